// OpenSSH allowed_signers files (ssh-keygen(1) "ALLOWED SIGNERS"): the trust
// list format of `ssh-keygen -Y verify` and git's gpg.ssh.allowedSignersFile.
//
//   principals [options] keytype base64-key [comment]
//
// principals: comma-separated patterns (`*`, `?`, `!negation`), optionally in
// double quotes. options: cert-authority, namespaces="p1,p2",
// valid-after="TIME", valid-before="TIME" (TIME = YYYYMMDD[HHMM[SS]] with an
// optional Z or UTC suffix; without it the time is local, as in OpenSSH).
//
// Differences from OpenSSH, all on the strict side:
//  - any malformed line makes the whole file invalid (OpenSSH only fails
//    when a lookup reaches that line);
//  - a principals field may be quoted only as a whole ("a b,c"), and empty
//    principals or namespaces ("a,,b", namespaces="") are errors;
//  - lines with other key types (ssh-rsa, ecdsa-*, sk-*, certificates) are
//    checked for well-formed base64 and then skipped (listed in skipped()):
//    gatos signatures are always ssh-ed25519;
//  - cert-authority entries are kept but never match a plain key (gatos does
//    not use certificates), exactly as OpenSSH treats them for plain keys.
//
// Thread-safety: an AllowedSigners is an immutable value after parsing;
// const methods are safe to call concurrently.
#ifndef GATOS_ALLOWED_SIGNERS_H_
#define GATOS_ALLOWED_SIGNERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/public_key.h"
#include "gatos/model/status.h"

namespace gatos {

struct AllowedSigner {
  std::vector<std::string> principals;  // patterns, "!" prefix = negated
  bool cert_authority = false;
  std::vector<std::string> namespaces;               // patterns; empty = any namespace
  std::optional<int64_t> valid_after, valid_before;  // unix seconds, inclusive
  Ed25519PublicKey key;                              // key.comment = trailing comment
  int line = 0;                                      // 1-based; 0 if not parsed
};

// A line that was well-formed but skipped because its key type is not
// ssh-ed25519.
struct SkippedSigner {
  int line = 0;
  std::string key_type;
};

class AllowedSigners {
 public:
  AllowedSigners() = default;
  explicit AllowedSigners(std::vector<AllowedSigner> entries) : entries_(std::move(entries)) {}

  const std::vector<AllowedSigner>& entries() const { return entries_; }
  const std::vector<SkippedSigner>& skipped() const { return skipped_; }

  // The first non-CA entry with this key whose namespaces (if any) match `ns`
  // and whose validity window contains `when` (unix seconds). nullptr if none.
  // The pointer is valid as long as this object is.
  const AllowedSigner* FindKey(const Ed25519PublicKey& key, std::string_view ns,
                               int64_t when) const;
  // True if some entry's principal patterns match `principal` (a negated
  // match excludes the entry) and FindKey's conditions hold for that entry.
  bool IsAllowed(std::string_view principal, const Ed25519PublicKey& key, std::string_view ns,
                 int64_t when) const;

  // allowed_signers text that parses back to the same entries (times are
  // written as UTC "YYYYMMDDHHMMSSZ"; skipped lines are not written).
  std::string Format() const;

 private:
  friend Result<AllowedSigners> ParseAllowedSigners(std::string_view text,
                                                    std::string_view source_name);
  std::vector<AllowedSigner> entries_;
  std::vector<SkippedSigner> skipped_;
};

// InvalidArgument "source_name:LINE: what is wrong" for the first bad line.
Result<AllowedSigners> ParseAllowedSigners(std::string_view text, std::string_view source_name);

// OpenSSH match_pattern_list over split patterns: 1 if some pattern matches
// and no negated one does, -1 if a negated pattern matches, 0 otherwise.
// Case-sensitive.
int MatchPatternList(std::string_view s, const std::vector<std::string>& patterns);

// Glob match with `*` (any run, including empty) and `?` (one byte).
bool MatchPattern(std::string_view s, std::string_view pattern);

}  // namespace gatos

#endif  // GATOS_ALLOWED_SIGNERS_H_
