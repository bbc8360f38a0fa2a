#include "gatos/git/pack_writer.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <unordered_set>

#include "gatos/model/encoding.h"

namespace gatos {
namespace {

class Sha1 {
 public:
  Sha1() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha1(), nullptr); }
  ~Sha1() { EVP_MD_CTX_free(ctx_); }
  Sha1(const Sha1&) = delete;
  Sha1& operator=(const Sha1&) = delete;
  void Update(std::string_view s) { EVP_DigestUpdate(ctx_, s.data(), s.size()); }
  std::string Final() {
    unsigned char md[20];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, md, &n);
    return std::string(reinterpret_cast<char*>(md), 20);
  }

 private:
  EVP_MD_CTX* ctx_;
};

void PutU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xff));
}

int PackType(ObjectType t) {
  switch (t) {
    case ObjectType::kCommit: return 1;
    case ObjectType::kTree: return 2;
    case ObjectType::kBlob: return 3;
  }
  return 3;
}

// An O_EXCL temporary file removed on destruction unless renamed.
class TempFile {
 public:
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  Status Open(const std::string& dir, const std::string& prefix) {
    // Names need only be unlikely to collide (O_EXCL decides); one seeded
    // engine per thread, not a random_device per file.
    thread_local std::mt19937_64 rng{std::random_device{}()};
    for (int i = 0; i < 16; ++i) {
      std::string p = dir + "/" + prefix + std::to_string(rng());
      fd_ = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
      if (fd_ >= 0) {
        path_ = p;
        return OkStatus();
      }
      if (errno != EEXIST) return ErrnoStatus("create " + p);
    }
    return InternalError("cannot create a temporary file in " + dir);
  }
  Status Write(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("write " + path_);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return OkStatus();
  }
  Status Sync() {
    if (::fdatasync(fd_) != 0) return ErrnoStatus("fdatasync " + path_);
    return OkStatus();
  }
  Status RenameTo(const std::string& final_path) {
    if (::close(fd_) != 0) {
      fd_ = -1;
      return ErrnoStatus("close " + path_);
    }
    fd_ = -1;
    if (::rename(path_.c_str(), final_path.c_str()) != 0) return ErrnoStatus("rename to " + final_path);
    path_.clear();
    return OkStatus();
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// zlib's stored (level 0) format, written directly: a zlib header, stored
// deflate blocks of at most 65535 bytes, and the Adler-32 of the data. No
// compressor state to set up per object.
void Store(std::string_view in, std::string* out) {
  out->push_back(static_cast<char>(0x78));
  out->push_back(static_cast<char>(0x01));
  size_t pos = 0;
  do {
    size_t n = std::min<size_t>(65535, in.size() - pos);
    bool last = pos + n == in.size();
    out->push_back(static_cast<char>(last ? 1 : 0));
    out->push_back(static_cast<char>(n & 0xff));
    out->push_back(static_cast<char>(n >> 8));
    out->push_back(static_cast<char>(~n & 0xff));
    out->push_back(static_cast<char>((~n >> 8) & 0xff));
    out->append(in.substr(pos, n));
    pos += n;
  } while (pos < in.size());
  uint32_t adler = static_cast<uint32_t>(adler32(1, reinterpret_cast<const Bytef*>(in.data()), static_cast<uInt>(in.size())));
  PutU32(out, adler);
}

// One deflate stream for the whole pack, reset per object: setting a stream
// up costs more than compressing a small object.
class Deflater {
 public:
  explicit Deflater(int level) : level_(level) {}
  ~Deflater() {
    if (init_) deflateEnd(&zs_);
  }
  Status Compress(std::string_view in, std::string* out) {
    if (level_ == 0) {
      Store(in, out);
      return OkStatus();
    }
    if (!init_) {
      // memLevel 2: a small hash table; objects here are a few KiB.
      if (deflateInit2(&zs_, level_, Z_DEFLATED, 15, 2, Z_DEFAULT_STRATEGY) != Z_OK) {
        return InternalError("zlib deflateInit failed");
      }
      init_ = true;
    } else if (deflateReset(&zs_) != Z_OK) {
      return InternalError("zlib deflateReset failed");
    }
    size_t bound = deflateBound(&zs_, static_cast<uLong>(in.size()));
    size_t start = out->size();
    out->resize(start + bound);
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs_.avail_in = static_cast<uInt>(in.size());
    zs_.next_out = reinterpret_cast<Bytef*>(out->data() + start);
    zs_.avail_out = static_cast<uInt>(bound);
    int rc = deflate(&zs_, Z_FINISH);
    if (rc != Z_STREAM_END) return InternalError("zlib deflate failed");
    out->resize(start + (bound - zs_.avail_out));
    return OkStatus();
  }

 private:
  int level_;
  bool init_ = false;
  z_stream zs_{};
};

}  // namespace

Status FsyncDirectory(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoStatus("open " + dir);
  int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) return ErrnoStatus("fsync " + dir);
  return OkStatus();
}

Result<std::string> WritePack(const std::string& git_dir, const std::vector<const GitObject*>& input,
                              const PackWriteOptions& options) {
  std::vector<const GitObject*> objects;
  objects.reserve(input.size());
  {
    std::unordered_set<std::string> seen;
    for (const GitObject* o : input) {
      if (seen.insert(o->id).second) objects.push_back(o);
    }
  }
  if (objects.empty()) return std::string();
  const std::string pack_dir = git_dir + "/objects/pack";
  // stat, not mkdir: mkdir of an existing directory takes its parent's lock
  // for writing, which a running `git repack` holds often.
  struct stat st;
  if (::stat(pack_dir.c_str(), &st) != 0 && ::mkdir(pack_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("mkdir " + pack_dir);
  }

  struct Entry {
    std::string raw_id;
    uint64_t offset;
    uint32_t crc;
  };
  std::vector<Entry> entries;
  entries.reserve(objects.size());
  Deflater blob_z(options.blob_level), tree_z(options.tree_level);
  std::string pack;
  size_t raw = 0;
  for (const GitObject* o : objects) raw += o->data.size() + 16;
  pack.reserve(64 + raw + raw / 1000 * 5);
  pack += "PACK";
  PutU32(&pack, 2);
  PutU32(&pack, static_cast<uint32_t>(objects.size()));
  for (const GitObject* o : objects) {
    size_t start = pack.size();
    uint64_t size = o->data.size();
    uint8_t c = static_cast<uint8_t>((PackType(o->type) << 4) | (size & 0x0f));
    size >>= 4;
    while (size) {
      pack.push_back(static_cast<char>(c | 0x80));
      c = static_cast<uint8_t>(size & 0x7f);
      size >>= 7;
    }
    pack.push_back(static_cast<char>(c));
    GATOS_RETURN_IF_ERROR((o->type == ObjectType::kTree ? tree_z : blob_z).Compress(o->data, &pack));
    uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(pack.data() + start), static_cast<uInt>(pack.size() - start)));
    entries.push_back({RawOid(o->id), start, crc});
  }
  std::string pack_sum;
  {
    Sha1 h;
    h.Update(pack);
    pack_sum = h.Final();
  }
  pack += pack_sum;

  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.raw_id < b.raw_id; });
  std::string idx;
  idx.reserve(8 + 1024 + entries.size() * 28 + 40);
  idx += "\377tOc";
  PutU32(&idx, 2);
  uint32_t fanout[256] = {};
  for (const Entry& e : entries) ++fanout[static_cast<uint8_t>(e.raw_id[0])];
  uint32_t running = 0;
  for (int i = 0; i < 256; ++i) {
    running += fanout[i];
    PutU32(&idx, running);
  }
  for (const Entry& e : entries) idx += e.raw_id;
  for (const Entry& e : entries) PutU32(&idx, e.crc);
  std::vector<uint64_t> large;
  for (const Entry& e : entries) {
    if (e.offset < 0x80000000ULL) {
      PutU32(&idx, static_cast<uint32_t>(e.offset));
    } else {
      PutU32(&idx, 0x80000000U | static_cast<uint32_t>(large.size()));
      large.push_back(e.offset);
    }
  }
  for (uint64_t off : large) {
    PutU32(&idx, static_cast<uint32_t>(off >> 32));
    PutU32(&idx, static_cast<uint32_t>(off & 0xffffffffU));
  }
  idx += pack_sum;
  {
    Sha1 h;
    h.Update(idx);
    idx += h.Final();
  }

  std::string base = pack_dir + "/pack-" + HexOid(pack_sum);
  const std::string& temp_dir = options.temp_dir.empty() ? pack_dir : options.temp_dir;
  TempFile pack_tmp, idx_tmp;
  GATOS_RETURN_IF_ERROR(pack_tmp.Open(temp_dir, "tmp_pack_"));
  GATOS_RETURN_IF_ERROR(pack_tmp.Write(pack));
  GATOS_RETURN_IF_ERROR(idx_tmp.Open(temp_dir, "tmp_idx_"));
  GATOS_RETURN_IF_ERROR(idx_tmp.Write(idx));
  if (options.fsync) {
    GATOS_RETURN_IF_ERROR(pack_tmp.Sync());
    GATOS_RETURN_IF_ERROR(idx_tmp.Sync());
  }
  GATOS_RETURN_IF_ERROR(pack_tmp.RenameTo(base + ".pack"));
  GATOS_RETURN_IF_ERROR(idx_tmp.RenameTo(base + ".idx"));
  if (options.fsync) {
    // The directory the files left first: on a file system without a
    // journal, a crash between the two syncs in the other order could leave
    // them under both names with one link counted, and removing the
    // temporary name (the spool is emptied at start) would free the pack.
    // In this order the worst is a pack with no name, which fsck reclaims.
    std::vector<std::string> dirs;
    if (temp_dir != pack_dir) dirs.push_back(temp_dir);
    dirs.push_back(pack_dir);
    if (options.deferred_dir_syncs) {
      for (auto& d : dirs) options.deferred_dir_syncs->push_back(std::move(d));
    } else {
      for (const auto& d : dirs) GATOS_RETURN_IF_ERROR(FsyncDirectory(d));
    }
  }
  return base + ".pack";
}

}  // namespace gatos
