#include "gatos/model/nats_auth.h"

#include <map>
#include <set>

#include "gatos/model/live_output.h"
#include "gatos/model/rpc.h"

namespace gatos {
namespace {

constexpr char kBase32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

uint16_t Crc16(const std::string& data) {
  // CRC-16/XMODEM, as the nkeys encoding uses.
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

std::string Base32NoPad(const std::string& data) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : data) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 5) {
      out += kBase32[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kBase32[(buffer << (5 - bits)) & 31];
  return out;
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string List(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + Quote(items[i]);
  return out + "]";
}

}  // namespace

std::string NkeyUserPublic(const Ed25519PublicKey& key) {
  std::string raw(1, static_cast<char>(20 << 3));  // the nkeys prefix byte of a user key: 'U'
  raw.append(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size());
  uint16_t crc = Crc16(raw);
  raw.push_back(static_cast<char>(crc & 0xff));  // little-endian
  raw.push_back(static_cast<char>(crc >> 8));
  return Base32NoPad(raw);
}

std::string InboxPrefixFor(const Ed25519PublicKey& key) {
  return "_INBOX_" + key.Hex().substr(0, 16);
}

std::vector<std::string> WorkerPublishSubjects(const std::vector<std::string>& pools) {
  std::string consumer = std::string(rpc::kStream) + "." + rpc::kWorkerDurable;
  std::vector<std::string> out = {rpc::kClaim,
          rpc::kRenew,
          rpc::kResult,
          rpc::kClaimBatch,
          rpc::kResultBatch,
          "$JS.API.CONSUMER.INFO." + consumer,
          "$JS.API.CONSUMER.MSG.NEXT." + consumer,
          "$JS.ACK." + consumer + ".>",
          rpc::kWorkerHeartbeat,
          std::string(kLiveSubjectPrefix) + "*.*.*"};
  // The consumers of the other pools the worker may serve (rpc::WorkerDurableFor).
  for (const std::string& pool : pools) {
    if (pool == kDefaultPool) continue;
    std::string c = std::string(rpc::kStream) + "." + rpc::WorkerDurableFor(pool);
    for (const char* api : {"$JS.API.CONSUMER.INFO.", "$JS.API.CONSUMER.MSG.NEXT."}) out.push_back(api + c);
    out.push_back("$JS.ACK." + c + ".>");
  }
  return out;
}

std::vector<std::string> UserPublishSubjects() {
  // Reads from a replica by name (names may hold dots: ">") or from any.
  return {rpc::kSubmit, rpc::kStatus, rpc::kList, rpc::kCancel, rpc::kRetry, rpc::kLogs, rpc::kPools,
          std::string(rpc::kReplicaReadPrefix) + ">", std::string(rpc::kAnyReplicaReadPrefix) + "*"};
}

std::string NatsAuthorizationConfig(const Policy& policy) {
  // key hex -> roles
  std::map<std::string, std::pair<Ed25519PublicKey, std::set<std::string>>> users;
  auto add = [&](const Ed25519PublicKey& k, const char* role) {
    auto& u = users[k.Hex()];
    u.first = k;
    u.first.comment.clear();
    u.second.insert(role);
  };
  add(policy.ledger_key, "ledger");
  for (const auto& e : policy.workers.entries()) {
    if (!e.cert_authority) add(e.key, "worker");
  }
  for (const auto& e : policy.submitters.entries()) {
    if (!e.cert_authority) add(e.key, "user");
  }
  for (const auto& e : policy.operators.entries()) {
    if (!e.cert_authority) {
      add(e.key, "user");
      add(e.key, "operator");
    }
  }
  // Pools: the ones the policy lets each worker serve; a worker it does not
  // list may serve every pool the policy names.
  const SchedulingPolicy& sched = policy.settings.scheduling;
  std::set<std::string> named(sched.paused.begin(), sched.paused.end());
  for (const auto& [k, pools] : sched.worker_pools) named.insert(pools.begin(), pools.end());
  for (const auto& [k, pools] : sched.submitter_pools) named.insert(pools.begin(), pools.end());
  for (const auto& [pool, n] : sched.pool_max_running) named.insert(pool);
  std::string out =
      "# nats-server authorization for a GATOS ledger, generated from its policy\n"
      "# (gatos nats-config). One user per key; no anonymous access.\n"
      "authorization {\n  users = [\n";
  for (const auto& [hex, user] : users) {
    const auto& [key, roles] = user;
    std::string names;
    for (const char* r : {"ledger", "worker", "user"}) {
      if (!roles.count(r)) continue;
      names += std::string(names.empty() ? "" : " ") +
               (std::string(r) == "user" ? "submitter/operator" : r);
    }
    out += "    # " + names + " " + key.WorkerId() + "\n";
    out += "    { nkey: " + NkeyUserPublic(key);
    if (roles.count("ledger")) {
      out += ", permissions: { publish: \">\", subscribe: \">\" } }\n";
      continue;
    }
    std::vector<std::string> pub, sub = {InboxPrefixFor(key) + ".>"};
    if (roles.count("worker")) {
      auto listed = sched.worker_pools.find(hex);
      std::vector<std::string> pools = listed != sched.worker_pools.end()
                                           ? listed->second
                                           : std::vector<std::string>(named.begin(), named.end());
      for (auto& s : WorkerPublishSubjects(pools)) pub.push_back(s);
      sub.push_back(std::string(rpc::kCancelEventPrefix) + "*");
    }
    if (roles.count("user")) {
      for (auto& s : UserPublishSubjects()) pub.push_back(s);
      // Live output of the jobs this key signed; an operator's, of every job.
      sub.push_back(roles.count("operator") ? std::string(kLiveSubjectPrefix) + ">"
                                            : std::string(kLiveSubjectPrefix) + key.Hex() + ".>");
    }
    out += ",\n      permissions: { publish: { allow: " + List(pub) + " },\n";
    out += "                     subscribe: { allow: " + List(sub) + " } } }\n";
  }
  out += "  ]\n}\n";
  return out;
}

}  // namespace gatos
