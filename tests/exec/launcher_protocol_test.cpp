// The slot protocol between the worker and gatos-supervise, driven by hand:
// controls name their job, so a stale one (a Stop() that raced with the
// end of its job) is ignored, even when it arrives in the same read as the
// next job request, and never reaches the next job.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "../../lib/exec/src/exec_internal.h"
#include "launcher_test_util.h"
#include "test_util.h"

namespace gatos {
namespace {

using namespace ::gatos::exec_internal;  // NOLINT
using ::gatos::testing::TempDir;

std::string Control(char type, uint32_t seq) {
  std::string f(kFrameHeader + 4, '\0');
  f[0] = type;
  uint32_t len = 4;
  std::memcpy(f.data() + 1, &len, 4);
  std::memcpy(f.data() + kFrameHeader, &seq, 4);
  return f;
}

std::string JobFrame(const JobRequest& job) {
  std::string payload = EncodeJob(job);
  std::string f(kFrameHeader, '\0');
  f[0] = kFrameJob;
  uint32_t len = static_cast<uint32_t>(payload.size());
  std::memcpy(f.data() + 1, &len, 4);
  return f + payload;
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

class SlotProtocol : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(DefaultSuperviseBinary().empty());
    int sp[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    int one = 1;
    setsockopt(sp[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
    const std::string& sup = DefaultSuperviseBinary();
    auto pid = StartSupervisor({sup, "--slot", std::to_string(kProtocolVersion), GetParam() ? "ns" : "plain"},
                               {sp[1]});
    close(sp[1]);
    ASSERT_TRUE(pid.ok()) << pid.status().ToString();
    conn_ = std::make_unique<SupervisorConn>(Fd(sp[0]), *pid, GetParam());
    Record r;
    ASSERT_EQ(conn_->Read(&r, nullptr, -1), 1);
    ASSERT_EQ(r.kind, kRecReady);
  }

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
      if (conn_->Read(&r, nullptr, -1) != 1) return out + "EOF";
      if (r.seq != seq) return out + "seq" + std::to_string(r.seq);
      out += r.kind;
      if (r.kind == kRecStarted) out += std::to_string(r.stage);
      if (r.kind == kRecExited) out += std::to_string(r.value);
      if (r.kind == kRecClean) return out;
    }
  }

  static std::string ReadAll(int fd) {
    std::string s;
    char buf[256];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(n));
    return s;
  }

  TempDir dir_;
  std::unique_ptr<SupervisorConn> conn_;
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
    ASSERT_TRUE(SendWithFds(conn_->fd(), bytes, out[1], err[1]));
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
    ASSERT_TRUE(conn_->SendJob(EncodeJob(Job(seq, "echo up; exec sleep 100")), out[1], err[1]));
    close(out[1]);
    close(err[1]);
    Record r;
    ASSERT_EQ(conn_->Read(&r, nullptr, -1), 1);
    ASSERT_EQ(r.kind, kRecStarted);
    char c;
    ASSERT_EQ(read(out[0], &c, 1), 1);  // "up": the job runs
    ASSERT_TRUE(conn_->SendControl(k.wrong_type, k.wrong_seq));
    ASSERT_TRUE(conn_->SendControl(k.right_type, seq));
    EXPECT_EQ(Records(seq), "X" + std::to_string(k.expect_signal) + "C");
    close(out[0]);
    close(err[0]);
  }
}

TEST_P(SlotProtocol, AMalformedRequestEndsTheSlot) {
  int out[2], err[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
  std::string bad(kFrameHeader, '\0');
  bad[0] = kFrameJob;
  uint32_t len = 3;
  std::memcpy(bad.data() + 1, &len, 4);
  bad += "xyz";
  ASSERT_TRUE(SendWithFds(conn_->fd(), bad, out[1], err[1]));
  close(out[1]);
  close(err[1]);
  Record r;
  EXPECT_EQ(conn_->Read(&r, nullptr, -1), -1);  // the supervisor exits; never runs anything
  close(out[0]);
  close(err[0]);
}

}  // namespace
}  // namespace gatos
