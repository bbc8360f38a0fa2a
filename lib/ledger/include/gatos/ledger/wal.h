// The ledger writer's write-ahead log: what makes a batch durable with one
// sync instead of six.
//
// A batch is durable once its record — its log sequence, its log commit id
// and every object it wrote — is in gatos/wal/ and fdatasync'ed. The pack
// and the refs/gatos/log move follow without syncs; a checkpoint (syncfs of
// the ledger's file system, in the background) makes them durable in bulk,
// and then the files whose records it covers are deleted (one is kept as
// the next file's space: Drop). After a crash the
// next writer (LedgerWriter::Open) writes every record left in gatos/wal/ as
// a pack again, durably, and moves the log forward to the last one: a batch
// acknowledged before the crash is never lost, whatever the file system kept
// of the unsynced pack and ref. Format: docs/ledger-format.md, section 7a.
#ifndef GATOS_LEDGER_WAL_H_
#define GATOS_LEDGER_WAL_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/git/git_object.h"
#include "gatos/model/status.h"

namespace gatos {

struct WalRecord {
  int64_t seq = 0;
  std::string log_id;
  std::vector<GitObject> objects;
};

// Encodes one record (header, payload, BLAKE3 of both) and decodes what a
// file holds: the records up to the first one that is incomplete or does
// not check (a torn tail, never acknowledged). Pure; fuzzed.
std::string EncodeWalRecord(int64_t seq, const std::string& log_id, const std::vector<const GitObject*>& objects);
struct WalFileContents {
  std::vector<WalRecord> records;
  size_t valid_bytes = 0;  // where the records that check end
};
WalFileContents DecodeWalFile(std::string_view data);

class WriteAheadLog {
 public:
  // gatos/wal under the ledger's state dir, created when missing.
  static Result<WriteAheadLog> Open(const std::string& state_dir);
  WriteAheadLog(WriteAheadLog&&) noexcept;
  WriteAheadLog& operator=(WriteAheadLog&&) noexcept;
  ~WriteAheadLog();

  // Every record left in the directory's files, oldest first. A file that
  // starts at or before the sequence its predecessor reached replaces that
  // predecessor's records from there (they were never acknowledged: the
  // append that failed closed its file). DataLoss when a sequence is
  // skipped (a file is missing or foreign).
  Result<std::vector<WalRecord>> ReadAll() const;
  // Appends a record and makes it durable (fdatasync; a new file's name is
  // synced into the directory too).
  Status Append(int64_t seq, const std::string& log_id, const std::vector<const GitObject*>& objects);
  // Appends records encoded by EncodeWalRecord, consecutive sequences from
  // `seq`, with one fdatasync: a follower's group of records.
  Status AppendEncoded(int64_t seq, std::string_view records);
  // The next Append starts a new file; returns the files closed so far
  // (their records are all appended before this call).
  std::vector<std::string> Rotate();
  // Deletes these files (after a checkpoint covered them) and syncs the
  // directory. One of them is kept as the spare (kSpareName) when there is
  // none: its first record is made unreadable (synced) before it is renamed,
  // and the next new file is the spare renamed into place and overwritten
  // from its start, so appends land in blocks already allocated and an
  // fdatasync writes no inode (~0.1 ms less per batch on ext4). A file
  // decodes up to its first record that does not follow the one before,
  // so what is left of older records after the new ones is never read.
  // Must not run concurrently with itself; may with Append.
  Status Drop(const std::vector<std::string>& files);
  static constexpr char kSpareName[] = "spare";
  // Gives back files Rotate returned that could not be dropped: the next
  // Rotate returns them again.
  void Keep(std::vector<std::string> files);
  // Every file now in the directory.
  std::vector<std::string> Files() const;
  // For a writer without a checkpoint thread (a follower replica): closes
  // the open file, syncs the file system that holds `ledger_dir` (syncfs),
  // and drops the closed files. Not concurrently with Append.
  Status CheckpointNow(const std::string& ledger_dir);
  // Bytes appended to the open file.
  uint64_t open_bytes() const { return open_bytes_; }

 private:
  explicit WriteAheadLog(std::string dir);
  void CloseOpen();
  std::string SparePath() const;
  std::string dir_;
  std::unique_ptr<std::mutex> spare_mu_;  // spare_ and the spare's name
  bool spare_ = false;                    // dir_/kSpareName exists, its first record unreadable
  int fd_ = -1;
  std::string open_path_;
  uint64_t open_bytes_ = 0;
  std::vector<std::string> closed_;
};

}  // namespace gatos

#endif  // GATOS_LEDGER_WAL_H_
