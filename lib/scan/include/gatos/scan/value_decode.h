// Decoding a secret's value for allow-list decisions (`decoded_regexes` in
// a rule's allow-list): a URL password written percent-encoded
// (`pass%2fis%40bad`) or a value that is base64 of text
// (`credential=YS1naXQtdG9rZW4=`, "a-git-token") is judged by what it says,
// so placeholders and names stay silent whatever their encoding.
//
// Decoding never makes a finding: it only lets an allow-list recognise one.
// The decoded text is used in memory and never stored or printed.
//
// Thread-safety: pure functions.
#ifndef GATOS_SCAN_VALUE_DECODE_H_
#define GATOS_SCAN_VALUE_DECODE_H_

#include <optional>
#include <string>
#include <string_view>

namespace gatos::scan {

// `s` with each valid `%XX` escape decoded; other bytes, including a `%`
// that does not start a valid escape, are kept. nullopt when `s` holds no
// valid escape.
std::optional<std::string> PercentDecoded(std::string_view s);

// The text `s` encodes in base64 (standard or URL-safe alphabet, padded or
// not): nullopt unless `s` is at least 8 characters of one alphabet with
// padding only at its end, and it decodes to at least 4 bytes that are all
// printable ASCII (0x20-0x7e). Random key material almost never decodes to
// printable text, so a match here is text that was encoded on purpose.
std::optional<std::string> Base64Text(std::string_view s);

// PercentDecoded(s) if `s` holds an escape, else Base64Text(s).
std::optional<std::string> DecodedValue(std::string_view s);

}  // namespace gatos::scan

#endif  // GATOS_SCAN_VALUE_DECODE_H_
