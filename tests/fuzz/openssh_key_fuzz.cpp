// Fuzzes ParseOpenSshPrivateKey. Input starting with '-' is used as key text;
// anything else is treated as the binary openssh-key-v1 blob and armored
// first, so mutations reach the wire-format parser instead of base64 errors.
// Invariant: whatever parses re-formats to text that parses back to the same
// key and formats identically.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gatos/crypto/keys.h"
#include "gatos/model/encoding.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (size == 0 || data[0] != '-') {
    std::string b64 = gatos::Base64Encode(data, size);
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
    for (size_t i = 0; i < b64.size(); i += 70) text += b64.substr(i, 70) + "\n";
    text += "-----END OPENSSH PRIVATE KEY-----\n";
  }
  auto key = gatos::ParseOpenSshPrivateKey(text);
  if (!key.ok()) return 0;
  std::string formatted = gatos::FormatOpenSshPrivateKey(*key);
  auto again = gatos::ParseOpenSshPrivateKey(formatted);
  if (!again.ok() || again->public_key() != key->public_key() ||
      again->comment() != key->comment() || gatos::FormatOpenSshPrivateKey(*again) != formatted) {
    std::abort();
  }
  return 0;
}
