// Hostile jobs and a hostile bus against the worker, with real processes
// (nats-server, gatosd, gatos-worker): a forged grant is never run, a job
// that is not a scan job cannot reach the scan state, and poison outputs
// end `failed` in the first epoch instead of running again forever.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "gatos/crypto/keys.h"
#include "gatos/git/result.h"
#include "gatos/model/clock.h"
#include "gatos/model/encoding.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/nats/bus.h"
#include "stack.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

using nlohmann::json;

bool FileExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

class WorkerSecurityTest : public ::testing::Test {
 protected:
  RunResult Git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"git", "--git-dir", stack_->ledger()};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions ro;
    ro.env = stack_->env();
    return testing::Run(argv, ro);
  }
  std::string ResultCommit(const std::string& id) {
    return TrimEnd(Git({"rev-parse", "--verify", "-q", "refs/gatos/jobs/" + id.substr(7) + "/result"}).out);
  }
  json Poe(const std::string& id) {
    json j = json::parse(Git({"show", ResultCommit(id) + ":poe.json"}).out, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }
  std::string Show(const std::string& id, const std::string& path) {
    return Git({"show", ResultCommit(id) + ":" + path}).out;
  }
  json Status(const std::string& id) {
    RunResult r = stack_->Gatos({"status", id, "--ledger", stack_->ledger(), "--json"});
    json j = json::parse(r.out, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }
  RunResult Wait(const std::string& id, int seconds = 60) {
    return stack_->Gatos({"wait", id, "--ledger", stack_->nats_url(), "--timeout", std::to_string(seconds)},
                         seconds + 30);
  }
  // The job ended `failed` with its first lease: no retry, no takeover.
  void ExpectFailedInOneEpoch(const std::string& id, const std::string& reason_part) {
    RunResult w = Wait(id);
    EXPECT_EQ(w.exit_code, 1) << w.out << w.err << stack_->worker(0)->log();
    json st = Status(id);
    EXPECT_EQ(st.value("state", ""), "failed") << st.dump();
    EXPECT_EQ(st.value("epoch", 0), 1) << st.dump();
    json poe = Poe(id);
    EXPECT_EQ(poe.value("lease_epoch", 0), 1) << poe.dump();
    std::string reason = poe.value("reason", "");
    EXPECT_NE(reason.find(reason_part), std::string::npos) << reason;
    // Nothing of the poison reached the ledger's tree.
    EXPECT_EQ(Git({"ls-tree", "-r", "--name-only", ResultCommit(id), "outputs"}).out, "");
  }

  std::unique_ptr<Stack> stack_;
};

TEST_F(WorkerSecurityTest, PoisonOutputNamesEndFailedInOneEpoch) {
  stack_ = std::make_unique<Stack>();
  ASSERT_TRUE(stack_->Start());
  stack_->StartWorker(0);
  std::string git_config = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\"]\n"
      "args: ['mkdir -p \"$GATOS_OUTPUT_DIR/.git\" && echo \"[core]\" > \"$GATOS_OUTPUT_DIR/.git/config\"']\n"
      "timeout: 30\n");
  std::string not_utf8 = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\"]\n"
      "args: ['echo x > \"$GATOS_OUTPUT_DIR/$(printf \"bad\\377name\")\"']\n"
      "timeout: 30\n");
  ExpectFailedInOneEpoch(git_config, "'.git' component");
  ExpectFailedInOneEpoch(not_utf8, "is not valid UTF-8");
  // The job's own stdout and stderr are still reported.
  EXPECT_EQ(Show(git_config, "stderr"), "");
}

TEST_F(WorkerSecurityTest, HundredThousandEmptyOutputFilesEndFailedInOneEpoch) {
  stack_ = std::make_unique<Stack>();
  ASSERT_TRUE(stack_->Start());
  stack_->StartWorker(0);
  std::string id = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\"]\n"
      "args: ['cd \"$GATOS_OUTPUT_DIR\" && seq 1 100000 | xargs touch && echo made']\n"
      "timeout: 120\n");
  ExpectFailedInOneEpoch(id, "more than");
  EXPECT_EQ(Show(id, "stdout"), "made\n");
  RunResult st = testing::Run({BinaryPath("gatos-worker"), "status", "--state-dir", stack_->worker_state(0), "--json"});
  json health = json::parse(st.out, nullptr, false);
  ASSERT_FALSE(health.is_discarded()) << st.out << st.err;
  EXPECT_EQ(health["state"], "idle") << st.out;
  EXPECT_EQ(health["pending_bytes"], 0) << st.out;
}

TEST_F(WorkerSecurityTest, OversizedOutputsEndFailedInOneEpoch) {
  // The bus carries at most 1 MiB, the ledger's policy allows 4 MiB results:
  // a 2 MB output is within the policy but cannot be sent; a 5 MB one is
  // over the policy.
  stack_ = std::make_unique<Stack>(StackOptions{.nats_max_payload = 1 << 20});
  ASSERT_TRUE(stack_->Start());
  stack_->StartWorker(0);
  std::string over_bus = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\"]\n"
      "args: ['head -c 2000000 /dev/urandom > \"$GATOS_OUTPUT_DIR/big\"']\n"
      "timeout: 30\n");
  std::string over_policy = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\"]\n"
      "args: ['head -c 5000000 /dev/zero > \"$GATOS_OUTPUT_DIR/huge\"']\n"
      "timeout: 30\n");
  ExpectFailedInOneEpoch(over_bus, "could not be sent to the ledger");
  ExpectFailedInOneEpoch(over_policy, "result limit");
  // The result that could not be sent is a dead letter with the reason; the
  // small failed result took its place.
  RunResult st = testing::Run({BinaryPath("gatos-worker"), "status", "--state-dir", stack_->worker_state(0), "--json"});
  json health = json::parse(st.out, nullptr, false);
  ASSERT_FALSE(health.is_discarded()) << st.out << st.err;
  EXPECT_EQ(health["dead_letter"], 1) << st.out;
  EXPECT_NE(health["last_dead_error"].get<std::string>().find("cannot be sent"), std::string::npos) << st.out;
  EXPECT_EQ(health["queue_depth"], 0) << st.out;
}

TEST_F(WorkerSecurityTest, OnlyScanJobsReachTheScanState) {
  stack_ = std::make_unique<Stack>();
  ASSERT_TRUE(stack_->Start());
  std::string repo = stack_->dir().Join("repo");
  RunOptions ro;
  ro.env = stack_->env();
  ASSERT_EQ(testing::Run({"git", "init", "-q", "-b", "main", repo}, ro).exit_code, 0);
  WriteFile(repo + "/README", "nothing secret here\n");
  ro.cwd = repo;
  testing::Run({"git", "add", "."}, ro);
  ASSERT_EQ(testing::Run({"git", "commit", "-q", "-m", "first"}, ro).exit_code, 0);
  stack_->StartWorker(0, {"--ro-bind", repo});
  // A scan job fills the state: mirror, done-ledger, fingerprint key.
  std::string scan = stack_->PushJob("command: [\"gatos-scan\"]\nargs: [\"--repo\", \"" + repo +
                                     "\"]\nenv: {LD_PRELOAD: \"/nonexistent.so\"}\ntimeout: 120\n");
  RunResult w = Wait(scan, 120);
  ASSERT_EQ(w.exit_code, 0) << w.out << Show(scan, "stderr") << stack_->worker(0)->log();
  // It ran the worker's own gatos-scan, without the manifest's loader variables.
  EXPECT_EQ(Show(scan, "stderr").find("LD_PRELOAD"), std::string::npos) << Show(scan, "stderr");
  std::string state = stack_->worker_state(0) + "/scan";
  ASSERT_TRUE(FileExists(state + "/fingerprint.key"));
  ASSERT_TRUE(FileExists(state + "/scan.sqlite"));
  std::string key_before = ReadFile(state + "/fingerprint.key");
  std::string db_before = ReadFile(state + "/scan.sqlite");

  // A plain job knows where the state is and tries everything.
  std::string plain = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\"]\n"
      "args: ['S=" + state + "; "
      "ls \"$S\" >/dev/null 2>&1 && echo LISTED; "
      "cat \"$S/fingerprint.key\" >/dev/null 2>&1 && echo READ-KEY; "
      "ls \"$S/mirrors\" >/dev/null 2>&1 && echo READ-MIRRORS; "
      "echo poison >> \"$S/scan.sqlite\" 2>/dev/null && echo WROTE-DB; "
      "echo \"state=[$GATOS_STATE_DIR]\"']\n"
      "timeout: 30\n");
  RunResult pw = Wait(plain);
  ASSERT_EQ(pw.exit_code, 0) << pw.out << stack_->worker(0)->log();
  EXPECT_EQ(Show(plain, "stdout"), "state=[]\n");
  EXPECT_EQ(ReadFile(state + "/fingerprint.key"), key_before);
  EXPECT_EQ(ReadFile(state + "/scan.sqlite"), db_before);
  // A job that names gatos-scan by another path is a plain job too (and a
  // manifest cannot set GATOS_STATE_DIR: HostileInputsE2ETest).
  std::string impostor = stack_->PushJob(
      "command: [\"/bin/sh\", \"-c\"]\n"
      "args: ['echo \"state=[$GATOS_STATE_DIR]\"; ls " + state + " >/dev/null 2>&1 && echo LISTED; true']\n"
      "env: {PATH: \"/bin:/usr/bin\"}\n"
      "timeout: 30\n");
  ASSERT_EQ(Wait(impostor).exit_code, 0);
  EXPECT_EQ(Show(impostor, "stdout"), "state=[]\n");  // no variable, and no access
}

// A rogue subscriber on the claim subjects answers before gatosd with a
// grant of its own making: its own job.yaml (a command that leaves a
// marker), a lease commit allowing the network, and the reply's grant
// signature made with its own key (batch replies: with none).
TEST_F(WorkerSecurityTest, ForgedGrantFromARogueResponderIsRefusedAndNeverRuns) {
  stack_ = std::make_unique<Stack>();
  ASSERT_TRUE(stack_->Start());
  std::string marker = stack_->dir().Join("forged-grant-ran");
  auto rogue_key = GenerateEd25519Key("rogue");
  ASSERT_TRUE(rogue_key.ok());
  BusOptions bo;
  bo.url = stack_->nats_url();
  auto bus = Bus::Connect(bo);
  ASSERT_TRUE(bus.ok());
  Bus* rogue_bus = bus->get();
  std::atomic<int> forged{0};
  auto forge = [&](std::string_view request, bool sign) -> std::string {
    auto j = rpc::ParseRequest(request, rpc::kClaim);
    if (!j.ok()) return "";
    auto req = rpc::ParseLeaseRequest(*j, false);
    if (!req.ok()) return "";
    std::string yaml = "command: [\"/bin/sh\", \"-c\", \"touch " + marker + "\"]\ntimeout: 30\n";
    std::vector<GitObject> objects;
    std::string tree = *BuildTreeObjects({{"job.yaml", yaml, false}}, &objects);
    auto job = BuildCommitObject(tree, {}, "job\n\nJob-Id: blake3:" + req->job_hex + "\n", "r", "r@x",
                                 SystemNowMs(), &*rogue_key);
    LeaseCommitInfo info;
    info.kind = "claim";
    info.job_hex = req->job_hex;
    info.worker_hex = req->worker_hex;
    info.epoch = req->epoch;
    info.expires_ms = SystemNowMs() + 30000;
    info.requested_at_ms = req->requested_at_ms;
    info.request_sig_hex = req->sig_hex;
    info.lease_ms = 30000;
    info.output_cap_bytes = 1 << 20;
    info.max_result_bytes = 4 << 20;
    info.allow_network = true;
    auto empty = MakeObject(ObjectType::kTree, "");
    auto lease = BuildCommitObject(empty.id, {job->id}, FormatLeaseCommitMessage(info), "gatos ledger",
                                   "ledger@gatos.invalid", SystemNowMs(), nullptr);
    objects.insert(objects.begin(), *job);
    objects.insert(objects.begin(), *lease);
    objects.push_back(empty);
    std::string batch = EncodeObjectBatch(objects);
    ++forged;
    json reply = {{"ok", true},
                  {"attempt", 1},
                  {"objects", Base64Encode(reinterpret_cast<const uint8_t*>(batch.data()), batch.size())}};
    rpc::Grant g{req->job_hex, info.epoch, lease->id, info.expires_ms, job->id};
    rpc::SetGrantFields(g, &reply);
    if (sign) {
      auto sig = Ed25519Sign(*rogue_key, rpc::GrantsPayload({g}));
      reply[rpc::kGrantSigField] = HexEncode(sig.data(), sig.size());
    }
    return rpc::Dump(reply);
  };
  auto single = (*bus)->Subscribe(rpc::kClaim, [&](Message m) {
    std::string reply = forge(m.data, true);
    if (!reply.empty()) (void)rogue_bus->Respond(m, reply);  // a rogue: failures do not matter
  });
  auto batched = (*bus)->Subscribe(rpc::kClaimBatch, [&](Message m) {
    auto entries = rpc::DecodeBatch(m.data);
    if (!entries.ok()) return;
    std::vector<std::string> replies;
    for (auto e : *entries) replies.push_back(forge(e, false));
    (void)rogue_bus->Respond(m, rpc::EncodeBatch(replies));
  });
  ASSERT_TRUE(single.ok() && batched.ok());
  ASSERT_TRUE((*bus)->Flush(2000).ok());

  std::string id = stack_->PushJob("command: [\"/bin/true\"]\ntimeout: 30\n");
  // The offer is on the stream; then gatosd freezes, so the rogue's answer is
  // the only one the worker gets.
  uint64_t offered = 0;
  for (int i = 0; i < 200 && offered < 1; ++i) {
    auto cs = (*bus)->GetConsumerState(rpc::kStream, rpc::kWorkerDurable);
    if (cs.ok()) offered = cs->num_pending;
    if (offered < 1) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_GE(offered, 1u) << "the job was never offered on the stream";
  kill(stack_->gatosd().pid(), SIGSTOP);
  ChildProcess* w = stack_->StartWorker(0, {"--sandbox", "off"});
  EXPECT_TRUE(w->WaitForLog("REFUSED a grant for job " + id.substr(7, 12), 20000)) << w->log();
  EXPECT_GE(forged.load(), 1);
  kill(stack_->gatosd().pid(), SIGCONT);
  EXPECT_FALSE(FileExists(marker)) << "the forged command ran";
  EXPECT_EQ(w->log().find("claimed job " + id.substr(7, 12)), std::string::npos) << w->log();
  EXPECT_TRUE(w->running());
}

}  // namespace
}  // namespace gatos::testing
