// libFuzzer target: a claim or renew reply as a worker receives it from the
// bus (anyone may answer in gatosd's place): a single JSON reply or a batch
// of them (rpc::EncodeBatch). The ok entries' grants and their one signature
// go through VerifyReplyGrants; the first input byte, when odd, makes the
// target sign the grants it can parse with the ledger key itself, so the
// objects behind a validly signed grant (lease commit, job commit, tree,
// job.yaml: DecodeObjectBatch, ParseRawCommit, ParseTree, ParseManifest)
// are fuzzed too, through VerifyGrant and VerifyRenewal.
// Invariants: no crash; a reply accepted unsigned-by-us was signed by the
// ledger key (never, from the fuzzer); a grant accepted names the lease
// commit signed, and its job.yaml hashes to the job asked for.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/grant.h"
#include "gatos/model/encoding.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"

namespace {

const gatos::Ed25519PrivateKey& LedgerKey() {
  static const gatos::Ed25519PrivateKey key = gatos::Ed25519PrivateKey::FromSeed(std::array<uint8_t, 32>{7}, "ledger");
  return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool self_sign = data[0] & 1;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string_view> entries;
  if (gatos::rpc::IsBatch(bytes)) {
    auto e = gatos::rpc::DecodeBatch(bytes);
    if (!e.ok()) return 0;
    entries = *e;
  } else {
    entries.push_back(bytes);
  }
  std::vector<nlohmann::json> bodies;
  for (std::string_view e : entries) {
    auto j = nlohmann::json::parse(e, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    auto ok = j.find("ok");
    if (ok == j.end() || !ok->is_boolean() || !ok->get<bool>()) continue;
    bodies.push_back(std::move(j));
  }
  const std::vector<gatos::Ed25519PublicKey> keys = {LedgerKey().public_key()};
  if (self_sign) {
    std::vector<gatos::rpc::Grant> grants;
    for (const auto& b : bodies) {
      auto g = gatos::rpc::ParseGrantFields(b);
      if (g.ok()) grants.push_back(*g);
    }
    auto sig = gatos::Ed25519Sign(LedgerKey(), gatos::rpc::GrantsPayload(grants));
    for (auto& b : bodies) b[gatos::rpc::kGrantSigField] = gatos::HexEncode(sig.data(), sig.size());
  }
  std::vector<const nlohmann::json*> ptrs;
  for (const auto& b : bodies) ptrs.push_back(&b);
  auto grants = gatos::VerifyReplyGrants(ptrs, keys);
  if (!grants.ok()) return 0;
  if (!self_sign && !bodies.empty()) abort();  // the fuzzer forged the ledger's signature
  if (grants->size() != bodies.size()) abort();
  for (size_t i = 0; i < bodies.size(); ++i) {
    const gatos::rpc::Grant& g = (*grants)[i];
    gatos::LeaseRequest sent;
    sent.job_hex = g.job_hex;
    sent.epoch = g.epoch;
    const std::string objects = gatos::ReplyObjects(bodies[i]);
    // The request a lease commit in the reply answers, when the input names
    // one, so the checks past it are reached.
    auto text = [&](const char* name) {
      auto it = bodies[i].find(name);
      return it != bodies[i].end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    sent.worker_hex = text("worker");
    sent.sig_hex = text("sig");
    auto at = bodies[i].find("requested_at");
    if (at != bodies[i].end() && at->is_number_integer()) sent.requested_at_ms = at->get<int64_t>();
    auto v = gatos::VerifyGrant(objects, g, sent);
    if (v.ok() && (v->lease_commit != g.lease_commit || gatos::JobIdHexOfCanonical(v->canonical) != g.job_hex)) {
      abort();
    }
    auto r = gatos::VerifyRenewal(objects, g, keys, sent);
    if (r.ok() && r->lease_commit != g.lease_commit) abort();
  }
  return 0;
}
