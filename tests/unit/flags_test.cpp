// gatos::Flags (the flag parser of every program), TruncateUtf8 (user text
// in messages) and the log line format.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "gatos/model/encoding.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/log.h"

namespace gatos {
namespace {

using Args = std::vector<std::string>;

const std::vector<FlagSpec> kSpecs = {
    {"ledger"}, {"file", 'f'}, {"json", 0, false}, {"quiet", 'q', false}, {"ro-bind", 0, true, true},
    {"concurrency"}};

Flags Parsed(const Args& args) {
  Flags f;
  EXPECT_TRUE(f.Parse(args, kSpecs)) << f.error();
  return f;
}

TEST(FlagsTest, ValuesBooleansShortAliasesAndPositionals) {
  Flags f = Parsed({"a", "--ledger", "L", "-f", "F", "--json", "b", "-q", "-", "--concurrency=3"});
  EXPECT_EQ(f.Get("ledger"), "L");
  EXPECT_EQ(f.Get("file"), "F");
  EXPECT_TRUE(f.Has("json"));
  EXPECT_TRUE(f.Has("quiet"));
  EXPECT_EQ(f.Get("concurrency"), "3");
  EXPECT_EQ(f.positional(), (Args{"a", "b", "-"}));
  EXPECT_FALSE(f.help());
  EXPECT_FALSE(f.Has("ro-bind"));
  EXPECT_EQ(f.Get("ro-bind"), std::nullopt);
  EXPECT_EQ(f.GetOr("ro-bind", "x"), "x");
  EXPECT_TRUE(f.GetAll("ro-bind").empty());
}

TEST(FlagsTest, ValueMayLookLikeAFlagOrBeEmpty) {
  Flags f = Parsed({"--ledger", "--json", "--file=", "--concurrency", "-5"});
  EXPECT_EQ(f.Get("ledger"), "--json");
  EXPECT_FALSE(f.Has("json"));
  EXPECT_EQ(f.Get("file"), "");
  EXPECT_EQ(f.Get("concurrency"), "-5");
}

TEST(FlagsTest, InlineValueKeepsLaterEqualsSigns) {
  EXPECT_EQ(Parsed({"--ledger=a=b"}).Get("ledger"), "a=b");
}

TEST(FlagsTest, RepeatableFlagsKeepEveryValueInOrder) {
  Flags f = Parsed({"--ro-bind", "/a", "--ro-bind=/b", "--ro-bind", "/c"});
  EXPECT_EQ(f.GetAll("ro-bind"), (Args{"/a", "/b", "/c"}));
  EXPECT_EQ(f.Get("ro-bind"), "/c");
}

TEST(FlagsTest, DoubleDashEndsFlags) {
  Flags f = Parsed({"--json", "--", "--ledger", "-q", "x"});
  EXPECT_TRUE(f.Has("json"));
  EXPECT_FALSE(f.Has("ledger"));
  EXPECT_EQ(f.positional(), (Args{"--ledger", "-q", "x"}));
}

TEST(FlagsTest, HelpEndsParsingAndWinsOverLaterMistakes) {
  for (const Args& a : {Args{"--help"}, Args{"-h"}, Args{"--json", "--help", "--bogus"}}) {
    Flags f;
    EXPECT_TRUE(f.Parse(a, kSpecs));
    EXPECT_TRUE(f.help());
  }
  Flags f;
  EXPECT_FALSE(f.Parse({"--bogus", "--help"}, kSpecs));  // what comes first counts
  // After "--" it is only a word.
  Flags g = Parsed({"--", "--help"});
  EXPECT_FALSE(g.help());
}

struct BadCase {
  Args args;
  FlagErrorKind kind;
  std::string flag;
  std::string message;
};

TEST(FlagsTest, UsageErrorsNameTheFlagAndWhatToDo) {
  const std::vector<BadCase> cases = {
      {{"--bogus"}, FlagErrorKind::kUnknown, "--bogus", "unknown option '--bogus' (see --help)"},
      {{"--bogus=1"}, FlagErrorKind::kUnknown, "--bogus", "unknown option '--bogus' (see --help)"},
      {{"-x"}, FlagErrorKind::kUnknown, "-x", "unknown option '-x' (see --help)"},
      {{"-qf"}, FlagErrorKind::kUnknown, "-qf", "unknown option '-qf' (see --help)"},
      {{"--ledger"}, FlagErrorKind::kMissingValue, "--ledger", "option '--ledger' needs a value"},
      {{"-f"}, FlagErrorKind::kMissingValue, "-f", "option '-f' needs a value"},
      {{"--json=yes"}, FlagErrorKind::kUnexpectedValue, "--json", "option '--json' takes no value"},
      {{"--ledger", "a", "--ledger=b"}, FlagErrorKind::kRepeated, "--ledger",
       "option '--ledger' given more than once"},
      {{"-f", "a", "--file", "b"}, FlagErrorKind::kRepeated, "--file", "option '--file' given more than once"},
      {{"--json", "--json"}, FlagErrorKind::kRepeated, "--json", "option '--json' given more than once"},
  };
  for (const auto& c : cases) {
    Flags f;
    EXPECT_FALSE(f.Parse(c.args, kSpecs)) << c.args[0];
    EXPECT_EQ(f.error(), c.message);
    EXPECT_EQ(f.error_kind(), c.kind) << c.message;
    EXPECT_EQ(f.error_flag(), c.flag);
  }
}

TEST(FlagsTest, AnUnknownFlagIsShownCutAndAsValidUtf8) {
  Flags f;
  std::string junk = "--" + std::string(200, 'x') + "\xff";
  EXPECT_FALSE(f.Parse({junk}, kSpecs));
  EXPECT_LT(f.error().size(), 120u);
  EXPECT_EQ(TruncateUtf8(f.error(), 1000), f.error());  // already valid UTF-8
}

TEST(FlagsTest, GetIntChecksTypeAndRange) {
  Flags f = Parsed({"--concurrency", "256", "--ledger", "0"});
  int n = 1;
  EXPECT_TRUE(f.GetInt("concurrency", 1, 256, &n));
  EXPECT_EQ(n, 256);
  int untouched = 7;
  EXPECT_TRUE(f.GetInt("file", 1, 9, &untouched));  // absent: the default stays
  EXPECT_EQ(untouched, 7);
  EXPECT_FALSE(f.GetInt("ledger", 1, 256, &n));
  EXPECT_EQ(f.error(), "--ledger must be an integer in 1..256, got \"0\"");
  EXPECT_EQ(f.error_kind(), FlagErrorKind::kBadValue);
  EXPECT_EQ(n, 256);  // unchanged on failure
  for (const char* bad : {"", "x", "1x", " 1", "1.5", "99999999999999999999999"}) {
    Flags g = Parsed({"--concurrency", bad});
    int64_t v = 3;
    EXPECT_FALSE(g.GetInt("concurrency", int64_t{0}, int64_t{1000}, &v)) << bad;
    EXPECT_EQ(v, 3);
  }
  Flags neg = Parsed({"--concurrency=-4"});
  int64_t v = 0;
  EXPECT_TRUE(neg.GetInt("concurrency", int64_t{-10}, int64_t{10}, &v));
  EXPECT_EQ(v, -4);
}

TEST(FlagsTest, GetUintTakesDigitsOnly) {
  uint64_t v = 5;
  Flags f = Parsed({"--concurrency", "18446744073709551615"});
  EXPECT_TRUE(f.GetUint("concurrency", 0, std::numeric_limits<uint64_t>::max(), &v));
  EXPECT_EQ(v, std::numeric_limits<uint64_t>::max());
  for (const char* bad : {"-1", "+1", "18446744073709551616", "1e3"}) {
    Flags g = Parsed({"--concurrency", bad});
    EXPECT_FALSE(g.GetUint("concurrency", 0, std::numeric_limits<uint64_t>::max(), &v)) << bad;
    EXPECT_EQ(g.error(), "--concurrency must be a whole number, got \"" + std::string(bad) + "\"");
  }
  Flags h = Parsed({"--concurrency", "2000"});
  EXPECT_FALSE(h.GetUint("concurrency", 1, 1024, &v));
  EXPECT_EQ(h.error(), "--concurrency must be an integer in 1..1024, got \"2000\"");
}

TEST(FlagsTest, GetDoubleRefusesNanAndOutOfRange) {
  double d = 1;
  Flags f = Parsed({"--concurrency", "2.5"});
  EXPECT_TRUE(f.GetDouble("concurrency", 0, HUGE_VAL, &d));
  EXPECT_EQ(d, 2.5);
  for (const char* bad : {"-1", "nan", "", "2s"}) {
    Flags g = Parsed({"--concurrency", bad});
    EXPECT_FALSE(g.GetDouble("concurrency", 0, HUGE_VAL, &d)) << bad;
    EXPECT_EQ(g.error(), "--concurrency must be a number >= 0, got \"" + std::string(bad) + "\"");
  }
  Flags h = Parsed({"--concurrency", "7"});
  EXPECT_FALSE(h.GetDouble("concurrency", 0.5, 2, &d));
  EXPECT_EQ(h.error(), "--concurrency must be a number in 0.5..2, got \"7\"");
}

TEST(FlagsTest, GetChoiceListsTheChoices) {
  std::string s = "auto";
  Flags f = Parsed({"--ledger", "off"});
  EXPECT_TRUE(f.GetChoice("ledger", {"auto", "require", "off"}, &s));
  EXPECT_EQ(s, "off");
  Flags g = Parsed({"--ledger", "sometimes"});
  EXPECT_FALSE(g.GetChoice("ledger", {"auto", "require", "off"}, &s));
  EXPECT_EQ(g.error(), "--ledger must be auto, require or off, got \"sometimes\"");
  EXPECT_EQ(s, "off");
}

TEST(FlagsTest, BadValuesAreQuotedCutOnACharacterBoundary) {
  std::string value(100, 'a');
  value += "\xC3\xA9";  // é past the cut
  Flags f = Parsed({"--concurrency", value});
  int n = 0;
  EXPECT_FALSE(f.GetInt("concurrency", 1, 2, &n));
  EXPECT_NE(f.error().find("got \"" + std::string(64, 'a') + "\""), std::string::npos) << f.error();
}

TEST(FlagsTest, SynopsisAndHelpText) {
  const std::vector<FlagSpec> specs = {{"file", 'f', true, false, "FILE", "write the key here"},
                                       {"quiet", 'q', false, false, "", "say nothing"},
                                       {"ref", 0, true, true, "REF", "a ref to scan"},
                                       {"rate"}};
  EXPECT_EQ(FlagSynopsis(specs), "[-f|--file FILE] [-q|--quiet] [--ref REF]... [--rate VALUE]");
  EXPECT_EQ(FlagHelp(specs),
            "  -f, --file FILE  write the key here\n"
            "  -q, --quiet      say nothing\n"
            "  --ref REF        a ref to scan\n"
            "  --rate VALUE\n");
}

TEST(SubcommandsTest, UsageHelpVersionDispatchAndUnknown) {
  Args seen;
  const std::vector<Subcommand> commands = {{"run", [&](const Args& a) {
                                               seen = a;
                                               return 7;
                                             }}};
  auto run = [&](const Args& args, std::string* out, std::string* err) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    int rc = RunSubcommands("prog", "usage: prog run\n", "prog 1.0", args, commands);
    *out = ::testing::internal::GetCapturedStdout();
    *err = ::testing::internal::GetCapturedStderr();
    return rc;
  };
  std::string out, err;
  EXPECT_EQ(run({}, &out, &err), kExitUsage);
  EXPECT_EQ(err, "usage: prog run\n");
  for (const char* help : {"--help", "-h", "help"}) {
    EXPECT_EQ(run({help}, &out, &err), kExitOk);
    EXPECT_EQ(out, "usage: prog run\n");
  }
  EXPECT_EQ(run({"--version"}, &out, &err), kExitOk);
  EXPECT_EQ(out, "prog 1.0\n");
  EXPECT_EQ(run({"run", "--x", "y"}, &out, &err), 7);
  EXPECT_EQ(seen, (Args{"--x", "y"}));
  EXPECT_EQ(run({"walk"}, &out, &err), kExitUsage);
  EXPECT_EQ(err, "prog: unknown command 'walk' (see prog --help)\n");
  EXPECT_EQ(RunSubcommands("p", "u\n", "", {"--version"}, {}), kExitUsage);  // no version: unknown
}

TEST(TruncateUtf8Test, NeverSplitsACharacter) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀: 1+2+3+4 bytes
  EXPECT_EQ(TruncateUtf8(s, 100), s);
  EXPECT_EQ(TruncateUtf8(s, 0), "");
  EXPECT_EQ(TruncateUtf8(s, 1), "a");
  EXPECT_EQ(TruncateUtf8(s, 2), "a");
  EXPECT_EQ(TruncateUtf8(s, 3), "a\xC3\xA9");
  EXPECT_EQ(TruncateUtf8(s, 5), "a\xC3\xA9");
  EXPECT_EQ(TruncateUtf8(s, 6), "a\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(TruncateUtf8(s, 9), "a\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(TruncateUtf8(s, 10), s);
}

TEST(TruncateUtf8Test, ReplacesEveryByteThatIsNotWellFormed) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(TruncateUtf8("a\xFF" "b", 100), "a" + fffd + "b");
  EXPECT_EQ(TruncateUtf8("\xC3", 100), fffd);                      // truncated sequence
  EXPECT_EQ(TruncateUtf8("\xC0\xAF", 100), fffd + fffd);           // overlong '/'
  EXPECT_EQ(TruncateUtf8("\xE0\x80\xAF", 100), fffd + fffd + fffd);  // overlong
  EXPECT_EQ(TruncateUtf8("\xED\xA0\x80", 100), fffd + fffd + fffd);  // surrogate
  EXPECT_EQ(TruncateUtf8("\xF4\x90\x80\x80", 100), fffd + fffd + fffd + fffd);  // > U+10FFFF
  EXPECT_EQ(TruncateUtf8("\xEF\xBF\xBF", 100), "\xEF\xBF\xBF");    // U+FFFF is fine
  EXPECT_EQ(TruncateUtf8(std::string("a\0b", 3), 100), std::string("a\0b", 3));
  // A replacement that does not fit is not started.
  EXPECT_EQ(TruncateUtf8("ab\xFF", 4), "ab");
}

TEST(LogLineTest, ProgramTimeAndText) {
  // 2025-01-31T12:34:56.789Z
  EXPECT_EQ(FormatLogLine("gatosd", 1738326896789, "serving ledger /x"),
            "gatosd: 2025-01-31T12:34:56.789Z serving ledger /x");
  EXPECT_EQ(FormatLogLine("gatos-worker[w1]", 0, "ready"), "gatos-worker[w1]: 1970-01-01T00:00:00.000Z ready");
}

TEST(LogLineTest, OneLineWhateverTheText) {
  std::string line = FormatLogLine("p", 0, "a\nfake: line\r\x1b[31m\tb\x7f\n\n");
  EXPECT_EQ(line, "p: 1970-01-01T00:00:00.000Z a\\nfake: line\\r\\x1b[31m\tb\\x7f");
  std::string bad = FormatLogLine("p", 0, "bad \xFF byte");
  EXPECT_NE(bad.find("bad \xEF\xBF\xBD byte"), std::string::npos);
  std::string huge = FormatLogLine("p", 0, std::string(kMaxLogText * 2, 'x'));
  EXPECT_LE(huge.size(), kMaxLogText + 40);
}

TEST(LogLineTest, ProgramNameWithInstance) {
  std::string before = LogProgram();
  SetLogProgram("gatos-worker", "w1");
  EXPECT_EQ(LogProgram(), "gatos-worker[w1]");
  SetLogProgram("gatosd");
  EXPECT_EQ(LogProgram(), "gatosd");
  SetLogProgram(before);
}

}  // namespace
}  // namespace gatos
