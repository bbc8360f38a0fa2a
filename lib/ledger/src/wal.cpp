#include "gatos/ledger/wal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gatos/git/pack_writer.h"
#include "gatos/model/blake3.h"
#include "gatos/model/encoding.h"
#include "gatos/sys/file.h"
#include "writer_internal.h"

namespace gatos {
namespace {

constexpr char kMagic[8] = {'G', 'W', 'A', 'L', '0', '0', '0', '1'};
constexpr size_t kHeader = 24;   // magic, seq, payload length
constexpr size_t kTrailer = 32;  // BLAKE3 of seq, length and payload
constexpr uint64_t kMaxPayload = uint64_t{1} << 32;
constexpr char kSuffix[] = ".wal";

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

Digest32 Checksum(std::string_view seq_len_payload) { return Blake3(seq_len_payload); }

// The payload of one record: the log commit id, then each object as
// type (0 commit, 1 tree, 2 blob), length and bytes.
bool DecodePayload(std::string_view p, WalRecord* r) {
  if (p.size() < 40 + 8) return false;
  r->log_id.assign(p.substr(0, 40));
  for (char c : r->log_id) {
    if (LowerHexValue(c) < 0) return false;
  }
  uint64_t count = GetU64(p.data() + 40);
  size_t at = 48;
  bool has_log = false;
  for (uint64_t i = 0; i < count; ++i) {
    if (p.size() - at < 9) return false;
    uint8_t type = static_cast<uint8_t>(p[at]);
    uint64_t len = GetU64(p.data() + at + 1);
    at += 9;
    if (type > 2 || len > p.size() - at) return false;
    GitObject o;
    o.type = static_cast<ObjectType>(type);
    o.data.assign(p.substr(at, len));
    at += len;
    o.id = GitObjectId(o.type, o.data);
    has_log |= o.id == r->log_id && o.type == ObjectType::kCommit;
    r->objects.push_back(std::move(o));
  }
  return at == p.size() && has_log;
}

// Makes the first record of `path` unreadable (its magic zeroed) and syncs
// that: false when it cannot.
bool Invalidate(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const char zeros[sizeof kMagic] = {};
  const bool ok = ::pwrite(fd, zeros, sizeof zeros, 0) == static_cast<ssize_t>(sizeof zeros) && ::fdatasync(fd) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::string EncodeWalRecord(int64_t seq, const std::string& log_id, const std::vector<const GitObject*>& objects) {
  std::string payload = log_id;
  PutU64(&payload, objects.size());
  for (const GitObject* o : objects) {
    payload.push_back(static_cast<char>(static_cast<uint8_t>(o->type)));
    PutU64(&payload, o->data.size());
    payload += o->data;
  }
  std::string out(kMagic, sizeof kMagic);
  out.reserve(kHeader + payload.size() + kTrailer);
  PutU64(&out, static_cast<uint64_t>(seq));
  PutU64(&out, payload.size());
  out += payload;
  Digest32 sum = Checksum(std::string_view(out).substr(sizeof kMagic));
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  return out;
}

WalFileContents DecodeWalFile(std::string_view data) {
  WalFileContents out;
  size_t at = 0;
  while (data.size() - at >= kHeader + kTrailer) {
    const char* h = data.data() + at;
    if (std::memcmp(h, kMagic, sizeof kMagic) != 0) break;
    uint64_t seq = GetU64(h + 8);
    uint64_t len = GetU64(h + 16);
    if (len > kMaxPayload || len > data.size() - at - kHeader - kTrailer) break;
    std::string_view body = data.substr(at + sizeof kMagic, 16 + len);
    Digest32 want = Checksum(body);
    if (std::memcmp(want.data(), data.data() + at + kHeader + len, kTrailer) != 0) break;
    WalRecord r;
    r.seq = static_cast<int64_t>(seq);
    if (r.seq <= 0 || !DecodePayload(data.substr(at + kHeader, len), &r)) break;
    if (!out.records.empty() && r.seq != out.records.back().seq + 1) break;
    out.records.push_back(std::move(r));
    at += kHeader + len + kTrailer;
    out.valid_bytes = at;
  }
  return out;
}

WriteAheadLog::WriteAheadLog(std::string dir) : dir_(std::move(dir)), spare_mu_(std::make_unique<std::mutex>()) {
  // A crash between an append into the renamed spare and the sync of its
  // new name can leave a record under the spare's name: made unreadable
  // again before the spare is used.
  struct stat st;
  const std::string spare = SparePath();
  spare_ = ::lstat(spare.c_str(), &st) == 0 && S_ISREG(st.st_mode) && Invalidate(spare);
}

std::string WriteAheadLog::SparePath() const { return dir_ + "/" + kSpareName; }

Result<WriteAheadLog> WriteAheadLog::Open(const std::string& state_dir) {
  std::string dir = state_dir + "/wal";
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + dir);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return FailedPreconditionError(dir + " is not a directory");
  }
  return WriteAheadLog(dir);
}

WriteAheadLog::WriteAheadLog(WriteAheadLog&& o) noexcept
    : dir_(std::move(o.dir_)),
      spare_mu_(std::move(o.spare_mu_)),
      spare_(o.spare_),
      fd_(o.fd_),
      open_path_(std::move(o.open_path_)),
      open_bytes_(o.open_bytes_),
      closed_(std::move(o.closed_)) {
  o.fd_ = -1;
}

WriteAheadLog& WriteAheadLog::operator=(WriteAheadLog&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    dir_ = std::move(o.dir_);
    spare_mu_ = std::move(o.spare_mu_);
    spare_ = o.spare_;
    fd_ = o.fd_;
    open_path_ = std::move(o.open_path_);
    open_bytes_ = o.open_bytes_;
    closed_ = std::move(o.closed_);
    o.fd_ = -1;
  }
  return *this;
}

WriteAheadLog::~WriteAheadLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> WriteAheadLog::Files() const {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, kSuffix) == 0) out.push_back(dir_ + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());  // names are zero-padded first sequences
  return out;
}

Result<std::vector<WalRecord>> WriteAheadLog::ReadAll() const {
  std::vector<WalRecord> all;
  for (const std::string& path : Files()) {
    // A record file is at most a few batches; 1 GiB bounds a corrupt one.
    Result<std::string> data = ReadFileToString(path, size_t{1} << 30);
    if (!data.ok()) return data.status();
    WalFileContents c = DecodeWalFile(*data);
    if (!c.records.empty()) {
      const int64_t first = c.records.front().seq;
      while (!all.empty() && all.back().seq >= first) all.pop_back();
    }
    for (auto& r : c.records) {
      if (!all.empty() && r.seq != all.back().seq + 1) {
        return DataLossError(path + " starts at log sequence " + std::to_string(r.seq) + " but the record before it is " +
                             std::to_string(all.back().seq) + ": a write-ahead log file is missing or foreign");
      }
      all.push_back(std::move(r));
    }
  }
  return all;
}

Status WriteAheadLog::Append(int64_t seq, const std::string& log_id, const std::vector<const GitObject*>& objects) {
  return AppendEncoded(seq, EncodeWalRecord(seq, log_id, objects));
}

Status WriteAheadLog::AppendEncoded(int64_t seq, std::string_view rec) {
  bool created = false;
  if (fd_ < 0) {
    char name[32];
    std::snprintf(name, sizeof name, "/%020lld%s", static_cast<long long>(seq), kSuffix);
    open_path_ = dir_ + name;
    {
      // The spare, renamed into place: its first record is unreadable until
      // this append overwrites it, so a crash before then leaves a file
      // that holds no record.
      std::lock_guard<std::mutex> l(*spare_mu_);
      if (spare_) {
        spare_ = false;
        const std::string spare = SparePath();
        if (::renameat2(AT_FDCWD, spare.c_str(), AT_FDCWD, open_path_.c_str(), RENAME_NOREPLACE) == 0) {
          fd_ = ::open(open_path_.c_str(), O_WRONLY | O_CLOEXEC);
          if (fd_ < 0) ::unlink(open_path_.c_str());  // holds no record; a new file takes its name
        }
      }
    }
    if (fd_ < 0) fd_ = ::open(open_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0) return ErrnoStatus("create " + open_path_);
    open_bytes_ = 0;
    created = true;
  }
  size_t done = 0;
  while (done < rec.size()) {
    ssize_t n = ::pwrite(fd_, rec.data() + done, rec.size() - done, static_cast<off_t>(open_bytes_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = ErrnoStatus("write " + open_path_);
      // A partial record must not stay in front of the next one: this file
      // is closed for good (recovery reads up to the torn record).
      CloseOpen();
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd_) != 0) {
    Status s = ErrnoStatus("fdatasync " + open_path_);
    CloseOpen();
    return s;
  }
  open_bytes_ += rec.size();
  if (created) GATOS_RETURN_IF_ERROR(FsyncDirectory(dir_));
  return OkStatus();
}

void WriteAheadLog::CloseOpen() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  closed_.push_back(open_path_);
  open_bytes_ = 0;
}

std::vector<std::string> WriteAheadLog::Rotate() {
  CloseOpen();
  std::vector<std::string> out;
  out.swap(closed_);
  return out;
}

void WriteAheadLog::Keep(std::vector<std::string> files) {
  files.insert(files.end(), closed_.begin(), closed_.end());
  closed_ = std::move(files);
}

Status WriteAheadLog::Drop(const std::vector<std::string>& files) {
  if (files.empty()) return OkStatus();
  for (const auto& f : files) {
    bool want;
    {
      std::lock_guard<std::mutex> l(*spare_mu_);
      want = !spare_;
    }
    // Synced unreadable before the rename: a spare never holds a record.
    if (want && Invalidate(f)) {
      std::lock_guard<std::mutex> l(*spare_mu_);
      if (!spare_ && ::rename(f.c_str(), SparePath().c_str()) == 0) {
        spare_ = true;
        continue;
      }
    }
    if (::unlink(f.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("delete " + f);
  }
  return FsyncDirectory(dir_);
}

Status WriteAheadLog::CheckpointNow(const std::string& ledger_dir) {
  std::vector<std::string> files = Rotate();
  if (files.empty()) return OkStatus();
  Status s = writer_internal::SyncFileSystem(ledger_dir);
  if (s.ok()) s = Drop(files);
  if (!s.ok()) Keep(std::move(files));
  return s;
}

}  // namespace gatos
