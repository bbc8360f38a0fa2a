// BLAKE3 digests, backed by the official C implementation (built from the
// Debian librust-blake3-dev sources with SIMD dispatch; see cmake/Blake3.cmake).
// Thread-safety: Blake3Hasher is not; one per thread. Free functions are pure.
#ifndef GATOS_BLAKE3_H_
#define GATOS_BLAKE3_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gatos/model/status.h"

namespace gatos {

using Digest32 = std::array<uint8_t, 32>;

class Blake3Hasher {
 public:
  Blake3Hasher();
  // Keyed mode (BLAKE3 keyed_hash), for fingerprints that must not be
  // recomputable without the key.
  explicit Blake3Hasher(const Digest32& key);
  ~Blake3Hasher();
  Blake3Hasher(const Blake3Hasher&) = delete;
  Blake3Hasher& operator=(const Blake3Hasher&) = delete;

  void Update(const void* data, size_t len);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  Digest32 Finalize() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

Digest32 Blake3(std::string_view data);
// "blake3:<64 lowercase hex>"
std::string Blake3Tagged(std::string_view data);
std::string DigestHex(const Digest32& d);
std::string TaggedDigest(const Digest32& d);  // "blake3:" + hex
// Parses "blake3:<64 lowercase hex>"; InvalidArgument otherwise.
Result<Digest32> ParseTaggedBlake3(std::string_view text);

}  // namespace gatos

#endif  // GATOS_BLAKE3_H_
