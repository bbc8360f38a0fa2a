#include "gatos/scan/pack_reader.h"

#include <algorithm>
#include <cstring>

namespace gatos::scan {
namespace {

constexpr int kOfsDelta = 6;
constexpr int kRefDelta = 7;
constexpr uint64_t kMaxKeyOffset = uint64_t{1} << 48;

uint64_t Key(PackLocation loc) { return (uint64_t{loc.pack} << 48) | loc.offset; }

// A little-endian base-128 size at `*p` (a delta's source or result size).
bool DeltaVarint(const unsigned char** p, const unsigned char* end, uint64_t* out) {
  uint64_t v = 0;
  int shift = 0;
  while (*p < end) {
    const unsigned char c = *(*p)++;
    if (shift > 56) return false;
    v |= uint64_t{c & 0x7fu} << shift;
    shift += 7;
    if (!(c & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

// git's delta format: source size, result size, then copy and insert ops.
bool ApplyDelta(const std::string& base, const std::string& delta, uint64_t max_bytes,
                std::string* out, std::string* why) {
  const auto* p = reinterpret_cast<const unsigned char*>(delta.data());
  const auto* end = p + delta.size();
  uint64_t src = 0, dst = 0;
  if (!DeltaVarint(&p, end, &src) || !DeltaVarint(&p, end, &dst)) {
    *why = "truncated delta header";
    return false;
  }
  if (src != base.size()) {
    *why = "delta expects a base of " + std::to_string(src) + " bytes, the base has " +
           std::to_string(base.size());
    return false;
  }
  if (dst > max_bytes) {
    *why = "delta result of " + std::to_string(dst) + " bytes is over the limit";
    return false;
  }
  out->clear();
  out->reserve(dst);
  while (p < end) {
    const unsigned char op = *p++;
    if (op & 0x80) {
      uint64_t off = 0, size = 0;
      for (int i = 0; i < 4; ++i) {
        if (op & (1u << i)) {
          if (p >= end) return *why = "truncated copy op", false;
          off |= uint64_t{*p++} << (8 * i);
        }
      }
      for (int i = 0; i < 3; ++i) {
        if (op & (0x10u << i)) {
          if (p >= end) return *why = "truncated copy op", false;
          size |= uint64_t{*p++} << (8 * i);
        }
      }
      if (size == 0) size = 0x10000;
      if (off > base.size() || size > base.size() - off || size > dst - out->size()) {
        *why = "copy op outside the base or past the result size";
        return false;
      }
      out->append(base, off, size);
    } else if (op != 0) {
      if (op > static_cast<uint64_t>(end - p) || op > dst - out->size()) {
        *why = "insert op past the delta or the result size";
        return false;
      }
      out->append(reinterpret_cast<const char*>(p), op);
      p += op;
    } else {
      *why = "reserved delta op 0";
      return false;
    }
  }
  if (out->size() != dst) {
    *why = "delta produced " + std::to_string(out->size()) + " bytes, its header says " +
           std::to_string(dst);
    return false;
  }
  return true;
}

}  // namespace

// One parsed entry header.
struct PackReader::Entry {
  PackLocation loc;
  int type = 0;       // 1-4 objects, 6 OFS_DELTA, 7 REF_DELTA
  uint64_t size = 0;  // inflated size of this entry's data
  uint64_t data = 0;  // offset of the zlib stream
  PackLocation base;  // deltas only
};

PackReader::PackReader(const PackStore& store, size_t cache_bytes)
    : store_(store), cache_budget_(cache_bytes) {}

PackReader::~PackReader() {
  if (zs_ready_) inflateEnd(&zs_);
}

Status PackReader::Damaged(PackLocation loc, const std::string& what) const {
  return DataLossError("pack " + store_.PackName(loc.pack) + " at offset " +
                       std::to_string(loc.offset) + ": " + what);
}

Status PackReader::Parse(PackLocation loc, Entry* e) const {
  const std::string_view pack = store_.PackBytes(loc.pack);
  // The last 20 bytes are the pack's checksum, never entry data.
  const auto* begin = reinterpret_cast<const unsigned char*>(pack.data());
  const auto* end = begin + pack.size() - kOidBytes;
  if (loc.offset < 12 || loc.offset >= pack.size() - kOidBytes) {
    return Damaged(loc, "entry offset outside the pack");
  }
  const unsigned char* p = begin + loc.offset;
  unsigned char c = *p++;
  e->loc = loc;
  e->type = (c >> 4) & 7;
  uint64_t size = c & 15;
  int shift = 4;
  while (c & 0x80) {
    if (p >= end || shift > 57) return Damaged(loc, "bad entry header");
    c = *p++;
    size |= uint64_t{c & 0x7fu} << shift;
    shift += 7;
  }
  e->size = size;
  if (e->type == kOfsDelta) {
    if (p >= end) return Damaged(loc, "truncated delta offset");
    c = *p++;
    uint64_t back = c & 0x7f;
    while (c & 0x80) {
      if (p >= end || back > (uint64_t{1} << 55)) return Damaged(loc, "bad delta offset");
      c = *p++;
      back = ((back + 1) << 7) | (c & 0x7f);
    }
    if (back == 0 || back > loc.offset) return Damaged(loc, "delta base outside the pack");
    e->base = {loc.pack, loc.offset - back};
  } else if (e->type == kRefDelta) {
    if (end - p < static_cast<ptrdiff_t>(kOidBytes)) return Damaged(loc, "truncated delta base id");
    std::optional<PackLocation> base = store_.Find(p);
    if (!base) return NotFoundError("delta base outside the packs read directly");
    e->base = *base;
    p += kOidBytes;
  } else if (e->type < 1 || e->type > 4) {
    return Damaged(loc, "unknown object type " + std::to_string(e->type));
  }
  e->data = static_cast<uint64_t>(p - begin);
  return OkStatus();
}

Status PackReader::Inflate(const Entry& e, uint64_t size, std::string* out) {
  const std::string_view pack = store_.PackBytes(e.loc.pack);
  if (!zs_ready_) {
    if (inflateInit(&zs_) != Z_OK) return InternalError("zlib: cannot initialise a stream");
    zs_ready_ = true;
  } else if (inflateReset(&zs_) != Z_OK) {
    return InternalError("zlib: cannot reset a stream");
  }
  // One spare byte: a stream holding more than its header said is damage.
  out->resize(size + 1);
  zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(pack.data() + e.data));
  zs_.next_out = reinterpret_cast<Bytef*>(out->data());
  zs_.avail_in = 0;
  zs_.avail_out = 0;
  // zlib counts in 32 bits: hand it large objects in pieces.
  constexpr uint64_t kPiece = uint64_t{1} << 30;
  uint64_t in_left = pack.size() - kOidBytes - e.data;
  uint64_t out_left = size + 1;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (zs_.avail_in == 0 && in_left > 0) {
      zs_.avail_in = static_cast<uInt>(std::min(in_left, kPiece));
      in_left -= zs_.avail_in;
    }
    if (zs_.avail_out == 0 && out_left > 0) {
      zs_.avail_out = static_cast<uInt>(std::min(out_left, kPiece));
      out_left -= zs_.avail_out;
    }
    // Z_BUF_ERROR when input or output ran out without the stream's end.
    rc = inflate(&zs_, Z_NO_FLUSH);
  }
  const uint64_t produced = size + 1 - out_left - zs_.avail_out;
  if (rc != Z_STREAM_END || produced != size) {
    return Damaged(e.loc, "zlib stream does not match the entry's size (" +
                              std::to_string(produced) + " of " + std::to_string(size) + " bytes)");
  }
  out->resize(size);
  ++stats_.inflated;
  return OkStatus();
}

// The first `want` inflated bytes (or all of a shorter stream).
Status PackReader::InflatePrefix(const Entry& e, std::string* out, size_t want) {
  const std::string_view pack = store_.PackBytes(e.loc.pack);
  if (!zs_ready_) {
    if (inflateInit(&zs_) != Z_OK) return InternalError("zlib: cannot initialise a stream");
    zs_ready_ = true;
  } else if (inflateReset(&zs_) != Z_OK) {
    return InternalError("zlib: cannot reset a stream");
  }
  out->resize(want);
  zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(pack.data() + e.data));
  zs_.avail_in = static_cast<uInt>(std::min<uint64_t>(pack.size() - kOidBytes - e.data, 1u << 20));
  zs_.next_out = reinterpret_cast<Bytef*>(out->data());
  zs_.avail_out = static_cast<uInt>(want);
  const int rc = inflate(&zs_, Z_SYNC_FLUSH);
  if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
    return Damaged(e.loc, "zlib stream is damaged");
  }
  out->resize(want - zs_.avail_out);
  return OkStatus();
}

const PackReader::Cached* PackReader::Lookup(uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &*it->second;
}

void PackReader::Remember(uint64_t key, ObjectKind kind, std::shared_ptr<const std::string> data) {
  const size_t size = data->size();
  if (size > cache_budget_ / 4 || index_.count(key)) return;
  while (cache_used_ + size > cache_budget_ && !lru_.empty()) {
    cache_used_ -= lru_.back().data->size();
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  lru_.push_front({key, kind, std::move(data)});
  index_[key] = lru_.begin();
  cache_used_ += size;
}

Status PackReader::Header(PackLocation loc, ObjectKind* kind, uint64_t* size) {
  Entry top;
  GATOS_RETURN_IF_ERROR(Parse(loc, &top));
  if (top.type < kOfsDelta) {
    *kind = static_cast<ObjectKind>(top.type);
    *size = top.size;
    return OkStatus();
  }
  // A delta's result size is its second header varint.
  std::string head;
  GATOS_RETURN_IF_ERROR(InflatePrefix(top, &head, 32));
  const auto* p = reinterpret_cast<const unsigned char*>(head.data());
  uint64_t src = 0;
  if (!DeltaVarint(&p, p + head.size(), &src) ||
      !DeltaVarint(&p, reinterpret_cast<const unsigned char*>(head.data()) + head.size(), size)) {
    return Damaged(loc, "truncated delta header");
  }
  // Its kind is its base's: follow the chain through headers only.
  Entry e = top;
  for (size_t depth = 0; e.type >= kOfsDelta; ++depth) {
    if (depth > kMaxDeltaDepth) return Damaged(loc, "delta chain too long");
    if (e.base.offset < kMaxKeyOffset) {
      if (const Cached* c = Lookup(Key(e.base))) {
        *kind = c->kind;
        return OkStatus();
      }
    }
    const PackLocation base = e.base;
    GATOS_RETURN_IF_ERROR(Parse(base, &e));
  }
  *kind = static_cast<ObjectKind>(e.type);
  return OkStatus();
}

Status PackReader::Read(PackLocation loc, uint64_t max_bytes, ObjectKind* kind,
                        std::shared_ptr<const std::string>* data) {
  std::vector<Entry> chain;  // deltas, the requested object first
  std::shared_ptr<const std::string> base;
  ObjectKind base_kind = ObjectKind::kBlob;
  PackLocation at = loc;
  while (true) {
    if (at.offset < kMaxKeyOffset) {
      if (const Cached* c = Lookup(Key(at))) {
        ++stats_.cache_hits;
        base = c->data;
        base_kind = c->kind;
        break;
      }
    }
    Entry e;
    GATOS_RETURN_IF_ERROR(Parse(at, &e));
    if (e.type < kOfsDelta) {
      if (e.size > max_bytes) {
        return FailedPreconditionError("object of " + std::to_string(e.size) +
                                       " bytes is over the limit");
      }
      auto text = std::make_shared<std::string>();
      GATOS_RETURN_IF_ERROR(Inflate(e, e.size, text.get()));
      base = std::move(text);
      base_kind = static_cast<ObjectKind>(e.type);
      if (at.offset < kMaxKeyOffset) Remember(Key(at), base_kind, base);
      break;
    }
    if (chain.size() >= kMaxDeltaDepth) return Damaged(loc, "delta chain too long");
    // A delta's own data is no larger than a result it may produce, give or
    // take its ops; bound it like the objects.
    if (e.size > max_bytes + 64) {
      return FailedPreconditionError("delta of " + std::to_string(e.size) +
                                     " bytes is over the limit");
    }
    chain.push_back(e);
    at = e.base;
  }
  std::string delta;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    GATOS_RETURN_IF_ERROR(Inflate(*it, it->size, &delta));
    auto result = std::make_shared<std::string>();
    std::string why;
    if (!ApplyDelta(*base, delta, max_bytes, result.get(), &why)) {
      if (why.find("over the limit") != std::string::npos) return FailedPreconditionError(why);
      return Damaged(it->loc, why);
    }
    ++stats_.deltas;
    base = std::move(result);
    if (it->loc.offset < kMaxKeyOffset) Remember(Key(it->loc), base_kind, base);
  }
  ++stats_.objects;
  *kind = base_kind;
  *data = std::move(base);
  return OkStatus();
}

const char* ObjectKindName(ObjectKind k) {
  switch (k) {
    case ObjectKind::kCommit:
      return "commit";
    case ObjectKind::kTree:
      return "tree";
    case ObjectKind::kBlob:
      return "blob";
    case ObjectKind::kTag:
      return "tag";
  }
  return "object";
}

}  // namespace gatos::scan
