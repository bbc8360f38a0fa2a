#include "tree_walker.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <tuple>

#include "git/git_util.h"
#include "gatos/scan/git_objects.h"

namespace gatos::scan {
namespace {

// Blobs per run handed to one scanning thread: contiguous in the pack.
constexpr size_t kBlobRun = 512;
// Blobs collected before they are sorted into pack order and handed out;
// fewer when the scanning threads have nothing to do.
constexpr size_t kWalkBatch = 16384;

}  // namespace

void TreeWalker::Flush() {
  if (pending_.empty()) return;
  for (BlobJob& j : pending_) j.loc = source_->Locate(j.oid);
  std::stable_sort(pending_.begin(), pending_.end(), [](const BlobJob& a, const BlobJob& b) {
    if (a.loc.has_value() != b.loc.has_value()) return a.loc.has_value();
    if (!a.loc) return false;
    return std::tie(a.loc->pack, a.loc->offset) < std::tie(b.loc->pack, b.loc->offset);
  });
  for (size_t i = 0; i < pending_.size(); i += kBlobRun) {
    const size_t end = std::min(pending_.size(), i + kBlobRun);
    jobs_->Push(BlobRun(std::make_move_iterator(pending_.begin() + i),
                        std::make_move_iterator(pending_.begin() + end)));
  }
  pending_.clear();
}

bool TreeWalker::WalkCommit(const git_oid& commit) {
  commit_hex_ = git::OidHex(commit);
  std::shared_ptr<const std::string> raw;
  if (Status s = source_->ReadShared(commit, source_->Locate(commit), ObjectKind::kCommit,
                                     kMaxTreeBytes, &raw);
      !s.ok()) {
    run_->Problem(s.message());
    return false;
  }
  git_oid tree;
  if (!CommitTreeId(*raw, &tree)) {
    run_->Problem("commit " + commit_hex_ + " does not start with its tree id");
    return false;
  }
  ++run_->commits_walked;
  if (!seen_.Insert(tree)) return true;
  return WalkTree(tree);
}

bool TreeWalker::WalkTree(const git_oid& root) {
  struct Frame {
    std::shared_ptr<const std::string> data;  // keeps `rest` valid
    std::string_view rest;
    std::string prefix;
  };
  std::vector<Frame> stack;
  auto open = [&](const git_oid& id, std::string prefix) {
    std::shared_ptr<const std::string> data;
    if (Status s = source_->ReadShared(id, source_->Locate(id), ObjectKind::kTree, kMaxTreeBytes,
                                       &data);
        !s.ok()) {
      run_->Problem(s.message() + (prefix.empty() ? "" : " at " + prefix) + " in commit " +
                    commit_hex_);
      return false;
    }
    const std::string_view rest = *data;
    stack.push_back({std::move(data), rest, std::move(prefix)});
    return true;
  };
  if (!open(root, "")) return false;
  while (!stack.empty()) {
    if (run_->stop) return false;
    Frame& f = stack.back();
    TreeEntry e;
    bool bad = false;
    if (!NextTreeEntry(&f.rest, &e, &bad)) {
      if (bad) {
        run_->Problem("a tree at " + (f.prefix.empty() ? "the root" : f.prefix) + " in commit " +
                      commit_hex_ + " is malformed");
        return false;
      }
      stack.pop_back();
      continue;
    }
    const bool tree = IsTreeMode(e.mode);
    if (!tree && !IsBlobMode(e.mode)) continue;  // a submodule
    if (!seen_.Insert(e.id)) continue;
    std::string path = f.prefix;
    path.append(e.name);
    if (tree) {
      path += '/';
      if (!open(e.id, std::move(path))) return false;  // `f` may dangle from here
    } else if (!OnBlob(e.id, std::move(path))) {
      return false;
    }
  }
  return true;
}

bool TreeWalker::OnBlob(const git_oid& oid, std::string path) {
  ++run_->blobs_seen;
  const std::string hex = git::OidHex(oid);
  Result<bool> done = ledger_ ? ledger_->IsDone(policy_, hex) : Result<bool>(false);
  if (!done.ok()) {
    run_->Problem(done.status().message());
    return false;
  }
  if (*done) {
    ++run_->blobs_skipped_done;
    Result<bool> has = ledger_->HasFindings(policy_, hex);
    if (!has.ok()) {
      run_->Problem(has.status().message());
      return false;
    }
    // Keep the listing complete for this repository: the blob may have
    // been scanned through another repository.
    if (*has) results_->Push(BlobLocation{hex, commit_hex_, std::move(path)});
    return true;
  }
  if (opts_.max_blobs && queued_ >= *opts_.max_blobs) {
    // Stops the walk only: blobs already queued are still scanned.
    if (!run_->budget_hit.exchange(true)) run_->Problem("the --max-blobs budget ran out");
    return false;
  }
  ++queued_;
  pending_.push_back(BlobJob{oid, commit_hex_, std::move(path), std::nullopt});
  // A full batch, or enough for a run while the scanning threads wait.
  if (pending_.size() >= kWalkBatch || (pending_.size() >= kBlobRun && jobs_->Empty())) Flush();
  return true;
}

}  // namespace gatos::scan
