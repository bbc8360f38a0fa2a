#include "gatos/scan/value_decode.h"

#include <cstdint>

namespace gatos::scan {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The 6-bit value of a base64 character in `alphabet` (0: standard "+/",
// 1: URL-safe "-_"), or -1.
int Base64Digit(char c, int alphabet) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (alphabet == 0) return c == '+' ? 62 : c == '/' ? 63 : -1;
  return c == '-' ? 62 : c == '_' ? 63 : -1;
}

}  // namespace

std::optional<std::string> PercentDecoded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool any = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = HexDigit(s[i + 1]);
      const int lo = HexDigit(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        any = true;
        continue;
      }
    }
    out += s[i];
  }
  if (!any) return std::nullopt;
  return out;
}

std::optional<std::string> Base64Text(std::string_view s) {
  if (s.size() < 8) return std::nullopt;
  size_t body = s.size();
  while (body > 0 && s[body - 1] == '=') --body;
  const size_t padding = s.size() - body;
  if (padding > 2 || (padding > 0 && s.size() % 4 != 0) || body % 4 == 1) return std::nullopt;
  for (int alphabet = 0; alphabet < 2; ++alphabet) {
    std::string out;
    out.reserve(body * 3 / 4);
    uint32_t acc = 0;
    int bits = 0;
    bool ok = true;
    for (size_t i = 0; i < body && ok; ++i) {
      const int d = Base64Digit(s[i], alphabet);
      if (d < 0) {
        ok = false;
        break;
      }
      acc = (acc << 6) | static_cast<uint32_t>(d);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        const unsigned char c = static_cast<unsigned char>((acc >> bits) & 0xff);
        if (c < 0x20 || c > 0x7e) ok = false;
        out += static_cast<char>(c);
      }
    }
    if (ok && out.size() >= 4) return out;
  }
  return std::nullopt;
}

std::optional<std::string> DecodedValue(std::string_view s) {
  if (std::optional<std::string> p = PercentDecoded(s)) return p;
  return Base64Text(s);
}

}  // namespace gatos::scan
