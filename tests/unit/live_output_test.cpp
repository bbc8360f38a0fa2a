// The live output codec, the progress line protocol and terminal escaping
// (gatos/model/live_output.h).
#include "gatos/model/live_output.h"

#include <gtest/gtest.h>

namespace gatos {
namespace {

const std::string kJob(64, 'a');
const std::string kOwner(64, 'b');

TEST(LiveOutput, SubjectsNameOwnerJobAndKind) {
  EXPECT_EQ(LiveSubject(kOwner, kJob, LiveKind::kOutput),
            "gatos.live." + kOwner + "." + kJob + ".output");
  EXPECT_EQ(LiveSubject(kOwner, kJob, LiveKind::kProgress),
            "gatos.live." + kOwner + "." + kJob + ".progress");
  EXPECT_EQ(LiveSubject("", kJob, LiveKind::kOutput), "gatos.live.unsigned." + kJob + ".output");
  EXPECT_EQ(LiveJobSubjects(kOwner, kJob), "gatos.live." + kOwner + "." + kJob + ".*");
}

TEST(LiveOutput, ProgressLinesParse) {
  auto p = ParseProgressLine("objects=120/5000 bytes=1048576  commits=7\r");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->has_value());
  Progress want;
  want.counters = {{"objects", 120, 5000, 0}, {"bytes", 1048576, 0, 0}, {"commits", 7, 0, 0}};
  EXPECT_EQ(**p, want);
  EXPECT_EQ(FormatProgressLine(**p), "objects=120/5000 bytes=1048576 commits=7");
  auto blank = ParseProgressLine("   ");
  ASSERT_TRUE(blank.ok());
  EXPECT_FALSE(blank->has_value());
  auto comment = ParseProgressLine("# starting");
  ASSERT_TRUE(comment.ok());
  EXPECT_FALSE(comment->has_value());
}

TEST(LiveOutput, BadProgressLinesAreRefusedWithTheReason) {
  struct Case {
    std::string line, says;
  };
  for (const Case& c : std::vector<Case>{{"objects", "without '='"},
                                         {"Objects=1", "counter name"},
                                         {"x=-1", "DONE must be"},
                                         {"x=1/", "TOTAL must be"},
                                         {"x=5/4", "more than total"},
                                         {"x=1 x=2", "given twice"},
                                         {"x=99999999999999999", "DONE must be"},
                                         {"a=1 b=1 c=1 d=1 e=1 f=1 g=1 h=1 i=1", "more than 8"},
                                         {std::string(1025, 'a'), "longer than 1024"}}) {
    auto p = ParseProgressLine(c.line);
    ASSERT_FALSE(p.ok()) << c.line;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(c.says), std::string::npos)
        << c.line << ": " << p.status().message();
  }
}

TEST(LiveOutput, MessagesRoundTrip) {
  LiveMessage out;
  out.job_hex = kJob;
  out.attempt = 2;
  out.seq = 7;
  out.kind = LiveKind::kOutput;
  out.stream = "stderr";
  out.offset = 4096;
  out.data = std::string("line\n\x1b[2J\0binary", 17);
  out.at_ms = 1700000000000;
  auto back = ParseLiveMessage(EncodeLiveMessage(out));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, out);

  LiveMessage prog;
  prog.job_hex = kJob;
  prog.kind = LiveKind::kProgress;
  prog.progress.counters = {{"objects", 10, 20, 2.5}, {"bytes", 1000, 0, 0}};
  prog.at_ms = 5;
  auto pb = ParseLiveMessage(EncodeLiveMessage(prog));
  ASSERT_TRUE(pb.ok()) << pb.status().message();
  EXPECT_EQ(*pb, prog);
}

TEST(LiveOutput, HostileMessagesAreRefused) {
  const std::string good_head = R"({"v":1,"job":")" + kJob + R"(","attempt":1,"seq":0,"at_ms":0,)";
  for (
      const std::string& text : std::vector<std::string>{
          "", "[]", "not json", R"({"v":2})",
          good_head + R"("kind":"output","stream":"stdin","offset":0,"data":""})",
          good_head + R"("kind":"output","stream":"stdout","offset":-1,"data":""})",
          good_head + R"("kind":"output","stream":"stdout","offset":0,"data":"!!"})",
          good_head + R"("kind":"output","stream":"stdout","offset":0,"data":"","extra":1})",
          good_head + R"("kind":"progress","counters":[{"name":"x","done":5,"total":4}]})",
          good_head + R"("kind":"progress","counters":[]})",
          good_head + R"("kind":"progress","counters":[{"name":"x","done":1,"evil":1}]})",
          good_head + R"("kind":"shell"})",
          R"({"v":1,"job":"../../etc","attempt":1,"seq":0,"at_ms":0,"kind":"output","stream":"stdout","offset":0,"data":""})",
          good_head + R"("kind":"output","stream":"stdout","offset":0,"data":")" +
              std::string(30000, 'A') + "\"}",
          std::string(70000, ' ')}) {
    auto m = ParseLiveMessage(text);
    EXPECT_FALSE(m.ok()) << text.substr(0, 200);
    if (!m.ok()) EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(LiveOutput, TerminalEscapingKeepsTextAndDisarmsControls) {
  EXPECT_EQ(EscapeForTerminal("plain text\n\ttab"), "plain text\n\ttab");
  EXPECT_EQ(EscapeForTerminal("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(EscapeForTerminal("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
  EXPECT_EQ(EscapeForTerminal("a\rb"), "a\\x0db");
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b"
                              "31m"),
            "\\xc2\\x9b31m");  // C1 CSI as UTF-8
  EXPECT_EQ(EscapeForTerminal("\xe2\x80\xae"
                              "evil"),
            "\\xe2\\x80\\xaeevil");  // right-to-left override
  EXPECT_EQ(EscapeForTerminal("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(EscapeForTerminal("\x7f"), "\\x7f");
  EXPECT_EQ(EscapeForTerminal("\xc3"), "\\xc3");  // cut sequence
}

TEST(LiveOutput, ProgressIsDescribedForPeople) {
  Progress p;
  p.counters = {{"objects", 250, 1000, 50}, {"bytes", 3 << 20, 0, 1 << 20}};
  EXPECT_EQ(DescribeProgress(p), "objects 250/1000 (25%, 50/s)  bytes 3.0 MiB (1.0 MiB/s)");
}

}  // namespace
}  // namespace gatos
