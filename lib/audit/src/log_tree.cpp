#include "gatos/audit/log_tree.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "gatos/model/encoding.h"
#include "gatos/model/log_format.h"
#include "gatos/sys/file.h"

namespace gatos {
namespace {

constexpr int kTileHeight = 8;
constexpr uint64_t kTileWidth = 256;
constexpr char kStateMagic[] = "gatos-tlog 1";
constexpr size_t kEntryRecord = 28;  // raw commit id (20) + Log-Time ms (u64 BE)

std::string Short(const std::string& id) { return id.substr(0, 12); }

// The hashes tile (tile_level, index) holds in a tree of `size` entries.
uint64_t TileWidthAt(int tile_level, uint64_t index, uint64_t size) {
  uint64_t count = size >> (kTileHeight * tile_level);
  if (count <= index * kTileWidth) return 0;
  return std::min<uint64_t>(kTileWidth, count - index * kTileWidth);
}

struct StateFile {
  uint64_t size = 0;
  std::string head;
};

Result<StateFile> ReadState(const std::string& dir) {
  auto text = ReadFileToString(dir + "/state", 4096);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return StateFile{};
    return text.status();
  }
  StateFile s;
  std::string_view t = *text;
  auto bad = [&] { return DataLossError(dir + "/state: not a gatos-tlog state file"); };
  std::string expect_head;
  size_t nl = t.find('\n');
  if (nl == std::string_view::npos || t.substr(0, nl) != kStateMagic) return bad();
  t.remove_prefix(nl + 1);
  if (t.substr(0, 5) != "size ") return bad();
  t.remove_prefix(5);
  nl = t.find('\n');
  if (nl == std::string_view::npos) return bad();
  auto [p, ec] = std::from_chars(t.data(), t.data() + nl, s.size);
  if (ec != std::errc() || p != t.data() + nl) return bad();
  t.remove_prefix(nl + 1);
  if (t.substr(0, 5) != "head " || t.size() != 5 + 40 + 1 || t.back() != '\n') return bad();
  s.head = std::string(t.substr(5, 40));
  if (!IsLowerHex(s.head, 40)) return bad();
  return s;
}

}  // namespace

std::string TlogTilePath(int tile_level, uint64_t index, int width) {
  std::string n = std::to_string(index % 1000);
  n = std::string(3 - n.size(), '0') + n;
  for (uint64_t rest = index / 1000; rest > 0; rest /= 1000) {
    std::string g = std::to_string(rest % 1000);
    n = "x" + std::string(3 - g.size(), '0') + g + "/" + n;
  }
  std::string p = "tile/" + std::to_string(tile_level) + "/" + n;
  if (width > 0 && width < static_cast<int>(kTileWidth)) p += ".p/" + std::to_string(width);
  return p;
}

bool ParseTlogTilePath(std::string_view path, int* tile_level, uint64_t* index, int* width) {
  auto digits = [](std::string_view s, size_t max) {
    return !s.empty() && s.size() <= max && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    size_t slash = path.find('/', at);
    parts.push_back(path.substr(at, slash == std::string_view::npos ? std::string_view::npos : slash - at));
    if (slash == std::string_view::npos) break;
    at = slash + 1;
  }
  if (parts.size() < 3 || parts.size() > 12 || parts[0] != "tile" || !digits(parts[1], 2)) return false;
  const int level = std::stoi(std::string(parts[1]));
  size_t last = parts.size() - 1;
  int w = 0;
  if (parts.size() >= 4 && parts[last - 1].size() == 5 && parts[last - 1].substr(3) == ".p") {
    if (!digits(parts[last], 3)) return false;
    w = std::stoi(std::string(parts[last]));
    parts[last - 1] = parts[last - 1].substr(0, 3);
    --last;
  }
  uint64_t n = 0;
  for (size_t i = 2; i <= last; ++i) {
    std::string_view g = parts[i];
    if (i < last) {
      if (g.size() != 4 || g[0] != 'x') return false;
      g.remove_prefix(1);
    }
    if (g.size() != 3 || !digits(g, 3)) return false;
    if (n > (UINT64_MAX - 999) / 1000) return false;
    n = n * 1000 + static_cast<uint64_t>(std::stoi(std::string(g)));
  }
  if (level > 63 || w < 0 || w >= static_cast<int>(kTileWidth)) return false;
  if (TlogTilePath(level, n, w) != path) return false;  // one spelling per tile
  *tile_level = level;
  *index = n;
  *width = w;
  return true;
}

std::string LogTree::DirFor(const std::string& repo_path) { return repo_path + "/gatos/tlog"; }

Result<LogTree> LogTree::Open(std::string dir) {
  LogTree t(std::move(dir));
  GATOS_ASSIGN_OR_RETURN(StateFile s, ReadState(t.dir_));
  t.size_ = s.size;
  t.head_ = s.head;
  return t;
}

Result<const std::string*> LogTree::Tile(int tile_level, uint64_t index) {
  auto key = std::make_pair(tile_level, index);
  auto it = cache_.find(key);
  if (it != cache_.end()) return &it->second;
  uint64_t width = TileWidthAt(tile_level, index, size_);
  if (width == 0) return NotFoundError("tile beyond the tree");
  std::string path = dir_ + "/" + TlogTilePath(tile_level, index, static_cast<int>(width));
  auto data = ReadFileToString(path, kTileWidth * 32);
  if (!data.ok() && data.status().code() == StatusCode::kNotFound) {
    // Another process extended the tree and replaced this partial tile:
    // the full or wider tile holds the same hashes first.
    GATOS_ASSIGN_OR_RETURN(StateFile s, ReadState(dir_));
    uint64_t w2 = TileWidthAt(tile_level, index, s.size);
    if (w2 > width) {
      data = ReadFileToString(dir_ + "/" + TlogTilePath(tile_level, index, static_cast<int>(w2)), kTileWidth * 32);
      if (data.ok()) data = data->substr(0, width * 32);
    }
  }
  if (!data.ok()) return DataLossError("Merkle tree tile " + path + ": " + data.status().message());
  if (data->size() != width * 32) {
    return DataLossError("Merkle tree tile " + path + " holds " + std::to_string(data->size()) +
                         " bytes, not " + std::to_string(width * 32));
  }
  auto [pos, inserted] = cache_.emplace(key, std::move(*data));
  return &pos->second;
}

Result<MerkleHash> LogTree::SubtreeHash(int level, uint64_t index) {
  int tl = level / kTileHeight;
  int r = level % kTileHeight;
  uint64_t first = index << r;  // at tree level kTileHeight * tl
  uint64_t n = uint64_t{1} << r;
  if (((first + n) << (kTileHeight * tl)) > size_) return NotFoundError("subtree beyond the tree");
  GATOS_ASSIGN_OR_RETURN(const std::string* tile, Tile(tl, first / kTileWidth));
  uint64_t off = first % kTileWidth;
  if ((off + n) * 32 > tile->size()) return DataLossError("Merkle tree tile too short");
  std::vector<MerkleHash> hs(n);
  for (uint64_t i = 0; i < n; ++i) std::memcpy(hs[i].data(), tile->data() + (off + i) * 32, 32);
  while (hs.size() > 1) {
    std::vector<MerkleHash> up(hs.size() / 2);
    for (size_t i = 0; i < up.size(); ++i) up[i] = MerkleNodeHash(hs[2 * i], hs[2 * i + 1]);
    hs = std::move(up);
  }
  return hs[0];
}

Result<MerkleHash> LogTree::Root(uint64_t size) {
  if (size > size_) return InvalidArgumentError("the tree has only " + std::to_string(size_) + " entries");
  return MerkleRoot([this](int l, uint64_t i) { return SubtreeHash(l, i); }, size);
}

Result<std::vector<MerkleHash>> LogTree::InclusionProof(uint64_t index, uint64_t size) {
  if (size > size_) return InvalidArgumentError("the tree has only " + std::to_string(size_) + " entries");
  return MerkleInclusionProof([this](int l, uint64_t i) { return SubtreeHash(l, i); }, index, size);
}

Result<std::vector<MerkleHash>> LogTree::ConsistencyProof(uint64_t size1, uint64_t size2) {
  if (size2 > size_) return InvalidArgumentError("the tree has only " + std::to_string(size_) + " entries");
  return MerkleConsistencyProof([this](int l, uint64_t i) { return SubtreeHash(l, i); }, size1, size2);
}

Status LogTree::Update(Ledger& ledger, const std::string& head_arg) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return InternalError("cannot create " + dir_ + ": " + ec.message());
  int lock_fd = ::open((dir_ + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) return ErrnoStatus("open " + dir_ + "/lock");
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock_fd};
  if (::flock(lock_fd, LOCK_EX) != 0) return ErrnoStatus("flock " + dir_ + "/lock");

  GATOS_ASSIGN_OR_RETURN(StateFile st, ReadState(dir_));
  if (st.size != size_ || st.head != head_) {
    cache_.clear();
    size_ = st.size;
    head_ = st.head;
  }
  std::string head = head_arg;
  if (head.empty()) {
    GATOS_ASSIGN_OR_RETURN(head, ledger.ResolveRef(std::string(kLogRef)));
    if (head.empty()) return NotFoundError("the repository has no refs/gatos/log");
  }
  if (head == head_) return OkStatus();

  // Walk back to the recorded head, hashing each new entry.
  std::vector<MerkleHash> leaves;  // newest first
  std::vector<std::string> records;  // their index records, newest first
  std::string cur = head;
  int64_t expect = -1;
  std::string new_head = head;
  uint64_t new_size = 0;
  while (true) {
    auto raw = ledger.ReadRawObject(cur);
    if (!raw.ok() || raw->first != ObjectType::kCommit) {
      return DataLossError("log commit " + cur + " cannot be read; is the clone complete?");
    }
    GATOS_ASSIGN_OR_RETURN(RawCommit c, ParseRawCommit(raw->second, cur));
    auto info = ParseLogMessage(c.message);
    if (!info.ok()) {
      return InvalidArgumentError("log commit " + Short(cur) + ": " + info.status().message());
    }
    if (expect < 0) new_size = static_cast<uint64_t>(info->seq);
    if ((expect >= 0 && info->seq != expect) || info->seq < 1) {
      return DataLossError("log commit " + Short(cur) + " has Log-Seq " + std::to_string(info->seq) +
                           ", expected " + std::to_string(expect));
    }
    if (static_cast<uint64_t>(info->seq) == size_) {
      if (cur != head_) {
        return DataLossError("the log was rewritten: its commit of sequence " + std::to_string(size_) + " is " +
                             Short(cur) + ", the Merkle tree recorded " + Short(head_));
      }
      break;
    }
    if (static_cast<uint64_t>(info->seq) < size_) {
      return DataLossError("the log was rolled back: its head has sequence " + std::to_string(info->seq) +
                           ", the Merkle tree already holds " + std::to_string(size_) + " entries");
    }
    leaves.push_back(MerkleLeafHash(raw->second));
    std::string rec = RawOid(cur);
    for (int i = 7; i >= 0; --i) rec += static_cast<char>(static_cast<uint64_t>(info->time_ms) >> (8 * i));
    records.push_back(std::move(rec));
    if (info->seq == 1) break;
    if (c.parents.empty()) return DataLossError("log commit " + Short(cur) + " has no parent");
    cur = c.parents[0];
    expect = info->seq - 1;
  }
  if (size_ + leaves.size() != new_size) return DataLossError("log sequence does not match the Merkle tree");

  GATOS_ASSIGN_OR_RETURN(CompactMerkleRange range,
                         CompactMerkleRange::FromSource([this](int l, uint64_t i) { return SubtreeHash(l, i); }, size_));
  std::map<std::pair<int, uint64_t>, std::string> touched;
  Status st_cb;
  for (size_t i = leaves.size(); i-- > 0;) {
    range.Append(leaves[i], [&](int level, uint64_t index, const MerkleHash& h) {
      if (level % kTileHeight != 0 || !st_cb.ok()) return;
      auto key = std::make_pair(level / kTileHeight, index / kTileWidth);
      auto it = touched.find(key);
      if (it == touched.end()) {
        std::string existing;
        if (index % kTileWidth != 0) {
          auto t = Tile(key.first, key.second);
          if (!t.ok()) {
            st_cb = t.status();
            return;
          }
          existing = **t;
        }
        it = touched.emplace(key, std::move(existing)).first;
      }
      it->second.append(reinterpret_cast<const char*>(h.data()), 32);
    });
  }
  GATOS_RETURN_IF_ERROR(st_cb);
  uint64_t old_size = size_;
  GATOS_RETURN_IF_ERROR(WriteTiles(touched));
  std::string entries;
  entries.reserve(records.size() * kEntryRecord);
  for (size_t i = records.size(); i-- > 0;) entries += records[i];
  GATOS_RETURN_IF_ERROR(WriteEntries(old_size, entries));
  // Derived data: no sync (a lost file is recomputed from the log).
  GATOS_RETURN_IF_ERROR(WriteFileAtomically(
      dir_ + "/state", std::string(kStateMagic) + "\nsize " + std::to_string(new_size) + "\nhead " + new_head + "\n",
      0644, false));
  for (const auto& [key, data] : touched) {
    uint64_t old_w = TileWidthAt(key.first, key.second, old_size);
    if (old_w > 0 && old_w < kTileWidth && old_w * 32 != data.size()) {
      // The narrower partial tile it replaces, and its .p directory once empty.
      std::filesystem::path p(dir_ + "/" + TlogTilePath(key.first, key.second, static_cast<int>(old_w)));
      std::filesystem::remove(p, ec);
      std::filesystem::remove(p.parent_path(), ec);
    }
  }
  size_ = new_size;
  head_ = new_head;
  for (auto& [key, data] : touched) cache_[key] = std::move(data);
  return OkStatus();
}

Status LogTree::WriteEntries(uint64_t old_size, const std::string& records) {
  int fd = ::open((dir_ + "/entries").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open " + dir_ + "/entries");
  size_t done = 0;
  off_t at = static_cast<off_t>(old_size * kEntryRecord);
  while (done < records.size()) {
    ssize_t n = ::pwrite(fd, records.data() + done, records.size() - done, at + static_cast<off_t>(done));
    if (n <= 0) {
      Status s = ErrnoStatus("write " + dir_ + "/entries");
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd, at + static_cast<off_t>(records.size())) != 0) {
    Status s = ErrnoStatus("truncate " + dir_ + "/entries");
    ::close(fd);
    return s;
  }
  ::close(fd);
  return OkStatus();
}

Result<std::pair<std::string, int64_t>> LogTree::Entry(uint64_t index) {
  if (index >= size_) return NotFoundError("entry " + std::to_string(index) + " is beyond the tree");
  if (entries_fd_ < 0) {
    entries_fd_ = ::open((dir_ + "/entries").c_str(), O_RDONLY | O_CLOEXEC);
    if (entries_fd_ < 0) return ErrnoStatus("open " + dir_ + "/entries");
  }
  char rec[kEntryRecord];
  ssize_t n = ::pread(entries_fd_, rec, sizeof rec, static_cast<off_t>(index * kEntryRecord));
  if (n != static_cast<ssize_t>(sizeof rec)) return DataLossError(dir_ + "/entries is shorter than the tree");
  uint64_t t = 0;
  for (int i = 0; i < 8; ++i) t = (t << 8) | static_cast<uint8_t>(rec[20 + i]);
  return std::make_pair(HexOid(std::string_view(rec, 20)), static_cast<int64_t>(t));
}

Result<uint64_t> LogTree::FirstEntryAtOrAfter(int64_t time_ms) {
  uint64_t lo = 0, hi = size_;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    GATOS_ASSIGN_OR_RETURN(auto e, Entry(mid));
    if (e.second < time_ms) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

LogTree::~LogTree() {
  if (entries_fd_ >= 0) ::close(entries_fd_);
}

LogTree::LogTree(LogTree&& o) noexcept
    : dir_(std::move(o.dir_)), size_(o.size_), head_(std::move(o.head_)), cache_(std::move(o.cache_)),
      entries_fd_(o.entries_fd_) {
  o.entries_fd_ = -1;
}

Status LogTree::WriteTiles(const std::map<std::pair<int, uint64_t>, std::string>& tiles) {
  for (const auto& [key, data] : tiles) {
    int width = static_cast<int>(data.size() / 32);
    std::string path = dir_ + "/" + TlogTilePath(key.first, key.second, width == 256 ? 0 : width);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) return InternalError("cannot create the directory of " + path + ": " + ec.message());
    GATOS_RETURN_IF_ERROR(WriteFileAtomically(path, data, 0644, false));
  }
  return OkStatus();
}

}  // namespace gatos
