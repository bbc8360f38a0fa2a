#include "hooks.h"

#include <cstdlib>
#include <cstring>
#include <istream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "gatos/job_index.h"
#include "gatos/job_plane.h"
#include "gatos/ledger.h"
#include "ledger_setup.h"

namespace gatos::gatosd {
namespace {

struct Update {
  std::string old_id, new_id, ref;
};

std::vector<Update> ReadUpdates(std::istream& in) {
  std::vector<Update> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    Update u;
    if (ls >> u.old_id >> u.new_id >> u.ref) out.push_back(u);
  }
  return out;
}

bool IsZero(const std::string& id) { return id.find_first_not_of('0') == std::string::npos; }

// refs/gatos/jobs/<hex>/<leaf> -> hex and leaf; false for other shapes.
bool SplitJobRef(const std::string& ref, std::string* hex, std::string* leaf) {
  const std::string prefix = kJobsPrefix;
  if (ref.compare(0, prefix.size(), prefix) != 0) return false;
  std::string rest = ref.substr(prefix.size());
  size_t slash = rest.find('/');
  if (slash == std::string::npos) return false;
  *hex = rest.substr(0, slash);
  *leaf = rest.substr(slash + 1);
  return true;
}

bool IsResultRef(const std::string& ref) {
  return ref.size() > 7 && ref.compare(ref.size() - 7, 7, "/result") == 0 &&
         ref.compare(0, std::strlen(kJobsPrefix), kJobsPrefix) == 0;
}

struct HookContext {
  std::unique_ptr<Ledger> ledger;
  std::unique_ptr<JobPlane> plane;
};

std::string LedgerDir(const HookContext& ctx) {
  std::string dir = ctx.ledger->path();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

Result<HookContext> OpenContext() {
  HookContext ctx;
  GATOS_ASSIGN_OR_RETURN(ctx.ledger, Ledger::OpenFromEnv());
  std::string dir = ctx.ledger->path();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  GATOS_ASSIGN_OR_RETURN(Ed25519PrivateKey key, LoadLedgerKey(dir));
  ctx.plane = std::make_unique<JobPlane>(ctx.ledger.get(), std::move(key), SystemNowMs);
  GATOS_RETURN_IF_ERROR(ctx.plane->LoadPolicy());
  return ctx;
}

// Why a push to `ref` is refused, or "" when it may go on to content checks.
std::string RefRule(const Update& u, std::string* job_hex) {
  std::string leaf;
  if (u.ref.compare(0, std::strlen(kSubmitPrefix), kSubmitPrefix) == 0) {
    if (u.ref.size() == std::strlen(kSubmitPrefix)) return "a submit ref needs a name";
    return "";
  }
  if (SplitJobRef(u.ref, job_hex, &leaf)) {
    if (!IsJobIdHex(*job_hex)) {
      return "\"" + *job_hex + "\" is not a job id (64 lowercase hex, as 'gatos job id' prints it without blake3:)";
    }
    if (leaf == "job") {
      if (IsZero(u.new_id)) return "jobs cannot be deleted";
      if (!IsZero(u.old_id)) return "job " + *job_hex + " already exists; a job commit is never replaced";
      return "";
    }
    if (leaf == "lease" || leaf.rfind("claims/", 0) == 0) {
      return "refs/gatos/jobs/<id>/" + leaf + " is written by the ledger only; workers claim through the ledger RPC";
    }
    if (leaf == "result") {
      if (IsZero(u.new_id)) return "results cannot be deleted";
      if (!IsZero(u.old_id)) return "job " + *job_hex + " already has a result; a result is never replaced";
      return "";
    }
    if (leaf == "cancel") return "cancel a job with 'gatos cancel JOB-ID'";
    return "unknown job ref '" + leaf + "' (job refs are job, lease, claims/<worker>, result, cancel)";
  }
  if (u.ref == kPolicyRef) return "the policy changes only through 'gatos policy' on the ledger host";
  return "this is a GATOS ledger: push job commits to refs/gatos/submit/<name> (e.g. git push LEDGER HEAD:refs/gatos/submit/my-job)";
}

}  // namespace

// A metric label for a refused job commit (gatos_rejected_total{reason}).
std::string RejectReasonLabel(const Status& s) {
  const std::string& m = s.message();
  if (s.code() == StatusCode::kPermissionDenied) {
    if (m.find("not signed") != std::string::npos) return "unsigned";
    if (m.find("not an allowed submitter") != std::string::npos) return "untrusted_signer";
    return "bad_signature";
  }
  if (m.find("but the ref names job") != std::string::npos) return "wrong_job_id";
  if (m.find("Job-Id") != std::string::npos) return "missing_trailer";
  if (m.find("policy_root") != std::string::npos) return "policy_root";
  return "bad_manifest";
}

int RunPreReceive(std::istream& in, std::ostream& err) {
  std::vector<Update> updates = ReadUpdates(in);
  auto ctx = OpenContext();
  if (!ctx.ok()) {
    err << "gatos: ledger unavailable: " << ctx.status().message() << "\n";
    return 1;
  }
  int rejected = 0;
  for (const auto& u : updates) {
    std::string job_hex;
    std::string why = RefRule(u, &job_hex);
    if (why.empty() && IsZero(u.new_id)) continue;  // deleting a submit ref
    std::string reason = why.empty() ? "" : "forbidden_ref";
    if (why.empty() && IsResultRef(u.ref)) {
      Outcome o = ctx->plane->CheckResultPush(*ctx->ledger, job_hex, u.new_id);
      if (!o.ok()) {
        why = o.message;
        reason = "bad_result";
      }
    } else if (why.empty()) {
      auto check = ctx->plane->CheckJobCommit(*ctx->ledger, u.new_id, job_hex);
      if (!check.ok()) {
        why = check.status().message();
        reason = RejectReasonLabel(check.status());
      }
    }
    if (!why.empty()) {
      // Counted by gatosd's /metrics (gatos_rejected_total); best effort.
      (void)AppendInbox(LedgerDir(*ctx), "reject " + reason);
      ++rejected;
      std::istringstream lines(why);
      std::string line;
      while (std::getline(lines, line)) err << "gatos: " << u.ref << ": " << line << "\n";
    }
  }
  if (rejected) {
    err << "gatos: push rejected (" << rejected << " of " << updates.size()
        << " refs); the ledger is unchanged\n";
    return 1;
  }
  return 0;
}

int RunPostReceive(std::istream& in, std::ostream& err) {
  std::vector<Update> updates = ReadUpdates(in);
  auto ctx = OpenContext();
  if (!ctx.ok()) {
    err << "gatos: ledger unavailable: " << ctx.status().message() << "\n";
    return 1;
  }
  int rc = 0;
  for (const auto& u : updates) {
    if (IsZero(u.new_id)) continue;
    std::string job_hex;
    bool existing = false;
    if (u.ref.compare(0, std::strlen(kSubmitPrefix), kSubmitPrefix) == 0) {
      Outcome o = ctx->plane->AdoptJob(u.new_id, &job_hex, &existing);
      if (!o.ok()) {
        err << "gatos: " << u.ref << ": " << o.message << "\n";
        rc = 1;
        continue;
      }
      // The submit ref has done its work; the canonical ref is the record.
      Status s = ctx->ledger->UpdateRefs({{u.ref, u.new_id, ""}}, "gatos: submit adopted");
      if (!s.ok()) err << "gatos: note: " << u.ref << " left in place: " << s.message() << "\n";
    } else {
      std::string leaf;
      if (!SplitJobRef(u.ref, &job_hex, &leaf)) continue;
      if (leaf == "result") {
        (void)AppendInbox(LedgerDir(*ctx), "job " + job_hex);
        err << "gatos: result of job blake3:" << job_hex << " recorded\n";
        continue;
      }
      if (leaf != "job") continue;
    }
    // Tell gatosd (if running) to publish the job now; if this line is lost,
    // its next start republishes every pending job from the refs.
    if (!existing) {
      Status noted = AppendInbox(LedgerDir(*ctx), "job " + job_hex);
      if (!noted.ok()) err << "gatos: note: " << noted.message() << "\n";
    }
    if (existing) {
      err << "gatos: job blake3:" << job_hex << " already exists; nothing to do (no-op)\n";
    } else {
      err << "gatos: accepted job blake3:" << job_hex << "\n";
    }
  }
  return rc;
}

}  // namespace gatos::gatosd
