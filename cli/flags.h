// A small git-style flag parser shared by the gatos subcommands.
// Supports "--name VALUE", "--name=VALUE", boolean "--name", short aliases
// ("-f"), and positional arguments. Unknown flags are usage errors.
#ifndef GATOS_CLI_FLAGS_H_
#define GATOS_CLI_FLAGS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gatos::cli {

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the operation ran and failed (e.g. job failed)
inline constexpr int kExitUsage = 2;    // bad flags or invalid input

struct FlagSpec {
  std::string name;        // long name without "--"
  char short_name = 0;     // e.g. 'f'
  bool takes_value = true;
  bool repeatable = false;
};

class Flags {
 public:
  // Parses args (after the subcommand words). Returns false and fills error()
  // on a usage error. "--help"/"-h" sets help().
  bool Parse(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs);

  bool help() const { return help_; }
  const std::string& error() const { return error_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  const std::vector<std::string>& GetAll(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  bool help_ = false;
  std::string error_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace gatos::cli

#endif  // GATOS_CLI_FLAGS_H_
