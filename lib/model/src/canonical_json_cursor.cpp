#include "gatos/model/canonical_json_cursor.h"

#include "gatos/model/canonical_json.h"

namespace gatos {
namespace {

int Hex(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

}  // namespace

bool CanonicalJsonCursor::Str(std::string* out) {
  std::string_view raw;
  if (!CanonicalString(&raw)) return false;
  // Its escapes are the canonical ones, checked: decode them.
  out->clear();
  size_t run = 0;
  for (size_t k = raw.find('\\'); k != std::string_view::npos; k = raw.find('\\', run)) {
    out->append(raw.data() + run, k - run);
    const char e = raw[k + 1];
    run = k + 2;
    switch (e) {
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u':  // \u00xx
        out->push_back(static_cast<char>(Hex(raw[k + 4]) << 4 | Hex(raw[k + 5])));
        run = k + 6;
        break;
      default: out->push_back(e); break;  // \" and \\ (the only others)
    }
  }
  out->append(raw.data() + run, raw.size() - run);
  return true;
}

bool CanonicalJsonCursor::Int(int64_t* v) {
  bool neg = Lit("-");
  size_t start = i_;
  int64_t n = 0;
  while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
    if (i_ - start == 16) return false;  // a 17th digit: no canonical integer
    n = n * 10 + (t_[i_++] - '0');
  }
  size_t digits = i_ - start;
  if (digits == 0 || digits > 16 || (digits > 1 && t_[start] == '0')) return false;
  if (n > kMaxSafeInteger || (neg && n == 0)) return false;  // the writer refuses one, writes "0" for "-0"
  *v = neg ? -n : n;
  return true;
}

bool CanonicalJsonCursor::Bool(bool* v) {
  if (Lit("true")) return *v = true, true;
  if (Lit("false")) return *v = false, true;
  return false;
}

bool CanonicalJsonCursor::IntOrNull(std::optional<int64_t>* v) {
  if (Lit("null")) return v->reset(), true;
  int64_t n;
  if (!Int(&n)) return false;
  *v = n;
  return true;
}

bool CanonicalJsonCursor::CanonicalValue(std::string_view* span, size_t max_depth) {
  const size_t start = i_;
  max_depth_ = max_depth;
  if (!CanonicalValueAt(0)) return false;
  *span = t_.substr(start, i_ - start);
  return true;
}

bool CanonicalJsonCursor::CanonicalString(std::string_view* raw) {
  if (!Lit("\"")) return false;
  const size_t start = i_;
  bool high = false;
  while (i_ < t_.size()) {
    const auto c = static_cast<unsigned char>(t_[i_]);
    if (c == '"') {
      *raw = t_.substr(start, i_ - start);
      ++i_;
      return !high || IsValidUtf8(*raw);  // escapes are ASCII
    }
    if (c < 0x20) return false;
    if (c != '\\') {
      high |= c > 0x7f;
      ++i_;
      continue;
    }
    if (i_ + 1 >= t_.size()) return false;
    const char e = t_[i_ + 1];
    i_ += 2;
    if (e == '"' || e == '\\' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') continue;
    if (e != 'u' || i_ + 4 > t_.size() || t_.substr(i_, 2) != "00") return false;
    const int hi = Hex(t_[i_ + 2]), lo = Hex(t_[i_ + 3]);
    if (hi < 0 || hi > 1 || lo < 0) return false;
    const int code = hi << 4 | lo;
    // These five have a short escape, which the canonical form uses.
    if (code == '\b' || code == '\f' || code == '\n' || code == '\r' || code == '\t') return false;
    i_ += 4;
  }
  return false;
}

bool CanonicalJsonCursor::CanonicalValueAt(size_t depth) {
  if (i_ >= t_.size()) return false;
  const char c = t_[i_];
  if (c == '"') {
    std::string_view raw;
    return CanonicalString(&raw);
  }
  if (c == '{') {
    if (depth >= max_depth_) return false;
    ++i_;
    if (Lit("}")) return true;
    std::string_view prev;
    bool first = true;
    do {
      std::string_view key;
      if (!CanonicalString(&key)) return false;
      // Plain ASCII keys sort by their bytes as by UTF-16 code units.
      for (char k : key) {
        if (k == '\\' || static_cast<unsigned char>(k) > 0x7f) return false;
      }
      if (!first && !(prev < key)) return false;
      first = false;
      prev = key;
      if (!Lit(":") || !CanonicalValueAt(depth + 1)) return false;
    } while (Lit(","));
    return Lit("}");
  }
  if (c == '[') {
    if (depth >= max_depth_) return false;
    ++i_;
    if (Lit("]")) return true;
    do {
      if (!CanonicalValueAt(depth + 1)) return false;
    } while (Lit(","));
    return Lit("]");
  }
  if (Lit("true") || Lit("false") || Lit("null")) return true;
  if (c == '-' || (c >= '0' && c <= '9')) {
    int64_t n = 0;
    if (!Int(&n)) return false;
    // A fraction or an exponent: a float, which has no canonical form.
    return !(Peek(".") || Peek("e") || Peek("E"));
  }
  return false;
}

}  // namespace gatos
