#include "gatos/model/canonical_json.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace gatos {
namespace {

// Decodes one code point starting at s[i]; returns its length, or 0 when the
// bytes there are not well-formed UTF-8 (Unicode 15, table 3-7).
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, min = 0x80, *cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, min = 0x800, *cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, min = 0x10000, *cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (b(i + k) & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

std::u16string ToUtf16(std::string_view s) {
  std::u16string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t n = DecodeUtf8(s, i, &cp);
    if (n == 0) return out;  // callers validated first
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
    i += n;
  }
  return out;
}

void AppendEscaped(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t plain = 0;  // the start of the run of bytes copied as they are
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xF]);
    }
  }
  out->append(s.data() + plain, s.size() - plain);
  out->push_back('"');
}

// What is wrong with a value, after its JSON path: the same words from
// CanonicalJson and CanonicalJsonWriter.
std::string OutOfRangeMessage(const std::string& n) {
  return "integer " + n + " is outside +-(2^53-1) and cannot be represented exactly; use a string";
}
std::string TooDeepMessage() {
  return "nesting deeper than " + std::to_string(kMaxCanonicalJsonDepth) + " levels; flatten the value";
}
// "" when `s` is valid UTF-8.
std::string Utf8Message(std::string_view s, std::string_view what) {
  size_t bad = 0;
  if (IsValidUtf8(s, &bad)) return "";
  return std::string(what) + " is not valid UTF-8 (bad byte at offset " + std::to_string(bad) +
         "); encode text as UTF-8";
}

// Path segments are kept as a stack and joined only when an error is built.
class Serializer {
 public:
  Status Write(const nlohmann::json& v, size_t depth) {
    using T = nlohmann::json::value_t;
    switch (v.type()) {
      case T::null:
        out_.append("null");
        return OkStatus();
      case T::boolean:
        out_.append(v.get<bool>() ? "true" : "false");
        return OkStatus();
      case T::number_integer: {
        const int64_t n = v.get<int64_t>();
        if (n > kMaxSafeInteger || n < -kMaxSafeInteger) return OutOfRange(std::to_string(n));
        out_.append(std::to_string(n));
        return OkStatus();
      }
      case T::number_unsigned: {
        const uint64_t n = v.get<uint64_t>();
        if (n > static_cast<uint64_t>(kMaxSafeInteger)) return OutOfRange(std::to_string(n));
        out_.append(std::to_string(n));
        return OkStatus();
      }
      case T::number_float:
        return Error("floating-point numbers are not allowed; use an integer or a string");
      case T::string: {
        const auto& s = v.get_ref<const std::string&>();
        GATOS_RETURN_IF_ERROR(CheckUtf8(s, "string"));
        AppendEscaped(s, &out_);
        return OkStatus();
      }
      case T::array: {
        if (depth >= kMaxCanonicalJsonDepth) return TooDeep();
        out_.push_back('[');
        size_t i = 0;
        for (const auto& item : v) {
          if (i) out_.push_back(',');
          path_.push_back("[" + std::to_string(i) + "]");
          GATOS_RETURN_IF_ERROR(Write(item, depth + 1));
          path_.pop_back();
          ++i;
        }
        out_.push_back(']');
        return OkStatus();
      }
      case T::object: {
        if (depth >= kMaxCanonicalJsonDepth) return TooDeep();
        std::vector<std::pair<std::u16string, nlohmann::json::const_iterator>> keys;
        keys.reserve(v.size());
        for (auto it = v.begin(); it != v.end(); ++it) {
          path_.push_back("." + it.key());
          GATOS_RETURN_IF_ERROR(CheckUtf8(it.key(), "key"));
          path_.pop_back();
          keys.emplace_back(ToUtf16(it.key()), it);
        }
        std::sort(keys.begin(), keys.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        out_.push_back('{');
        bool first = true;
        for (const auto& [utf16, it] : keys) {
          if (!first) out_.push_back(',');
          first = false;
          AppendEscaped(it.key(), &out_);
          out_.push_back(':');
          path_.push_back("." + it.key());
          GATOS_RETURN_IF_ERROR(Write(it.value(), depth + 1));
          path_.pop_back();
        }
        out_.push_back('}');
        return OkStatus();
      }
      case T::binary:
        return Error("binary values have no JSON form");
      case T::discarded:
        return Error("discarded value has no JSON form");
    }
    return Error("unknown JSON value type");
  }

  std::string Take() { return std::move(out_); }

 private:
  std::string Path() const {
    std::string p = "$";
    for (const auto& seg : path_) p += seg;
    return p;
  }
  Status Error(std::string_view what) const {
    return InvalidArgumentError(Path() + ": " + std::string(what));
  }
  Status OutOfRange(const std::string& n) const { return Error(OutOfRangeMessage(n)); }
  Status TooDeep() const { return Error(TooDeepMessage()); }
  Status CheckUtf8(const std::string& s, std::string_view what) const {
    const std::string m = Utf8Message(s, what);
    return m.empty() ? OkStatus() : Error(m);
  }

  std::string out_;
  std::vector<std::string> path_;
};

}  // namespace

bool IsValidUtf8(std::string_view s, size_t* bad_offset) {
  for (size_t i = 0; i < s.size();) {
    // ASCII eight bytes at a time (most strings are ASCII only).
    uint64_t word;
    while (i + 8 <= s.size() && (std::memcpy(&word, s.data() + i, 8), (word & 0x8080808080808080u) == 0)) i += 8;
    while (i < s.size() && static_cast<uint8_t>(s[i]) < 0x80) ++i;
    if (i == s.size()) break;
    uint32_t cp = 0;
    const size_t n = DecodeUtf8(s, i, &cp);
    if (n == 0) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += n;
  }
  return true;
}

Result<std::string> CanonicalJson(const nlohmann::json& value) {
  Serializer s;
  GATOS_RETURN_IF_ERROR(s.Write(value, 0));
  return s.Take();
}

CanonicalJsonWriter& CanonicalJsonWriter::BeginObject() { return Open('{', false); }
CanonicalJsonWriter& CanonicalJsonWriter::EndObject() { return Close('}'); }
CanonicalJsonWriter& CanonicalJsonWriter::BeginArray() { return Open('[', true); }
CanonicalJsonWriter& CanonicalJsonWriter::EndArray() { return Close(']'); }

CanonicalJsonWriter& CanonicalJsonWriter::Open(char bracket, bool array) {
  BeforeValue();
  if (levels_.size() >= kMaxCanonicalJsonDepth) Fail(TooDeepMessage());
  out_.push_back(bracket);
  levels_.push_back({array, 0, {}});
  return *this;
}

CanonicalJsonWriter& CanonicalJsonWriter::Close(char bracket) {
  out_.push_back(bracket);
  if (!levels_.empty()) levels_.pop_back();
  AfterValue();
  return *this;
}

CanonicalJsonWriter& CanonicalJsonWriter::Key(std::string_view key) {
  if (levels_.empty() || levels_.back().array) {
    if (error_.ok()) error_ = InternalError("canonical JSON writer: a key outside an object");
    return *this;
  }
  Level& l = levels_.back();
  if (l.count) out_.push_back(',');
  l.key = key;
  if (std::string m = Utf8Message(key, "key"); !m.empty()) Fail(m);
  AppendEscaped(key, &out_);
  out_.push_back(':');
  return *this;
}

CanonicalJsonWriter& CanonicalJsonWriter::String(std::string_view s) {
  BeforeValue();
  if (std::string m = Utf8Message(s, "string"); !m.empty()) Fail(m);
  AppendEscaped(s, &out_);
  AfterValue();
  return *this;
}

CanonicalJsonWriter& CanonicalJsonWriter::Int(int64_t n) {
  BeforeValue();
  if (n > kMaxSafeInteger || n < -kMaxSafeInteger) Fail(OutOfRangeMessage(std::to_string(n)));
  out_.append(std::to_string(n));
  AfterValue();
  return *this;
}

CanonicalJsonWriter& CanonicalJsonWriter::Uint(uint64_t n) {
  if (n <= static_cast<uint64_t>(kMaxSafeInteger)) return Int(static_cast<int64_t>(n));
  BeforeValue();
  Fail(OutOfRangeMessage(std::to_string(n)));
  out_.append(std::to_string(n));
  AfterValue();
  return *this;
}

CanonicalJsonWriter& CanonicalJsonWriter::Bool(bool b) {
  BeforeValue();
  out_.append(b ? "true" : "false");
  AfterValue();
  return *this;
}

CanonicalJsonWriter& CanonicalJsonWriter::Null() {
  BeforeValue();
  out_.append("null");
  AfterValue();
  return *this;
}

// An array's items are separated here; an object's members by Key.
void CanonicalJsonWriter::BeforeValue() {
  if (!levels_.empty() && levels_.back().array && levels_.back().count) out_.push_back(',');
}

void CanonicalJsonWriter::AfterValue() {
  if (!levels_.empty()) ++levels_.back().count;
}

// The message CanonicalJson gives: the value's JSON path, then what is wrong.
void CanonicalJsonWriter::Fail(std::string_view what) {
  if (!error_.ok()) return;
  std::string path = "$";
  for (const Level& l : levels_) {
    path += l.array ? "[" + std::to_string(l.count) + "]" : "." + std::string(l.key);
  }
  error_ = InvalidArgumentError(path + ": " + std::string(what));
}

Result<std::string> CanonicalJsonWriter::Finish() {
  if (!error_.ok()) return error_;
  if (!levels_.empty()) return InternalError("canonical JSON writer: an object or array was not closed");
  return std::move(out_);
}

size_t CanonicalJsonStringSize(std::string_view s) {
  std::string out;
  AppendEscaped(s, &out);
  return out.size();
}

}  // namespace gatos
