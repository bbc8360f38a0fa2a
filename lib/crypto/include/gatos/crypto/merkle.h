// Merkle trees over an append-only list of entries, hashed as RFC 6962
// (section 2.1) says: SHA-256, leaf = H(0x00 || entry), interior node =
// H(0x01 || left || right), the tree of n entries splitting at the largest
// power of two below n, the empty tree hashing to H(""). Inclusion and
// consistency proofs are RFC 6962's PATH and PROOF; their verification is
// RFC 9162 sections 2.1.3.2 and 2.1.4.2. The ledger's log keeps such a tree
// over its log commits (docs/ledger-format.md, section 7b).
//
// Tested against the transparency-dev/merkle vectors
// (tests/data/tlog/merkle, tests/unit/merkle_test.cpp).
//
// Thread-safety: pure functions on values. A HashSource is called on the
// calling thread only.
#ifndef GATOS_MERKLE_H_
#define GATOS_MERKLE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

using MerkleHash = std::array<uint8_t, 32>;

MerkleHash MerkleLeafHash(std::string_view entry);                        // H(0x00 || entry)
MerkleHash MerkleNodeHash(const MerkleHash& left, const MerkleHash& right);  // H(0x01 || l || r)
MerkleHash MerkleEmptyRoot();                                              // H("")

// Standard base64 of the 32 bytes (the checkpoint's and the proofs' text form).
std::string MerkleHashBase64(const MerkleHash& h);
// InvalidArgument unless `text` is base64 of exactly 32 bytes.
Result<MerkleHash> ParseMerkleHashBase64(std::string_view text);

// The hash of the complete subtree at `level` (0 = a leaf), `index`: it
// covers entries [index << level, (index + 1) << level). Only asked for
// subtrees that lie inside the tree it serves. Errors are passed on.
using HashSource = std::function<Result<MerkleHash>(int level, uint64_t index)>;

// The root of the tree of the first `size` entries (MTH(D[0:size])).
Result<MerkleHash> MerkleRoot(const HashSource& source, uint64_t size);
// PATH(index, D[0:size]): the audit path of entry `index`, leaf side first.
// InvalidArgument when index >= size.
Result<std::vector<MerkleHash>> MerkleInclusionProof(const HashSource& source, uint64_t index,
                                                     uint64_t size);
// PROOF(size1, D[0:size2]). InvalidArgument unless 0 < size1 <= size2.
// Empty when size1 == size2.
Result<std::vector<MerkleHash>> MerkleConsistencyProof(const HashSource& source, uint64_t size1,
                                                       uint64_t size2);

// OK when `proof` proves that `leaf` is entry `index` of the tree of `size`
// entries with root `root`. PermissionDenied (the proof does not prove it),
// saying why: index out of range, wrong length, root mismatch.
Status VerifyMerkleInclusion(uint64_t index, uint64_t size, const MerkleHash& leaf,
                             const std::vector<MerkleHash>& proof, const MerkleHash& root);
// OK when `proof` proves that the tree of size1 entries with root1 is a
// prefix of the tree of size2 entries with root2 (append-only). size1 ==
// size2 needs an empty proof and equal roots; size1 == 0 proves nothing and
// is refused, as in transparency-dev/merkle. PermissionDenied otherwise.
Status VerifyMerkleConsistency(uint64_t size1, uint64_t size2, const std::vector<MerkleHash>& proof,
                               const MerkleHash& root1, const MerkleHash& root2);

// Text form of a proof, as in C2SP tlog-proof: one base64 hash per line,
// each line ending in a newline. Parsing is strict (at most 64 hashes).
std::string EncodeMerkleProof(const std::vector<MerkleHash>& proof);
Result<std::vector<MerkleHash>> ParseMerkleProof(std::string_view text);

// Accumulates leaf hashes one at a time and keeps only the right edge of
// the tree (the roots of its complete subtrees, at most 64): appending is
// O(log n) and the root of everything appended so far is available at any
// time. What a writer keeps in memory to hash each new entry into the tree.
class CompactMerkleRange {
 public:
  // Appends one leaf hash. `completed`, when given, receives every complete
  // subtree this append finished, as (level, index, hash), lowest first:
  // the leaf itself at level 0, then each parent it completed.
  void Append(const MerkleHash& leaf,
              const std::function<void(int level, uint64_t index, const MerkleHash&)>& completed = {});
  uint64_t size() const { return size_; }
  MerkleHash Root() const;
  // Rebuilds the range of a tree of `size` entries from its complete
  // subtrees' hashes (the ones Append keeps).
  static Result<CompactMerkleRange> FromSource(const HashSource& source, uint64_t size);

 private:
  uint64_t size_ = 0;
  std::vector<MerkleHash> edge_;  // roots of the complete subtrees, largest (leftmost) first
};

}  // namespace gatos

#endif  // GATOS_MERKLE_H_
