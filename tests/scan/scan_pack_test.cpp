// The scanner's direct pack reading (gatos/scan/: PackStore, PackReader,
// ObjectSource, tree and commit parsing, OidSet): every object of a real
// delta-compressed pack reads back as git prints it, and damaged or hostile
// packs and indexes are refused or reported, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gatos/scan/git_objects.h"
#include "gatos/scan/object_source.h"
#include "gatos/scan/oid_set.h"
#include "gatos/scan/pack_reader.h"
#include "gatos/scan/pack_store.h"
#include "secrets_for_tests.h"
#include "test_util.h"

namespace gatos::scan {
namespace {

namespace fs = std::filesystem;
using gatos::testing::ReadFile;
using gatos::testing::RunOptions;
using gatos::testing::RunResult;
using gatos::testing::TempDir;
using gatos::testing::WriteFile;

class PackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    git_libgit2_init();
    repo_ = tmp_.Join("repo");
    Git({"init", "-q", "-b", "main", repo_});
    // Many versions of a few files: the packer stores most as deltas.
    testing::SecretMaker mk(7);
    std::string text;
    for (int v = 0; v < 40; ++v) {
      text += "line " + std::to_string(v) + " " + mk.Alnum(60) + "\n";
      WriteFile(repo_ + "/a.txt", text);
      WriteFile(repo_ + "/dir/b.txt", text + "tail " + std::to_string(v) + "\n");
      Git({"-C", repo_, "add", "-A"});
      Git({"-C", repo_, "commit", "-q", "-m", "v" + std::to_string(v)});
    }
    Git({"-C", repo_, "gc", "-q", "--aggressive"});
    git_dir_ = repo_ + "/.git";
  }

  std::string Git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git",
                                     "-c",
                                     "user.name=T",
                                     "-c",
                                     "user.email=t@example.invalid",
                                     "-c",
                                     "commit.gpgsign=false"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions o;
    o.env = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"GIT_CONFIG_GLOBAL", "/dev/null"}};
    RunResult r = gatos::testing::Run(argv, o);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  // id -> (type, bytes) of every object, as git prints them.
  std::map<std::string, std::pair<std::string, std::string>> AllObjects() {
    std::map<std::string, std::pair<std::string, std::string>> out;
    std::string list = Git({"-C", git_dir_, "cat-file", "--batch-all-objects",
                            "--batch-check=%(objectname) %(objecttype)"});
    size_t at = 0;
    while (at < list.size()) {
      const size_t nl = list.find('\n', at);
      const std::string line = list.substr(at, nl - at);
      at = nl + 1;
      const std::string id = line.substr(0, 40);
      const std::string type = line.substr(41);
      out[id] = {type, Git({"-C", git_dir_, "cat-file", type, id})};
    }
    return out;
  }

  std::string PackPath(const std::string& ext) {
    for (const auto& e : fs::directory_iterator(git_dir_ + "/objects/pack")) {
      if (e.path().extension() == ext) return e.path();
    }
    return "";
  }

  TempDir tmp_;
  std::string repo_;
  std::string git_dir_;
};

git_oid Oid(const std::string& hex) {
  git_oid o;
  git_oid_fromstr(&o, hex.c_str());
  return o;
}

TEST_F(PackTest, EveryObjectOfADeltaPackReadsBackAsGitPrintsIt) {
  std::unique_ptr<PackStore> store = PackStore::Open(git_dir_);
  ASSERT_EQ(store->pack_count(), 1u);
  EXPECT_EQ(store->skipped(), 0u);
  const auto objects = AllObjects();
  EXPECT_EQ(store->object_count(), objects.size());
  // A small cache: most bases must be rebuilt, exercising long chains.
  for (size_t cache : {size_t{0}, size_t{64} << 20}) {
    PackReader reader(*store, cache);
    for (const auto& [hex, want] : objects) {
      const git_oid id = Oid(hex);
      std::optional<PackLocation> loc = store->Find(id.id);
      ASSERT_TRUE(loc.has_value()) << hex;
      ObjectKind kind;
      uint64_t size = 0;
      ASSERT_TRUE(reader.Header(*loc, &kind, &size).ok()) << hex;
      EXPECT_EQ(ObjectKindName(kind), want.first) << hex;
      std::shared_ptr<const std::string> data;
      Status s = reader.Read(*loc, 1 << 20, &kind, &data);
      ASSERT_TRUE(s.ok()) << hex << ": " << s.ToString();
      EXPECT_EQ(ObjectKindName(kind), want.first);
      EXPECT_EQ(size, data->size()) << hex;
      EXPECT_EQ(*data, want.second) << hex;
    }
    EXPECT_GT(reader.stats().deltas, 0u) << "the pack should hold deltas";
  }
  // An id the pack does not hold.
  const git_oid missing = Oid(std::string(40, 'f'));
  EXPECT_FALSE(store->Find(missing.id).has_value());
  // A limit below an object's size: refused, not read.
  PackReader reader(*store, 0);
  for (const auto& [hex, want] : objects) {
    if (want.second.size() < 100) continue;
    ObjectKind kind;
    std::shared_ptr<const std::string> data;
    Status s = reader.Read(*store->Find(Oid(hex).id), 10, &kind, &data);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << hex << ": " << s.ToString();
  }
}

TEST_F(PackTest, ObjectSourceFallsBackToLibgit2ForLooseObjects) {
  // One more commit, left loose.
  WriteFile(repo_ + "/loose.txt", "loose\n");
  Git({"-C", repo_, "add", "-A"});
  Git({"-C", repo_, "commit", "-q", "-m", "loose"});
  const std::string blob = Git({"-C", repo_, "rev-parse", "HEAD:loose.txt"}).substr(0, 40);
  std::unique_ptr<PackStore> store = PackStore::Open(git_dir_);
  Result<std::unique_ptr<ObjectSource>> source = ObjectSource::Open(git_dir_, store.get(), 1 << 20);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const git_oid id = Oid(blob);
  EXPECT_FALSE((*source)->Locate(id).has_value());
  std::string_view data;
  ASSERT_TRUE((*source)->Read(id, std::nullopt, ObjectKind::kBlob, 1 << 20, &data).ok());
  EXPECT_EQ(data, "loose\n");
  EXPECT_EQ((*source)->fallbacks(), 1u);
  // Asked for the wrong kind: an error naming the object.
  Status s = (*source)->Read(id, std::nullopt, ObjectKind::kTree, 1 << 20, &data);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find(blob + " is not a tree"), std::string::npos) << s.message();
  const git_oid missing = Oid(std::string(40, 'e'));
  EXPECT_EQ((*source)->Read(missing, std::nullopt, ObjectKind::kBlob, 1 << 20, &data).code(),
            StatusCode::kNotFound);
}

TEST_F(PackTest, DamagedPacksAreReportedAndHostileIndexesSkipped) {
  const auto objects = AllObjects();
  const std::string pack = ReadFile(PackPath(".pack"));
  const std::string idx = ReadFile(PackPath(".idx"));
  auto with = [&](const std::string& name, const std::string& p, const std::string& i) {
    const std::string dir = tmp_.Join(name);
    fs::create_directories(dir + "/objects/pack");
    WriteFile(dir + "/objects/pack/pack-x.pack", p);
    WriteFile(dir + "/objects/pack/pack-x.idx", i);
    return PackStore::Open(dir);
  };
  // Index damage: the pack is skipped, its objects left to libgit2.
  std::string unsorted = idx;
  std::swap_ranges(unsorted.begin() + 8 + 1024, unsorted.begin() + 8 + 1024 + 20,
                   unsorted.begin() + 8 + 1024 + 20);
  std::string bad_offset = idx;
  const size_t n = objects.size();
  const size_t offsets = 8 + 1024 + n * 24;
  bad_offset[offsets] = '\x7f';  // far past the end of the pack
  std::string wrong_count = pack;
  wrong_count[11] = static_cast<char>(wrong_count[11] + 1);
  for (const auto& [name, p, i] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"truncated-idx", pack, idx.substr(0, idx.size() / 2)},
           {"no-magic", pack, std::string(idx.size(), '\0')},
           {"unsorted", pack, unsorted},
           {"bad-offset", pack, bad_offset},
           {"wrong-count", wrong_count, idx},
           {"empty-pack", "", idx},
           {"truncated-pack", pack.substr(0, 30), idx}}) {
    std::unique_ptr<PackStore> store = with(name, p, i);
    EXPECT_EQ(store->pack_count(), 0u) << name;
    EXPECT_EQ(store->skipped(), 1u) << name;
  }
  // Pack damage past the header: every read returns an object or an error.
  for (size_t stride : {size_t{7}, size_t{97}, size_t{1009}}) {
    std::string broken = pack;
    for (size_t at = 12 + stride; at + 20 < broken.size(); at += stride * 3) broken[at] ^= 0x5a;
    std::unique_ptr<PackStore> store = with("broken" + std::to_string(stride), broken, idx);
    ASSERT_EQ(store->pack_count(), 1u);
    PackReader reader(*store, 1 << 20);
    size_t errors = 0;
    for (const auto& [hex, want] : objects) {
      std::optional<PackLocation> loc = store->Find(Oid(hex).id);
      ASSERT_TRUE(loc.has_value());
      ObjectKind kind;
      uint64_t size;
      std::shared_ptr<const std::string> data;
      Status h = reader.Header(*loc, &kind, &size);
      Status s = reader.Read(*loc, 1 << 20, &kind, &data);
      if (!s.ok()) {
        ++errors;
        // Damage, a size over the limit, or a delta base id the packs lack.
        EXPECT_TRUE(s.code() == StatusCode::kDataLoss ||
                    s.code() == StatusCode::kFailedPrecondition ||
                    s.code() == StatusCode::kNotFound)
            << s.ToString();
        if (s.code() == StatusCode::kDataLoss) {
          EXPECT_EQ(s.message().rfind("pack pack-x.pack at offset ", 0), 0u) << s.message();
        }
      } else {
        EXPECT_LE(data->size(), 1u << 20);
      }
      (void)h;
    }
    EXPECT_GT(errors, 0u) << "stride " << stride;
  }
}

TEST(ScanGitObjects, TreeEntriesAndCommitTreeIds) {
  std::string tree = "100644 a.txt";
  tree += '\0';
  tree += std::string(20, '\x11');
  tree += "40000 dir";
  tree += '\0';
  tree += std::string(20, '\x22');
  std::string_view rest = tree;
  TreeEntry e;
  bool bad = false;
  ASSERT_TRUE(NextTreeEntry(&rest, &e, &bad));
  EXPECT_EQ(e.mode, 0100644u);
  EXPECT_EQ(e.name, "a.txt");
  EXPECT_TRUE(IsBlobMode(e.mode));
  EXPECT_EQ(e.id.id[0], 0x11);
  ASSERT_TRUE(NextTreeEntry(&rest, &e, &bad));
  EXPECT_TRUE(IsTreeMode(e.mode));
  EXPECT_FALSE(NextTreeEntry(&rest, &e, &bad));
  EXPECT_FALSE(bad);
  EXPECT_FALSE(IsBlobMode(0160000));  // a submodule
  for (const std::string& broken :
       {std::string("100644 a.txt"), std::string("10x644 a") + '\0' + std::string(20, 'x'),
        std::string(" a") + '\0' + std::string(20, 'x'),
        std::string("100644 ") + '\0' + std::string(20, 'x'),
        std::string("100644 a") + '\0' + std::string(19, 'x'),
        std::string("12345678 a") + '\0' + std::string(20, 'x')}) {
    std::string_view r = broken;
    bool b = false;
    EXPECT_FALSE(NextTreeEntry(&r, &e, &b));
    EXPECT_TRUE(b) << broken;
  }
  git_oid id;
  ASSERT_TRUE(CommitTreeId("tree " + std::string(40, 'a') + "\nparent x\n", &id));
  EXPECT_EQ(id.id[0], 0xaa);
  EXPECT_FALSE(CommitTreeId("tree " + std::string(40, 'A') + "\n", &id));  // git writes lowercase
  EXPECT_FALSE(CommitTreeId("tree " + std::string(39, 'a') + "\n", &id));
  EXPECT_FALSE(CommitTreeId("parent " + std::string(40, 'a') + "\n", &id));
}

TEST(ScanOidSet, InsertsOnceAndGrows) {
  OidSet set;
  for (uint32_t i = 0; i < 100000; ++i) {
    git_oid o{};
    std::memcpy(o.id, &i, sizeof i);
    EXPECT_TRUE(set.Insert(o));
  }
  EXPECT_EQ(set.size(), 100000u);
  for (uint32_t i = 0; i < 100000; i += 997) {
    git_oid o{};
    std::memcpy(o.id, &i, sizeof i);
    EXPECT_FALSE(set.Insert(o));
    EXPECT_TRUE(set.Contains(o));
  }
  git_oid other{};
  other.id[19] = 1;
  EXPECT_FALSE(set.Contains(other));
  EXPECT_EQ(set.size(), 100000u);
}

}  // namespace
}  // namespace gatos::scan
