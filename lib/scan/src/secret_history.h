// Where each listed finding sits in the repository's history, for findings
// grouped by secret (gatos/model/secret_groups.h): the time of the commit that
// introduced its blob, and whether the blob is still in a scanned tip.
//
// Thread-safety: uses `repo` and `source` on the calling thread only.
#ifndef GATOS_SCAN_SRC_SECRET_HISTORY_H_
#define GATOS_SCAN_SRC_SECRET_HISTORY_H_

#include <git2.h>

#include <vector>

#include "gatos/model/status.h"
#include "gatos/scan/done_ledger.h"
#include "gatos/scan/object_source.h"

namespace gatos::scan {

// Sets commit_time, commit_rank and at_tip of every finding. Ranks order
// the listing's commits by time, and by ancestry among equal times (a
// rebase gives many commits one time). A commit no longer in the
// repository (rewritten by a force-push and pruned) keeps time 0 and rank
// -1. The trees
// of `tips` are walked once each (shared subtrees once), and only when
// there are findings, stopping when every finding's blob was seen.
// Commit times and ancestry come from `repo`; the tips' commits and trees
// are read through `source` (packs directly), on the calling thread.
// Errors (a tip tree that cannot be read) are returned with the tree named;
// the findings' at_tip values are then incomplete.
Status AnnotateSecretHistory(git_repository* repo, ObjectSource* source,
                             const std::vector<git_oid>& tips, std::vector<ListedFinding>* findings);

}  // namespace gatos::scan

#endif  // GATOS_SCAN_SRC_SECRET_HISTORY_H_
