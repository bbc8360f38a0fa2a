// libFuzzer target: what a follower of a replicated ledger does with a push
// before it asks the leader (follower_door.h, PlanForward): the request
// from its front door's hook, and the pushed objects it reads, which the
// pusher wrote. The objects are written to a real repository as git
// received them (no checks), so commits and trees may be anything.
//
// Input: the first byte picks the form.
//   2 mod 4  a witness commit signed by a fixed key, written to the
//         repository (its sequence, log commit and time from the input),
//         pushed under its own key's name or another; or a schedule
//         commit signed by that key whose template echoes the input
//   0 mod 4  the rest is the request as is, on a subject the second byte
//         picks (push-submit, push-result, push-witness, rejected,
//         schedule, policy)
//   odd   a job commit (a valid job.yaml, the Job-Id trailer, with a
//         parent when bit 1 is set) whose tree holds, besides job.yaml,
//         entries the rest describes three bytes at a time (mode, the
//         object named: the job's blob, a tree of the same kind, a
//         submodule or 20 raw bytes, and a name); every object is written,
//         a push of the commit is planned, and ForwardedJobObjects walks it
// Invariants: no crash or sanitizer report; a refusal is a JSON error
// reply; a forward names a 64-hex job, the submit or result RPC (a result
// naming its commit) and a frame whose first object is the commit, at most
// 8 objects for a submit; a forwarded witness or schedule names the ref it
// waits for and the commit its frame carries first.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "follower_door.h"
#include "gatos/crypto/keys.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/ledger/witness.h"
#include "gatos/git/result.h"
#include "gatos/model/encoding.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"

namespace {

std::unique_ptr<gatos::Ledger> g_ledger;
gatos::Policy g_policy;
std::string g_blob, g_job_hex, g_empty_tree, g_empty_commit;  // written at start

void CheckPlan(const gatos::gatosd::ForwardPlan& plan, const std::string& commit) {
  if (!plan.reply.empty()) {
    auto j = nlohmann::json::parse(plan.reply, nullptr, false);
    if (!j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
      fprintf(stderr, "refusal is not a JSON reply: %s\n", plan.reply.c_str());
      abort();
    }
    return;
  }
  if (plan.subject == nullptr) abort();
  const std::string_view subject = plan.subject;
  if (subject == gatos::rpc::kForwardWitness || subject == gatos::rpc::kForwardSchedule) {
    // Forwarded for a ref: the frame names the commit the ref will hold.
    nlohmann::json header;
    std::string_view batch;
    if (plan.ref.empty() || !gatos::IsLowerHex(plan.ref_commit, 40) || !plan.job_hex.empty()) abort();
    if (!gatos::rpc::DecodeFrame(plan.frame, gatos::rpc::kMaxJsonRequest, &header, &batch).ok()) abort();
    if (header.value("commit", "") != plan.ref_commit) abort();
    auto objects = gatos::DecodeObjectBatch(batch, gatos::BatchLimits{});
    if (!objects.ok() || objects->empty() || objects->front().id != plan.ref_commit) abort();
    return;
  }
  if (!gatos::IsLowerHex(plan.job_hex, 64)) abort();
  const bool result = plan.subject == std::string_view(gatos::rpc::kResult);
  if (!result && plan.subject != std::string_view(gatos::rpc::kSubmit)) abort();
  if (result != !plan.result_commit.empty() || (result && plan.result_commit != commit)) abort();
  nlohmann::json header;
  std::string_view batch;
  if (!gatos::rpc::DecodeFrame(plan.frame, gatos::rpc::kMaxJsonRequest, &header, &batch).ok()) abort();
  auto objects = gatos::DecodeObjectBatch(batch, gatos::BatchLimits{});
  const size_t most = result ? gatos::BatchLimits{}.max_objects : 8;
  if (!objects.ok() || objects->empty() || objects->size() > most || objects->front().id != commit) abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static char tmpl[] = "/tmp/gatos-follower-push-fuzz-XXXXXX";
  if (!mkdtemp(tmpl)) abort();
  std::atexit([] {
    g_ledger.reset();
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
  });
  const std::string dir = std::string(tmpl) + "/ledger.git";
  if (!gatos::Ledger::InitRepository(dir).ok()) abort();
  auto l = gatos::Ledger::Open(dir);
  if (!l.ok()) abort();
  g_ledger = std::move(*l);
  g_policy.settings.dev_mode = true;  // unsigned commits pass, so the walk is reached
  const std::string yaml = "command: [\"/bin/true\"]\ntimeout: 30\n";
  auto m = gatos::ParseManifest(yaml, "job.yaml");
  if (!m.ok()) abort();
  g_job_hex = gatos::JobIdHex(*m);
  auto blob = g_ledger->WriteBlob(yaml);
  auto empty = g_ledger->WriteRawObject(gatos::ObjectType::kTree, "");
  if (!blob.ok() || !empty.ok()) abort();
  g_blob = *blob;
  g_empty_tree = *empty;
  auto root = g_ledger->WriteRawObject(gatos::ObjectType::kCommit,
                                       "tree " + g_empty_tree +
                                           "\nauthor A <a@example.com> 1 +0000\ncommitter A <a@example.com> 1 +0000\n\nroot\n");
  if (!root.ok()) abort();
  g_empty_commit = *root;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const uint8_t form = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  const int64_t now = 1'800'000'000'000;
  if ((form & 3) == 2) {
    // A signed witness (written to the repository, as a push leaves it) or
    // a signed schedule commit (in the frame, as `gatos schedule` sends
    // it), their fields from the input: the forward path is reached.
    static const gatos::Ed25519PrivateKey key = *gatos::GenerateEd25519Key("fuzz-witness");
    const uint8_t pick = static_cast<uint8_t>(in[0]);
    const std::string text(in.substr(1));
    if (pick & 1) {
      gatos::WitnessStatement w{g_empty_commit, static_cast<int64_t>(pick >> 1), std::string(40, 'a' + (pick & 3)),
                                "", now + static_cast<int64_t>(text.size())};
      if (text.size() >= 40 && gatos::IsLowerHex(text.substr(0, 40), 40)) w.log_commit = text.substr(0, 40);
      auto c = gatos::BuildWitnessCommit(w, key);
      if (!c.ok()) abort();
      auto id = g_ledger->WriteRawObject(c->type, c->data);
      if (!id.ok() || *id != c->id) abort();
      const std::string named = (pick & 2) ? key.public_key().Hex() : std::string(64, 'b');
      gatos::ServiceRequest r{gatos::rpc::kLocalPushWitness,
                              nlohmann::json{{"commit", c->id}, {"key", named}}.dump(), now};
      const gatos::gatosd::ForwardPlan plan = gatos::gatosd::PlanForward(g_ledger.get(), g_policy, r, now);
      CheckPlan(plan, c->id);
      if (plan.reply.empty() && (plan.ref != gatos::WitnessRef(named) || plan.ref_commit != c->id)) abort();
    } else {
      gatos::ScheduleSpec spec;
      spec.name = "fuzz";
      spec.every_ms = 1000 * (1 + (pick >> 1));
      auto m = gatos::ParseManifest("command: [\"/bin/echo\", " + nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                        "]\ntimeout: 30\n",
                                    "job.yaml");
      if (!m.ok()) return 0;
      spec.job = *m;
      auto objects = gatos::BuildScheduleCommit(spec, "active", "", key, now);
      if (!objects.ok()) return 0;
      const std::string frame =
          gatos::rpc::EncodeFrame({{"commit", objects->front().id}}, gatos::EncodeObjectBatch(*objects));
      gatos::ServiceRequest r{gatos::rpc::kLocalSchedule, frame, now};
      const gatos::gatosd::ForwardPlan plan = gatos::gatosd::PlanForward(g_ledger.get(), g_policy, r, now);
      CheckPlan(plan, objects->front().id);
      if (!plan.reply.empty() || plan.ref != "refs/gatos/schedules/fuzz" || plan.frame != frame) abort();
    }
    return 0;
  }
  if (!(form & 1)) {
    const char* subjects[] = {gatos::rpc::kLocalPushSubmit, gatos::rpc::kLocalPushResult,
                              gatos::rpc::kLocalPushWitness, gatos::rpc::kLocalRejected,
                              gatos::rpc::kLocalSchedule, gatos::rpc::kLocalPolicy};
    gatos::ServiceRequest r{subjects[static_cast<uint8_t>(in[0]) % 6], std::string(in.substr(1)), now};
    CheckPlan(gatos::gatosd::PlanForward(g_ledger.get(), g_policy, r, now), "");
    return 0;
  }
  // Tree entries from the input: mode, what it names, a name.
  auto raw_id = [](const std::string& hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    return out;
  };
  std::string sub = g_empty_tree;  // the tree entries of kind "tree" name: the one written last
  std::string tree_bytes;
  std::string entries = "100644 job.yaml";
  entries += '\0';
  entries += raw_id(g_blob);
  int n = 0;
  while (in.size() >= 3 && n < 64) {
    const uint8_t mode = static_cast<uint8_t>(in[0]), what = static_cast<uint8_t>(in[1]),
                  len = static_cast<uint8_t>(in[2]) % 16;
    in.remove_prefix(3);
    const char* modes[] = {"100644", "100755", "40000", "160000", "120000", "644", "40000 x", ""};
    std::string name(in.substr(0, std::min<size_t>(len, in.size())));
    in.remove_prefix(name.size());
    std::string id;
    switch (what % 4) {
      case 0: id = raw_id(g_blob); break;
      case 1: id = raw_id(sub); break;
      case 2: id = raw_id(g_empty_tree); break;
      default:
        id = std::string(in.substr(0, std::min<size_t>(20, in.size())));
        in.remove_prefix(id.size());
        id.resize(20, '\x01');
    }
    entries += std::string(modes[mode % 8]) + " " + (name.empty() ? "f" + std::to_string(n) : name);
    entries += '\0';
    entries += id;
    ++n;
    if (what & 8) {  // the entries so far become a tree of their own
      auto t = g_ledger->WriteRawObject(gatos::ObjectType::kTree, entries);
      if (t.ok()) sub = *t;
    }
  }
  tree_bytes = entries;
  auto tree = g_ledger->WriteRawObject(gatos::ObjectType::kTree, tree_bytes);
  if (!tree.ok()) return 0;
  std::string body = "tree " + *tree + "\n";
  if (form & 2) body += "parent " + g_empty_commit + "\n";
  body += "author A <a@example.com> 1 +0000\ncommitter A <a@example.com> 1 +0000\n\na job\n\nJob-Id: blake3:" +
          g_job_hex + "\n";
  auto commit = g_ledger->WriteRawObject(gatos::ObjectType::kCommit, body);
  if (!commit.ok()) return 0;
  gatos::ServiceRequest r{gatos::rpc::kLocalPushSubmit, nlohmann::json{{"commit", *commit}}.dump(), now};
  CheckPlan(gatos::gatosd::PlanForward(g_ledger.get(), g_policy, r, now), *commit);
  auto objects = gatos::gatosd::ForwardedJobObjects(*g_ledger, *commit);
  if (objects.ok() && (objects->empty() || objects->size() > 8 || objects->front().id != *commit)) abort();
  return 0;
}
