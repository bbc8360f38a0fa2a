// The positions a trigger last saw (docs/scheduling.md, "Triggers";
// docs/ledger-format.md, "Watch positions"): a commit signed by the ledger
// key at refs/gatos/watch/<name>, logged as `watch`:
//
//   tree:     positions.json  {"schedule_commit": "<schedule commit>",
//                              "refs": {"<url>": {"<ref>": "<commit>"}}}
//   parents:  the previous positions commit of the schedule (none at first)
//   message:  gatos: watch NAME
//
// The ledger writes one when a trigger first reads its repositories under
// a schedule commit (the baseline: nothing fires) and whenever a watched
// ref moves, appears or disappears, in the batch after the fires it caused.
// gatosd reads it back when it starts, so a move fired before a restart is
// not fired again.
//
// Thread-safety: pure functions.
#ifndef GATOS_LEDGER_WATCH_POSITIONS_H_
#define GATOS_LEDGER_WATCH_POSITIONS_H_

#include <string>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/git_object.h"
#include "gatos/git/result.h"
#include "gatos/model/status.h"
#include "gatos/model/trigger.h"

namespace gatos {

// The commit (first) and its tree and positions.json blob.
Result<std::vector<GitObject>> BuildWatchCommit(const std::string& schedule_name,
                                                const WatchPositions& positions,
                                                const std::string& parent,
                                                const Ed25519PrivateKey& key, int64_t time_ms);

struct WatchCommit {
  std::string commit;
  std::string parent;      // "" for the first
  std::string signer_hex;  // "" when unsigned
  WatchPositions positions;
};

// Parses a positions commit: at most one parent, positions.json a regular
// file that ParseWatchPositions accepts, a signature that verifies when
// present. InvalidArgument with the reason.
Result<WatchCommit> ParseWatchCommit(const ObjectLookup& lookup, const std::string& commit_id);

}  // namespace gatos

#endif  // GATOS_LEDGER_WATCH_POSITIONS_H_
