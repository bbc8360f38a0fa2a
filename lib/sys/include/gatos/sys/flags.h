// The one command-line flag parser of every gatos program (gatos, gatosd,
// gatos-worker, gatos-scan, the benchmarks).
//
//   --name VALUE, --name=VALUE   a flag with a value
//   --name                       a boolean flag (--name=VALUE is an error)
//   -f VALUE, -q                 a short alias of a long flag
//   --help, -h                   sets help() and ends parsing (true)
//   --                           everything after it is positional
//   anything else                a positional argument ("-" is one too)
//
// Unknown flags, a missing value and a flag given twice that is not
// repeatable are usage errors; error() then holds a message that names the
// flag and says what to do, for the program to print after its own prefix:
//
//   gatos::Flags flags;
//   if (!flags.Parse(args, {{"ledger"}, {"json", 0, false}})) return Usage(flags.error());
//   if (flags.help()) { std::cout << kUsage; return gatos::kExitOk; }
//   int n = 2;
//   if (!flags.GetInt("concurrency", 1, 256, &n)) return Usage(flags.error());
//       // "--concurrency must be an integer in 1..256, got \"0\""
//
// A flag's value shows up in an error message only cut to a few dozen bytes
// on a UTF-8 boundary (TruncateUtf8); no flag of ours carries a secret.
//
// Thread-safety: a Flags object is not thread-safe; the free functions are.
#ifndef GATOS_FLAGS_H_
#define GATOS_FLAGS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gatos {

// Exit codes shared by every program.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the operation ran and failed (e.g. a job failed)
inline constexpr int kExitUsage = 2;    // bad flags or invalid input

struct FlagSpec {
  std::string name;          // long name without "--"
  char short_name = 0;       // e.g. 'f' for -f; 0: none
  bool takes_value = true;   // false: a boolean flag
  bool repeatable = false;   // true: every value is kept (GetAll); else twice is an error
  std::string value_name{};  // for help text: "N", "DIR"; empty: "VALUE"
  std::string help{};        // for help text: one line
};

// What went wrong in Parse or a typed getter, for a program that words one
// case its own way (gatos-scan says: unknown argument "--x").
enum class FlagErrorKind {
  kNone,
  kUnknown,          // a flag no spec names
  kMissingValue,     // --name at the end, without its value
  kUnexpectedValue,  // --bool=VALUE
  kRepeated,         // a non-repeatable flag given twice
  kBadValue,         // a typed getter refused the value
};

class Flags {
 public:
  // Parses args (the words after the program or subcommand name). Returns
  // false and fills error() on a usage error. Call once per object.
  bool Parse(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs);

  bool help() const { return help_; }
  const std::string& error() const { return error_; }
  FlagErrorKind error_kind() const { return error_kind_; }
  // The flag the error is about, as typed ("--bogus", "-x").
  const std::string& error_flag() const { return error_flag_; }

  bool Has(std::string_view name) const { return values_.find(name) != values_.end(); }
  // The value (the last one of a repeatable flag); nullopt when absent.
  std::optional<std::string> Get(std::string_view name) const;
  std::string GetOr(std::string_view name, const std::string& fallback) const;
  // Every value in command-line order; empty when absent.
  const std::vector<std::string>& GetAll(std::string_view name) const;
  const std::vector<std::string>& positional() const { return positional_; }

  // Typed values. When the flag is absent *out is left alone (it holds the
  // default) and the result is true. When it is present and its value is not
  // of the type or out of range, the result is false and error() says
  //   --NAME must be an integer in LO..HI, got "VALUE"
  // (likewise for the others). *out changes only on success.
  bool GetInt(std::string_view name, int64_t lo, int64_t hi, int64_t* out);
  bool GetInt(std::string_view name, int lo, int hi, int* out);
  // A whole number (digits only); with hi = max the message says "a whole number".
  bool GetUint(std::string_view name, uint64_t lo, uint64_t hi, uint64_t* out);
  // A decimal number in lo..hi (hi may be infinity); NaN is refused.
  bool GetDouble(std::string_view name, double lo, double hi, double* out);
  // One of `choices`: "--sandbox must be auto, require or off, got \"x\"".
  bool GetChoice(std::string_view name, const std::vector<std::string>& choices, std::string* out);

 private:
  bool Fail(FlagErrorKind kind, std::string flag, std::string message);
  bool BadValue(std::string_view name, const std::string& value, const std::string& wanted);

  bool help_ = false;
  std::string error_;
  FlagErrorKind error_kind_ = FlagErrorKind::kNone;
  std::string error_flag_;
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
  std::vector<std::string> positional_;
};

// Usage text support. FlagSynopsis gives "[--jobs N] [-q|--quiet] [--ref REF]..."
// (a repeatable flag is followed by "..."); FlagHelp gives one line per flag
// with its help, aligned:
//   "  -f, --file FILE    write the key here\n"
std::string FlagSynopsis(const std::vector<FlagSpec>& specs);
std::string FlagHelp(const std::vector<FlagSpec>& specs);

// One subcommand of a program made of subcommands (gatosd, gatos-worker).
struct Subcommand {
  std::string name;
  std::function<int(const std::vector<std::string>& args)> run;  // gets the words after `name`
};

// The main() of such a program:
//   (no words)               `usage` on stderr, kExitUsage
//   --help | -h | help       `usage` on stdout, kExitOk
//   --version                `version` and a newline on stdout (when not empty), kExitOk
//   NAME ARGS...             the subcommand's run(ARGS)
//   anything else            "<program>: unknown command 'X' (see <program> --help)", kExitUsage
//
//   int main(int argc, char** argv) {
//     return gatos::RunSubcommands("gatosd", kUsage, "", {argv + 1, argv + argc},
//                                  {{"init", Init}, {"serve", Serve}});
//   }
int RunSubcommands(std::string_view program, std::string_view usage, std::string_view version,
                   const std::vector<std::string>& args, const std::vector<Subcommand>& commands);

}  // namespace gatos

#endif  // GATOS_FLAGS_H_
