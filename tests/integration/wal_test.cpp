// The ledger writer's write-ahead log: its record format, its files, and
// (ledger_writer_test.cpp) the writer replaying it after a crash.
#include "gatos/ledger/wal.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>

#include "test_util.h"

namespace gatos {
namespace {

std::vector<GitObject> Objects(int n) {
  std::vector<GitObject> out;
  out.push_back(MakeObject(ObjectType::kBlob, "blob " + std::to_string(n) + "\n"));
  out.push_back(MakeObject(ObjectType::kTree, ""));
  out.push_back(MakeObject(ObjectType::kCommit, "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nlog " +
                                                    std::to_string(n) + "\n"));
  return out;
}
std::vector<const GitObject*> Ptrs(const std::vector<GitObject>& v) {
  std::vector<const GitObject*> p;
  for (const auto& o : v) p.push_back(&o);
  return p;
}
std::string Record(int64_t seq) {
  auto objs = Objects(static_cast<int>(seq));
  return EncodeWalRecord(seq, objs.back().id, Ptrs(objs));
}

TEST(WalTest, RecordsRoundTripAndATornOrDamagedTailEndsAFile) {
  std::string file = Record(7) + Record(8) + Record(9);
  WalFileContents all = DecodeWalFile(file);
  ASSERT_EQ(all.records.size(), 3u);
  EXPECT_EQ(all.valid_bytes, file.size());
  for (int i = 0; i < 3; ++i) {
    auto want = Objects(7 + i);
    const WalRecord& r = all.records[i];
    EXPECT_EQ(r.seq, 7 + i);
    EXPECT_EQ(r.log_id, want.back().id);
    ASSERT_EQ(r.objects.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(r.objects[k].type, want[k].type);
      EXPECT_EQ(r.objects[k].data, want[k].data);
      EXPECT_EQ(r.objects[k].id, want[k].id);
    }
  }
  // Cut anywhere: exactly the records wholly before the cut.
  const size_t one = Record(7).size(), two = one + Record(8).size();
  for (size_t cut = 0; cut < file.size(); ++cut) {
    size_t want = cut >= two ? 2 : cut >= one ? 1 : 0;
    ASSERT_EQ(DecodeWalFile(std::string_view(file).substr(0, cut)).records.size(), want) << "cut at " << cut;
  }
  // A damaged byte anywhere in the second record ends the file before it.
  for (size_t at = one; at < two; at += 7) {
    std::string bad = file;
    bad[at] = static_cast<char>(bad[at] ^ 0x20);
    WalFileContents c = DecodeWalFile(bad);
    ASSERT_EQ(c.records.size(), 1u) << "byte " << at;
    EXPECT_EQ(c.valid_bytes, one);
  }
  // Sequences must follow one another within a file.
  EXPECT_EQ(DecodeWalFile(Record(7) + Record(9)).records.size(), 1u);
  // A record whose log commit is not among its objects is not a record.
  auto objs = Objects(3);
  EXPECT_TRUE(DecodeWalFile(EncodeWalRecord(3, objs[0].id, Ptrs(objs))).records.empty());
}

// The format as docs/ledger-format.md section 6 states it, written by an
// encoder of its own (Python and b3sum): the fuzz target's seed.
TEST(WalTest, TheDocumentedFormatDecodes) {
  std::string file = testing::ReadFile(std::string(GATOS_SOURCE_DIR) + "/tests/fuzz/corpus/wal_fuzz/two_records");
  WalFileContents c = DecodeWalFile(file);
  ASSERT_EQ(c.records.size(), 2u);
  EXPECT_EQ(c.valid_bytes, file.size());
  EXPECT_EQ(c.records[0].seq, 5);
  EXPECT_EQ(c.records[1].seq, 6);
  ASSERT_EQ(c.records[0].objects.size(), 3u);
  EXPECT_EQ(c.records[0].objects[0].type, ObjectType::kBlob);
  EXPECT_EQ(c.records[0].objects[0].data, "job.yaml\n");
  EXPECT_EQ(c.records[0].log_id, c.records[0].objects[2].id);
  EXPECT_EQ(c.records[1].log_id, GitObjectId(ObjectType::kCommit, c.records[1].objects[0].data));
}

TEST(WalTest, AppendRotateReadAndDrop) {
  testing::TempDir dir;
  auto wal = WriteAheadLog::Open(dir.path());
  ASSERT_TRUE(wal.ok()) << wal.status().message();
  EXPECT_TRUE(wal->ReadAll()->empty());
  for (int64_t seq : {1, 2}) {
    auto objs = Objects(static_cast<int>(seq));
    ASSERT_TRUE(wal->Append(seq, objs.back().id, Ptrs(objs)).ok());
  }
  EXPECT_GT(wal->open_bytes(), 0u);
  std::vector<std::string> closed = wal->Rotate();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(wal->open_bytes(), 0u);
  auto objs3 = Objects(3);
  ASSERT_TRUE(wal->Append(3, objs3.back().id, Ptrs(objs3)).ok());
  EXPECT_EQ(wal->Files().size(), 2u);
  auto all = wal->ReadAll();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].seq, 3);
  // A checkpoint drops the closed file only; the open one stays.
  ASSERT_TRUE(wal->Drop(closed).ok());
  ASSERT_EQ(wal->Files().size(), 1u);
  EXPECT_EQ(wal->ReadAll()->front().seq, 3);
  // Kept files come back from the next Rotate, with the file open now.
  wal->Keep({dir.Join("wal/kept.wal")});
  EXPECT_EQ(wal->Rotate().size(), 2u);
}

TEST(WalTest, ALaterFileReplacesAnUnacknowledgedTailAndAGapIsDataLoss) {
  testing::TempDir dir;
  auto wal = WriteAheadLog::Open(dir.path());
  ASSERT_TRUE(wal.ok());
  // Records 1..3 in one file; an append of 3 failed after its bytes were
  // written, so the writer went on with a new file starting at 3 again.
  testing::WriteFile(dir.Join("wal/00000000000000000001.wal"), Record(1) + Record(2) + Record(3));
  auto objs = Objects(30);
  std::string again = EncodeWalRecord(3, objs.back().id, Ptrs(objs)) + Record(4);
  testing::WriteFile(dir.Join("wal/00000000000000000003.wal"), again);
  auto all = wal->ReadAll();
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[2].log_id, objs.back().id) << "the later file's batch 3 wins";
  EXPECT_EQ((*all)[3].seq, 4);
  // A file that skips a sequence: a file is missing.
  testing::WriteFile(dir.Join("wal/00000000000000000006.wal"), Record(6));
  auto gap = wal->ReadAll();
  EXPECT_EQ(gap.status().code(), StatusCode::kDataLoss) << gap.status().message();
}


// A checkpoint keeps one dropped file as the spare, its first record made
// unreadable, and the next file is that spare overwritten from its start
// (the same inode): only the new records read back, never what is left of
// the old ones after them.
TEST(WalTest, ADroppedFileIsRecycledAndItsOldRecordsNeverReadBack) {
  testing::TempDir dir;
  auto wal = WriteAheadLog::Open(dir.path());
  ASSERT_TRUE(wal.ok());
  // Big old records, so that the new one ends inside the first of them.
  auto big = [](int64_t seq) {
    std::vector<GitObject> objs = Objects(static_cast<int>(seq));
    objs.insert(objs.begin(), MakeObject(ObjectType::kBlob, std::string(4096, 'x') + std::to_string(seq)));
    return objs;
  };
  for (int64_t seq = 1; seq <= 3; ++seq) {
    auto objs = big(seq);
    ASSERT_TRUE(wal->Append(seq, objs.back().id, Ptrs(objs)).ok());
  }
  const std::vector<std::string> closed = wal->Rotate();
  ASSERT_EQ(closed.size(), 1u);
  struct stat before;
  ASSERT_EQ(::stat(closed[0].c_str(), &before), 0);
  ASSERT_TRUE(wal->Drop(closed).ok());
  EXPECT_TRUE(wal->Files().empty());
  const std::string spare = dir.Join(std::string("wal/") + WriteAheadLog::kSpareName);
  ASSERT_TRUE(std::filesystem::exists(spare)) << "the dropped file is kept as the spare";
  EXPECT_TRUE(DecodeWalFile(testing::ReadFile(spare)).records.empty()) << "a spare holds no record";

  auto objs4 = Objects(4);
  ASSERT_TRUE(wal->Append(4, objs4.back().id, Ptrs(objs4)).ok());
  ASSERT_EQ(wal->Files().size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(spare));
  struct stat after;
  ASSERT_EQ(::stat(wal->Files()[0].c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the spare became the new file";
  EXPECT_EQ(after.st_size, before.st_size) << "overwritten in place, not appended to";
  auto objs5 = Objects(5);
  ASSERT_TRUE(wal->Append(5, objs5.back().id, Ptrs(objs5)).ok());
  auto all = wal->ReadAll();
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].seq, 4);
  EXPECT_EQ((*all)[1].seq, 5);
  EXPECT_EQ((*all)[1].log_id, objs5.back().id);

  // Two files dropped at once: one becomes the spare, the other goes.
  std::vector<std::string> two = wal->Rotate();
  auto objs6 = Objects(6);
  ASSERT_TRUE(wal->Append(6, objs6.back().id, Ptrs(objs6)).ok());
  for (auto& f : wal->Rotate()) two.push_back(f);
  ASSERT_EQ(two.size(), 2u);
  ASSERT_TRUE(wal->Drop(two).ok());
  EXPECT_TRUE(wal->Files().empty());
  size_t left = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.Join("wal"))) {
    ++left;
    EXPECT_EQ(e.path().filename(), WriteAheadLog::kSpareName);
  }
  EXPECT_EQ(left, 1u);
}

// A crash right after the spare was renamed into place, before the append
// overwrote it, leaves a file with no record: nothing old is replayed. And
// a record a crash left under the spare's name (written, its new name not
// yet synced) is made unreadable again when the log is opened.
TEST(WalTest, ASpareRenamedInBeforeItsFirstRecordReadsAsEmptyAndOpenReinvalidatesTheSpare) {
  testing::TempDir dir;
  {
    auto wal = WriteAheadLog::Open(dir.path());
    ASSERT_TRUE(wal.ok());
    for (int64_t seq : {1, 2}) {
      auto objs = Objects(static_cast<int>(seq));
      ASSERT_TRUE(wal->Append(seq, objs.back().id, Ptrs(objs)).ok());
    }
    ASSERT_TRUE(wal->Drop(wal->Rotate()).ok());
  }
  const std::string spare = dir.Join(std::string("wal/") + WriteAheadLog::kSpareName);
  const std::string renamed = dir.Join("wal/00000000000000000003.wal");
  std::filesystem::rename(spare, renamed);
  {
    auto wal = WriteAheadLog::Open(dir.path());
    ASSERT_TRUE(wal.ok());
    auto all = wal->ReadAll();
    ASSERT_TRUE(all.ok()) << all.status().message();
    EXPECT_TRUE(all->empty()) << "record 2 is still in the file, after an unreadable first record";
  }
  // Under the spare's name, a whole record (as a crash can leave it).
  std::filesystem::remove(renamed);
  testing::WriteFile(spare, Record(7) + Record(8));
  ASSERT_EQ(DecodeWalFile(testing::ReadFile(spare)).records.size(), 2u);
  auto wal = WriteAheadLog::Open(dir.path());
  ASSERT_TRUE(wal.ok());
  EXPECT_TRUE(DecodeWalFile(testing::ReadFile(spare)).records.empty());
  auto objs = Objects(9);
  ASSERT_TRUE(wal->Append(9, objs.back().id, Ptrs(objs)).ok());
  ASSERT_EQ(wal->Files().size(), 1u);
  EXPECT_EQ(wal->Files()[0], dir.Join("wal/00000000000000000009.wal"));
  auto all = wal->ReadAll();
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 1u) << "record 8, left intact after the new record 9, does not follow it";
  EXPECT_EQ((*all)[0].seq, 9);
}

}  // namespace
}  // namespace gatos
