// The slot protocol between the worker and gatos-supervise, driven by hand
// (gatos/exec/supervise_protocol.h): controls name their job, so a stale one
// (a Stop() that raced with the end of its job) is ignored, even when it
// arrives in the same read as the next job request, and never reaches the
// next job.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "gatos/exec/supervise_protocol.h"
#include "gatos/sys/process.h"
#include "launcher_test_util.h"
#include "test_util.h"

namespace gatos {
namespace {

using namespace ::gatos::exec_protocol;  // NOLINT
using ::gatos::testing::TempDir;

std::string Control(char type, uint32_t seq) {
  char f[kControlFrame];
  EncodeControl(type, seq, f);
  return std::string(f, sizeof(f));
}

std::string JobFrame(const JobRequest& job) { return EncodeFrame(kFrameJob, EncodeJob(job)); }

// gatos-supervise as the worker finds it: $GATOS_SUPERVISE, else next to
// the running binary.
std::string SupervisePath() {
  if (const char* env = std::getenv("GATOS_SUPERVISE")) return env;
  return (std::filesystem::canonical("/proc/self/exe").parent_path() / "gatos-supervise").string();
}

// One record, blocking: true, or false at EOF (the supervisor exited).
bool ReadRecord(int sock, Record* rec) {
  char buf[sizeof(Record)];
  size_t have = 0;
  while (have < sizeof(buf)) {
    ssize_t n = ::recv(sock, buf + have, sizeof(buf) - have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    have += static_cast<size_t>(n);
  }
  std::memcpy(rec, buf, sizeof(*rec));
  return true;
}

// Sends `bytes` in one sendmsg with the two descriptors attached.
bool SendWithFds(int sock, const std::string& bytes, int a, int b) {
  int fds[2] = {a, b};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(fds))] = {};
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof(cbuf);
  cmsghdr* cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(cm), fds, sizeof(fds));
  return sendmsg(sock, &mh, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

TEST(SuperviseProtocol, AJobRequestRoundTripsAndNothingElseDecodes) {
  JobRequest job;
  job.seq = 7;
  job.network = true;
  job.grace_ms = (int64_t{5} << 32) + 3;  // both halves
  job.exec_path = "/bin/sh";
  job.chdir = "/w";
  job.argv = {"/bin/sh", "-c", "echo hi"};
  job.env = {"A=1", "B="};
  job.binds = {{"/src", "/dst", true, false}, {"/w", "/w", false, true}};
  const std::string payload = EncodeJob(job);
  JobRequest back;
  ASSERT_TRUE(DecodeJob(payload, &back));
  EXPECT_EQ(back.seq, 7u);
  EXPECT_TRUE(back.network);
  EXPECT_EQ(back.grace_ms, job.grace_ms);
  EXPECT_EQ(back.exec_path, "/bin/sh");
  EXPECT_EQ(back.chdir, "/w");
  EXPECT_EQ(back.argv, job.argv);
  EXPECT_EQ(back.env, job.env);
  ASSERT_EQ(back.binds.size(), 2u);
  EXPECT_EQ(back.binds[0].source, "/src");
  EXPECT_EQ(back.binds[0].destination, "/dst");
  EXPECT_TRUE(back.binds[0].writable);
  EXPECT_FALSE(back.binds[0].is_dir);
  EXPECT_FALSE(back.binds[1].writable);
  EXPECT_TRUE(back.binds[1].is_dir);

  // Every truncation, and a byte too many, is refused.
  for (size_t n = 0; n < payload.size(); ++n) {
    JobRequest j;
    EXPECT_FALSE(DecodeJob(payload.substr(0, n), &j)) << n;
  }
  JobRequest j;
  EXPECT_FALSE(DecodeJob(payload + "x", &j));
  // What EncodeJob encodes but a supervisor must not run.
  auto refused = [](JobRequest r) {
    JobRequest out;
    return !DecodeJob(EncodeJob(r), &out);
  };
  JobRequest bad = job;
  bad.argv[1] = std::string("a\0b", 3);
  EXPECT_TRUE(refused(bad));
  bad = job;
  bad.argv.clear();
  EXPECT_TRUE(refused(bad));
  bad = job;
  bad.exec_path.clear();
  EXPECT_TRUE(refused(bad));
  bad = job;
  bad.binds[0].destination = "/";
  EXPECT_TRUE(refused(bad));
  bad = job;
  bad.binds[0].source = "relative";
  EXPECT_TRUE(refused(bad));
}

TEST(SuperviseProtocol, FramesCarryTheirTypeLengthAndJob) {
  const std::string frame = EncodeFrame(kFrameJob, "abc");
  ASSERT_EQ(frame.size(), kFrameHeader + 3);
  FrameHeader h = DecodeFrameHeader(frame.data());
  EXPECT_EQ(h.type, kFrameJob);
  EXPECT_EQ(h.length, 3u);
  EXPECT_EQ(frame.substr(kFrameHeader), "abc");
  char control[kControlFrame];
  EncodeControl(kFrameTerm, 0xfeedbeef, control);
  h = DecodeFrameHeader(control);
  EXPECT_EQ(h.type, kFrameTerm);
  EXPECT_EQ(h.length, 4u);
  EXPECT_EQ(DecodeControlSeq(control + kFrameHeader), 0xfeedbeefu);
  EXPECT_STREQ(StageName(kStageChdir), "changing to the job's cwd");
  EXPECT_STREQ(StageName(200), "setup");
}

class SlotProtocol : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    const std::string sup = SupervisePath();
    ASSERT_EQ(access(sup.c_str(), X_OK), 0) << sup;
    int sp[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    sock_.reset(sp[0]);
    int one = 1;
    setsockopt(sp[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
    SpawnOptions o;
    o.extra_fds = {sp[1]};  // the worker's socket, at fd 3
    auto p = Process::Spawn({sup, "--slot", std::to_string(kProtocolVersion), GetParam() ? "ns" : "plain"}, o);
    close(sp[1]);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    slot_ = std::move(*p);
    Record r;
    ASSERT_TRUE(ReadRecord(sock(), &r));
    ASSERT_EQ(r.kind, kRecReady);
    ASSERT_EQ(r.value, kProtocolVersion);
  }

  // As the worker closes a slot: its socket, then the supervisor exits.
  void TearDown() override {
    sock_.reset();
    if (slot_.pid() > 0) {
      EXPECT_TRUE(slot_.Wait().exited());
    }
  }

  int sock() const { return sock_.get(); }

  JobRequest Job(uint32_t seq, const std::string& script) {
    JobRequest j;
    j.seq = seq;
    j.grace_ms = 100;
    j.exec_path = "/bin/sh";
    j.argv = {"/bin/sh", "-c", script};
    j.chdir = dir_.path();
    j.binds = {{dir_.path(), dir_.path(), true, true}};
    return j;
  }

  // Reads records of job `seq` until 'C'; returns "S<stage>X<status>C".
  std::string Records(uint32_t seq) {
    std::string out;
    for (;;) {
      Record r;
      if (!ReadRecord(sock(), &r)) return out + "EOF";
      if (r.seq != seq) return out + "seq" + std::to_string(r.seq);
      out += r.kind;
      if (r.kind == kRecStarted) out += std::to_string(r.stage);
      if (r.kind == kRecExited) out += std::to_string(r.value);
      if (r.kind == kRecClean) return out;
    }
  }

  size_t SendBytes(const std::string& bytes) {
    ssize_t n = send(sock(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    return n < 0 ? 0 : static_cast<size_t>(n);
  }

  static std::string ReadAll(int fd) {
    std::string s;
    char buf[256];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(n));
    return s;
  }

  TempDir dir_;
  UniqueFd sock_;
  Process slot_;
};
INSTANTIATE_TEST_SUITE_P(Both, SlotProtocol, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Namespaces" : "Unsandboxed"; });

TEST_P(SlotProtocol, StaleControlsInTheSameReadAsAJobAreIgnored) {
  for (uint32_t seq : {1u, 2u}) {
    int out[2], err[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
    // A TERM and a KILL for the previous job, then this job, in one send.
    std::string bytes = Control(kFrameTerm, seq - 1) + Control(kFrameKill, seq - 1) +
                        JobFrame(Job(seq, "echo job" + std::to_string(seq)));
    ASSERT_TRUE(SendWithFds(sock(), bytes, out[1], err[1]));
    close(out[1]);
    close(err[1]);
    EXPECT_EQ(Records(seq), "S0X0C");
    EXPECT_EQ(ReadAll(out[0]), "job" + std::to_string(seq) + "\n");
    close(out[0]);
    close(err[0]);
  }
}

TEST_P(SlotProtocol, ControlsForAnotherJobDoNotReachTheRunningOne) {
  // {wrong control, right control, the signal the job must die of}: had the
  // wrong one been applied, the job would die of the other signal.
  struct Case {
    char wrong_type;
    uint32_t wrong_seq;
    char right_type;
    int expect_signal;
  };
  uint32_t seq = 10;
  for (const Case& k : {Case{kFrameKill, 9, kFrameTerm, SIGTERM}, Case{kFrameTerm, 13, kFrameKill, SIGKILL}}) {
    ++seq;
    int out[2], err[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
    ASSERT_TRUE(SendWithFds(sock(), JobFrame(Job(seq, "echo up; exec sleep 100")), out[1], err[1]));
    close(out[1]);
    close(err[1]);
    Record r;
    ASSERT_TRUE(ReadRecord(sock(), &r));
    ASSERT_EQ(r.kind, kRecStarted);
    char c;
    ASSERT_EQ(read(out[0], &c, 1), 1);  // "up": the job runs
    ASSERT_EQ(SendBytes(Control(k.wrong_type, k.wrong_seq)), kControlFrame);
    ASSERT_EQ(SendBytes(Control(k.right_type, seq)), kControlFrame);
    EXPECT_EQ(Records(seq), "X" + std::to_string(k.expect_signal) + "C");
    close(out[0]);
    close(err[0]);
  }
}

TEST_P(SlotProtocol, AMalformedRequestEndsTheSlot) {
  int out[2], err[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
  const std::string bad = EncodeFrame(kFrameJob, "xyz");
  ASSERT_TRUE(SendWithFds(sock(), bad, out[1], err[1]));
  close(out[1]);
  close(err[1]);
  Record r;
  EXPECT_FALSE(ReadRecord(sock(), &r));  // the supervisor exits; never runs anything
  close(out[0]);
  close(err[0]);
}

}  // namespace
}  // namespace gatos
