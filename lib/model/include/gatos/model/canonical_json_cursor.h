// A cursor over JSON text laid out exactly as a known writer lays it out, for
// readers that take a document without a JSON parser when it has that one
// form and parse it in full otherwise (poe.json, the in-toto statement).
//
// Each reader consumes its token and returns true, or returns false (the
// caller gives up and parses in full). What a reader accepts it decodes as
// nlohmann's parser decodes it; anything it is unsure of is refused.
//
// Thread-safety: a value type over a string_view the caller keeps alive.
#ifndef GATOS_CANONICAL_JSON_CURSOR_H_
#define GATOS_CANONICAL_JSON_CURSOR_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gatos {

class CanonicalJsonCursor {
 public:
  explicit CanonicalJsonCursor(std::string_view t) : t_(t) {}
  bool done() const { return i_ == t_.size(); }
  bool Peek(std::string_view lit) const { return t_.substr(i_, lit.size()) == lit; }
  bool Lit(std::string_view lit) {
    if (!Peek(lit)) return false;
    i_ += lit.size();
    return true;
  }
  // A string exactly as CanonicalJsonWriter writes one: the escapes \" \\ \b
  // \f \n \r \t, \u00xx with lowercase hex for the other control
  // characters, other bytes as they are; bytes above 0x7f must be
  // well-formed UTF-8.
  bool Str(std::string* out);
  // An integer as the writer spells one: -?(0|[1-9][0-9]*) within
  // +-(2^53-1), no "-0".
  bool Int(int64_t* v);
  bool Bool(bool* v);
  bool IntOrNull(std::optional<int64_t>* v);
  // One value exactly in CanonicalJson's form (canonical escapes, integers
  // within +-(2^53-1), no "-0", keys in strictly increasing order, at most
  // `max_depth` levels of nesting); `*span` is its text. Keys with an escape
  // or a byte above 0x7f are refused (their order is not checked here).
  bool CanonicalValue(std::string_view* span, size_t max_depth = 64);

 private:
  bool CanonicalValueAt(size_t depth);
  bool CanonicalString(std::string_view* raw);
  std::string_view t_;
  size_t i_ = 0;
  size_t max_depth_ = 0;
};

}  // namespace gatos

#endif  // GATOS_CANONICAL_JSON_CURSOR_H_
