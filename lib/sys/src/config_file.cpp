#include "gatos/sys/config_file.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "gatos/model/encoding.h"
#include "gatos/model/yaml_tree.h"

namespace gatos {
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

std::string Show(const std::string& s) { return "'" + TruncateUtf8(s, 64) + "'"; }

// The long flag names the command line gives ("--x", "--x=v").
std::set<std::string> GivenFlags(const std::vector<std::string>& args) {
  std::set<std::string> out;
  for (const auto& a : args) {
    if (a == "--") break;
    if (a.size() > 2 && a.rfind("--", 0) == 0) out.insert(a.substr(2, a.find('=') - 2));
  }
  return out;
}

Result<std::string> Scalar(const internal::YamlNode& node, const std::string& where) {
  if (node.kind == internal::YamlNode::Kind::kNull) return InvalidArgumentError(where + ": expected one value");
  if (node.kind != internal::YamlNode::Kind::kScalar) return InvalidArgumentError(where + ": expected one value");
  if (node.plain && (node.value == "~" || node.value == "null")) {
    return InvalidArgumentError(where + ": expected one value");
  }
  if (node.value.empty()) return InvalidArgumentError(where + ": empty value");
  return node.value;
}

}  // namespace

Result<std::vector<std::string>> ConfigArgs(std::string_view yaml, const std::string& source,
                                            const std::vector<FlagSpec>& specs,
                                            const std::vector<std::string>& cli_args) {
  using Kind = internal::YamlNode::Kind;
  if (yaml.size() > kMaxConfigBytes) return InvalidArgumentError(source + ": larger than 1 MiB");
  // The bounded parser of manifests: no alias bombs, no deep nesting, valid
  // UTF-8, unique keys.
  // A file of comments and blank lines only sets nothing.
  bool blank = true;
  for (size_t pos = 0; pos < yaml.size() && blank;) {
    size_t nl = yaml.find('\n', pos);
    std::string_view line = yaml.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    size_t first = line.find_first_not_of(" \t\r");
    blank = first == std::string_view::npos || line[first] == '#';
    pos = nl == std::string_view::npos ? yaml.size() : nl + 1;
  }
  if (blank) return std::vector<std::string>{};
  internal::YamlNode root;
  internal::YamlTreeError error;
  if (!internal::ParseYamlTree(yaml, internal::YamlTreeLimits{}, &root, &error)) {
    std::string at = error.path.empty() ? "" : " ('" + error.path + "')";
    if (error.message.find("duplicate") != std::string::npos) at += " (a key given twice)";
    return InvalidArgumentError(source + ":" + std::to_string(error.line) + ":" + std::to_string(error.column) +
                                ": not valid YAML" + at + ": " + error.message);
  }
  std::vector<std::string> out;
  if (root.kind == Kind::kNull) return out;  // an empty file sets nothing
  if (root.kind != Kind::kMap) return InvalidArgumentError(source + ": must be a mapping of flag names to values");
  const std::set<std::string> given = GivenFlags(cli_args);
  for (const auto& entry : root.entries) {
    const std::string& key = entry.key.value;
    const std::string where = source + ":" + std::to_string(entry.key.line) + ": " + Show(key);
    const FlagSpec* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == key) spec = &s;
    }
    if (!spec || key == "config" || key == "help") {
      std::string names;
      for (const auto& s : specs) {
        if (s.name != "config" && s.name != "help") names += (names.empty() ? "" : ", ") + s.name;
      }
      return InvalidArgumentError(where + " is not a setting here (known: " + names + ")");
    }
    const internal::YamlNode& value = entry.value;
    if (value.kind == Kind::kMap) return InvalidArgumentError(where + ": expected a value, not a mapping");
    if (!spec->takes_value) {
      if (value.kind != Kind::kScalar || !value.plain || (value.value != "true" && value.value != "false")) {
        return InvalidArgumentError(where + ": expected true or false");
      }
      if (!given.count(key) && value.value == "true") out.push_back("--" + key);
      continue;
    }
    if (value.kind == Kind::kSequence) {
      if (!spec->repeatable) return InvalidArgumentError(where + ": takes one value, not a list");
      for (const auto& item : value.items) {
        auto v = Scalar(item, where);
        if (!v.ok()) return v.status();
        if (given.count(key)) continue;  // the command line wins
        out.push_back("--" + key);
        out.push_back(*v);
      }
      continue;
    }
    auto v = Scalar(value, where);
    if (!v.ok()) return v.status();
    if (given.count(key)) continue;  // the command line wins
    out.push_back("--" + key);
    out.push_back(*v);
  }
  return out;
}

Result<std::vector<std::string>> WithConfigFile(const std::vector<std::string>& args,
                                                const std::vector<FlagSpec>& specs) {
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i] == "--config" && i + 1 < args.size()) path = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) path = args[i].substr(9);
  }
  if (path.empty()) return args;
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("--config " + path + ": cannot read the file");
  std::string text;
  text.resize(kMaxConfigBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  auto extra = ConfigArgs(text, path, specs, args);
  if (!extra.ok()) return extra.status();
  std::vector<std::string> out = args;
  // Flags go before a "--" separator, if the command line has one.
  auto sep = std::find(out.begin(), out.end(), "--");
  out.insert(sep, extra->begin(), extra->end());
  return out;
}

}  // namespace gatos
