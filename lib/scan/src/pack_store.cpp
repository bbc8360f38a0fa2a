#include "gatos/scan/pack_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace gatos::scan {
namespace {

uint32_t Be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint64_t Be64(const unsigned char* p) { return (uint64_t{Be32(p)} << 32) | Be32(p + 4); }

// A read-only mapping of a whole file.
class Mapping {
 public:
  Mapping() = default;
  ~Mapping() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  bool Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
    if (ok) {
      size_ = static_cast<size_t>(st.st_size);
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      ok = p != MAP_FAILED;
      if (ok) data_ = p;
    }
    ::close(fd);
    return ok;
  }
  const unsigned char* data() const { return static_cast<const unsigned char*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

constexpr size_t kFanoutBytes = 256 * 4;
constexpr size_t kIdxHeader = 8;
constexpr size_t kTrailer = 2 * kOidBytes;  // pack checksum + index checksum
constexpr size_t kPackHeader = 12;

}  // namespace

struct PackStore::Pack {
  std::string name;
  Mapping idx;
  Mapping pack;
  uint32_t count = 0;
  const unsigned char* fanout = nullptr;
  const unsigned char* oids = nullptr;
  const unsigned char* offsets = nullptr;  // 4 bytes each
  const unsigned char* large = nullptr;    // 8 bytes each
  size_t large_count = 0;

  // Parses and checks a version-2 index and its pack; false if unusable.
  bool Load(const std::string& idx_path, const std::string& pack_path) {
    if (!idx.Open(idx_path) || !pack.Open(pack_path)) return false;
    const unsigned char* p = idx.data();
    const size_t size = idx.size();
    if (size < kIdxHeader + kFanoutBytes + kTrailer) return false;
    if (std::memcmp(p, "\377tOc", 4) != 0 || Be32(p + 4) != 2) return false;
    fanout = p + kIdxHeader;
    uint32_t prev = 0;
    for (int i = 0; i < 256; ++i) {
      const uint32_t v = Be32(fanout + 4 * i);
      if (v < prev) return false;
      prev = v;
    }
    count = prev;
    const uint64_t fixed =
        kIdxHeader + kFanoutBytes + uint64_t{count} * (kOidBytes + 4 + 4) + kTrailer;
    if (fixed > size || (size - fixed) % 8 != 0) return false;
    large_count = (size - fixed) / 8;
    oids = fanout + kFanoutBytes;
    offsets = oids + size_t{count} * kOidBytes + size_t{count} * 4;  // after the CRCs
    large = offsets + size_t{count} * 4;
    // Sorted ids: a lookup must never land on another object's entry.
    for (uint32_t i = 1; i < count; ++i) {
      if (std::memcmp(oids + (i - 1) * kOidBytes, oids + i * kOidBytes, kOidBytes) >= 0) {
        return false;
      }
    }
    const unsigned char* h = pack.data();
    if (pack.size() < kPackHeader + kOidBytes || std::memcmp(h, "PACK", 4) != 0) return false;
    const uint32_t version = Be32(h + 4);
    if ((version != 2 && version != 3) || Be32(h + 8) != count) return false;
    for (uint32_t i = 0; i < count; ++i) {
      if (!Offset(i)) return false;
    }
    return true;
  }

  std::optional<uint64_t> Offset(uint32_t i) const {
    uint64_t off = Be32(offsets + size_t{i} * 4);
    if (off & 0x80000000u) {
      const uint64_t k = off & 0x7fffffffu;
      if (k >= large_count) return std::nullopt;
      off = Be64(large + k * 8);
    }
    if (off < kPackHeader || off >= pack.size() - kOidBytes) return std::nullopt;
    return off;
  }
};

PackStore::~PackStore() = default;

std::unique_ptr<PackStore> PackStore::Open(const std::string& git_dir) {
  std::unique_ptr<PackStore> store(new PackStore());
  const std::filesystem::path dir = std::filesystem::path(git_dir) / "objects" / "pack";
  std::error_code ec;
  std::vector<std::string> idx_files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && name.rfind("pack-", 0) == 0 && name.ends_with(".idx")) {
      idx_files.push_back(e.path().string());
    }
  }
  std::sort(idx_files.begin(), idx_files.end());
  for (const std::string& idx : idx_files) {
    auto pack = std::make_unique<Pack>();
    pack->name = std::filesystem::path(idx).filename().replace_extension(".pack").string();
    if (pack->Load(idx, idx.substr(0, idx.size() - 4) + ".pack")) {
      store->packs_.push_back(std::move(pack));
    } else {
      ++store->skipped_;
    }
  }
  return store;
}

std::optional<PackLocation> PackStore::Find(const unsigned char* oid) const {
  for (size_t p = 0; p < packs_.size(); ++p) {
    const Pack& pk = *packs_[p];
    const uint32_t lo0 = oid[0] == 0 ? 0 : Be32(pk.fanout + 4 * (oid[0] - 1));
    uint32_t lo = lo0;
    uint32_t hi = Be32(pk.fanout + 4 * oid[0]);
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      const int c = std::memcmp(pk.oids + size_t{mid} * kOidBytes, oid, kOidBytes);
      if (c == 0) {
        std::optional<uint64_t> off = pk.Offset(mid);
        if (!off) break;
        return PackLocation{static_cast<uint32_t>(p), *off};
      }
      if (c < 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
  }
  return std::nullopt;
}

size_t PackStore::object_count() const {
  size_t n = 0;
  for (const auto& p : packs_) n += p->count;
  return n;
}

std::string_view PackStore::PackBytes(uint32_t pack) const {
  const Pack& p = *packs_[pack];
  return {reinterpret_cast<const char*>(p.pack.data()), p.pack.size()};
}

const std::string& PackStore::PackName(uint32_t pack) const { return packs_[pack]->name; }

}  // namespace gatos::scan
