#include "gatos/model/yaml_tree.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <exception>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "gatos/model/canonical_json.h"

namespace gatos::internal {
namespace {

// The longest mapping key, as a JSON string with its quotes: yaml-cpp reads
// a quoted key of 1,022 characters and refuses one of 1,023.
constexpr size_t kMaxKeyJsonBytes = 1024;

// Thrown from inside the event handler to stop yaml-cpp at the first fatal
// problem (a limit, a duplicate key); caught in ParseYamlTree.
struct TreeAbort {
  YamlTreeError error;
};

// Stops the parser as soon as a second document starts.
class SecondDocumentHandler : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    throw TreeAbort{{mark.line + 1, mark.column + 1, "",
                     "a second YAML document starts here; a manifest is exactly one document "
                     "(remove the '---' separator and what follows)"}};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

class TreeBuilder : public YAML::EventHandler {
 public:
  explicit TreeBuilder(const YamlTreeLimits& limits) : limits_(limits) {}

  bool has_root() const { return has_root_; }
  YamlNode TakeRoot() { return std::move(root_); }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    YamlNode n;
    n.kind = YamlNode::Kind::kNull;
    SetMark(&n, mark);
    Count(mark, 1, 0);
    Complete(std::move(n), anchor, 1, 0);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) {
      Fail(mark,
           "alias refers to an anchor that is still open (a recursive alias); "
           "remove the cycle");
    }
    Count(mark, it->second.nodes, it->second.bytes);
    YamlNode copy = it->second.node;
    SetMark(&copy, mark);
    Complete(std::move(copy), 0, it->second.nodes, it->second.bytes);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    // yaml-cpp reports "?" for a plain scalar and "!" for a quoted/block one.
    if (tag != "?" && tag != "!") {
      Fail(mark, "explicit tag '" + tag +
                     "' is not supported; remove the tag (quote the "
                     "value to make it a string)");
    }
    if (value.size() > limits_.max_string_bytes) {
      Fail(mark, "string of " + std::to_string(value.size()) + " bytes exceeds the limit of " +
                     std::to_string(limits_.max_string_bytes) + " bytes (max_string_bytes)");
    }
    size_t bad = 0;
    if (!IsValidUtf8(value, &bad)) {
      Fail(mark, "string is not valid UTF-8 (bad byte at offset " + std::to_string(bad) +
                     "); encode the text as UTF-8");
    }
    if (value.find('\0') != std::string::npos) {
      Fail(mark, "string contains a NUL byte; remove it");
    }
    YamlNode n;
    n.kind = YamlNode::Kind::kScalar;
    n.plain = tag == "?";
    n.value = value;
    SetMark(&n, mark);
    Count(mark, 1, value.size());
    Complete(std::move(n), anchor, 1, value.size());
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, tag, anchor, YamlNode::Kind::kSequence);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, tag, anchor, YamlNode::Kind::kMap);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    YamlNode node;
    YAML::anchor_t anchor = 0;
    size_t nodes_at_start = 0;
    size_t bytes_at_start = 0;
    bool have_key = false;
    YamlNode key;
    std::set<std::string> keys;
  };
  struct Anchored {
    YamlNode node;
    size_t nodes = 0;
    size_t bytes = 0;
  };

  static void SetMark(YamlNode* n, const YAML::Mark& mark) {
    n->line = mark.line + 1;
    n->column = mark.column + 1;
  }

  std::string Path() const {
    std::string p;
    for (const Frame& f : stack_) {
      if (f.node.kind == YamlNode::Kind::kSequence) {
        p += "[" + std::to_string(f.node.items.size()) + "]";
      } else if (f.have_key) {
        if (!p.empty()) p += ".";
        p += f.key.value;
      }
    }
    return p;
  }

  [[noreturn]] void Fail(int line, int column, std::string message) const {
    throw TreeAbort{{line, column, Path(), std::move(message)}};
  }
  [[noreturn]] void Fail(const YAML::Mark& mark, std::string message) const {
    Fail(mark.line + 1, mark.column + 1, std::move(message));
  }

  void Count(const YAML::Mark& mark, size_t nodes, size_t bytes) {
    nodes_ += nodes;
    bytes_ += bytes;
    if (nodes_ > limits_.max_nodes) {
      Fail(mark, "document has more than " + std::to_string(limits_.max_nodes) +
                     " nodes after alias expansion (max_nodes); simplify it or remove aliases");
    }
    if (bytes_ > limits_.max_total_bytes) {
      Fail(mark, "document has more than " + std::to_string(limits_.max_total_bytes) +
                     " bytes of strings after alias expansion (max_bytes); remove aliases");
    }
  }

  void Open(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
            YamlNode::Kind kind) {
    if (!tag.empty() && tag != "?") {
      Fail(mark, "explicit tag '" + tag + "' is not supported; remove the tag");
    }
    if (stack_.size() + 1 > limits_.max_depth) {
      Fail(mark, "nesting deeper than " + std::to_string(limits_.max_depth) +
                     " levels (max_depth); flatten the document");
    }
    Count(mark, 1, 0);
    Frame f;
    f.node.kind = kind;
    SetMark(&f.node, mark);
    f.anchor = anchor;
    f.nodes_at_start = nodes_ - 1;
    f.bytes_at_start = bytes_;
    stack_.push_back(std::move(f));
  }

  void Close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    if (f.have_key) {
      // Unreachable with yaml-cpp (it emits a null value), kept as a guard.
      Fail(f.key.line, f.key.column, "key '" + f.key.value + "' has no value");
    }
    Complete(std::move(f.node), f.anchor, nodes_ - f.nodes_at_start, bytes_ - f.bytes_at_start);
  }

  // Attaches a finished node to its parent (or makes it the root) and records
  // it under its anchor for later aliases.
  void Complete(YamlNode node, YAML::anchor_t anchor, size_t nodes, size_t bytes) {
    if (anchor != 0) anchors_[anchor] = Anchored{node, nodes, bytes};
    if (stack_.empty()) {
      root_ = std::move(node);
      has_root_ = true;
      return;
    }
    Frame& top = stack_.back();
    if (top.node.kind == YamlNode::Kind::kSequence) {
      top.node.items.push_back(std::move(node));
      return;
    }
    if (!top.have_key) {
      if (node.kind != YamlNode::Kind::kScalar) {
        Fail(node.line, node.column,
             node.kind == YamlNode::Kind::kNull
                 ? "empty mapping key; every key must be a non-empty string"
                 : "mapping key is a collection; keys must be strings");
      }
      // The canonical JSON form (job ids are hashed over it, and it must
      // parse back) writes every key as a JSON string, and YAML reads no
      // key longer than 1024 characters: a key whose JSON form is longer
      // (escapes grow it: 6 bytes per control character) could not be read
      // back.
      if (const size_t n = CanonicalJsonStringSize(node.value); n > kMaxKeyJsonBytes) {
        Fail(node.line, node.column,
             "mapping key takes " + std::to_string(n) + " bytes as a JSON string, more than " +
                 std::to_string(kMaxKeyJsonBytes) +
                 " (YAML's longest key; control characters take 6 bytes, quotes and backslashes 2); shorten it");
      }
      if (node.plain && node.value == "<<") {
        Fail(node.line, node.column,
             "merge keys ('<<') are not supported; write the keys out in full");
      }
      if (!top.keys.insert(node.value).second) {
        const std::string parent = Path();
        throw TreeAbort{{node.line, node.column,
                         parent.empty() ? node.value : parent + "." + node.value,
                         "duplicate key '" + node.value + "'; each key may appear only once"}};
      }
      top.key = std::move(node);
      top.have_key = true;
      return;
    }
    top.node.entries.push_back(YamlEntry{std::move(top.key), std::move(node)});
    top.key = YamlNode();
    top.have_key = false;
  }

  const YamlTreeLimits& limits_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  size_t nodes_ = 0;
  size_t bytes_ = 0;
  YamlNode root_;
  bool has_root_ = false;
};

void LineColumnAt(std::string_view text, size_t offset, int* line, int* column) {
  *line = 1;
  *column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++*line;
      *column = 1;
    } else {
      ++*column;
    }
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ReadHex4(std::string_view s, size_t i, uint32_t* v) {
  if (i + 4 > s.size()) return false;
  *v = 0;
  for (size_t k = 0; k < 4; ++k) {
    int h = HexValue(s[i + k]);
    if (h < 0) return false;
    *v = (*v << 4) | static_cast<uint32_t>(h);
  }
  return true;
}

}  // namespace

std::string RewriteJsonSurrogatePairs(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (!in_string) {
      if (c == '"') in_string = true;
      out.push_back(c);
      continue;
    }
    if (c == '"') {
      in_string = false;
      out.push_back(c);
      continue;
    }
    if (c != '\\' || i + 1 >= json.size()) {
      out.push_back(c);
      continue;
    }
    uint32_t hi = 0, lo = 0;
    if (json[i + 1] == 'u' && ReadHex4(json, i + 2, &hi) && hi >= 0xD800 && hi <= 0xDBFF &&
        i + 12 <= json.size() && json[i + 6] == '\\' && json[i + 7] == 'u' &&
        ReadHex4(json, i + 8, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
      const uint32_t cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += "\\U";
      for (int shift = 28; shift >= 0; shift -= 4) out.push_back(kHex[(cp >> shift) & 0xF]);
      i += 11;
      continue;
    }
    // Any other escape: copy both characters so an escaped quote does not
    // end the string.
    out.push_back(c);
    out.push_back(json[i + 1]);
    ++i;
  }
  return out;
}

bool ParseYamlTree(std::string_view text, const YamlTreeLimits& limits, YamlNode* out,
                   YamlTreeError* error) {
  // yaml-cpp guesses UTF-16/32 from NUL bytes and BOMs and passes invalid
  // UTF-8 through; a manifest is UTF-8, so check the raw bytes first.
  size_t bad = 0;
  const bool utf8_ok = IsValidUtf8(text, &bad);
  if (!utf8_ok || text.find('\0') != std::string_view::npos) {
    if (utf8_ok) bad = text.find('\0');
    *error = YamlTreeError{};
    LineColumnAt(text, bad, &error->line, &error->column);
    error->message = utf8_ok ? "file contains a NUL byte; a manifest is UTF-8 text"
                             : "file is not valid UTF-8 (bad byte at offset " +
                                   std::to_string(bad) + "); save it as UTF-8";
    return false;
  }
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    TreeBuilder builder(limits);
    if (!parser.HandleNextDocument(builder) || !builder.has_root()) {
      *error = YamlTreeError{1, 1, "", "document is empty; expected a mapping of fields"};
      return false;
    }
    SecondDocumentHandler second;
    parser.HandleNextDocument(second);
    *out = builder.TakeRoot();
    return true;
  } catch (const TreeAbort& abort) {
    *error = abort.error;
  } catch (const YAML::Exception& e) {
    *error = YamlTreeError{};
    if (!e.mark.is_null()) {
      error->line = e.mark.line + 1;
      error->column = e.mark.column + 1;
    }
    error->message = "syntax error: " + e.msg;
  } catch (const std::exception& e) {
    *error = YamlTreeError{1, 1, "", std::string("cannot parse: ") + e.what()};
  }
  return false;
}

}  // namespace gatos::internal
