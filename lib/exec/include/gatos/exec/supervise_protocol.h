// The wire protocol between gatos-worker and gatos-supervise (gatos/exec/exec.h,
// docs/worker-execution.md "Process model"): the frames the worker sends, the
// records the supervisor answers with, and the codec of a job request.
// Workers do not speak it themselves (JobLauncher and Execution do); it is
// public so that tests can drive a supervisor by hand.
//
// One SOCK_STREAM socketpair per supervisor, at descriptor 3 in it:
//
//   worker -> supervisor: frames [u8 type][u32 length][payload]
//     'J' run a job (slots only); payload = EncodeJob(); two to six
//         descriptors attached (SCM_RIGHTS: the job's stdout and stderr
//         pipes, then the cgroup.procs files of its cgroup, one per
//         hierarchy, which the job child writes "0" to before anything else)
//     'T' u32 seq: SIGTERM to every process of job `seq`, SIGKILL after grace
//     'K' u32 seq: SIGKILL to every process of job `seq` now
//   supervisor -> worker: fixed 16-byte Records
//     'Y' slot ready (value = protocol version)
//     'F' slot could not be set up (stage, value2 = errno); it exits
//     'S' job started: value = its pid; stage != 0: it failed at `stage`
//         (index, value2 = errno) and exited 127. In a namespace slot the
//         record carries SCM_CREDENTIALS with the job's pid, which the
//         kernel translates into the worker's PID namespace.
//     'X' the job's main process ended (value = raw wait status)
//     'C' no process of the job is left; the slot is idle again (value =
//         the CPU time of the job's processes in ms, from the supervisor's
//         RUSAGE_CHILDREN)
//
// Control frames name the job, so a late 'T' for a finished job never
// reaches the next one. Integers are in host byte order: both ends run on
// the same machine, and a supervisor of another version refuses to start
// (kProtocolVersion is on its command line).
//
// Thread-safety: plain functions and value types. The frame-header and
// control decoders make no allocation and are async-signal-safe (the
// supervisor may be a forked copy of a multithreaded worker); EncodeJob,
// DecodeJob and the encoders allocate.
#ifndef GATOS_EXEC_SUPERVISE_PROTOCOL_H_
#define GATOS_EXEC_SUPERVISE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gatos::exec_protocol {

constexpr int kProtocolVersion = 3;

constexpr char kFrameJob = 'J';
constexpr char kFrameTerm = 'T';
constexpr char kFrameKill = 'K';
constexpr size_t kFrameHeader = 5;                  // type + u32 length
constexpr size_t kControlFrame = kFrameHeader + 4;  // a 'T' or 'K' frame, whole
constexpr uint32_t kMaxJobFrame = 64u << 20;        // a longer 'J' is a protocol error

constexpr char kRecReady = 'Y';
constexpr char kRecSlotFailed = 'F';
constexpr char kRecStarted = 'S';
constexpr char kRecExited = 'X';
constexpr char kRecClean = 'C';

// Record::index bit set on 'S' when SCM_CREDENTIALS carries the job's pid.
constexpr uint16_t kPidInCredentials = 0x8000;
// Record::index of a kStageMount failure: kJobBindIndex | i for the job's
// i-th bind (JobRequest::binds), else the i-th operation of the sandbox layout.
constexpr uint16_t kJobBindIndex = 0x4000;

struct Record {
  char kind = 0;
  uint8_t stage = 0;
  uint16_t index = 0;
  uint32_t seq = 0;
  int32_t value = 0;
  int32_t value2 = 0;
};
static_assert(sizeof(Record) == 16);

// Where a job or a slot failed to start (Record::stage).
enum Stage : uint8_t {
  kStageNone = 0,
  kStageFork,        // clone of the job
  kStageStdio,       // dup2 of stdin/stdout/stderr
  kStageChdir,       // chdir to the job's cwd
  kStageExec,        // execve
  kStageNetns,       // entering the slot's empty network namespace
  kStageUnshare,     // mount/ipc/uts/cgroup namespaces of the job
  kStageRoot,        // building and entering the job's root
  kStageMount,       // one mount operation (index = which)
  kStageUserns,      // the job's user namespace and its id maps
  kStageKeyring,     // a fresh session keyring
  kStagePrivileges,  // dropping capabilities
  kStageSlotUserns,  // slot: creating the user + PID namespaces
  kStageSlotIdMap,   // slot: writing uid_map/gid_map
  kStageSlotNet,     // slot: the empty network namespace and its loopback
  kStageProtocol,    // slot: malformed request
  kStageSlotRoot,    // slot: building the template of its jobs' root (index = which step)
  kStageSeccomp,     // installing the job's system-call filter
  kStageCgroup,      // joining the job's cgroup (index = which hierarchy)
  kStageRlimit,      // setting the job's resource limits (index = which)
};
// At most this many cgroup.procs descriptors come with a job.
constexpr int kMaxCgroupFds = 4;
// What the supervisor was doing at `stage`, for error messages
// ("changing to the job's cwd"); "setup" for an unknown stage.
const char* StageName(uint8_t stage);

// One bind of a job, normalized (absolute, lexically clean paths).
struct BindPlan {
  std::string source;       // host path
  std::string destination;  // sandbox path
  bool writable = false;
  bool is_dir = true;
};

// A job as sent to a slot.
struct JobRequest {
  uint32_t seq = 0;
  bool network = false;
  int64_t grace_ms = 0;
  std::string exec_path;
  std::string chdir;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value"
  std::vector<BindPlan> binds;   // workspace, output dir, then the spec's binds
  // Resource limits the job child sets itself (0 = unchanged): RLIMIT_FSIZE,
  // RLIMIT_NPROC (namespace sandbox only, inside the job's user namespace),
  // and the size of its /tmp and /dev/shm (namespace sandbox).
  int64_t fsize_bytes = 0;
  int64_t nproc = 0;
  int64_t tmpfs_bytes = 0;
};
// The payload of a 'J' frame.
std::string EncodeJob(const JobRequest& job);
// False for anything EncodeJob would not make: a short or long payload, a
// string with NUL, no argv or exec path, a bind that is not absolute or whose
// destination is "/".
bool DecodeJob(const std::string& payload, JobRequest* job);

// A whole frame: header, then `payload`.
std::string EncodeFrame(char type, std::string_view payload);
// A whole 'T' or 'K' frame for job `seq` (kControlFrame bytes) into `out`.
void EncodeControl(char type, uint32_t seq, char out[kControlFrame]);

struct FrameHeader {
  char type = 0;
  uint32_t length = 0;  // of the payload that follows
};
// The header at `p` (kFrameHeader bytes).
FrameHeader DecodeFrameHeader(const char* p);
// The job a control frame names, from its 4-byte payload at `p`.
uint32_t DecodeControlSeq(const char* p);

}  // namespace gatos::exec_protocol

#endif  // GATOS_EXEC_SUPERVISE_PROTOCOL_H_
