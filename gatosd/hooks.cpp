#include "hooks.h"

#include <cstdio>
#include <cstring>
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "gatos/git/ledger.h"
#include "gatos/ledger/checks.h"
#include "gatos/git/result.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/ledger/witness.h"
#include "gatos/model/encoding.h"
#include "gatos/model/manifest.h"
#include "gatos/model/refs.h"
#include "gatos/model/rpc.h"
#include "gatos/model/scheduling.h"
#include "gatos/sys/parallel.h"

namespace gatos::gatosd {
namespace {

struct Update {
  std::string old_id, new_id, ref;
};

bool IsZero(const std::string& id) { return id.find_first_not_of('0') == std::string::npos; }

bool StartsWith(const std::string& s, const char* p) { return s.compare(0, std::strlen(p), p) == 0; }

std::string LedgerDir(Ledger& ledger) {
  std::string dir = ledger.path();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// Why a push to `ref` is refused before its content is looked at, or "".
// The ledger's own refs are hidden from receive-pack (receive.hideRefs), so
// git refuses pushes to them before any hook runs; this covers the rest.
std::string RefRule(const Update& u, std::string* job_hex) {
  if (StartsWith(u.ref, kSubmitPrefix)) {
    if (u.ref.size() == std::strlen(kSubmitPrefix)) return "a submit ref needs a name (refs/gatos/submit/<name>)";
    if (IsZero(u.new_id)) return "there is nothing to delete: pushes to refs/gatos/submit/ create no ref";
    return "";
  }
  if (StartsWith(u.ref, kResultsPushPrefix)) {
    *job_hex = u.ref.substr(std::strlen(kResultsPushPrefix));
    if (!IsLowerHex(*job_hex, 64)) {
      return "push a result to refs/gatos/results/<job id, 64 hex>";
    }
    if (IsZero(u.new_id)) return "results cannot be deleted";
    return "";
  }
  if (StartsWith(u.ref, kWitnessPushPrefix)) {
    *job_hex = u.ref.substr(std::strlen(kWitnessPushPrefix));  // the witness key
    if (!IsLowerHex(*job_hex, 64)) return "push a witness to refs/gatos/witnesses/<your key, 64 hex>";
    if (IsZero(u.new_id)) return "witnesses cannot be deleted";
    return "";
  }
  if (StartsWith(u.ref, kSchedulePushPrefix)) {
    *job_hex = u.ref.substr(std::strlen(kSchedulePushPrefix));  // the schedule's name
    if (std::string p = PoolNameProblem(*job_hex); !p.empty()) {
      return "push a schedule to refs/gatos/submit-schedule/<its name>: the name " + p;
    }
    if (IsZero(u.new_id)) {
      return "a schedule is not deleted by a push: push a commit with Schedule-State: removed";
    }
    return "";
  }
  if (StartsWith(u.ref, "refs/gatos/")) {
    return "refs under refs/gatos/ are written by the ledger only; push jobs to refs/gatos/submit/<name>, "
           "results to refs/gatos/results/<job>, witnesses to refs/gatos/witnesses/<key> and schedules to "
           "refs/gatos/submit-schedule/<name>";
  }
  return "this is a GATOS ledger: push job commits to refs/gatos/submit/<name> "
         "(e.g. git push LEDGER HEAD:refs/gatos/submit/my-job)";
}

void PrintLines(std::ostream& err, const std::string& ref, const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) err << "gatos: " << ref << ": " << TruncateUtf8(line, 2000) << "\n";
}

// The kLocalSchedule request for schedule commit `commit`: its header and
// the commit, its tree and the tree's blobs (schedule.yaml).
Result<std::string> ScheduleFrame(Ledger& ledger, const std::string& commit) {
  ObjectLookup lookup = LedgerLookup(&ledger);
  std::vector<GitObject> objects;
  GATOS_ASSIGN_OR_RETURN(auto c, lookup(commit));
  if (c.first != ObjectType::kCommit) return InvalidArgumentError("a schedule is a commit");
  GATOS_ASSIGN_OR_RETURN(RawCommit raw, ParseRawCommit(c.second, commit));
  objects.push_back({c.first, c.second, commit});
  GATOS_ASSIGN_OR_RETURN(auto tree, lookup(raw.tree));
  if (tree.first != ObjectType::kTree) return InvalidArgumentError("the schedule's tree is not a tree");
  GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(tree.second, raw.tree));
  if (entries.size() > 4) return InvalidArgumentError("a schedule commit's tree holds schedule.yaml only");
  objects.push_back({tree.first, tree.second, raw.tree});
  for (const auto& e : entries) {
    GATOS_ASSIGN_OR_RETURN(auto blob, lookup(e.id));
    objects.push_back({blob.first, blob.second, e.id});
  }
  return rpc::EncodeFrame(nlohmann::json{{"commit", commit}}, EncodeObjectBatch(objects));
}

// ---- pkt-line (git's protocol framing), for proc-receive ----

bool ReadPkt(std::istream& in, std::string* out, bool* flush) {
  char len[4];
  if (!in.read(len, 4)) return false;
  unsigned n = 0;
  for (char c : len) {
    n <<= 4;
    if (c >= '0' && c <= '9') n |= static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f') n |= static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') n |= static_cast<unsigned>(c - 'A' + 10);
    else return false;
  }
  *flush = n == 0;
  out->clear();
  if (n == 0) return true;
  if (n < 4 || n > 65520) return false;
  out->resize(n - 4);
  if (!in.read(out->data(), n - 4)) return false;
  if (!out->empty() && out->back() == '\n') out->pop_back();
  return true;
}

void WritePkt(std::ostream& out, const std::string& s) {
  char len[5];
  std::snprintf(len, sizeof len, "%04x", static_cast<unsigned>(s.size() + 4));
  out << len << s;
}

void Flush(std::ostream& out) {
  out << "0000";
  out.flush();
}

// The front door's hooks name the ledger; the ledger's own run in it.
Result<std::unique_ptr<Ledger>> OpenHookLedger(const std::string& ledger_dir, bool quarantine) {
  if (ledger_dir.empty()) return Ledger::OpenFromEnv();
  return quarantine ? Ledger::OpenForHook(ledger_dir) : Ledger::Open(ledger_dir);
}

}  // namespace

int RunPreReceive(const std::string& ledger_dir, std::istream& in, std::ostream& err) {
  std::vector<Update> updates;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    Update u;
    if (ls >> u.old_id >> u.new_id >> u.ref) updates.push_back(u);
  }
  auto ledger = OpenHookLedger(ledger_dir, /*quarantine=*/true);
  if (!ledger.ok()) {
    err << "gatos: ledger unavailable: " << ledger.status().message() << "\n";
    return 1;
  }
  auto policy = (*ledger)->ReadPolicy();
  if (!policy.ok()) {
    err << "gatos: ledger unavailable: " << policy.status().message() << "\n";
    return 1;
  }
  int64_t now = SystemNowMs();
  // Why each update is refused ("" if it is not), and the metric's label.
  std::vector<std::string> why(updates.size()), reason(updates.size());
  auto check = [&](Ledger* l, size_t i) {
    const Update& u = updates[i];
    ObjectLookup lookup = LedgerLookup(l);
    std::string job_hex;
    why[i] = RefRule(u, &job_hex);
    reason[i] = why[i].empty() ? "" : "forbidden_ref";
    if (!why[i].empty()) return;
    if (StartsWith(u.ref, kSchedulePushPrefix)) {
      reason[i] = "bad_schedule";
      auto sc = CheckScheduleCommit(lookup, u.new_id);
      if (!sc.ok()) {
        why[i] = sc.status().message();
      } else if (sc->spec.name != job_hex) {
        why[i] = "the schedule is named " + sc->spec.name + "; push it to " + kSchedulePushPrefix + sc->spec.name;
      }
    } else if (StartsWith(u.ref, kWitnessPushPrefix)) {
      reason[i] = "bad_witness";
      auto w = CheckWitnessCommit(lookup, u.new_id);
      if (!w.ok()) {
        why[i] = w.status().message();
      } else if (w->key_hex != job_hex) {
        why[i] = "the witness is signed by ed25519:" + w->key_hex + "; push it to refs/gatos/witnesses/" + w->key_hex;
      }
    } else if (StartsWith(u.ref, kResultsPushPrefix)) {
      reason[i] = "bad_result";
      ParsedResult parsed;
      Decision o = CheckResultContent(lookup, u.new_id, *policy, &parsed, job_hex);
      if (!o.ok()) why[i] = o.message;
    } else {
      auto c = CheckJobCommit(lookup, u.new_id, "", *policy, now);
      if (!c.ok()) {
        why[i] = c.status().message();
        reason[i] = RejectReasonLabel(c.status());
      }
    }
  };
  // A push of many jobs is checked on every CPU (signatures dominate), each
  // thread with its own repository handle; the verdicts are reported in
  // push order.
  const size_t threads = ThreadsFor(updates.size(), 32);
  std::vector<std::string> helper_error(threads);
  RunOnThreads(threads, [&](size_t t) {
    Ledger* l = ledger->get();
    std::unique_ptr<Ledger> own;
    if (t > 0) {
      auto opened = OpenHookLedger(ledger_dir, /*quarantine=*/true);
      if (!opened.ok()) {
        helper_error[t] = opened.status().message();
        return;
      }
      own = std::move(*opened);
      l = own.get();
    }
    for (size_t i = t; i < updates.size(); i += threads) check(l, i);
  });
  for (const std::string& e : helper_error) {
    if (!e.empty()) {
      err << "gatos: ledger unavailable: " << e << "\n";
      return 1;
    }
  }
  int rejected = 0;
  for (size_t i = 0; i < updates.size(); ++i) {
    if (!why[i].empty()) {
      // Counted by gatosd's /metrics (gatos_rejected_total) when it runs.
      NotifyGatosd(LedgerDir(**ledger), rpc::kLocalRejected, rpc::Dump({{"reason", reason[i]}}));
      ++rejected;
      PrintLines(err, updates[i].ref, why[i]);
    }
  }
  if (rejected) {
    err << "gatos: push rejected (" << rejected << " of " << updates.size() << " refs); the ledger is unchanged\n";
    return 1;
  }
  return 0;
}

int RunProcReceive(const std::string& ledger_dir, std::istream& in, std::ostream& out, std::ostream& err) {
  std::string pkt;
  bool flush = false;
  // Version negotiation: git sends "version=1\0<capabilities>", then a flush.
  bool got_version = false;
  while (ReadPkt(in, &pkt, &flush) && !flush) got_version |= pkt.rfind("version=1", 0) == 0;
  if (!got_version) {
    err << "gatos: proc-receive: git did not offer protocol version 1\n";
    return 1;
  }
  WritePkt(out, std::string("version=1") + '\0');
  Flush(out);
  std::vector<Update> updates;
  while (ReadPkt(in, &pkt, &flush) && !flush) {
    std::istringstream ls(pkt);
    Update u;
    if (ls >> u.old_id >> u.new_id >> u.ref) updates.push_back(u);
  }
  // Objects are out of the quarantine by now: git moves them before it runs
  // proc-receive.
  auto ledger = OpenHookLedger(ledger_dir, /*quarantine=*/false);
  std::string dir = ledger.ok() ? LedgerDir(**ledger) : "";
  if (ledger_dir.empty() && ledger.ok()) {
    err << "gatos: hint: push to " << LedgerPushPath(dir)
        << " instead: a push to the ledger itself reads every ref of the ledger, more with every job\n";
  }
  // First the refs' own rules; then every request at once, so the ledger
  // records a push of many jobs in few log batches.
  std::vector<std::string> refused(updates.size());
  std::vector<std::pair<std::string, std::string>> requests;
  std::vector<size_t> asked;  // requests[k] is for updates[asked[k]]
  for (size_t i = 0; i < updates.size(); ++i) {
    const Update& u = updates[i];
    std::string job_hex;
    std::string why = RefRule(u, &job_hex);
    if (why.empty() && !ledger.ok()) why = "ledger unavailable: " + ledger.status().message();
    if (!why.empty()) {
      refused[i] = why;
      continue;
    }
    bool result = StartsWith(u.ref, kResultsPushPrefix);
    bool witness = StartsWith(u.ref, kWitnessPushPrefix);
    if (StartsWith(u.ref, kSchedulePushPrefix)) {
      // The ledger takes a schedule commit with its objects, as from
      // gatos schedule add; they are in the ledger's object store by now.
      auto frame = ScheduleFrame(**ledger, u.new_id);
      if (!frame.ok()) {
        refused[i] = frame.status().message();
        continue;
      }
      requests.emplace_back(rpc::kLocalSchedule, std::move(*frame));
      asked.push_back(i);
      continue;
    }
    nlohmann::json req = {{"commit", u.new_id}};
    if (result) req["job"] = job_hex;
    if (witness) req["key"] = job_hex;
    requests.emplace_back(witness  ? rpc::kLocalPushWitness
                          : result ? rpc::kLocalPushResult
                                   : rpc::kLocalPushSubmit,
                          rpc::Dump(req));
    asked.push_back(i);
  }
  LocalOptions lo;
  bool via_gatosd = false;
  Result<std::vector<std::string>> replies = std::vector<std::string>();
  if (requests.size() >= 100) err << "gatos: recording " << requests.size() << " pushed refs in the ledger\n";
  if (!requests.empty()) replies = LocalLedgerRequests(dir, requests, lo, &via_gatosd);
  std::vector<std::optional<std::string>> reply_of(updates.size());
  for (size_t k = 0; k < asked.size(); ++k) {
    if (replies.ok()) {
      reply_of[asked[k]] = (*replies)[k];
    } else {
      refused[asked[k]] = "the ledger did not record the push: " + replies.status().message();
    }
  }
  for (size_t i = 0; i < updates.size(); ++i) {
    const Update& u = updates[i];
    std::string why = refused[i];
    nlohmann::json body;
    if (why.empty() && reply_of[i]) {
      Decision e;
      auto parsed = rpc::ParseReply(*reply_of[i], "push", &e);
      if (!parsed.ok()) {
        why = "the ledger did not record the push: " + parsed.status().message();
      } else if (e.error != TransitionError::kNone) {
        why = e.message;
      } else {
        body = std::move(*parsed);
      }
    }
    if (!why.empty()) {
      PrintLines(err, u.ref, why);
      WritePkt(out, "ng " + u.ref + " " + TruncateUtf8(why.substr(0, why.find('\n')), 200));
      continue;
    }
    const bool result = StartsWith(u.ref, kResultsPushPrefix);
    const bool witness = StartsWith(u.ref, kWitnessPushPrefix);
    const std::string job = body.value("job", "");
    const std::string by_leader = body.value("forwarded", false)
                                      ? " by the leader; this replica applied it at log sequence " +
                                            std::to_string(body.value("log_seq", int64_t{0}))
                                      : "";
    if (StartsWith(u.ref, kSchedulePushPrefix)) {
      err << "gatos: schedule " << u.ref.substr(std::strlen(kSchedulePushPrefix)) << " recorded (schedule commit "
          << body.value("commit", u.new_id).substr(0, 12) << ")" << by_leader << "\n";
    } else if (witness) {
      err << "gatos: witness " << u.new_id.substr(0, 12) << " recorded at "
          << WitnessRef(u.ref.substr(std::strlen(kWitnessPushPrefix)))
          << (body.value("existing", false) ? " (already recorded)" : "") << by_leader << "\n";
    } else if (result) {
      err << "gatos: result of job " << job << " recorded (" << body.value("state", "") << ")" << by_leader << "\n";
    } else if (body.value("existing", false)) {
      err << "gatos: job " << job << " already exists; nothing to do (no-op)\n";
    } else {
      err << "gatos: accepted job " << job
          << (body.value("forwarded", false)
                  ? " (recorded by the leader; this replica applied it at log sequence " +
                        std::to_string(body.value("log_seq", int64_t{0})) + ")"
              : via_gatosd ? ""
                           : " (gatosd is not running: recorded in the log; it is offered to workers when gatosd "
                             "starts)")
          << "\n";
    }
    WritePkt(out, "ok " + u.ref);
  }
  Flush(out);
  return 0;
}

}  // namespace gatos::gatosd
