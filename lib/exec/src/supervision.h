// The supervision of one job, as gatos-supervise (per job or in a slot) and
// the forked fallback do it: start the job child, report 'S', 'X' and 'C'
// (gatos/exec/supervise_protocol.h), follow the worker's 'T' and 'K' frames
// with TERM, grace and KILL to every process of the job, kill what the job
// left behind once its main process is gone, and return only when none is
// left. Also the supervisor's own process setup and its end of the socket.
// docs/worker-execution.md, "Process model".
//
// Async-signal-safe, all of it: it runs in a forked copy of a multithreaded
// worker (ForkedSupervisorMain), so it only makes system calls (no
// allocation, no lock, no stdio). A supervisor is single-threaded; a SupCtx
// belongs to it.
#ifndef GATOS_EXEC_SRC_SUPERVISION_H_
#define GATOS_EXEC_SRC_SUPERVISION_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "gatos/exec/supervise_protocol.h"
#include "job_child.h"

namespace gatos::exec_internal {

// A supervisor's state across jobs.
struct SupCtx {
  int sock = -1;
  bool sock_open = true;
  bool is_init = false;  // pid 1 of the job's PID namespace
  bool creds = false;    // report the job's pid through SCM_CREDENTIALS
  int sfd = -1;          // signalfd for SIGCHLD (may be -1)
  int devnull = -1;
  int netns_fd = -1;
  pid_t* tracked = nullptr;  // kMaxTracked entries (proc_scan.h)
  // Bytes read from the worker but not consumed yet, and received descriptors.
  char in[512];
  size_t in_len = 0;
  int fds[8];
  int nfds = 0;
};

// Moves the kept descriptors above 2 (close-on-exec; keep[] gets their new
// numbers), closes every other one, points 0-2 at /dev/null (c->devnull),
// ignores interactive signals, blocks SIGCHLD into a signalfd (c->sfd) and
// changes to /. False if a step failed.
bool PrepareProcess(int* keep, int nkeep, SupCtx* c);

// Sends `rec` to the worker (nothing once the socket is closed); with
// `cred_pid`, as SCM_CREDENTIALS too (a namespace slot's job pid).
void SendRecord(SupCtx& c, exec_protocol::Record rec, pid_t cred_pid = 0);

// Reads what the worker sent into c.in (descriptors into c.fds); false on
// EOF or error (the worker is gone), or when c.in is full without a frame.
bool FillInput(SupCtx& c);
// Drops the first `n` bytes of c.in.
void ConsumeInput(SupCtx& c, size_t n);

// Starts the job (JobChildMain on the clone), reports 'S', 'X' and 'C', and
// returns once no process of the job is left. Closes s.out_w and s.err_w.
void RunJob(SupCtx& c, JobChildSpec s, uint32_t seq, int64_t grace_ms);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_SUPERVISION_H_
