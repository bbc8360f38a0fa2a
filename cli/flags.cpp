#include "flags.h"

namespace gatos::cli {

bool Flags::Parse(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs) {
  auto find_long = [&](const std::string& n) -> const FlagSpec* {
    for (const auto& s : specs) if (s.name == n) return &s;
    return nullptr;
  };
  auto find_short = [&](char c) -> const FlagSpec* {
    for (const auto& s : specs) if (s.short_name && s.short_name == c) return &s;
    return nullptr;
  };
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      positional_.push_back(a);
      continue;
    }
    if (a == "--") { only_positional = true; continue; }
    if (a == "--help" || a == "-h") { help_ = true; continue; }
    const FlagSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    std::string shown = a;
    if (a.rfind("--", 0) == 0) {
      std::string name = a.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
        shown = "--" + name;
      }
      spec = find_long(name);
    } else if (a.size() == 2) {
      spec = find_short(a[1]);
    }
    if (!spec) {
      error_ = "unknown option '" + shown + "' (see --help)";
      return false;
    }
    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        error_ = "option '" + shown + "' needs a value";
        return false;
      }
    } else if (inline_value) {
      error_ = "option '" + shown + "' takes no value";
      return false;
    }
    auto& slot = values_[spec->name];
    if (!slot.empty() && !spec->repeatable) {
      error_ = "option '--" + spec->name + "' given more than once";
      return false;
    }
    slot.push_back(value);
  }
  return true;
}

std::optional<std::string> Flags::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::string Flags::GetOr(const std::string& name, const std::string& fallback) const {
  auto v = Get(name);
  return v ? *v : fallback;
}

const std::vector<std::string>& Flags::GetAll(const std::string& name) const {
  static const std::vector<std::string> kEmpty;
  auto it = values_.find(name);
  return it == values_.end() ? kEmpty : it->second;
}

}  // namespace gatos::cli
