// gatos cluster status: each replica of a replicated ledger, as it reports
// itself in the ledger's leader bucket (docs/replication.md, "Status").
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "gatos/ledger/replica_id.h"
#include "gatos/model/replica_status.h"
#include "gatos/nats/kv_bucket.h"
#include "gatos/sys/flags.h"
#include "ledger_client.h"

namespace gatos::cli {

int RunClusterStatus(const Args& args) {
  static const char kHelp[] =
      "usage: gatos cluster status --ledger DIR --nats URL [--json]\n\n"
      "Prints each replica of the replicated ledger DIR (any replica's repository)\n"
      "that reported itself in the last few seconds: name, role (leader or\n"
      "follower), term, log sequence and lag (how long since it last held every\n"
      "record of the replicated log). --json: {\"replicas\":[{\"name\",\"role\",\n"
      "\"term\",\"log_seq\",\"lag_ms\",\"reads\"}]}. Reads the ledger's KV bucket, so the\n"
      "NATS identity (GATOS_NATS_KEY) needs access to it (the ledger key has).\n"
      "READS: whether the replica answers reads on its own subjects\n"
      "(gatos.replica.NAME.*, what 'gatos status --replica NAME' asks), with the round\n"
      "trip; \"reads\" in --json: {\"ok\",\"ms\"} or {\"ok\":false,\"error\"}.\n";
  Flags flags;
  if (!flags.Parse(args, {{"ledger"}, {"nats"}, {"json", 0, false}})) return UsageError("cluster status", flags.error());
  if (flags.help()) {
    std::cout << kHelp;
    return kExitOk;
  }
  auto ledger = flags.Get("ledger");
  auto url = flags.Get("nats");
  if (!ledger || !url) return UsageError("cluster status", "--ledger DIR and --nats URL are required");
  auto id = ReplicaLedgerId(*ledger);
  if (!id.ok()) return ReportError("gatos cluster status: " + id.status().message(), kExitFailure);
  auto bus = ConnectGatosd(*url);
  if (!bus.ok()) return ReportError("gatos cluster status: " + bus.status().message(), kExitFailure);
  auto kv = KvBucket::OpenExisting(**bus, LeaderBucketName(*id));
  if (!kv.ok()) {
    return ReportError("gatos cluster status: " + kv.status().message() +
                           (kv.status().code() == StatusCode::kNotFound
                                ? " (no replica of this ledger runs with --replicated on this NATS)"
                                : ""),
                       kExitFailure);
  }
  auto keys = (*kv)->Keys();
  if (!keys.ok()) return ReportError("gatos cluster status: " + keys.status().message(), kExitFailure);
  std::vector<ReplicaStatus> replicas;
  const std::string prefix = kReplicaStatusKeyPrefix;
  for (const auto& k : *keys) {
    if (k.rfind(prefix, 0) != 0) continue;
    auto e = (*kv)->Get(k);
    if (!e.ok() || !e->has_value()) continue;  // expired meanwhile
    auto s = DecodeReplicaStatus((*e)->value);
    if (!s.ok()) {
      std::cerr << "gatos cluster status: ignoring " << k << ": " << s.status().message() << "\n";
      continue;
    }
    replicas.push_back(std::move(*s));
  }
  // Each replica's own read subjects, asked once (2 s each at most).
  std::map<std::string, nlohmann::json> reads;
  for (const auto& r : replicas) {
    auto probe = ProbeReplicaReads(**bus, r.name, 2000);
    reads[r.name] = probe.ok() ? nlohmann::json{{"ok", true}, {"ms", (*probe)["read_ms"]}}
                               : nlohmann::json{{"ok", false}, {"error", probe.status().message()}};
  }
  if (flags.Has("json")) {
    nlohmann::json out = nlohmann::json::parse(ClusterStatusJson(replicas));
    for (auto& r : out["replicas"]) r["reads"] = reads[r.value("name", "")];
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  if (replicas.empty()) {
    std::cout << "no replica reported itself (none runs with --replicated)\n";
    return kExitFailure;
  }
  std::sort(replicas.begin(), replicas.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::printf("%-20s %-9s %8s %10s %8s  %s\n", "NAME", "ROLE", "TERM", "LOG SEQ", "LAG MS", "READS");
  for (const auto& r : replicas) {
    const nlohmann::json& rd = reads[r.name];
    const std::string answer =
        rd.value("ok", false) ? std::to_string(rd.value("ms", int64_t{0})) + " ms" : std::string("no answer");
    std::printf("%-20s %-9s %8llu %10lld %8lld  %s\n", r.name.c_str(), r.role.c_str(),
                static_cast<unsigned long long>(r.term), static_cast<long long>(r.log_seq),
                static_cast<long long>(r.lag_ms), answer.c_str());
  }
  return kExitOk;
}

}  // namespace gatos::cli
