#include "gatos/crypto/merkle.h"

#include <sodium.h>

#include <bit>
#include <cstring>

#include "gatos/model/encoding.h"

namespace gatos {
namespace {

// The largest power of two strictly below n (n > 1): where RFC 6962 splits.
uint64_t SplitPoint(uint64_t n) { return uint64_t{1} << (std::bit_width(n - 1) - 1); }

bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// MTH(D[begin:begin+n]); begin is a multiple of the subtree sizes the
// recursion asks for, as it always is when it starts from 0.
Result<MerkleHash> RangeHash(const HashSource& source, uint64_t begin, uint64_t n) {
  if (IsPowerOfTwo(n)) {
    int level = std::countr_zero(n);
    return source(level, begin >> level);
  }
  uint64_t k = SplitPoint(n);
  GATOS_ASSIGN_OR_RETURN(MerkleHash left, RangeHash(source, begin, k));
  GATOS_ASSIGN_OR_RETURN(MerkleHash right, RangeHash(source, begin + k, n - k));
  return MerkleNodeHash(left, right);
}

Status Path(const HashSource& source, uint64_t m, uint64_t begin, uint64_t n,
            std::vector<MerkleHash>* out) {
  if (n <= 1) return OkStatus();
  uint64_t k = SplitPoint(n);
  if (m < k) {
    GATOS_RETURN_IF_ERROR(Path(source, m, begin, k, out));
    GATOS_ASSIGN_OR_RETURN(MerkleHash h, RangeHash(source, begin + k, n - k));
    out->push_back(h);
  } else {
    GATOS_RETURN_IF_ERROR(Path(source, m - k, begin + k, n - k, out));
    GATOS_ASSIGN_OR_RETURN(MerkleHash h, RangeHash(source, begin, k));
    out->push_back(h);
  }
  return OkStatus();
}

Status SubProof(const HashSource& source, uint64_t m, uint64_t begin, uint64_t n, bool whole,
                std::vector<MerkleHash>* out) {
  if (m == n) {
    if (!whole) {
      GATOS_ASSIGN_OR_RETURN(MerkleHash h, RangeHash(source, begin, n));
      out->push_back(h);
    }
    return OkStatus();
  }
  uint64_t k = SplitPoint(n);
  if (m <= k) {
    GATOS_RETURN_IF_ERROR(SubProof(source, m, begin, k, whole, out));
    GATOS_ASSIGN_OR_RETURN(MerkleHash h, RangeHash(source, begin + k, n - k));
    out->push_back(h);
  } else {
    GATOS_RETURN_IF_ERROR(SubProof(source, m - k, begin + k, n - k, false, out));
    GATOS_ASSIGN_OR_RETURN(MerkleHash h, RangeHash(source, begin, k));
    out->push_back(h);
  }
  return OkStatus();
}

std::string ShortHash(const MerkleHash& h) { return MerkleHashBase64(h); }

}  // namespace

MerkleHash MerkleLeafHash(std::string_view entry) {
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  const unsigned char prefix = 0x00;
  crypto_hash_sha256_update(&st, &prefix, 1);
  crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>(entry.data()), entry.size());
  MerkleHash out;
  crypto_hash_sha256_final(&st, out.data());
  return out;
}

MerkleHash MerkleNodeHash(const MerkleHash& left, const MerkleHash& right) {
  unsigned char buf[65];
  buf[0] = 0x01;
  std::memcpy(buf + 1, left.data(), 32);
  std::memcpy(buf + 33, right.data(), 32);
  MerkleHash out;
  crypto_hash_sha256(out.data(), buf, sizeof buf);
  return out;
}

MerkleHash MerkleEmptyRoot() {
  MerkleHash out;
  crypto_hash_sha256(out.data(), nullptr, 0);
  return out;
}

std::string MerkleHashBase64(const MerkleHash& h) { return Base64Encode(h.data(), h.size()); }

Result<MerkleHash> ParseMerkleHashBase64(std::string_view text) {
  auto bytes = Base64Decode(text);
  if (!bytes.ok() || bytes->size() != 32) {
    return InvalidArgumentError("not a base64 SHA-256 hash (32 bytes): \"" + TruncateUtf8(text, 64) +
                                "\"");
  }
  MerkleHash h;
  std::memcpy(h.data(), bytes->data(), 32);
  return h;
}

Result<MerkleHash> MerkleRoot(const HashSource& source, uint64_t size) {
  if (size == 0) return MerkleEmptyRoot();
  return RangeHash(source, 0, size);
}

Result<std::vector<MerkleHash>> MerkleInclusionProof(const HashSource& source, uint64_t index,
                                                     uint64_t size) {
  if (index >= size) {
    return InvalidArgumentError("entry " + std::to_string(index) + " is not in a tree of " +
                                std::to_string(size) + " entries");
  }
  std::vector<MerkleHash> out;
  GATOS_RETURN_IF_ERROR(Path(source, index, 0, size, &out));
  return out;
}

Result<std::vector<MerkleHash>> MerkleConsistencyProof(const HashSource& source, uint64_t size1,
                                                       uint64_t size2) {
  if (size1 == 0 || size1 > size2) {
    return InvalidArgumentError("no consistency proof from " + std::to_string(size1) + " to " +
                                std::to_string(size2) + " entries");
  }
  std::vector<MerkleHash> out;
  GATOS_RETURN_IF_ERROR(SubProof(source, size1, 0, size2, true, &out));
  return out;
}

// RFC 9162, 2.1.3.2.
Status VerifyMerkleInclusion(uint64_t index, uint64_t size, const MerkleHash& leaf,
                             const std::vector<MerkleHash>& proof, const MerkleHash& root) {
  if (index >= size) {
    return PermissionDeniedError("inclusion proof: entry " + std::to_string(index) +
                                 " is beyond a tree of " + std::to_string(size) + " entries");
  }
  if (proof.size() > 64) return PermissionDeniedError("inclusion proof: more than 64 hashes");
  uint64_t fn = index;
  uint64_t sn = size - 1;
  MerkleHash r = leaf;
  for (const MerkleHash& p : proof) {
    if (sn == 0) return PermissionDeniedError("inclusion proof: too many hashes for the tree size");
    if ((fn & 1) || fn == sn) {
      r = MerkleNodeHash(p, r);
      while (!(fn & 1) && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      r = MerkleNodeHash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return PermissionDeniedError("inclusion proof: too few hashes for the tree size");
  if (r != root) {
    return PermissionDeniedError("inclusion proof: the path leads to root " + ShortHash(r) +
                                 ", not to the signed root " + ShortHash(root));
  }
  return OkStatus();
}

// RFC 9162, 2.1.4.2.
Status VerifyMerkleConsistency(uint64_t size1, uint64_t size2, const std::vector<MerkleHash>& proof,
                               const MerkleHash& root1, const MerkleHash& root2) {
  if (size1 > size2) {
    return PermissionDeniedError("consistency proof: the tree shrank from " + std::to_string(size1) +
                                 " to " + std::to_string(size2) + " entries");
  }
  if (size1 == 0) return PermissionDeniedError("consistency proof: from an empty tree proves nothing");
  if (size1 == size2) {
    if (!proof.empty()) return PermissionDeniedError("consistency proof: not empty for equal sizes");
    if (root1 != root2) {
      return PermissionDeniedError("consistency proof: two different roots for " +
                                   std::to_string(size1) + " entries");
    }
    return OkStatus();
  }
  if (proof.empty()) return PermissionDeniedError("consistency proof: empty");
  if (proof.size() > 64) return PermissionDeniedError("consistency proof: more than 64 hashes");
  std::vector<MerkleHash> path;
  path.reserve(proof.size() + 1);
  if (IsPowerOfTwo(size1)) path.push_back(root1);
  path.insert(path.end(), proof.begin(), proof.end());
  uint64_t fn = size1 - 1;
  uint64_t sn = size2 - 1;
  while (fn & 1) {
    fn >>= 1;
    sn >>= 1;
  }
  MerkleHash fr = path[0];
  MerkleHash sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const MerkleHash& c = path[i];
    if (sn == 0) return PermissionDeniedError("consistency proof: too many hashes");
    if ((fn & 1) || fn == sn) {
      fr = MerkleNodeHash(c, fr);
      sr = MerkleNodeHash(c, sr);
      while (!(fn & 1) && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      sr = MerkleNodeHash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return PermissionDeniedError("consistency proof: too few hashes");
  if (fr != root1) {
    return PermissionDeniedError("consistency proof: the older tree's root is " + ShortHash(fr) +
                                 ", not " + ShortHash(root1) + ": the log was rewritten");
  }
  if (sr != root2) {
    return PermissionDeniedError("consistency proof: the newer tree's root is " + ShortHash(sr) +
                                 ", not " + ShortHash(root2) + ": the log was rewritten");
  }
  return OkStatus();
}

std::string EncodeMerkleProof(const std::vector<MerkleHash>& proof) {
  std::string out;
  for (const MerkleHash& h : proof) {
    out += MerkleHashBase64(h);
    out += '\n';
  }
  return out;
}

Result<std::vector<MerkleHash>> ParseMerkleProof(std::string_view text) {
  std::vector<MerkleHash> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) return InvalidArgumentError("proof: last line has no newline");
    if (out.size() == 64) return InvalidArgumentError("proof: more than 64 hashes");
    auto h = ParseMerkleHashBase64(text.substr(pos, nl - pos));
    if (!h.ok()) {
      return InvalidArgumentError("proof line " + std::to_string(out.size() + 1) + ": " +
                                  h.status().message());
    }
    out.push_back(*h);
    pos = nl + 1;
  }
  return out;
}

void CompactMerkleRange::Append(
    const MerkleHash& leaf,
    const std::function<void(int level, uint64_t index, const MerkleHash&)>& completed) {
  MerkleHash h = leaf;
  int level = 0;
  uint64_t index = size_;
  if (completed) completed(0, index, h);
  while ((size_ >> level) & 1) {
    h = MerkleNodeHash(edge_.back(), h);
    edge_.pop_back();
    ++level;
    index >>= 1;
    if (completed) completed(level, index, h);
  }
  edge_.push_back(h);
  ++size_;
}

MerkleHash CompactMerkleRange::Root() const {
  if (edge_.empty()) return MerkleEmptyRoot();
  MerkleHash r = edge_.back();
  for (size_t i = edge_.size() - 1; i-- > 0;) r = MerkleNodeHash(edge_[i], r);
  return r;
}

Result<CompactMerkleRange> CompactMerkleRange::FromSource(const HashSource& source, uint64_t size) {
  CompactMerkleRange out;
  uint64_t begin = 0;
  for (int level = 63; level >= 0; --level) {
    if (!((size >> level) & 1)) continue;
    GATOS_ASSIGN_OR_RETURN(MerkleHash h, source(level, begin >> level));
    out.edge_.push_back(h);
    begin += uint64_t{1} << level;
  }
  out.size_ = size;
  return out;
}

}  // namespace gatos
