// gatos cluster status: each replica of a replicated ledger, as it reports
// itself in the ledger's leader bucket (docs/replication.md, "Status").
#include <algorithm>
#include <cstdio>
#include <iostream>

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
      "\"term\",\"log_seq\",\"lag_ms\"}]}. Reads the ledger's KV bucket, so the NATS\n"
      "identity (GATOS_NATS_KEY) needs access to it (the ledger key has).\n";
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
  if (flags.Has("json")) {
    std::cout << ClusterStatusJson(replicas) << "\n";
    return kExitOk;
  }
  if (replicas.empty()) {
    std::cout << "no replica reported itself (none runs with --replicated)\n";
    return kExitFailure;
  }
  std::sort(replicas.begin(), replicas.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::printf("%-20s %-9s %8s %10s %8s\n", "NAME", "ROLE", "TERM", "LOG SEQ", "LAG MS");
  for (const auto& r : replicas) {
    std::printf("%-20s %-9s %8llu %10lld %8lld\n", r.name.c_str(), r.role.c_str(),
                static_cast<unsigned long long>(r.term), static_cast<long long>(r.log_seq),
                static_cast<long long>(r.lag_ms));
  }
  return kExitOk;
}

}  // namespace gatos::cli
