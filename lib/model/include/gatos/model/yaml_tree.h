// A small, bounded document tree built from yaml-cpp's event API.
//
// We do not use YAML::Load/YAML::Node: it resolves scalar types for us (so
// `args: [1]` could not be told apart from `args: ["1"]`), expands aliases
// without a budget and keeps no per-node positions we control. This tree keeps
// every scalar's literal text, whether it was plain or quoted, and its
// 1-based line/column, and enforces the limits while parsing, so a hostile
// file (alias bomb, deep nesting) is refused before it costs memory or stack.
//
// Thread-safety: pure functions; the tree is a value type.
#ifndef GATOS_LIB_SRC_MANIFEST_YAML_TREE_H_
#define GATOS_LIB_SRC_MANIFEST_YAML_TREE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos::internal {

struct YamlEntry;

struct YamlNode {
  enum class Kind { kNull, kScalar, kSequence, kMap };
  Kind kind = Kind::kNull;
  // kScalar: true for a plain (unquoted) scalar, false for a quoted or block
  // scalar. A plain `~`/`null` stays a kScalar; typing is the caller's job.
  bool plain = false;
  std::string value;               // kScalar: the text after unescaping
  int line = 1;                    // 1-based
  int column = 1;                  // 1-based
  std::vector<YamlNode> items;     // kSequence
  std::vector<YamlEntry> entries;  // kMap, in document order, keys unique
};

struct YamlEntry {
  YamlNode key;  // always a kScalar
  YamlNode value;
};

struct YamlTreeLimits {
  size_t max_nodes = 10000;  // counted after alias expansion
  size_t max_depth = 32;     // collections nested inside each other
  size_t max_string_bytes = 65536;
  size_t max_total_bytes = 1 << 20;  // scalar bytes after alias expansion
};

// One problem found while building the tree.
struct YamlTreeError {
  int line = 1;
  int column = 1;
  std::string path;  // "args[2]", "env.FOO", "" for the document itself
  std::string message;
};

// Parses exactly one YAML document (JSON is a subset) into `*out`.
// Returns false and fills `*error` on: syntax errors, a second document,
// limits exceeded, duplicate keys, non-scalar or empty keys, merge keys
// (`<<`), explicit tags, recursive aliases, invalid UTF-8 or NUL bytes.
// Never throws.
bool ParseYamlTree(std::string_view text, const YamlTreeLimits& limits, YamlNode* out,
                   YamlTreeError* error);

// JSON text that nlohmann::json::accept()ed, rewritten so yaml-cpp reads the
// same strings: a `\uD83D\uDE00` surrogate-pair escape (valid JSON) becomes
// `\U0001F600` (yaml-cpp rejects escaped surrogates). Columns after such an
// escape shift left by two on that line; nothing else changes.
std::string RewriteJsonSurrogatePairs(std::string_view json);

}  // namespace gatos::internal

#endif  // GATOS_LIB_SRC_MANIFEST_YAML_TREE_H_
