// The Merkle tree over the ledger's log (docs/ledger-format.md, section 7b).
//
// Entry i of the tree is the log commit of Log-Seq i + 1; its leaf hash is
// RFC 6962's SHA-256(0x00 || the commit object's content), the bytes `git
// cat-file commit` prints, signature included. So a leaf binds everything
// that commit names: its batch record, its state index, every commit it
// adopted (its parents) and the log before it (its first parent). The tree
// is derived data: anyone holding the log computes the same tree, which is
// what lets a witness check the ledger's checkpoints from its own clone.
//
// It is kept in <repo>/gatos/tlog/ as C2SP tlog-tiles hash tiles (height 8):
// tile/<L>/<N> holds the 256 hashes of tree level 8L with indexes 256N ..
// 256N+255, tile/<L>/<N>.p/<W> the first W of a tile not yet full; N is
// written in groups of three digits, all but the last prefixed with "x"
// (1234067 -> x001/x234/067). `entries` indexes the entries by sequence
// (below). A file `state` ("gatos-tlog 1", "size <n>",
// "head <log commit of Log-Seq n>") is written after the tiles it counts.
// Update appends the log commits after the recorded head and refuses to go
// on when the recorded head is no longer the log's commit at that sequence
// (the log was rewritten). A proof reads O(log n) tiles.
//
// Thread-safety: a LogTree belongs to one thread, with the Ledger it reads.
// Several processes may update one directory: Update holds an flock on
// tlog/lock, and readers retry once when a partial tile was replaced.
#ifndef GATOS_LOG_TREE_H_
#define GATOS_LOG_TREE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gatos/crypto/merkle.h"
#include "gatos/git/ledger.h"
#include "gatos/model/status.h"

namespace gatos {

// "tile/<L>/<N>" or "tile/<L>/<N>.p/<W>" (W in 1..255; 0 or 256 = full).
std::string TlogTilePath(int tile_level, uint64_t index, int width);
// The inverse, for paths from the network: true and the tile's level, index
// and width (0 = full) only for a path TlogTilePath writes exactly (levels
// 0..63, no leading zeros but the groups', widths 1..255).
bool ParseTlogTilePath(std::string_view path, int* tile_level, uint64_t* index, int* width);

class LogTree {
 public:
  // `dir` is the tree's directory (normally <repo>/gatos/tlog). Reads the
  // state file when present; an absent directory is an empty tree.
  static Result<LogTree> Open(std::string dir);
  LogTree(LogTree&& o) noexcept;
  LogTree& operator=(LogTree&&) = delete;
  ~LogTree();
  // The directory of a repository's tree.
  static std::string DirFor(const std::string& repo_path);

  // Appends every log commit after the recorded head, up to `head` (or up
  // to refs/gatos/log when empty), and persists the tiles. DataLoss when
  // the commit at the recorded size is not the recorded head (rewritten
  // log) or the log cannot be read; InvalidArgument for a log commit whose
  // message does not parse.
  Status Update(Ledger& ledger, const std::string& head = "");

  uint64_t size() const { return size_; }
  const std::string& head() const { return head_; }  // log commit of Log-Seq size()
  Result<MerkleHash> Root(uint64_t size);
  Result<std::vector<MerkleHash>> InclusionProof(uint64_t index, uint64_t size);
  Result<std::vector<MerkleHash>> ConsistencyProof(uint64_t size1, uint64_t size2);
  // Entry `index`: its log commit and Log-Time (from tlog/entries, 28 bytes
  // per entry: the raw commit id and the time in ms, u64 big-endian).
  Result<std::pair<std::string, int64_t>> Entry(uint64_t index);
  // The first entry whose Log-Time is at or after `time_ms` (size() when
  // none): the ledger's clock only moves forward, so a job record's
  // submitted_ms / finished_ms finds the batch that wrote it.
  Result<uint64_t> FirstEntryAtOrAfter(int64_t time_ms);
  // Complete subtree hash (tiles), for Merkle functions.
  Result<MerkleHash> SubtreeHash(int level, uint64_t index);

 private:
  explicit LogTree(std::string dir) : dir_(std::move(dir)) {}
  Status WriteEntries(uint64_t old_size, const std::string& records);
  // The hashes stored at tree level 8 * tile_level, tile `index`, as many
  // as a tree of size_ entries holds.
  Result<const std::string*> Tile(int tile_level, uint64_t index);
  Status WriteTiles(const std::map<std::pair<int, uint64_t>, std::string>& tiles);

  std::string dir_;
  uint64_t size_ = 0;
  std::string head_;
  std::map<std::pair<int, uint64_t>, std::string> cache_;  // tile -> hashes
  int entries_fd_ = -1;
};

}  // namespace gatos

#endif  // GATOS_LOG_TREE_H_
