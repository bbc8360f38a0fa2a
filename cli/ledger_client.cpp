#include "ledger_client.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "gatos/ledger/job_service.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/leader_wait.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/nats/bus_identity.h"

namespace gatos::cli {

LedgerKind ClassifyLedger(const std::string& target) {
  if (target.rfind("nats://", 0) == 0 || target.rfind("tls://", 0) == 0) return LedgerKind::kNats;
  struct stat st;
  if (::stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return LedgerKind::kDirectory;
  return LedgerKind::kGitRemote;
}

std::optional<std::string> LedgerTarget(const std::optional<std::string>& flag) {
  if (flag) return flag;
  if (const char* env = std::getenv("GATOS_LEDGER"); env && *env) return std::string(env);
  return std::nullopt;
}

namespace {
std::optional<Ed25519PrivateKey>& NatsKey() {
  static std::optional<Ed25519PrivateKey> key;
  return key;
}
}  // namespace

void UseNatsKey(const Ed25519PrivateKey& key) { NatsKey() = key; }

namespace {
std::optional<std::string>& Replica() {
  static std::optional<std::string> replica;
  return replica;
}
}  // namespace

void UseReplica(const std::string& name) { Replica() = name; }
std::optional<std::string> ReplicaTarget() { return Replica(); }

Result<std::unique_ptr<Bus>> ConnectGatosd(const std::string& nats_url,
                                           std::function<void(const std::string&)> on_async_error) {
  BusOptions bo;
  bo.url = nats_url;
  bo.name = "gatos cli";
  bo.max_reconnect = 0;
  bo.on_async_error = std::move(on_async_error);
  if (const char* ca = std::getenv("GATOS_NATS_CA"); ca && *ca) bo.tls_ca_file = ca;
  if (!NatsKey()) {
    if (const char* path = std::getenv("GATOS_NATS_KEY"); path && *path) {
      auto key = ReadPrivateKeyFile(path);
      if (!key.ok()) return InvalidArgumentError("GATOS_NATS_KEY: " + key.status().message());
      NatsKey() = std::move(*key);
    }
  }
  if (NatsKey()) SetBusIdentity(&bo, *NatsKey());
  auto connected = Bus::Connect(bo);
  if (!connected.ok()) {
    const std::string m = connected.status().message();
    if (m.find("uthorization") != std::string::npos ||
        m.find("uthentication") != std::string::npos) {
      return PermissionDeniedError("NATS at " + nats_url + " refused this client: " + m +
                                   (NatsKey() ? " (the key is not in the ledger's policy, or the "
                                                "server's authorization is out of date)"
                                              : " (it needs a key the ledger's policy names: "
                                                "--sign-key/--key on commands that sign, "
                                                "or GATOS_NATS_KEY=FILE)"));
    }
    return connected.status();
  }
  return std::move(*connected);
}

Result<nlohmann::json> GatosdRequestOn(Bus& bus, const std::string& subject,
                                       const std::string& data, int timeout_ms) {
  // A read asked of a replica goes to its subject (the same request).
  const std::string to = Replica() ? rpc::ReplicaReadSubject(*Replica() == "any" ? "" : *Replica(), subject)
                                   : subject;
  auto reply = bus.Request(to, data, timeout_ms);
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kUnavailable) {
      if (to != subject) {
        return UnavailableError("no replica " + (*Replica() == "any" ? std::string("") : "named " + *Replica() + " ") +
                                "answers on " + bus.url() + " (" + reply.status().message() + ")");
      }
      return UnavailableError("no gatosd answers on " + bus.url() + " (" +
                              reply.status().message() + ")");
    }
    return reply.status();
  }
  Decision err;
  return rpc::ParseReply(reply->data, subject, &err);
}

Result<nlohmann::json> ProbeReplicaReads(Bus& bus, const std::string& name, int timeout_ms) {
  const std::string subject = rpc::ReplicaReadSubject(name, rpc::kList);
  const int64_t sent = SystemNowMs();
  auto reply = bus.Request(subject, rpc::Dump(rpc::ListRequestJson({std::nullopt, "", 1})), timeout_ms);
  const int64_t back = SystemNowMs();
  if (!reply.ok()) return UnavailableError("no answer on " + subject + ": " + reply.status().message());
  Decision err;
  auto j = rpc::ParseReply(reply->data, subject, &err);
  if (!j.ok()) return UnavailableError(subject + ": " + j.status().message());
  if (err.error != TransitionError::kNone) return UnavailableError(subject + ": " + err.message);
  if (!j->contains("replica") || !(*j)["replica"].is_object()) {
    return UnavailableError(subject + ": the reply does not name the replica");
  }
  nlohmann::json r = (*j)["replica"];
  r["read_ms"] = back - sent;
  return r;
}

namespace {
std::optional<int64_t>& LeaderWait() {
  static std::optional<int64_t> ms;
  return ms;
}
}  // namespace

const char kLeaderWaitHelp[] =
    "--leader-wait S: while a replicated ledger elects a new leader, ask again for up to S\n"
    "seconds (default 30, or GATOS_LEADER_WAIT=S; 0: do not wait) when no leader answers\n"
    "or the ledger says nothing was recorded (retry); a refusal is never asked again.\n";

void UseLeaderWait(int64_t ms) { LeaderWait() = ms; }

int64_t LeaderWaitMs() {
  if (LeaderWait()) return *LeaderWait();
  if (const char* env = std::getenv(kLeaderWaitEnv); env && *env) {
    if (auto ms = ParseLeaderWaitMs(env)) return *ms;
    std::cerr << "gatos: " << kLeaderWaitEnv << " is not a number of seconds; waiting "
              << kDefaultLeaderWaitMs / 1000 << " s for a leader\n";
  }
  LeaderWait() = kDefaultLeaderWaitMs;
  return kDefaultLeaderWaitMs;
}

std::string ApplyLeaderWaitFlag(const std::optional<std::string>& seconds) {
  if (!seconds) return "";
  auto ms = ParseLeaderWaitMs(*seconds);
  if (!ms) return "--leader-wait must be a number of seconds >= 0";
  UseLeaderWait(*ms);
  return "";
}

Result<nlohmann::json> GatosdRequest(const std::string& nats_url, const std::string& subject,
                                     const std::string& data, int timeout_ms) {
  static bool said = false;  // once per process: gatos wait asks many times
  std::chrono::steady_clock::time_point start;  // of the first failure
  for (int attempt = 1;; ++attempt) {
    GATOS_ASSIGN_OR_RETURN(auto bus, ConnectGatosd(nats_url));
    Result<nlohmann::json> reply = GatosdRequestOn(*bus, subject, data, timeout_ms);
    // A named replica is not the leader: nothing to wait for.
    if (ReplicaTarget()) return reply;
    TransitionError error = TransitionError::kNone;
    if (reply.ok() && !reply->value("ok", false)) {
      error = ParseTransitionError(reply->contains("error") && (*reply)["error"].is_string()
                                       ? (*reply)["error"].get<std::string>()
                                       : std::string());
    }
    const Status transport = reply.ok() ? OkStatus() : reply.status();
    if (!RetryAcrossLeaderChange(subject, transport, error)) return reply;
    const std::string why = reply.ok() ? reply->value("message", "retry") : transport.message();
    if (attempt == 1) start = std::chrono::steady_clock::now();
    const int64_t bound = LeaderWaitMs();
    const int64_t pause = LeaderWaitBackoffMs(attempt);
    const int64_t waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    if (waited + pause > bound) {
      if (bound == 0) return reply;
      const std::string after = " (no leader answered within " + std::to_string((waited + 500) / 1000) +
                                " s; --leader-wait or " + kLeaderWaitEnv + " waits longer)";
      if (!reply.ok()) return Status(transport.code(), transport.message() + after);
      (*reply)["message"] = why + after;
      return reply;
    }
    if (!said) {
      std::cerr << "gatos: waiting up to " << (bound + 999) / 1000 << " s for the ledger's leader (" << why
                << ")\n";
      said = true;
    }
    bus.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));
  }
}

std::string NotUsableLedger(const std::string& target, const std::string& what) {
  if (!target.empty() &&
      (target[0] == '/' || target[0] == '.' || target.find("://") == std::string::npos)) {
    if (target.find(':') == std::string::npos) {
      return "--ledger " + target +
             ": no such directory (give the ledger repository, or the gatosd URL nats://HOST:PORT)";
    }
  }
  return "--ledger " + target + ": " + what +
         " needs the ledger directory or the gatosd URL (nats://HOST:PORT)";
}

Result<std::string> ParseJobArg(const std::string& arg) {
  std::string hex = arg.rfind("blake3:", 0) == 0 ? arg.substr(7) : arg;
  if (!IsJobIdHex(hex)) {
    return InvalidArgumentError("\"" + arg.substr(0, 80) +
                                "\" is not a job id (blake3:<64 hex>, as 'gatos submit' prints)");
  }
  return hex;
}

Result<nlohmann::json> LedgerCall(const std::string& target, const std::string& subject,
                                  const std::string& data, int timeout_ms) {
  switch (ClassifyLedger(target)) {
    case LedgerKind::kNats:
      return GatosdRequest(target, subject, data, timeout_ms);
    case LedgerKind::kDirectory: {
      LocalOptions lo;
      lo.timeout_ms = timeout_ms;
      GATOS_ASSIGN_OR_RETURN(std::string reply, LocalLedgerRequest(target, subject, data, lo));
      Decision err;
      return rpc::ParseReply(reply, subject, &err);
    }
    case LedgerKind::kGitRemote:
      break;
  }
  return InvalidArgumentError(NotUsableLedger(target, "this command"));
}

Result<nlohmann::json> JobStatus(const std::string& target, const std::string& job_hex) {
  switch (ClassifyLedger(target)) {
    case LedgerKind::kDirectory: {
      GATOS_ASSIGN_OR_RETURN(auto view, LedgerView::Open(target));
      GATOS_ASSIGN_OR_RETURN(auto rec, view->Find(job_hex));
      if (!rec) return NotFoundError("no job blake3:" + job_hex + " in " + target);
      GATOS_ASSIGN_OR_RETURN(Policy policy, view->ReadPolicy());
      return JobStatusJson(view->ledger(), *rec, policy.settings, SystemNowMs());
    }
    case LedgerKind::kNats: {
      nlohmann::json req = {{"job", job_hex}};
      GATOS_ASSIGN_OR_RETURN(nlohmann::json reply,
                             GatosdRequest(target, rpc::kStatus, req.dump(), 5000));
      if (!reply.value("ok", false)) {
        std::string msg = reply.value("message", "status refused");
        if (msg.find("no job") != std::string::npos) return NotFoundError(msg);
        // A leader stepping down answers what it had queued "retry": the
        // next leader answers (gatos wait keeps waiting).
        if (reply.value("error", "") == "retry") return UnavailableError(msg);
        return FailedPreconditionError(msg);
      }
      // A replica's answer says which one and as of which log sequence.
      if (reply.contains("replica")) reply["status"]["replica"] = reply["replica"];
      return reply["status"];
    }
    case LedgerKind::kGitRemote:
      break;
  }
  return InvalidArgumentError(NotUsableLedger(target, "status"));
}

Result<nlohmann::json> JobLogsPage(const std::string& target, const nlohmann::json& request,
                                   Bus* bus) {
  switch (ClassifyLedger(target)) {
    case LedgerKind::kDirectory: {
      GATOS_ASSIGN_OR_RETURN(auto view, LedgerView::Open(target));
      std::string hex = request.value("job", "");
      GATOS_ASSIGN_OR_RETURN(auto rec, view->Find(hex));
      if (!rec) return NotFoundError("no job blake3:" + hex + " in " + target);
      return JobOutputReply(view->ledger(), *rec, request);
    }
    case LedgerKind::kNats:
      if (bus) return GatosdRequestOn(*bus, rpc::kLogs, rpc::Dump(request), 10000);
      return GatosdRequest(target, rpc::kLogs, rpc::Dump(request), 10000);
    case LedgerKind::kGitRemote:
      break;
  }
  return InvalidArgumentError(NotUsableLedger(target, "logs"));
}

Result<nlohmann::json> ListJobs(const std::string& target, const nlohmann::json& request) {
  switch (ClassifyLedger(target)) {
    case LedgerKind::kDirectory: {
      GATOS_ASSIGN_OR_RETURN(rpc::ListRequest req, rpc::ParseListRequest(request));
      GATOS_ASSIGN_OR_RETURN(auto view, LedgerView::Open(target));
      GATOS_ASSIGN_OR_RETURN(IndexStats stats, view->index().Stats());
      std::map<std::string, JobRecord> live;
      GATOS_RETURN_IF_ERROR(view->index().ForEachLive([&](const JobRecord& r) {
        live[r.job_hex] = r;
        return OkStatus();
      }));
      return ListReply(view->index(), stats, live, req, SystemNowMs());
    }
    case LedgerKind::kNats:
      return GatosdRequest(target, rpc::kList, rpc::Dump(request), 10000);
    case LedgerKind::kGitRemote:
      break;
  }
  return InvalidArgumentError(NotUsableLedger(target, "ls"));
}

}  // namespace gatos::cli
