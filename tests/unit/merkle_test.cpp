#include "gatos/crypto/merkle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gatos/model/encoding.h"

namespace gatos {
namespace {

namespace fs = std::filesystem;

// transparency-dev/merkle testonly/constants.go: LeafInputs and RootHashes.
const std::vector<std::string> kLeafHex = {
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"};
const std::vector<std::string> kRootHex = {
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};

std::string Unhex(const std::string& h) {
  auto b = HexDecode(h);
  EXPECT_TRUE(b.ok());
  return std::string(b->begin(), b->end());
}

std::string Hex(const MerkleHash& h) { return HexEncode(h.data(), h.size()); }

// Every complete subtree hash of a list of leaf hashes, computed the slow way.
struct TestTree {
  std::vector<std::vector<MerkleHash>> levels;
  explicit TestTree(const std::vector<MerkleHash>& leaves) {
    levels.push_back(leaves);
    while (levels.back().size() > 1) {
      const auto& below = levels.back();
      std::vector<MerkleHash> up;
      for (size_t i = 0; i + 1 < below.size(); i += 2) up.push_back(MerkleNodeHash(below[i], below[i + 1]));
      levels.push_back(up);
    }
  }
  HashSource Source(int* calls = nullptr) const {
    return [this, calls](int level, uint64_t index) -> Result<MerkleHash> {
      if (calls) ++*calls;
      if (level >= static_cast<int>(levels.size()) || index >= levels[level].size()) {
        return NotFoundError("no such subtree");
      }
      return levels[level][index];
    };
  }
};

std::vector<MerkleHash> VectorLeaves() {
  std::vector<MerkleHash> out;
  for (const auto& h : kLeafHex) out.push_back(MerkleLeafHash(Unhex(h)));
  return out;
}

TEST(MerkleTest, RootsMatchRfc6962Vectors) {
  TestTree tree(VectorLeaves());
  for (uint64_t n = 0; n <= 8; ++n) {
    auto root = MerkleRoot(tree.Source(), n);
    ASSERT_TRUE(root.ok());
    EXPECT_EQ(Hex(*root), kRootHex[n]) << n;
  }
  CompactMerkleRange range;
  EXPECT_EQ(Hex(range.Root()), kRootHex[0]);
  for (uint64_t n = 1; n <= 8; ++n) {
    range.Append(VectorLeaves()[n - 1]);
    EXPECT_EQ(Hex(range.Root()), kRootHex[n]) << n;
    auto rebuilt = CompactMerkleRange::FromSource(tree.Source(), n);
    ASSERT_TRUE(rebuilt.ok());
    EXPECT_EQ(Hex(rebuilt->Root()), kRootHex[n]);
  }
}

TEST(MerkleTest, CompactRangeReportsEveryCompletedSubtree) {
  std::vector<MerkleHash> leaves;
  for (int i = 0; i < 37; ++i) leaves.push_back(MerkleLeafHash("entry " + std::to_string(i)));
  TestTree tree(leaves);
  CompactMerkleRange range;
  size_t reported = 0;
  for (const auto& l : leaves) {
    range.Append(l, [&](int level, uint64_t index, const MerkleHash& h) {
      ASSERT_LT(static_cast<size_t>(level), tree.levels.size());
      ASSERT_LT(index, tree.levels[level].size());
      EXPECT_EQ(h, tree.levels[level][index]);
      ++reported;
    });
  }
  size_t complete = 0;
  for (const auto& lv : tree.levels) complete += lv.size();
  EXPECT_EQ(reported, complete);  // each complete subtree once, none invented
}

std::vector<MerkleHash> ParseHashes(const nlohmann::json& a, bool* ok) {
  std::vector<MerkleHash> out;
  if (a.is_null()) return out;
  for (const auto& s : a) {
    auto h = ParseMerkleHashBase64(s.get<std::string>());
    if (!h.ok()) {
      *ok = false;
      return out;
    }
    out.push_back(*h);
  }
  return out;
}

std::vector<fs::path> VectorFiles(const std::string& kind) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(GATOS_SOURCE_DIR) / "tests/data/tlog/merkle" / kind)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

nlohmann::json Load(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(MerkleTest, InclusionVectorsOfTransparencyDev) {
  auto files = VectorFiles("inclusion");
  ASSERT_GT(files.size(), 60u);
  TestTree tree(VectorLeaves());
  int happy = 0;
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    auto j = Load(f);
    bool parsed = true;
    auto proof = ParseHashes(j["proof"], &parsed);
    auto leaf = ParseMerkleHashBase64(j["leafHash"].get<std::string>());
    auto root = ParseMerkleHashBase64(j["root"].get<std::string>());
    bool want_err = j["wantErr"].get<bool>();
    bool ok = parsed && leaf.ok() && root.ok() &&
              VerifyMerkleInclusion(j["leafIdx"].get<uint64_t>(), j["treeSize"].get<uint64_t>(), *leaf,
                                    proof, *root)
                  .ok();
    EXPECT_EQ(ok, !want_err) << j["desc"];
    if (!want_err && j["treeSize"].get<uint64_t>() <= 8 && f.parent_path().filename() != "single-entry") {
      // Our generator makes the very proof of the vector.
      auto mine = MerkleInclusionProof(tree.Source(), j["leafIdx"].get<uint64_t>(), j["treeSize"].get<uint64_t>());
      ASSERT_TRUE(mine.ok());
      EXPECT_EQ(*mine, proof);
      ++happy;
    }
  }
  EXPECT_EQ(happy, 5);
}

TEST(MerkleTest, ConsistencyVectorsOfTransparencyDev) {
  auto files = VectorFiles("consistency");
  ASSERT_GT(files.size(), 80u);
  TestTree tree(VectorLeaves());
  int happy = 0;
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    // Its roots are 12-byte placeholders ("don't care"); our roots are
    // typed 32-byte hashes, so that case is covered by EqualSizes below.
    if (f.filename() == "sizes-are-equal-one-and-proof-is-empty.json") continue;
    auto j = Load(f);
    bool parsed = true;
    auto proof = ParseHashes(j["proof"], &parsed);
    auto r1 = ParseMerkleHashBase64(j["root1"].get<std::string>());
    auto r2 = ParseMerkleHashBase64(j["root2"].get<std::string>());
    bool want_err = j["wantErr"].get<bool>();
    uint64_t s1 = j["size1"].get<uint64_t>(), s2 = j["size2"].get<uint64_t>();
    bool ok = parsed && r1.ok() && r2.ok() && VerifyMerkleConsistency(s1, s2, proof, *r1, *r2).ok();
    EXPECT_EQ(ok, !want_err) << j["desc"];
    if (!want_err) {
      auto mine = MerkleConsistencyProof(tree.Source(), s1, s2);
      ASSERT_TRUE(mine.ok());
      EXPECT_EQ(*mine, proof);
      ++happy;
    }
  }
  EXPECT_EQ(happy, 5);
}

TEST(MerkleTest, EqualSizes) {
  MerkleHash a = MerkleLeafHash("a"), b = MerkleLeafHash("b");
  EXPECT_TRUE(VerifyMerkleConsistency(1, 1, {}, a, a).ok());
  EXPECT_EQ(VerifyMerkleConsistency(1, 1, {}, a, b).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(VerifyMerkleConsistency(1, 1, {a}, a, a).code(), StatusCode::kPermissionDenied);
}

// Every inclusion and consistency proof the generator makes for trees of up
// to 70 entries verifies, and fails for any other leaf, index or root.
TEST(MerkleTest, GeneratedProofsVerifyAndBindTheirInputs) {
  std::vector<MerkleHash> leaves;
  for (int i = 0; i < 70; ++i) leaves.push_back(MerkleLeafHash("e" + std::to_string(i)));
  for (uint64_t n = 1; n <= leaves.size(); ++n) {
    TestTree tree({leaves.begin(), leaves.begin() + n});
    MerkleHash root = *MerkleRoot(tree.Source(), n);
    for (uint64_t i = 0; i < n; ++i) {
      auto p = MerkleInclusionProof(tree.Source(), i, n);
      ASSERT_TRUE(p.ok());
      EXPECT_TRUE(VerifyMerkleInclusion(i, n, leaves[i], *p, root).ok()) << i << "/" << n;
      EXPECT_FALSE(VerifyMerkleInclusion(i, n, leaves[(i + 1) % n == i ? 69 : (i + 1) % n], *p, root).ok());
      if (n > 1) {
        EXPECT_FALSE(VerifyMerkleInclusion((i + 1) % n, n, leaves[i], *p, root).ok());
      }
      auto text = EncodeMerkleProof(*p);
      auto back = ParseMerkleProof(text);
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(*back, *p);
    }
    for (uint64_t m = 1; m <= n; ++m) {
      TestTree old({leaves.begin(), leaves.begin() + m});
      MerkleHash old_root = *MerkleRoot(old.Source(), m);
      auto p = MerkleConsistencyProof(tree.Source(), m, n);
      ASSERT_TRUE(p.ok());
      EXPECT_TRUE(VerifyMerkleConsistency(m, n, *p, old_root, root).ok()) << m << "->" << n;
      if (m < n) {
        MerkleHash forged = MerkleLeafHash("forged");
        EXPECT_EQ(VerifyMerkleConsistency(m, n, *p, forged, root).code(), StatusCode::kPermissionDenied);
      }
    }
  }
}

// A proof needs O(log n) subtree hashes, not O(n): what keeps `gatos proof`
// cheap on a large ledger.
TEST(MerkleTest, ProofsReadLogarithmicallyManySubtrees) {
  std::vector<MerkleHash> leaves;
  for (int i = 0; i < 5000; ++i) leaves.push_back(MerkleLeafHash(std::to_string(i)));
  TestTree tree(leaves);
  int calls = 0;
  ASSERT_TRUE(MerkleInclusionProof(tree.Source(&calls), 1234, 5000).ok());
  EXPECT_LE(calls, 40);
  calls = 0;
  ASSERT_TRUE(MerkleConsistencyProof(tree.Source(&calls), 3001, 5000).ok());
  EXPECT_LE(calls, 40);
}

TEST(MerkleTest, ProofTextIsStrict) {
  EXPECT_FALSE(ParseMerkleProof("AAAA\n").ok());
  std::string one = MerkleHashBase64(MerkleLeafHash("x"));
  EXPECT_TRUE(ParseMerkleProof(one + "\n").ok());
  EXPECT_FALSE(ParseMerkleProof(one).ok());          // no newline
  EXPECT_FALSE(ParseMerkleProof(one + "\n\n").ok());  // empty line
  std::string many;
  for (int i = 0; i < 65; ++i) many += one + "\n";
  EXPECT_FALSE(ParseMerkleProof(many).ok());
  EXPECT_TRUE(ParseMerkleProof("").ok());
}

}  // namespace
}  // namespace gatos
