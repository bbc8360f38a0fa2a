// gatos submit | status | ls | wait | cancel
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "commands.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/ledger.h"
#include "gatos/git/result.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/model/election.h"
#include "gatos/model/encoding.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/model/scheduling.h"
#include "gatos/model/trailers.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/manifest_file.h"
#include "ledger_client.h"

namespace gatos::cli {
namespace {

constexpr char kReplicaHelp[] =
    "--replica NAME asks that replica of a replicated ledger (nats:// only), --replica any\n"
    "whichever replica answers first; each answers from what it has applied, and says\n"
    "as of which log sequence (\"replica\" in --json). Without it the leader answers.\n";

// --replica NAME|any (replica_reads.h): "" when it is fine, else the error.
std::string ApplyReplicaFlag(const Flags& flags, const std::string& target) {
  auto name = flags.Get("replica");
  if (!name) return "";
  if (ClassifyLedger(target) != LedgerKind::kNats) {
    return "--replica needs --ledger nats://HOST:PORT (a replica is asked over NATS)";
  }
  if (*name != "any" && !ValidReplicaName(*name)) {
    return "--replica: a replica name is 1-64 of [A-Za-z0-9_.-], or any";
  }
  UseReplica(*name);
  return "";
}

// A note on stderr of the replica that answered and how stale it may be.
void SayReplica(const nlohmann::json& reply) {
  if (!reply.contains("replica") || !reply["replica"].is_object()) return;
  const nlohmann::json& r = reply["replica"];
  std::cerr << "(replica " << r.value("name", "?") << ", " << r.value("role", "?") << ", log sequence "
            << r.value("log_seq", int64_t{0}) << ", " << r.value("lag_ms", int64_t{0}) << " ms behind the log)\n";
}

using nlohmann::json;

constexpr int kExitWaitTimeout = 3;

std::string ReadAll(const std::string& path, Status* s) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *s = NotFoundError("cannot read " + path);
    return "";
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// Runs a shell command, returning its exit status and combined output.
int Shell(const std::string& cmd, std::string* output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int rc = ::pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string Describe(const json& j) {
  std::string out = j.value("job", "") + "  " + j.value("state", "");
  if (j.contains("lease")) {
    const json& l = j["lease"];
    std::string worker = l.value("worker", "");
    out +=
        "  worker " + worker.substr(0, 8 + 16) + "…  epoch " + std::to_string(l.value("epoch", 0));
    if (!j.contains("result_commit")) {
      out += (l.value("expired", false) ? "  lease expired " : "  lease until ") +
             l.value("expires", "");
    }
  }
  if (j.value("cancel_requested", false)) out += "  cancel requested";
  // As the worker reported it (gatosd only; display data).
  if (j.contains("progress") && j["progress"].is_object())
    out += "  progress: " + j["progress"].value("text", "");
  if (j.contains("result_commit")) out += "  result " + j.value("result_commit", "").substr(0, 12);
  int64_t attempt = j.value("attempt", int64_t{1});
  if (j.contains("max_attempts")) {
    out += "  attempt " + std::to_string(attempt) + " of " +
           std::to_string(j.value("max_attempts", int64_t{1}));
  } else if (attempt > 1) {
    out += "  attempt " + std::to_string(attempt);
  }
  if (j.contains("not_before")) out += "  next attempt not before " + j.value("not_before", "");
  if (j.value("dead", false)) out += "  dead";
  if (j.contains("priority") && j.value("priority", int64_t{5}) != 5)
    out += "  priority " + std::to_string(j.value("priority", int64_t{5}));
  // Why a pending job waits, when gatosd knows (docs/scheduling.md).
  if (j.contains("waiting")) out += "  (" + j.value("waiting", "") + ")";
  return out;
}

// One line per attempt of a status reply (JobStatusJson), for people.
std::string DescribeAttempts(const json& j) {
  if (!j.contains("attempts") || !j["attempts"].is_array()) return "";
  std::string out;
  for (const auto& a : j["attempts"]) {
    char head[64];
    std::snprintf(head, sizeof head, "  attempt %lld  %-9s",
                  static_cast<long long>(a.value("n", int64_t{0})), a.value("status", "").c_str());
    out += head;
    if (a.contains("exit_code"))
      out += "  exit " + std::to_string(a.value("exit_code", int64_t{0}));
    if (a.contains("signal")) out += "  signal " + std::to_string(a.value("signal", int64_t{0}));
    if (a.contains("epoch")) out += "  epoch " + std::to_string(a.value("epoch", int64_t{0}));
    if (a.contains("worker")) out += "  worker " + a.value("worker", "").substr(0, 8 + 16) + "…";
    if (a.contains("waited_ms")) {
      char b[48];
      std::snprintf(b, sizeof b, "  after %.1f s",
                    static_cast<double>(a.value("waited_ms", int64_t{0})) / 1000.0);
      out += b;
    }
    if (a.contains("claimed")) out += "  claimed " + a.value("claimed", "");
    if (a.contains("started"))
      out += "  ran " + a.value("started", "") + " .. " + a.value("ended", "");
    if (a.contains("finished")) out += "  recorded " + a.value("finished", "");
    if (a.contains("not_before")) {
      out += "  waits until " + a.value("not_before", "");
      if (a.contains("backoff_ms")) {
        char b[48];
        std::snprintf(b, sizeof b, " (backoff %.1f s)",
                      static_cast<double>(a.value("backoff_ms", int64_t{0})) / 1000.0);
        out += b;
      }
    }
    out += "\n";
    if (a.contains("reason")) out += "             reason: " + a.value("reason", "") + "\n";
    if (a.contains("limits") && a["limits"].is_object()) {
      out += "             limits: " + a["limits"].value("text", "") + "\n";
    }
    if (a.contains("usage") && a["usage"].is_object()) {
      out += "             used:   " + a["usage"].value("text", "") + "\n";
    }
  }
  return out;
}

// The key that signs a cancel or re-run: --key, or on a ledger directory
// the ledger key (the host's operator).
Result<Ed25519PrivateKey> RequestKey(const std::string& target,
                                     const std::optional<std::string>& key_path, const char* what) {
  if (key_path) return ReadPrivateKeyFile(*key_path);
  if (ClassifyLedger(target) == LedgerKind::kDirectory) return LoadLedgerKey(target);
  return InvalidArgumentError(std::string("--key KEY is required to ") + what +
                              " through gatosd (the job's submitter key or an operator's key)");
}

}  // namespace

int SubmitBytes(const std::string& target_str, const std::string& bytes, const std::string& hex,
                const std::string& name, const Ed25519PrivateKey* key, SubmitOutcome* result,
                int timeout_ms, int64_t priority) {
  const std::string* target = &target_str;
  CommitMessage msg;
  msg.body = "gatos: submit " + name;
  msg.trailers = {{"Job-Id", "blake3:" + hex}};
  if (priority != kDefaultPriority) msg.trailers.push_back({kPriorityTrailer, std::to_string(priority)});
  std::vector<GitObject> objects;
  auto tree = BuildTreeObjects({{"job.yaml", bytes, false}}, &objects);
  if (!tree.ok()) return ReportError(tree.status().message(), kExitFailure);
  const char* who_env = std::getenv("GIT_AUTHOR_NAME");
  const char* email_env = std::getenv("GIT_AUTHOR_EMAIL");
  auto commit =
      BuildCommitObject(*tree, {}, FormatCommitMessage(msg), who_env ? who_env : "gatos submit",
                        email_env ? email_env : "submit@gatos.invalid", SystemNowMs(), key);
  if (!commit.ok()) return ReportError(commit.status().message(), kExitUsage);
  objects.insert(objects.begin(), *commit);

  bool existing = false;
  switch (ClassifyLedger(*target)) {
    case LedgerKind::kDirectory:
    case LedgerKind::kNats: {
      json header = {{"commit", commit->id}};
      auto reply = LedgerCall(*target, rpc::kSubmit,
                              rpc::EncodeFrame(header, EncodeObjectBatch(objects)), timeout_ms);
      if (!reply.ok()) return ReportError(reply.status().message(), kExitFailure);
      if (!reply->value("ok", false)) {
        std::string err = reply->value("error", "");
        return ReportError(reply->value("message", "submit refused"),
                           err == "retry" || err == "internal" ? kExitFailure : kExitUsage);
      }
      existing = reply->value("existing", false);
      break;
    }
    case LedgerKind::kGitRemote: {
      char tmpl[] = "/tmp/gatos-submit-XXXXXX";
      if (!::mkdtemp(tmpl)) return ReportError("cannot create a temporary directory", kExitFailure);
      std::string tmp = tmpl;
      std::string repo = tmp + "/repo.git";
      Status s = Ledger::InitRepository(repo);
      if (s.ok()) {
        auto local = Ledger::Open(repo);
        if (!local.ok()) s = local.status();
        for (const auto& o : objects) {
          if (!s.ok()) break;
          s = (*local)->WriteRawObject(o.type, o.data).status();
        }
      }
      std::string out;
      int rc = s.ok()
                   ? Shell("git --git-dir " + Quote(repo) + " push --porcelain " + Quote(*target) +
                               " " + commit->id + ":refs/gatos/submit/" + hex.substr(0, 16),
                           &out)
                   : 1;
      Shell("rm -rf " + Quote(tmp), &out);
      if (!s.ok()) return ReportError(s.message(), kExitFailure);
      if (rc != 0) {
        std::cerr << out;
        return ReportError(
            "git push to " + *target + " was refused (see the remote's message above)",
            kExitFailure);
      }
      existing = out.find("already exists") != std::string::npos;
      break;
    }
  }
  result->existing = existing;
  result->commit = commit->id;
  return kExitOk;
}

bool PriorityFlag(const std::optional<std::string>& value, int64_t* priority, std::string* error) {
  *priority = kDefaultPriority;
  if (!value) return true;
  auto p = ParsePriority(*value);
  if (!p.ok()) {
    *error = "--priority: " + p.status().message();
    return false;
  }
  *priority = *p;
  return true;
}

int RunSubmit(const Args& args) {
  const std::string help =
      "usage: gatos submit FILE --ledger DIR|nats://HOST:PORT|GIT-URL [--sign-key KEY] [--timeout "
      "S] [--priority N] [--json]\n\n"
      "Submits the manifest FILE (YAML or JSON) as a job: builds a commit whose tree\n"
      "holds job.yaml (the file as written) with the Job-Id trailer, signs it with KEY\n"
      "(an OpenSSH Ed25519 private key allowed as a submitter), and hands it to the\n"
      "ledger: directly for a ledger directory, through gatosd for nats://, or with\n"
      "'git push URL COMMIT:refs/gatos/submit/<id>' for any git remote. Prints the\n"
      "job id. Submitting the same manifest again names the existing job.\n"
      "To run the same manifest again on purpose, change it (for example add a ulid\n"
      "is NOT enough: ulid is not hashed; add an input or an env entry such as RUN: 2).\n"
      "--timeout S: how long to wait for the ledger's answer (default 30; not for a\n"
      "git remote, where git push decides).\n"
      "--priority N: 0-9, higher first (default 5); written as the job commit's\n"
      "'Priority: N' trailer, signed with it but not hashed: the same manifest at\n"
      "another priority is the same job (docs/scheduling.md).\n"
      "GATOS_LEDGER is used when --ledger is not given.\n" +
      std::string(kLeaderWaitHelp);
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"sign-key"}, {"timeout"}, {"priority"}, {"json", 0, false}, {"leader-wait"}})) {
    return UsageError("submit", flags.error());
  }
  if (std::string e = ApplyLeaderWaitFlag(flags.Get("leader-wait")); !e.empty()) return UsageError("submit", e);
  int64_t priority = kDefaultPriority;
  std::string priority_error;
  if (!PriorityFlag(flags.Get("priority"), &priority, &priority_error)) return UsageError("submit", priority_error);
  int64_t timeout_s = 30;
  if (!flags.GetInt("timeout", 1, 86400, &timeout_s)) return UsageError("submit", flags.error());
  if (flags.help()) {
    std::cout << help;
    return kExitOk;
  }
  if (flags.positional().size() != 1) return UsageError("submit", "expects one manifest FILE");
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("submit", "--ledger is required (or set GATOS_LEDGER)");
  const std::string& file = flags.positional()[0];
  Status read_status = OkStatus();
  std::string bytes = ReadAll(file, &read_status);
  if (!read_status.ok()) return ReportError(read_status.message(), kExitUsage);
  auto manifest = LoadManifestFile(file);
  if (!manifest.ok()) return ReportError(manifest.status().message(), kExitUsage);
  // The tree always holds job.yaml; JSON is valid YAML, so a .json manifest is stored as is.
  std::string hex = JobIdHex(*manifest);
  std::optional<Ed25519PrivateKey> key;
  if (auto k = flags.Get("sign-key")) {
    auto loaded = ReadPrivateKeyFile(*k);
    if (!loaded.ok()) return ReportError(loaded.status().message(), kExitUsage);
    key = std::move(*loaded);
    UseNatsKey(*key);
  }
  std::string name = file.substr(file.rfind('/') + 1);
  SubmitOutcome out;
  int rc = SubmitBytes(*target, bytes, hex, name, key ? &*key : nullptr, &out,
                       static_cast<int>(timeout_s * 1000), priority);
  if (rc != kExitOk) return rc;
  bool existing = out.existing;
  if (flags.Has("json")) {
    std::cout
        << json{{"job", "blake3:" + hex}, {"existing", existing}, {"commit", out.commit}}.dump()
        << "\n";
  } else {
    std::cout << "blake3:" << hex << "\n";
    if (existing) std::cerr << "note: the ledger already had this job; nothing new was queued\n";
  }
  return kExitOk;
}

int RunStatus(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"json", 0, false}, {"replica"}, {"leader-wait"}}))
    return UsageError("status", flags.error());
  if (std::string e = ApplyLeaderWaitFlag(flags.Get("leader-wait")); !e.empty()) return UsageError("status", e);
  if (flags.help()) {
    std::cout << "usage: gatos status JOB-ID --ledger DIR|nats://HOST:PORT [--json]\n\n"
                 "Prints a job's state (pending, claimed, succeeded, failed, timed-out, aborted)\n"
                 "as the ledger records it, with its lease and result, then one line per attempt:\n"
                 "its outcome (status, exit code or signal, the reason of a refused run), the\n"
                 "lease epoch and worker, when the ledger granted the claim, when the job ran\n"
                 "(the worker's proof of execution) and when the ledger recorded the result.\n"
                 "A job waiting to be retried shows when its next attempt may start and the\n"
                 "backoff it drew. 'dead' marks a failed or timed-out job with no attempt left\n"
                 "(gatos retry JOB-ID runs it once more). See docs/retries.md.\n"
                 "--json prints the same as one object: state, attempt, max_attempts,\n"
                 "not_before, backoff_ms, dead, and attempts[] with n, status, epoch, worker,\n"
                 "claimed, waited_ms (from the attempt before to this claim), started, ended,\n"
                 "finished, exit_code, signal, timed_out, reason, result_commit, not_before and\n"
                 "backoff_ms (fields that do not apply are left out).\n"
                 "Without JOB-ID prints the number of jobs in each state.\n"
              << kReplicaHelp << kLeaderWaitHelp;
    return kExitOk;
  }
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("status", "--ledger is required (or set GATOS_LEDGER)");
  if (std::string e = ApplyReplicaFlag(flags, *target); !e.empty()) return UsageError("status", e);
  if (flags.positional().empty()) {
    // Counts per state.
    Args ls_args = {"--ledger", *target, "--limit", "1", "--counts"};
    if (flags.Has("json")) ls_args.push_back("--json");
    if (auto r = flags.Get("replica")) ls_args.insert(ls_args.end(), {"--replica", *r});
    return RunLs(ls_args);
  }
  if (flags.positional().size() != 1) return UsageError("status", "expects at most one JOB-ID");
  auto hex = ParseJobArg(flags.positional()[0]);
  if (!hex.ok()) return ReportError(hex.status().message(), kExitUsage);
  auto st = JobStatus(*target, *hex);
  if (!st.ok())
    return ReportError(st.status().message(), st.status().code() == StatusCode::kInvalidArgument
                                                  ? kExitUsage
                                                  : kExitFailure);
  if (flags.Has("json")) {
    std::cout << st->dump() << "\n";
  } else {
    std::cout << Describe(*st) << "\n" << DescribeAttempts(*st);
    SayReplica(*st);
  }
  return kExitOk;
}

int RunLs(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"},
                          {"state"},
                          {"limit"},
                          {"after"},
                          {"json", 0, false},
                          {"replica"},
                          {"leader-wait"},
                          {"counts", 0, false}})) {
    return UsageError("ls", flags.error());
  }
  if (std::string e = ApplyLeaderWaitFlag(flags.Get("leader-wait")); !e.empty()) return UsageError("ls", e);
  if (flags.help()) {
    std::cout
        << "usage: gatos ls --ledger DIR|nats://HOST:PORT [--state STATE] [--limit N] [--after "
           "JOB-ID] [--json]\n\n"
           "Lists jobs in job-id order, with their state. STATE is pending, claimed,\n"
           "succeeded, failed, timed-out, aborted, or dead (ended failed or timed out\n"
           "after its last attempt: no automatic retry is left; gatos retry runs it once\n"
           "more). Default limit 1000. The listing comes from the ledger's state\n"
           "index (gatosd's, or the log of a ledger directory): a page costs the same at any\n"
           "size; when a page stops early it prints where to continue (--after).\n"
        << kReplicaHelp << kLeaderWaitHelp;
    return kExitOk;
  }
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("ls", "--ledger is required (or set GATOS_LEDGER)");
  if (std::string e = ApplyReplicaFlag(flags, *target); !e.empty()) return UsageError("ls", e);
  std::optional<std::string> state;
  if (auto s = flags.Get("state")) {
    if (*s != "dead" && !ParseJobState(*s)) {
      return UsageError(
          "ls", "--state must be pending, claimed, succeeded, failed, timed-out, aborted or dead");
    }
    state = *s;
  }
  int64_t limit = 1000;
  if (auto l = flags.Get("limit")) {
    char* end = nullptr;
    limit = std::strtoll(l->c_str(), &end, 10);
    if (*end || limit < 1) return UsageError("ls", "--limit must be a positive integer");
  }
  json req = {{"limit", limit}};
  if (state) req["state"] = *state;
  if (auto a = flags.Get("after")) {
    auto hex = ParseJobArg(*a);
    if (!hex.ok()) return ReportError(hex.status().message(), kExitUsage);
    req["after"] = *hex;
  }
  auto reply = ListJobs(*target, req);
  if (!reply.ok()) {
    return ReportError(
        reply.status().message(),
        reply.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure);
  }
  if (!reply->value("ok", false))
    return ReportError(reply->value("message", "list refused"), kExitFailure);
  json jobs = (*reply)["jobs"];
  json counts = (*reply)["counts"];
  std::string next = reply->value("next", "");
  if (flags.Has("counts")) {
    if (flags.Has("json")) {
      if (reply->contains("replica")) counts["replica"] = (*reply)["replica"];
      std::cout << counts.dump() << "\n";
    } else {
      for (auto& [k, v] : counts.items()) std::cout << k << " " << v.get<int64_t>() << "\n";
      SayReplica(*reply);
    }
    return kExitOk;
  }
  if (flags.Has("json")) {
    json out = {{"jobs", jobs}, {"counts", counts}};
    if (!next.empty()) out["next"] = next;
    if (reply->contains("replica")) out["replica"] = (*reply)["replica"];
    std::cout << rpc::Dump(out) << "\n";
  } else {
    for (const auto& j : jobs) std::cout << Describe(j) << "\n";
    if (!next.empty()) std::cerr << "more: gatos ls ... --after " << next << "\n";
    SayReplica(*reply);
  }
  return kExitOk;
}

int RunWait(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"timeout"}, {"json", 0, false}, {"quiet", 'q', false}, {"replica"},
                          {"leader-wait"}})) {
    return UsageError("wait", flags.error());
  }
  if (std::string e = ApplyLeaderWaitFlag(flags.Get("leader-wait")); !e.empty()) return UsageError("wait", e);
  if (flags.help()) {
    std::cout
        << "usage: gatos wait JOB-ID... --ledger DIR|nats://HOST:PORT [--timeout S] [--json]\n\n"
           "Waits until every job is finished: a failed or timed-out attempt that the\n"
           "policy retries is not the end (the job is pending again, waiting out its\n"
           "backoff); wait returns each job's final state. Exit status: 0 when all\n"
           "succeeded, 1 when any failed, timed out or was aborted (after its last\n"
           "attempt), 3 when --timeout (default: none) ran out. --json prints the final\n"
           "status of each job (as gatos status --json) in one array.\n"
        << kReplicaHelp
        << "A replica that does not hold a job yet (it applies the log a moment after the\n"
           "leader) is asked again for up to 10 s before the job is said not to exist.\n"
        << kLeaderWaitHelp;
    return kExitOk;
  }
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("wait", "--ledger is required (or set GATOS_LEDGER)");
  if (std::string e = ApplyReplicaFlag(flags, *target); !e.empty()) return UsageError("wait", e);
  if (flags.positional().empty()) return UsageError("wait", "expects at least one JOB-ID");
  std::vector<std::string> hexes;
  for (const auto& a : flags.positional()) {
    auto hex = ParseJobArg(a);
    if (!hex.ok()) return ReportError(hex.status().message(), kExitUsage);
    hexes.push_back(*hex);
  }
  double timeout_s = -1;
  if (auto t = flags.Get("timeout")) {
    char* end = nullptr;
    timeout_s = std::strtod(t->c_str(), &end);
    if (*end || timeout_s < 0)
      return UsageError("wait", "--timeout must be a number of seconds >= 0");
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<json> final_states(hexes.size());
  std::vector<bool> done(hexes.size(), false);
  size_t remaining = hexes.size();
  int poll_ms = 20;
  while (true) {
    for (size_t i = 0; i < hexes.size(); ++i) {
      if (done[i]) continue;
      auto st = JobStatus(*target, hexes[i]);
      if (!st.ok()) {
        // gatosd restarting, a new leader elected, or one that did not
        // answer in time: keep waiting (until --timeout).
        if (st.status().code() == StatusCode::kUnavailable || st.status().code() == StatusCode::kDeadlineExceeded)
          continue;
        // A replica applies the log a moment after the leader: a job it
        // does not hold yet may be one the leader just recorded.
        if (st.status().code() == StatusCode::kNotFound && ReplicaTarget() &&
            std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
          continue;
        }
        return ReportError(st.status().message(), kExitFailure);
      }
      auto state = ParseJobState(st->value("state", ""));
      if (state && IsTerminal(*state)) {
        done[i] = true;
        final_states[i] = *st;
        --remaining;
        if (!flags.Has("json") && !flags.Has("quiet")) std::cout << Describe(*st) << "\n";
      }
    }
    if (remaining == 0) break;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s >= 0 && waited >= timeout_s) {
      for (size_t i = 0; i < hexes.size(); ++i) {
        if (!done[i])
          std::cerr << "gatos wait: blake3:" << hexes[i] << " not finished after " << timeout_s
                    << " s\n";
      }
      return kExitWaitTimeout;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
    poll_ms = std::min(poll_ms * 2, 250);
  }
  bool all_ok = true;
  for (const auto& s : final_states) all_ok &= s.value("state", "") == "succeeded";
  if (flags.Has("json")) std::cout << json(final_states).dump() << "\n";
  return all_ok ? kExitOk : kExitFailure;
}

int RunCancel(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"key"}, {"json", 0, false}}))
    return UsageError("cancel", flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos cancel JOB-ID --ledger DIR|nats://HOST:PORT [--key KEY]\n\n"
                 "Asks the ledger to cancel a job. A pending job ends aborted at once; a running\n"
                 "job is told to stop and ends aborted when its worker reports (or its lease\n"
                 "runs out). KEY signs the request: the job's submitter key, or an operator's\n"
                 "key named in the policy; on a ledger directory the ledger key is the default.\n";
    return kExitOk;
  }
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("cancel", "--ledger is required (or set GATOS_LEDGER)");
  if (flags.positional().size() != 1) return UsageError("cancel", "expects one JOB-ID");
  auto hex = ParseJobArg(flags.positional()[0]);
  if (!hex.ok()) return ReportError(hex.status().message(), kExitUsage);
  auto key = RequestKey(*target, flags.Get("key"), "cancel");
  if (!key.ok()) return ReportError(key.status().message(), kExitUsage);
  UseNatsKey(*key);
  UserRequest req = SignUserRequest(*key, *hex, false, 0, SystemNowMs());
  auto reply = LedgerCall(*target, rpc::kCancel, rpc::Dump(rpc::UserRequestJson(req)), 30000);
  if (!reply.ok()) return ReportError(reply.status().message(), kExitFailure);
  if (!reply->value("ok", false))
    return ReportError(reply->value("message", "cancel refused"), kExitFailure);
  bool already = reply->value("already", false);
  std::string state = reply->value("state", "");
  if (flags.Has("json")) {
    std::cout << json{{"job", "blake3:" + *hex}, {"already", already}, {"state", state}}.dump()
              << "\n";
  } else {
    std::cout << "blake3:" << *hex << " " << (already ? "was already cancelled" : "cancel recorded")
              << (state.empty() ? "" : "; state " + state) << "\n";
  }
  return kExitOk;
}

int RunRetry(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"key"}, {"json", 0, false}}))
    return UsageError("retry", flags.error());
  if (flags.help()) {
    std::cout << "usage: gatos retry JOB-ID --ledger DIR|nats://HOST:PORT [--key KEY] [--json]\n\n"
                 "Re-opens a job that ended failed or timed-out (for example a dead job, one\n"
                 "that used all the policy's max_attempts) for one more attempt, keeping its\n"
                 "id. The job is pending at once (no backoff) and is offered to workers again;\n"
                 "the earlier attempts' signed results stay in the ledger\n"
                 "(refs/gatos/jobs/<id>/attempts/<n>). The re-run is a signed request recorded\n"
                 "in the ledger's log (a commit at refs/gatos/jobs/<id>/retry). Only one more\n"
                 "attempt: if it fails it is not retried automatically. Succeeded, aborted and\n"
                 "unfinished jobs cannot be re-run. KEY signs the request: the job's submitter\n"
                 "key, or an operator's key named in the policy (gatos policy allow-operator);\n"
                 "on a ledger directory the ledger key is the default. Then 'gatos wait JOB-ID'\n"
                 "waits for the new attempt. See docs/retries.md.\n";
    return kExitOk;
  }
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("retry", "--ledger is required (or set GATOS_LEDGER)");
  if (flags.positional().size() != 1) return UsageError("retry", "expects one JOB-ID");
  auto hex = ParseJobArg(flags.positional()[0]);
  if (!hex.ok()) return ReportError(hex.status().message(), kExitUsage);
  auto st = JobStatus(*target, *hex);
  if (!st.ok()) return ReportError(st.status().message(), kExitFailure);
  auto key = RequestKey(*target, flags.Get("key"), "retry");
  if (!key.ok()) return ReportError(key.status().message(), kExitUsage);
  UseNatsKey(*key);
  int64_t attempt = st->value("attempt", int64_t{1}) + 1;
  UserRequest req = SignUserRequest(*key, *hex, true, attempt, SystemNowMs());
  auto reply = LedgerCall(*target, rpc::kRetry, rpc::Dump(rpc::UserRequestJson(req)), 30000);
  if (!reply.ok()) return ReportError(reply.status().message(), kExitFailure);
  if (!reply->value("ok", false))
    return ReportError(reply->value("message", "retry refused"), kExitFailure);
  if (flags.Has("json")) {
    std::cout << rpc::Dump(json{{"job", "blake3:" + *hex},
                                {"attempt", attempt},
                                {"state", reply->value("state", "")}})
              << "\n";
  } else {
    std::cout << "blake3:" << *hex << " re-opened for attempt " << attempt << "\n";
  }
  return kExitOk;
}

}  // namespace gatos::cli
