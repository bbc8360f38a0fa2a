#include "gatos/model/encoding.h"

#include <algorithm>
#include <array>

namespace gatos {
namespace {
constexpr char kHex[] = "0123456789abcdef";
constexpr char kB64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int B64Val(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Bytes in the well-formed UTF-8 sequence starting at text[i], or 0 when the
// bytes there are not one (Unicode 15, table 3-7: the second byte's range
// depends on the first, which rules out overlongs and surrogates).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto at = [&](size_t k) -> unsigned {
    return k < text.size() ? static_cast<uint8_t>(text[k]) : 0x100u;
  };
  const unsigned lead = at(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned second_lo = 0x80, second_hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_lo = 0xA0;
    if (lead == 0xED) second_hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_lo = 0x90;
    if (lead == 0xF4) second_hi = 0x8F;
  } else {
    return 0;
  }
  if (at(i + 1) < second_lo || at(i + 1) > second_hi) return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((at(i + k) & 0xC0u) != 0x80u) return 0;
  }
  return length;
}
}  // namespace

int LowerHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string HexEncode(const uint8_t* data, size_t len) {
  std::string out(len * 2, '\0');
  for (size_t i = 0; i < len; ++i) {
    out[2 * i] = kHex[data[i] >> 4];
    out[2 * i + 1] = kHex[data[i] & 0xf];
  }
  return out;
}

Result<Bytes> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) {
    return InvalidArgumentError("hex string has odd length " + std::to_string(hex.size()));
  }
  Bytes out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = LowerHexValue(hex[2 * i]), lo = LowerHexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return InvalidArgumentError("invalid hex character at offset " +
                                  std::to_string(hi < 0 ? 2 * i : 2 * i + 1) +
                                  " (expected lowercase 0-9a-f)");
    }
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

bool IsLowerHex(std::string_view s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s) {
    if (LowerHexValue(c) < 0) return false;
  }
  return true;
}

std::string Base64Encode(const uint8_t* data, size_t len) {
  std::string out;
  out.reserve((len + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < len; i += 3) {
    uint32_t v = data[i] << 16 | data[i + 1] << 8 | data[i + 2];
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (i + 1 == len) {
    uint32_t v = data[i] << 16;
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == len) {
    uint32_t v = data[i] << 16 | data[i + 1] << 8;
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

Result<Bytes> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return InvalidArgumentError("base64 length " + std::to_string(text.size()) +
                                " is not a multiple of 4");
  }
  // Value of each byte (-1: not in the alphabet), built once.
  static const std::array<int8_t, 256> kVal = [] {
    std::array<int8_t, 256> t;
    t.fill(-1);
    for (int c = 0; c < 256; ++c) t[c] = static_cast<int8_t>(B64Val(static_cast<char>(c)));
    return t;
  }();
  auto val = [](char c) { return static_cast<int>(kVal[static_cast<uint8_t>(c)]); };
  Bytes out(text.size() / 4 * 3);
  size_t o = 0;
  // Every group but the last has no padding.
  const size_t body = text.empty() ? 0 : text.size() - 4;
  for (size_t i = 0; i < body; i += 4) {
    int v[4] = {val(text[i]), val(text[i + 1]), val(text[i + 2]), val(text[i + 3])};
    if ((v[0] | v[1] | v[2] | v[3]) < 0) {
      size_t j = 0;
      while (v[j] >= 0) ++j;
      return InvalidArgumentError("invalid base64 character at offset " + std::to_string(i + j));
    }
    uint32_t w = v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3];
    out[o++] = static_cast<uint8_t>(w >> 16);
    out[o++] = static_cast<uint8_t>(w >> 8);
    out[o++] = static_cast<uint8_t>(w);
  }
  for (size_t i = body; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      char c = text[i + j];
      if (c == '=' && j >= 2) {
        v[j] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return InvalidArgumentError("base64 data after padding");
      v[j] = val(c);
      if (v[j] < 0) {
        return InvalidArgumentError("invalid base64 character at offset " +
                                    std::to_string(i + j));
      }
    }
    uint32_t w = v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3];
    out[o++] = static_cast<uint8_t>(w >> 16);
    if (pad < 2) out[o++] = static_cast<uint8_t>(w >> 8);
    if (pad < 1) out[o++] = static_cast<uint8_t>(w);
    // Non-canonical encodings (non-zero bits under the padding) are rejected so
    // that every value has one spelling.
    if ((pad == 1 && (v[2] & 3)) || (pad == 2 && (v[1] & 15))) {
      return InvalidArgumentError("non-canonical base64 padding bits");
    }
  }
  out.resize(o);
  return out;
}

std::string TruncateUtf8(std::string_view text, size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  size_t i = 0;
  while (i < text.size()) {
    const size_t length = Utf8SequenceLength(text, i);
    const std::string_view piece = length ? text.substr(i, length) : kReplacement;
    if (out.size() + piece.size() > max_bytes) break;
    out.append(piece);
    i += length ? length : 1;
  }
  return out;
}

}  // namespace gatos
