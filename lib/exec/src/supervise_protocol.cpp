// The codec of the worker <-> gatos-supervise protocol
// (gatos/exec/supervise_protocol.h): job requests, frames and stage names.
// Used by both ends: the worker encodes, the supervisor decodes.
#include "gatos/exec/supervise_protocol.h"

#include <cstring>

namespace gatos::exec_protocol {
namespace {

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void PutI64(std::string* out, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  PutU32(out, static_cast<uint32_t>(u));
  PutU32(out, static_cast<uint32_t>(u >> 32));
}
void PutStr(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  bool U32(uint32_t* v) {
    if (s_.size() - pos_ < 4) return false;
    std::memcpy(v, s_.data() + pos_, 4);
    pos_ += 4;
    return true;
  }
  bool I64(int64_t* v) {
    uint32_t lo, hi;
    if (!U32(&lo) || !U32(&hi)) return false;
    *v = static_cast<int64_t>((static_cast<uint64_t>(hi) << 32) | lo);
    return true;
  }
  bool Str(std::string* v) {
    uint32_t n;
    if (!U32(&n) || s_.size() - pos_ < n) return false;
    v->assign(s_, pos_, n);
    pos_ += n;
    return v->find('\0') == std::string::npos;
  }
  bool Strs(std::vector<std::string>* v) {
    uint32_t n;
    if (!U32(&n) || n > s_.size()) return false;
    v->resize(n);
    for (auto& e : *v) {
      if (!Str(&e)) return false;
    }
    return true;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

const char* StageName(uint8_t stage) {
  switch (stage) {
    case kStageFork: return "starting the job process";
    case kStageStdio: return "connecting stdin/stdout/stderr";
    case kStageChdir: return "changing to the job's cwd";
    case kStageExec: return "exec";
    case kStageNetns: return "entering the slot's empty network namespace";
    case kStageUnshare: return "creating the job's mount/IPC/UTS/cgroup namespaces";
    case kStageRoot: return "building the job's root file system";
    case kStageMount: return "mounting";
    case kStageUserns: return "creating the job's user namespace";
    case kStageKeyring: return "creating a fresh session keyring";
    case kStagePrivileges: return "dropping capabilities";
    case kStageSlotUserns: return "creating the slot's user and PID namespaces";
    case kStageSlotIdMap: return "writing the slot's uid_map/gid_map";
    case kStageSlotNet: return "creating the slot's network namespace";
    case kStageProtocol: return "reading the worker's request";
    case kStageSlotRoot: return "building the slot's template of the jobs' root file system";
    case kStageSeccomp: return "installing the job's system-call filter";
    case kStageCgroup:
      return "joining the job's cgroup";
    case kStageRlimit:
      return "setting the job's resource limits";
    default: return "setup";
  }
}

std::string EncodeJob(const JobRequest& job) {
  std::string out;
  PutU32(&out, job.seq);
  PutU32(&out, job.network ? 1 : 0);
  PutU32(&out, static_cast<uint32_t>(job.grace_ms));
  PutU32(&out, static_cast<uint32_t>(static_cast<uint64_t>(job.grace_ms) >> 32));
  PutStr(&out, job.exec_path);
  PutStr(&out, job.chdir);
  PutU32(&out, static_cast<uint32_t>(job.argv.size()));
  for (const auto& a : job.argv) PutStr(&out, a);
  PutU32(&out, static_cast<uint32_t>(job.env.size()));
  for (const auto& e : job.env) PutStr(&out, e);
  PutU32(&out, static_cast<uint32_t>(job.binds.size()));
  for (const auto& b : job.binds) {
    PutStr(&out, b.source);
    PutStr(&out, b.destination);
    PutU32(&out, (b.writable ? 1u : 0u) | (b.is_dir ? 2u : 0u));
  }
  for (int64_t v : {job.fsize_bytes, job.nproc, job.tmpfs_bytes}) PutI64(&out, v);
  return out;
}

bool DecodeJob(const std::string& payload, JobRequest* job) {
  Reader r(payload);
  uint32_t net, lo, hi, nb;
  if (!r.U32(&job->seq) || !r.U32(&net) || !r.U32(&lo) || !r.U32(&hi)) return false;
  job->network = net != 0;
  job->grace_ms = static_cast<int64_t>((static_cast<uint64_t>(hi) << 32) | lo);
  if (!r.Str(&job->exec_path) || !r.Str(&job->chdir) || !r.Strs(&job->argv) ||
      !r.Strs(&job->env) || !r.U32(&nb) || nb > payload.size()) {
    return false;
  }
  job->binds.resize(nb);
  for (auto& b : job->binds) {
    uint32_t f;
    if (!r.Str(&b.source) || !r.Str(&b.destination) || !r.U32(&f)) return false;
    b.writable = f & 1;
    b.is_dir = f & 2;
    if (b.source.empty() || b.source[0] != '/' || b.destination.size() < 2 ||
        b.destination[0] != '/') {
      return false;
    }
  }
  if (!r.I64(&job->fsize_bytes) || !r.I64(&job->nproc) || !r.I64(&job->tmpfs_bytes) ||
      job->fsize_bytes < 0 || job->nproc < 0 || job->tmpfs_bytes < 0) {
    return false;
  }
  return r.done() && !job->argv.empty() && !job->exec_path.empty();
}

std::string EncodeFrame(char type, std::string_view payload) {
  std::string frame(kFrameHeader, '\0');
  frame[0] = type;
  const uint32_t len = static_cast<uint32_t>(payload.size());
  std::memcpy(frame.data() + 1, &len, 4);
  frame.append(payload);
  return frame;
}

void EncodeControl(char type, uint32_t seq, char out[kControlFrame]) {
  out[0] = type;
  const uint32_t len = 4;
  std::memcpy(out + 1, &len, 4);
  std::memcpy(out + kFrameHeader, &seq, 4);
}

FrameHeader DecodeFrameHeader(const char* p) {
  FrameHeader h;
  h.type = p[0];
  std::memcpy(&h.length, p + 1, 4);
  return h;
}

uint32_t DecodeControlSeq(const char* p) {
  uint32_t seq;
  std::memcpy(&seq, p, 4);
  return seq;
}

}  // namespace gatos::exec_protocol
