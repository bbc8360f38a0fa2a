// Fuzzes the public-key line parser and the SSHSIG armor/blob parser. The
// first input byte selects the parser so one corpus covers both.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/sshsig.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto key = gatos::ParseOpenSshPublicKey(input);
    if (key.ok()) {
      // Invariant: the formatted line parses back to the same key.
      auto again = gatos::ParseOpenSshPublicKey(key->ToOpenSsh());
      if (!again.ok() || *again != *key) std::abort();
    }
    return 0;
  }
  auto sig = gatos::ParseSshSignature(input);
  if (sig.ok()) {
    // Exercise verification on parsed input; the result does not matter.
    gatos::SshSigVerify(*sig, input, sig->ns).IgnoreError();
  }
  return 0;
}
