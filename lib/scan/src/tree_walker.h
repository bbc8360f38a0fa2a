// The walk of one scan run: for each commit (oldest first, as the revwalk
// gives them), its tree and every subtree not seen before, queueing each
// blob not seen before and not already done. Blobs are collected and handed
// to the scanning threads in pack order (PackStore), in runs, so each
// thread reads neighbours whose delta bases it has just produced.
//
// Reads commits and trees through an ObjectSource (the packs directly,
// libgit2 otherwise) and parses them itself: no libgit2 object per tree.
// The walk is iterative: a hostile repository's deep nesting costs heap,
// not stack.
//
// Thread-safety: one walker, on the thread that owns its ObjectSource and
// DoneLedger.
#ifndef GATOS_SCAN_SRC_TREE_WALKER_H_
#define GATOS_SCAN_SRC_TREE_WALKER_H_

#include <git2.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gatos/scan/done_ledger.h"
#include "gatos/scan/scanner.h"
#include "gatos/scan/object_source.h"
#include "gatos/scan/oid_set.h"
#include "scan_run.h"

namespace gatos::scan {

class TreeWalker {
 public:
  // `ledger`: where done blobs are looked up; null when none can be (a
  // first scan under the policy).
  TreeWalker(ObjectSource* source, DoneLedger* ledger, const std::string& policy,
             const ScanOptions& opts, Queue<BlobRun>* jobs, Queue<WriterItem>* results,
             RunState* run)
      : source_(source),
        ledger_(ledger),
        policy_(policy),
        opts_(opts),
        jobs_(jobs),
        results_(results),
        run_(run) {}

  // Walks the tree of one commit. False when the walk must stop (budget,
  // error: recorded in the run state).
  bool WalkCommit(const git_oid& commit);

  // Hands the blobs collected so far to the scanning threads: sorted into
  // pack order (blobs outside the packs last, in walk order), in runs.
  void Flush();

 private:
  bool WalkTree(const git_oid& root);
  bool OnBlob(const git_oid& oid, std::string path);

  ObjectSource* source_;
  DoneLedger* ledger_;  // may be null
  const std::string& policy_;
  const ScanOptions& opts_;
  Queue<BlobRun>* jobs_;
  Queue<WriterItem>* results_;
  RunState* run_;
  std::vector<BlobJob> pending_;  // collected, not yet handed out
  OidSet seen_;                   // trees and blobs of this run
  std::string commit_hex_;
  uint64_t queued_ = 0;
};

// Largest commit or tree object the walk reads (a hostile repository's
// claim of more is an error naming the object).
inline constexpr uint64_t kMaxTreeBytes = 1ull << 30;

}  // namespace gatos::scan

#endif  // GATOS_SCAN_SRC_TREE_WALKER_H_
