#include "gatos/model/blake3.h"

#include <blake3.h>
#include <cerrno>
#include <cstring>

#include "gatos/model/encoding.h"

namespace gatos {

namespace {

// The C library detects the CPU's features on first use and caches them in
// a plain global: threads hashing for the first time at once race on it
// (ThreadSanitizer says so; every thread writes the same value). One hash
// under a function-local static, which C++ runs once and orders before every
// later use, fills the cache first.
void DetectCpuOnce() {
  static const bool detected = [] {
    blake3_hasher h;
    blake3_hasher_init(&h);
    unsigned char block[2 * BLAKE3_CHUNK_LEN] = {};  // more than a chunk: the SIMD paths run
    blake3_hasher_update(&h, block, sizeof block);
    uint8_t out[BLAKE3_OUT_LEN];
    blake3_hasher_finalize(&h, out, sizeof out);
    return true;
  }();
  (void)detected;
}

}  // namespace

struct Blake3Hasher::State {
  blake3_hasher h;
};

Blake3Hasher::Blake3Hasher() : state_(std::make_unique<State>()) {
  DetectCpuOnce();
  blake3_hasher_init(&state_->h);
}

Blake3Hasher::Blake3Hasher(const Digest32& key) : state_(std::make_unique<State>()) {
  DetectCpuOnce();
  blake3_hasher_init_keyed(&state_->h, key.data());
}

Blake3Hasher::~Blake3Hasher() = default;

void Blake3Hasher::Update(const void* data, size_t len) {
  blake3_hasher_update(&state_->h, data, len);
}

Digest32 Blake3Hasher::Finalize() const {
  Digest32 out;
  blake3_hasher_finalize(&state_->h, out.data(), out.size());
  return out;
}

Digest32 Blake3(std::string_view data) {
  Blake3Hasher h;
  h.Update(data);
  return h.Finalize();
}

std::string DigestHex(const Digest32& d) { return HexEncode(d.data(), d.size()); }
std::string TaggedDigest(const Digest32& d) { return "blake3:" + DigestHex(d); }
std::string Blake3Tagged(std::string_view data) { return TaggedDigest(Blake3(data)); }

Result<Digest32> ParseTaggedBlake3(std::string_view text) {
  constexpr std::string_view kPrefix = "blake3:";
  if (text.substr(0, kPrefix.size()) != kPrefix) {
    return InvalidArgumentError("expected \"blake3:<64 lowercase hex>\", got a value without the blake3: prefix");
  }
  std::string_view hex = text.substr(kPrefix.size());
  if (!IsLowerHex(hex, 64)) {
    return InvalidArgumentError("expected \"blake3:<64 lowercase hex>\", the digest part is not 64 lowercase hex characters");
  }
  Digest32 d;
  auto bytes = HexDecode(hex);
  if (!bytes.ok()) return bytes.status();
  std::memcpy(d.data(), bytes->data(), 32);
  return d;
}

}  // namespace gatos
