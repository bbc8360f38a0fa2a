// Hex and base64 helpers shared by every module.
// Thread-safety: pure functions.
#ifndef GATOS_ENCODING_H_
#define GATOS_ENCODING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

using Bytes = std::vector<uint8_t>;

// Lowercase hex.
std::string HexEncode(const uint8_t* data, size_t len);
inline std::string HexEncode(const Bytes& b) { return HexEncode(b.data(), b.size()); }
inline std::string HexEncode(std::string_view s) {
  return HexEncode(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
// Accepts lowercase hex only (the protocol's canonical spelling).
// InvalidArgument on odd length or a character outside [0-9a-f].
Result<Bytes> HexDecode(std::string_view hex);
// The value of a lowercase hex digit, or -1 for any other character.
int LowerHexValue(char c);
// True when `s` is exactly `len` lowercase hex characters.
bool IsLowerHex(std::string_view s, size_t len);

// Standard base64 with padding (RFC 4648 section 4), as OpenSSH uses.
std::string Base64Encode(const uint8_t* data, size_t len);
inline std::string Base64Encode(const Bytes& b) { return Base64Encode(b.data(), b.size()); }
// Strict: padding required, no whitespace, no URL alphabet.
Result<Bytes> Base64Decode(std::string_view text);

// Text from a user, a file or a peer, made safe to put into a message or a
// log line: at most `max_bytes` bytes, cut between two characters (never
// inside one), with each byte that is not part of well-formed UTF-8 replaced
// by U+FFFD. Nothing is appended to mark the cut.
//   "wrong value \"" + TruncateUtf8(arg, 64) + "\""
std::string TruncateUtf8(std::string_view text, size_t max_bytes);

}  // namespace gatos

#endif  // GATOS_ENCODING_H_
