// gatos doctor: checks one node of a deployment and says what to fix
// (docs/deployment.md, "Checking a node").
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "gatos/crypto/keys.h"
#include "gatos/exec/exec.h"
#include "gatos/exec/job_cgroup.h"
#include "gatos/git/ledger.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/model/clock.h"
#include "gatos/model/encoding.h"
#include "gatos/model/nats_cluster.h"
#include "gatos/model/public_key.h"
#include "gatos/model/rpc.h"
#include "ledger_client.h"
#include "gatos/nats/bus.h"
#include "gatos/nats/bus_identity.h"
#include "gatos/nats/job_stream.h"
#include "gatos/nats/kv_bucket.h"
#include "gatos/ledger/replica_id.h"
#include "gatos/model/replica_status.h"
#include "gatos/sys/config_file.h"
#include "gatos/sys/file.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/process.h"

namespace gatos::cli {
namespace {

using nlohmann::json;

enum class Outcome { kOk, kWarn, kFail, kSkip };

const char* Name(Outcome o) {
  switch (o) {
    case Outcome::kOk: return "ok";
    case Outcome::kWarn: return "warn";
    case Outcome::kFail: return "FAIL";
    case Outcome::kSkip: return "skip";
  }
  return "?";
}

struct Check {
  std::string name;
  Outcome outcome;
  std::string detail;
  std::string fix;
};

class Report {
 public:
  void Add(std::string name, Outcome o, std::string detail, std::string fix = "") {
    checks_.push_back({std::move(name), o, std::move(detail), std::move(fix)});
  }
  bool failed() const {
    for (const auto& c : checks_) {
      if (c.outcome == Outcome::kFail) return true;
    }
    return false;
  }
  void Print(bool as_json) const {
    if (as_json) {
      json a = json::array();
      for (const auto& c : checks_) {
        json j = {{"check", c.name}, {"status", Name(c.outcome)}, {"detail", c.detail}};
        if (!c.fix.empty()) j["fix"] = c.fix;
        a.push_back(j);
      }
      std::cout << json{{"ok", !failed()}, {"checks", a}}.dump(2, ' ', false, json::error_handler_t::replace)
                << "\n";
      return;
    }
    int fails = 0, warns = 0;
    for (const auto& c : checks_) {
      std::string tag = Name(c.outcome);
      std::cout << tag << std::string(6 - tag.size(), ' ') << c.name << std::string(c.name.size() < 16 ? 16 - c.name.size() : 1, ' ')
                << c.detail << "\n";
      if (!c.fix.empty() && (c.outcome == Outcome::kFail || c.outcome == Outcome::kWarn)) {
        std::cout << "      fix: " << c.fix << "\n";
      }
      fails += c.outcome == Outcome::kFail;
      warns += c.outcome == Outcome::kWarn;
    }
    std::cout << (fails ? std::to_string(fails) + " check(s) failed" : "all checks passed")
              << (warns ? ", " + std::to_string(warns) + " warning(s)" : "") << "\n";
  }

 private:
  std::vector<Check> checks_;
};

// The ledger's push front door (gatosd init and serve make it): present,
// sharing the ledger's objects, with executable hooks.
void CheckFrontDoor(Report* report, const std::string& ledger_dir) {
  const std::string door = LedgerPushPath(ledger_dir);
  const std::string fix = "gatosd serve --ledger " + ledger_dir + " recreates it";
  struct stat objects_door {}, objects_ledger {};
  if (access((door + "/config").c_str(), F_OK) != 0) {
    report->Add("push", Outcome::kWarn, door + " is missing: pushes to the ledger itself read all of its refs", fix);
  } else if (stat((door + "/objects").c_str(), &objects_door) != 0 ||
             stat((ledger_dir + "/objects").c_str(), &objects_ledger) != 0 ||
             objects_door.st_ino != objects_ledger.st_ino || objects_door.st_dev != objects_ledger.st_dev) {
    report->Add("push", Outcome::kFail, door + "/objects is not the ledger's objects directory", fix);
  } else if (access((door + "/hooks/pre-receive").c_str(), X_OK) != 0 ||
             access((door + "/hooks/proc-receive").c_str(), X_OK) != 0) {
    report->Add("push", Outcome::kFail, door + " has no executable pre-receive and proc-receive hooks", fix);
  } else {
    report->Add("push", Outcome::kOk, "front door " + door + " (git push here)");
  }
}

// "git version 2.39.5" -> {2, 39}.
std::pair<int, int> GitVersion(const std::string& text) {
  int major = 0, minor = 0;
  size_t pos = text.find("version ");
  if (pos == std::string::npos) return {0, 0};
  std::istringstream in(text.substr(pos + 8));
  char dot = 0;
  in >> major >> dot >> minor;
  return {major, minor};
}

void CheckGit(Report* r) {
  SpawnOptions so;
  so.env = Environment::Current();
  auto out = RunAndCapture({"git", "--version"}, so);
  if (!out.ok() || out->status.code != 0) {
    r->Add("git", Outcome::kFail, "git is not installed or does not run", "install git 2.34 or later");
    return;
  }
  std::string v = out->out;
  while (!v.empty() && v.back() == '\n') v.pop_back();
  auto [major, minor] = GitVersion(v);
  if (major < 2 || (major == 2 && minor < 34)) {
    r->Add("git", Outcome::kFail, v + ": too old for SSH-signed commits", "install git 2.34 or later");
  } else {
    r->Add("git", Outcome::kOk, v);
  }
}

// A private key file: present, an Ed25519 key, readable by its owner only.
std::optional<Ed25519PrivateKey> CheckKeyFile(Report* r, const std::string& check, const std::string& path) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) {
    r->Add(check, Outcome::kFail, path + ": missing", "create it with gatos keygen -f " + path);
    return std::nullopt;
  }
  auto key = ReadPrivateKeyFile(path);
  if (!key.ok()) {
    r->Add(check, Outcome::kFail, path + ": " + key.status().message(), "give an OpenSSH Ed25519 private key");
    return std::nullopt;
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (st.st_mode & 077) {
    r->Add(check, Outcome::kFail, path + " is mode " + mode + ": others can read the key",
           "chmod 600 " + path);
  } else if (st.st_uid != geteuid()) {
    r->Add(check, Outcome::kWarn,
           path + " belongs to uid " + std::to_string(st.st_uid) + ", not to the user running this check",
           "run gatos doctor as the service's user (sudo -u gatos gatos doctor ...), or chown the key to it");
  } else {
    r->Add(check, Outcome::kOk, path + " (" + mode + ", " + key->public_key().WorkerId().substr(0, 20) + "...)");
  }
  return std::move(*key);
}

// The cgroup hierarchy a worker here would use: found, and a job cgroup
// with every limit made and removed in it, as the worker does per job.
void CheckCgroups(Report* report) {
  const char* kFix =
      "run the worker as root, or under systemd with Delegate=yes in its unit "
      "(packaging/systemd/gatos-worker.service) on a cgroup v2 host; until then "
      "job memory, process and CPU limits are not enforced";
  auto host = CgroupHost::Open("gatos-doctor-" + std::to_string(getpid()));
  if (host->version() == CgroupHost::Version::kNone) {
    report->Add("cgroups", Outcome::kWarn, host->Describe(), kFix);
    return;
  }
  auto probe = JobCgroup::Create(host, "probe", JobLimits{64, 16, 100, 0});
  if (!probe.ok()) {
    report->Add("cgroups", Outcome::kWarn, probe.status().message(), kFix);
    return;
  }
  probe->reset();
  report->Add("cgroups", host->problems().empty() ? Outcome::kOk : Outcome::kWarn,
              "a cgroup per job: " + host->Describe(), host->problems().empty() ? "" : kFix);
}

// A replica of a replicated ledger (docs/replication.md): its bucket and
// stream, a leader, and this replica's own report.
void CheckReplica(Report* report, Bus& bus, const std::string& ledger_dir, const std::string& name) {
  if (ledger_dir.empty()) {
    report->Add("replica", Outcome::kSkip, "no ledger (--ledger) to name the replicated log");
    return;
  }
  auto id = ReplicaLedgerId(ledger_dir);
  if (!id.ok()) {
    report->Add("replica", Outcome::kFail, id.status().message());
    return;
  }
  auto kv = KvBucket::OpenExisting(bus, LeaderBucketName(*id));
  if (!kv.ok()) {
    report->Add("replica", Outcome::kFail, LeaderBucketName(*id) + ": " + kv.status().message(),
                "start gatosd serve --replicated (it creates the bucket); nats-server needs JetStream");
    return;
  }
  auto stream = bus.GetStreamState(WalStreamName(*id));
  if (!stream.ok()) {
    report->Add("replica", Outcome::kFail, WalStreamName(*id) + ": " + stream.status().message(),
                "start gatosd serve --replicated (it creates the stream)");
    return;
  }
  auto keys = (*kv)->Keys();
  std::optional<ReplicaStatus> me;
  int leaders = 0;
  for (const auto& k : keys.ok() ? *keys : std::vector<std::string>{}) {
    if (k.rfind(kReplicaStatusKeyPrefix, 0) != 0) continue;
    auto e = (*kv)->Get(k);
    if (!e.ok() || !e->has_value()) continue;
    auto s = DecodeReplicaStatus((*e)->value);
    if (!s.ok()) continue;
    if (s->role == "leader") ++leaders;
    if (s->name == name) me = *s;
  }
  const std::string where = WalStreamName(*id) + " holds " + std::to_string(stream->messages) + " message(s) on " +
                            std::to_string(stream->replicas) + " replica(s)";
  if (leaders == 0) {
    report->Add("replica", Outcome::kFail, where + "; no replica leads",
                "start gatosd serve --replicated on the replicas (a leader is elected within seconds)");
  } else if (!name.empty() && !me) {
    report->Add("replica", Outcome::kFail, where + "; replica " + name + " does not report itself",
                "start gatosd serve --replicated --replica-name " + name + " here");
  } else if (me && me->lag_ms > 5000) {
    report->Add("replica", Outcome::kWarn,
                where + "; " + name + " is a " + me->role + " " + std::to_string(me->lag_ms) + " ms behind the log",
                "see its log: a follower that refused a record stops");
  } else {
    report->Add("replica", Outcome::kOk,
                where + (me ? "; " + name + " is a " + me->role + " at log sequence " + std::to_string(me->log_seq) +
                                  ", lag " + std::to_string(me->lag_ms) + " ms"
                            : "; a replica leads"));
  }
  if (!me) return;
  // Its read endpoint (gatos status --replica NAME asks it there).
  auto reads = ProbeReplicaReads(bus, name, 3000);
  if (reads.ok()) {
    report->Add("replica-reads", Outcome::kOk,
                name + " answers reads on " + rpc::ReplicaReadSubject(name, rpc::kList) + " in " +
                    std::to_string(reads->value("read_ms", int64_t{0})) + " ms (as of log sequence " +
                    std::to_string(reads->value("log_seq", int64_t{0})) + ")");
  } else {
    report->Add("replica-reads", Outcome::kFail, reads.status().message(),
                "this NATS identity may not publish on gatos.replica.> (regenerate the server's authorization "
                "with gatos nats-config), or the replica runs a gatosd without replica reads");
  }
}

}  // namespace

int RunDoctor(const Args& args) {
  constexpr char kHelp[] =
      "usage: gatos doctor [--config FILE] [--nats URLS] [--key KEY] [--ledger DIR]\n"
      "                    [--ledger-key FILE] [--nats-ca FILE] [--sandbox] [--json]\n\n"
      "Checks this node of a deployment and says what to fix:\n"
      "  git          installed, 2.34 or later (SSH-signed commits)\n"
      "  key          KEY (or the ledger key on the ledger host) is an Ed25519 key\n"
      "               readable by its owner only (mode 0600)\n"
      "  ledger       DIR opens, its policy is valid, its key matches the policy\n"
      "  ledger-key   FILE names the key the policy names\n"
      "  nats         every member of URLS answers and refuses anonymous clients\n"
      "  nats-auth    KEY authenticates to NATS\n"
      "  jetstream    the GATOS_JOBS stream and the workers' consumer exist\n"
      "  gatosd       gatosd answers, and this host's clock is within 2 s of the\n"
      "               ledger's (leases are judged by it)\n"
      "  sandbox      bubblewrap can build a job sandbox (worker hosts; --sandbox,\n"
      "               or when the key is a worker's)\n"
      "  cgroups      the worker can make a cgroup per job with memory, process and\n"
      "               CPU limits (worker hosts; cgroup v2 delegated, or v1)\n"
      "  replica      with --replica-name NAME (or replicated: true in gatosd's\n"
      "               settings): the ledger's leader bucket and replicated log\n"
      "               exist, a replica leads, and NAME reports itself with its lag\n"
      "--config reads a gatosd or gatos-worker settings file (YAML) for nats, key,\n"
      "ledger and ledger-key; flags win. Exit status 0 when nothing failed, 1 else.\n";
  const std::vector<FlagSpec> specs = {{"config"}, {"nats"},   {"key"},    {"ledger"}, {"ledger-key"},
                                       {"nats-ca"}, {"sandbox", 0, false}, {"json", 0, false},
                                       {"replica-name"}};
  // A settings file of gatosd or of a worker: take what doctor needs, ignore the rest.
  std::vector<std::string> full = args;
  bool replicated = false;  // gatosd's settings say replicated: true
  for (size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (args[i] == "--config" && i + 1 < args.size()) path = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) path = args[i].substr(9);
    if (path.empty()) continue;
    std::vector<FlagSpec> service = {{"ledger"},      {"nats"},        {"http"},         {"republish-s"},
                                     {"sweep-ms"},    {"nats-wait-s"}, {"max-batch"},    {"no-fsync", 0, false},
                                     {"http-token-file"}, {"stream-replicas"}, {"state-dir"}, {"key"},
                                     {"ledger-key"},  {"ro-bind", 0, true, true}, {"name"}, {"concurrency"},
                                     {"sandbox"}, {"nats-ca"}, {"require-nats-auth", 0, false}, {"nats-auth-file"}, {"nats-pid-file"}, {"config"},
                                     {"replicated", 0, false}, {"replica-name"}};
    auto text = ReadFileToString(path, 1 << 20);
    if (!text.ok()) return UsageError("doctor", text.status().message());
    auto extra = ConfigArgs(*text, path, service, args);
    if (!extra.ok()) return UsageError("doctor", extra.status().message());
    for (size_t k = 0; k + 1 < extra->size(); ++k) {
      const std::string& f = (*extra)[k];
      if (f == "--replicated") {
        replicated = true;
      } else if (f == "--nats" || f == "--key" || f == "--ledger" || f == "--ledger-key" || f == "--nats-ca" ||
                 f == "--replica-name") {
        full.push_back(f);
        full.push_back((*extra)[++k]);
      } else if (f == "--sandbox") {
        ++k;
        full.push_back("--sandbox");
      }
    }
  }
  Flags flags;
  if (!flags.Parse(full, specs)) return UsageError("doctor", flags.error());
  if (flags.help()) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (!flags.positional().empty()) return UsageError("doctor", "unexpected argument (see --help)");
  const bool as_json = flags.Has("json");
  Report report;
  CheckGit(&report);

  // Keys, ledger, policy.
  std::optional<Ed25519PrivateKey> key;
  if (auto k = flags.Get("key")) key = CheckKeyFile(&report, "key", *k);
  std::optional<Policy> policy;
  if (auto dir = flags.Get("ledger")) {
    auto ledger = Ledger::Open(*dir);
    if (!ledger.ok()) {
      report.Add("ledger", Outcome::kFail, ledger.status().message(),
                 "give the ledger repository (gatosd init DIR creates one)");
    } else {
      auto p = (*ledger)->ReadPolicy();
      if (!p.ok()) {
        report.Add("ledger", Outcome::kFail, "policy: " + p.status().message(),
                   "the ledger's refs/gatos/policy must be a valid policy commit");
      } else {
        policy = std::move(*p);
        report.Add("ledger", Outcome::kOk,
                   *dir + ": policy valid (" + std::to_string(policy->workers.entries().size()) + " worker(s), " +
                       std::to_string(policy->submitters.entries().size()) + " submitter(s))");
        std::string ledger_key_path = *dir + "/gatos/ledger_key";
        if (access(ledger_key_path.c_str(), F_OK) == 0) {
          auto lk = CheckKeyFile(&report, "ledger-key-file", ledger_key_path);
          if (lk && lk->public_key() != policy->ledger_key) {
            report.Add("ledger-key-file", Outcome::kFail, ledger_key_path + " is not the key the policy names",
                       "restore the ledger key, or rotate it with gatos policy rotate-ledger-key");
          }
          if (!key && lk) key = std::move(*lk);
          CheckFrontDoor(&report, *dir);
        }
      }
    }
  }
  if (auto f = flags.Get("ledger-key")) {
    auto pub = ReadPublicKeyFile(*f);
    if (!pub.ok()) {
      report.Add("ledger-key", Outcome::kFail, pub.status().message(),
                 "write the ledger's public key there (gatos policy show --ledger DIR prints it)");
    } else if (policy && *pub != policy->ledger_key) {
      report.Add("ledger-key", Outcome::kFail, *f + " is not the key the ledger's policy names",
                 "copy the key 'gatos policy show --ledger DIR' prints");
    } else {
      report.Add("ledger-key", Outcome::kOk, *f + ": " + pub->WorkerId().substr(0, 20) + "...");
    }
  }
  bool is_worker = flags.Has("sandbox");
  if (key && policy) {
    std::string roles;
    if (key->public_key() == policy->ledger_key) roles += " ledger";
    for (const auto& e : policy->workers.entries()) {
      if (e.key == key->public_key()) {
        roles += " worker";
        is_worker = true;
      }
    }
    for (const auto& e : policy->submitters.entries()) {
      if (e.key == key->public_key()) roles += " submitter";
    }
    for (const auto& e : policy->operators.entries()) {
      if (e.key == key->public_key()) roles += " operator";
    }
    if (roles.empty()) {
      report.Add("policy", Outcome::kFail, "the key is not in the ledger's policy",
                 "gatos policy allow-worker (or allow-submitter) --ledger DIR KEY.pub");
    } else {
      report.Add("policy", Outcome::kOk, "the key is the policy's" + roles);
    }
  }

  // NATS: each member reachable and closed to anonymous clients; the key
  // authenticates; JetStream and gatosd answer.
  std::string tls_ca = flags.GetOr("nats-ca", "");
  if (auto urls_flag = flags.Get("nats")) {
    auto urls = SplitNatsUrls(*urls_flag);
    if (!urls.ok()) {
      report.Add("nats", Outcome::kFail, urls.status().message(), "give nats://HOST:PORT[,nats://HOST:PORT...]");
    } else {
      size_t reachable = 0;
      for (const auto& url : *urls) {
        auto anon = NatsAcceptsAnonymous(url, tls_ca);
        if (anon.ok()) ++reachable;
        if (!anon.ok()) {
          report.Add("nats", Outcome::kFail, url + ": " + anon.status().message(),
                     "start nats-server there (systemctl start nats-server) and open the port to this host");
        } else if (*anon) {
          report.Add("nats", Outcome::kFail, url + " lets anonymous clients in: anyone who reaches it can pose as gatosd",
                     "run nats-server with the configuration 'gatos nats-config --ledger DIR' prints");
        } else {
          report.Add("nats", Outcome::kOk, url + " answers and refuses anonymous clients");
        }
      }
      if (reachable == 0) {
        report.Add("nats-auth", Outcome::kSkip, "no NATS server answers");
      } else if (!key) {
        report.Add("nats-auth", Outcome::kSkip, "no key to authenticate with (--key, or --ledger on the ledger host)");
      } else {
        BusOptions bo;
        bo.url = *urls_flag;
        bo.name = "gatos doctor";
        auto denied = std::make_shared<std::atomic<bool>>(false);
        bo.on_async_error = [denied](const std::string& e) {
          if (e.find("ermission") != std::string::npos) *denied = true;
        };
        bo.max_reconnect = 0;
        bo.tls_ca_file = tls_ca;
        SetBusIdentity(&bo, *key);
        auto bus = Bus::Connect(bo);
        Status flushed = bus.ok() ? (*bus)->Flush(3000) : bus.status();
        if (!flushed.ok()) {
          report.Add("nats-auth", Outcome::kFail, flushed.message(),
                     "the key must be in the policy and nats-server's configuration regenerated from it "
                     "(gatos nats-config) and reloaded (SIGHUP)");
        } else {
          report.Add("nats-auth", Outcome::kOk, "authenticated as " + key->public_key().WorkerId().substr(0, 20) + "...");
          auto consumer = (*bus)->GetConsumerState(rpc::kStream, rpc::kWorkerDurable);
          if (!consumer.ok()) {
            report.Add("jetstream", Outcome::kFail, consumer.status().message(),
                       "start gatosd (it creates the stream and the workers' consumer); nats-server needs JetStream");
          } else {
            report.Add("jetstream", Outcome::kOk,
                       std::string(rpc::kStream) + "/" + rpc::kWorkerDurable + ": " +
                           std::to_string(consumer->num_pending) + " waiting, " +
                           std::to_string(consumer->num_ack_pending) + " being worked on");
          }
          if (auto name = flags.Get("replica-name"); name || replicated) {
            CheckReplica(&report, **bus, flags.GetOr("ledger", ""), name.value_or(""));
          }
          // gatosd and the clocks: workers may not list jobs, so they learn
          // gatosd is alive from the consumer above only.
          bool may_list = policy ? !is_worker || key->public_key() == policy->ledger_key : !is_worker;
          if (may_list) {
            int64_t sent = SystemNowMs();
            auto reply = (*bus)->Request(rpc::kList, rpc::Dump(rpc::ListRequestJson({std::nullopt, "", 1})), 5000);
            int64_t back = SystemNowMs();
            json j = reply.ok() ? json::parse(reply->data, nullptr, false) : json();
            if (!reply.ok() && *denied) {
              report.Add("clock", Outcome::kSkip,
                         "this key may not ask gatosd the time (a worker's); run gatos doctor on the ledger host, "
                         "and NTP here");
            } else if (!reply.ok()) {
              report.Add("gatosd", Outcome::kFail, "no reply on " + std::string(rpc::kList) + ": " + reply.status().message(),
                         "start gatosd (systemctl start gatosd) with the same NATS URLs");
            } else if (!j.is_object() || !j.contains("now_ms")) {
              report.Add("gatosd", Outcome::kWarn, "gatosd answers but does not tell its time (an older gatosd?)");
            } else {
              int64_t skew = j.value("now_ms", int64_t{0}) - (sent + back) / 2;
              int64_t bound = (back - sent) / 2;
              int64_t off = std::max<int64_t>(std::abs(skew) - bound, 0);
              std::string d = "gatosd answers; this clock is " + std::to_string(std::abs(skew)) + " ms " +
                              (skew > 0 ? "behind" : "ahead of") + " the ledger's (round trip " +
                              std::to_string(back - sent) + " ms)";
              if (off > 2000) {
                report.Add("clock", Outcome::kFail, d, "run NTP (systemd-timesyncd or chrony) on both hosts");
              } else {
                report.Add("clock", Outcome::kOk, d);
              }
            }
          } else {
            report.Add("clock", Outcome::kSkip,
                       "a worker key may not ask gatosd the time; run gatos doctor on the ledger host, and NTP here");
          }
        }
      }
    }
  }

  if (is_worker) {
    Status s = ProbeSandbox();
    if (s.ok()) {
      report.Add("sandbox", Outcome::kOk, "bubblewrap builds a job sandbox");
    } else {
      report.Add("sandbox", Outcome::kFail, s.message(),
                 "install bubblewrap and allow unprivileged user namespaces "
                 "(sysctl kernel.unprivileged_userns_clone=1), or run the worker with --sandbox off on a trusted host");
    }
    CheckCgroups(&report);
  }
  report.Print(as_json);
  return report.failed() ? kExitFailure : kExitOk;
}

}  // namespace gatos::cli
