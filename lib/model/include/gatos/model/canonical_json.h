// Canonical JSON: RFC 8785 (JSON Canonicalization Scheme, "JCS"), restricted
// to what the protocol hashes: no floating-point numbers.
//
// Output: UTF-8, no whitespace, object keys sorted by their UTF-16 code units
// (RFC 8785 section 3.2.3; this differs from byte order for characters above
// U+FFFF versus U+E000..U+FFFF), strings escaped as ECMAScript
// JSON.stringify does (\" \\ \b \f \n \r \t; other controls below 0x20 as
// \u00xx with lowercase hex; everything else literal UTF-8), integers in
// plain decimal.
//
// Thread-safety: pure functions.
#ifndef GATOS_CANONICAL_JSON_H_
#define GATOS_CANONICAL_JSON_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

// Largest magnitude accepted for an integer: 2^53 - 1, the range in which
// every JSON implementation (IEEE double) agrees on the value.
inline constexpr int64_t kMaxSafeInteger = (int64_t{1} << 53) - 1;
// Nesting deeper than this is refused (the serializer recurses).
inline constexpr size_t kMaxCanonicalJsonDepth = 512;

// Returns the JCS serialization of `value`.
// InvalidArgument, with the JSON path of the offending value in the message
// (e.g. "$.inputs[0].size: floating-point numbers are not allowed ..."), for:
// a float; an integer outside +-(2^53-1); a string or key that is not valid
// UTF-8; a binary or discarded value; nesting deeper than
// kMaxCanonicalJsonDepth.
Result<std::string> CanonicalJson(const nlohmann::json& value);

// Bytes `s` takes as a string in the canonical form, quotes included.
size_t CanonicalJsonStringSize(std::string_view s);

// Writes the canonical form directly, for a caller that knows its document's
// shape (SerializePoe): no tree is built. The caller gives each object's keys
// in canonical order (ASCII keys: byte order); values are checked as
// CanonicalJson checks them, with the same messages. The first error sticks
// and is returned by Finish.
class CanonicalJsonWriter {
 public:
  CanonicalJsonWriter& BeginObject();
  CanonicalJsonWriter& EndObject();
  CanonicalJsonWriter& BeginArray();
  CanonicalJsonWriter& EndArray();
  // The next member's key (inside an object).
  CanonicalJsonWriter& Key(std::string_view key);
  CanonicalJsonWriter& String(std::string_view s);
  CanonicalJsonWriter& Int(int64_t n);
  CanonicalJsonWriter& Uint(uint64_t n);
  CanonicalJsonWriter& Bool(bool b);
  CanonicalJsonWriter& Null();
  Result<std::string> Finish();

 private:
  struct Level {
    bool array;
    size_t count;           // members or items written
    std::string_view key;   // the current member's key (objects)
  };
  CanonicalJsonWriter& Open(char bracket, bool array);
  CanonicalJsonWriter& Close(char bracket);
  void BeforeValue();
  void AfterValue();
  void Fail(std::string_view what);
  std::string out_;
  std::vector<Level> levels_;
  Status error_;
};

// True when `s` is well-formed UTF-8 (no overlong forms, no surrogates, no
// code point above U+10FFFF). On failure `*bad_offset` (if given) receives the
// offset of the first byte of the bad sequence.
bool IsValidUtf8(std::string_view s, size_t* bad_offset = nullptr);

}  // namespace gatos

#endif  // GATOS_CANONICAL_JSON_H_
