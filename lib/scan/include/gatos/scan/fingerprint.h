// Secret fingerprints: keyed BLAKE3 of the secret bytes, so the same secret is
// recognisable across scans and repositories without being stored, and
// cannot be confirmed by someone who guesses a secret but lacks the key.
//
// Thread-safety: pure functions; the key file is created atomically.
#ifndef GATOS_SCAN_FINGERPRINT_H_
#define GATOS_SCAN_FINGERPRINT_H_

#include <string>
#include <string_view>

#include "gatos/model/blake3.h"
#include "gatos/model/status.h"

namespace gatos::scan {

// Reads a 32-byte key from `path`: either exactly 32 raw bytes, or 64
// lowercase hex characters with an optional trailing newline.
// NotFound if missing; InvalidArgument (with the path and expected format,
// never the content) otherwise.
Result<Digest32> ReadFingerprintKey(const std::string& path);

// Reads `path` if it exists, else creates it with 32 random bytes from the
// kernel (written as hex, mode 0600, via link(2) so concurrent creators agree
// on one key). `*created` (if given) tells whether this call made it.
Result<Digest32> LoadOrCreateFingerprintKey(const std::string& path, bool* created = nullptr);

// "blake3k:<64 hex>" = BLAKE3 keyed_hash(key, secret).
std::string Fingerprint(const Digest32& key, std::string_view secret);

}  // namespace gatos::scan

#endif  // GATOS_SCAN_FINGERPRINT_H_
