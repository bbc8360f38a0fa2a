// libFuzzer target, one per RPC subject: a single binary, run under the
// name rpc_<subject>_fuzz (a link the build makes for each subject; "-" in
// the subject is "_" in the name), so it is compiled and linked once: the
// request handler gatosd runs for that subject, in process, over real state
// (a ledger on disk with jobs pending, claimed and finished, the writer and
// the JobService). Any client on the bus can send these bytes. Also what a
// follower forwards (rpc_forward_witness_fuzz, rpc_forward_schedule_fuzz:
// gatos.forward.*, which on an authenticated NATS only the ledger key may
// send; on an open one, anyone).
//
// Input: the first byte chooses the form.
//   even  the rest is sent as is (framing, JSON, field types, sizes)
//   odd   a well-formed request signed with a key the policy allows, whose
//         job field, epoch, state or commit text come from the input (raw
//         bytes, not UTF-8-checked), so the checks behind the signature run
// Invariants: no crash or sanitizer report; exactly one reply per request
// (for a batch request, a batch of one reply per entry), and every reply is a
// JSON object with a boolean "ok" (a client always learns what happened).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gatos/crypto/signed_request.h"
#include "gatos/git/git_object.h"
#include "gatos/git/ledger.h"
#include "gatos/git/result.h"
#include "gatos/ledger/job_service.h"
#include "gatos/ledger/schedule_commit.h"
#include "gatos/ledger/witness.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/allowed_signers.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/model/trailers.h"


namespace {

using gatos::Ed25519PrivateKey;

struct Plane {
  std::string dir;
  Ed25519PrivateKey ledger_key = *gatos::GenerateEd25519Key("ledger");
  Ed25519PrivateKey submitter = *gatos::GenerateEd25519Key("alice");
  Ed25519PrivateKey worker = *gatos::GenerateEd25519Key("w1");
  int64_t now = 1'800'000'000'000;
  std::unique_ptr<gatos::LedgerWriter> writer;
  std::unique_ptr<gatos::JobService> service;
  std::vector<std::string> jobs;  // hex ids adopted at start
  std::string root;               // the log commit of sequence 1 (the ledger's identity)

  std::string Reply(const std::string& subject, const std::string& data) {
    now += 7;
    std::vector<gatos::ServiceRequest> reqs{{subject, data, now}};
    std::vector<std::string> replies = service->Handle(reqs);
    if (replies.size() != 1) abort();
    // A batch request is answered by a batch with one reply per entry (or,
    // when the batch itself is malformed, by one error reply).
    std::vector<std::string> each = {replies[0]};
    if (gatos::rpc::IsBatch(replies[0])) {
      auto entries = gatos::rpc::DecodeBatch(replies[0]);
      if (!entries.ok()) {
        fprintf(stderr, "malformed batch reply: %s\n", entries.status().message().c_str());
        abort();
      }
      each.assign(entries->begin(), entries->end());
    }
    for (const std::string& reply : each) {
      auto j = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
        fprintf(stderr, "reply is not a JSON object with ok: %s\n", reply.c_str());
        abort();
      }
    }
    (void)service->TakeEvents();
    return replies[0];
  }

  // A signed job commit for `yaml`, as the submit RPC carries it.
  std::string SubmitData(const std::string& yaml) {
    std::vector<gatos::GitObject> objects;
    auto tree = gatos::BuildTreeObjects({{"job.yaml", yaml, false}}, &objects);
    if (!tree.ok()) return "";
    gatos::CommitMessage msg;
    msg.body = "gatos: submit fuzz";
    auto manifest = gatos::ParseManifest(yaml, "job.yaml");
    if (manifest.ok()) msg.trailers = {{"Job-Id", "blake3:" + gatos::JobIdHex(*manifest)}};
    auto commit = gatos::BuildCommitObject(*tree, {}, gatos::FormatCommitMessage(msg), "fuzz", "fuzz@gatos.invalid",
                                           now, &submitter);
    if (!commit.ok()) return "";
    objects.insert(objects.begin(), *commit);
    return gatos::rpc::EncodeFrame({{"commit", commit->id}}, gatos::EncodeObjectBatch(objects));
  }
};

Plane* g_plane = nullptr;
std::string g_subject;  // from the program's name

// rpc_claim_batch_fuzz -> gatos.rpc.claim-batch, rpc_forward_witness_fuzz ->
// gatos.forward.witness; "" for any other name.
std::string SubjectFromProgramName(std::string name) {
  size_t slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  const std::string prefix = "rpc_", suffix = "_fuzz";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return "";
  }
  std::string s = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  for (char& c : s) {
    if (c == '_') c = '-';
  }
  for (const char* known : {gatos::rpc::kClaim, gatos::rpc::kRenew, gatos::rpc::kResult, gatos::rpc::kClaimBatch,
                            gatos::rpc::kResultBatch, gatos::rpc::kSubmit, gatos::rpc::kStatus, gatos::rpc::kList,
                            gatos::rpc::kCancel, gatos::rpc::kRetry, gatos::rpc::kPools}) {
    if ("gatos.rpc." + s == known) return known;
  }
  // What a follower forwards (rpc_forward_*_fuzz): a witness as its own
  // subject; a schedule as gatosd hands it to the service, kLocalSchedule.
  if (s == "forward-witness") return gatos::rpc::kForwardWitness;
  if (s == "forward-schedule") return gatos::rpc::kLocalSchedule;
  return "";
}

std::string JsonQuoteRaw(std::string_view raw) {
  // Quotes and backslashes escaped, every other byte as is: the JSON parser,
  // not this harness, decides what invalid UTF-8 means.
  std::string q = "\"";
  for (char c : raw) {
    if (c == '"' || c == '\\') q += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      q += ' ';
      continue;
    }
    q += c;
  }
  return q + "\"";
}

// `request` with the value of `field` (a string) replaced by raw bytes.
std::string WithRawField(const nlohmann::json& request, const char* field, std::string_view raw) {
  nlohmann::json copy = request;
  copy[field] = "@@RAW@@";
  std::string text = copy.dump();
  size_t at = text.find("\"@@RAW@@\"");
  if (at == std::string::npos) return text;
  return text.substr(0, at) + JsonQuoteRaw(raw) + text.substr(at + 9);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  g_subject = *argc > 0 ? SubjectFromProgramName((*argv)[0]) : "";
  if (g_subject.empty()) {
    fprintf(stderr, "run this fuzzer as rpc_<subject>_fuzz (e.g. rpc_claim_batch_fuzz): the name picks the RPC\n");
    abort();
  }
  auto* p = new Plane;
  static char tmpl[] = "/tmp/gatos-rpc-fuzz-XXXXXX";
  if (!mkdtemp(tmpl)) abort();
  // Gone when the run ends (libFuzzer exits through exit()); a crash keeps
  // it for a look.
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
  });
  p->dir = std::string(tmpl) + "/ledger.git";
  if (!gatos::Ledger::InitRepository(p->dir).ok()) abort();
  gatos::Policy policy;
  policy.settings.lease_ms = 10'000;
  policy.settings.max_attempts = 3;
  policy.ledger_key = p->ledger_key.public_key();
  policy.submitters_text = "alice " + p->submitter.public_key().ToOpenSsh() + "\n";
  policy.workers_text = "w1 " + p->worker.public_key().ToOpenSsh() + "\n";
  policy.submitters = *gatos::ParseAllowedSigners(policy.submitters_text, "submitters");
  policy.workers = *gatos::ParseAllowedSigners(policy.workers_text, "workers");
  if (!gatos::LedgerWriter::Initialize(p->dir, policy, p->ledger_key, p->now).ok()) abort();
  gatos::WriterOptions wo;
  wo.fsync = false;
  wo.clock = [p] { return p->now; };
  auto w = gatos::LedgerWriter::Open(p->dir, p->ledger_key, wo);
  if (!w.ok()) abort();
  p->writer = std::move(*w);
  p->root = p->writer->head();
  p->service = std::make_unique<gatos::JobService>(p->writer.get(), gatos::ServiceOptions{});
  p->service->Start();
  // Real state: four jobs; the first two claimed by the worker.
  for (int i = 0; i < 4; ++i) {
    std::string yaml = "command: [\"/bin/echo\", \"" + std::to_string(i) + "\"]\ntimeout: 30\n";
    std::string reply = p->Reply(gatos::rpc::kSubmit, p->SubmitData(yaml));
    auto m = gatos::ParseManifest(yaml, "job.yaml");
    p->jobs.push_back(gatos::JobIdHex(*m));
    if (reply.find("\"ok\":true") == std::string::npos) {
      fprintf(stderr, "setup submit refused: %s\n", reply.c_str());
      abort();
    }
  }
  for (int i = 0; i < 2; ++i) {
    auto req = gatos::SignLeaseRequest(p->worker, p->jobs[i], 1, p->now, false);
    p->Reply(gatos::rpc::kClaim, gatos::rpc::LeaseRequestJson(req).dump());
  }
  g_plane = p;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Plane& p = *g_plane;
  const std::string& subject = g_subject;
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    p.Reply(subject, std::string(in));
    return 0;
  }
  // Structured: a few control bytes, then raw text.
  uint8_t pick = in.empty() ? 0 : static_cast<uint8_t>(in[0]);
  std::string_view raw = in.empty() ? in : in.substr(1);
  const std::string& job = p.jobs[pick % p.jobs.size()];
  int64_t epoch = static_cast<int64_t>(pick >> 2) - 8;
  std::string request;
  if (subject == gatos::rpc::kClaim || subject == gatos::rpc::kRenew || subject == gatos::rpc::kClaimBatch) {
    bool renew = subject == gatos::rpc::kRenew;
    auto req = gatos::SignLeaseRequest(p.worker, job, epoch, p.now, renew);
    nlohmann::json j = gatos::rpc::LeaseRequestJson(req);
    request = (pick & 0x80) ? WithRawField(j, "job", raw) : j.dump();
    if (subject == gatos::rpc::kClaimBatch) {
      request = gatos::rpc::EncodeBatch({request, (pick & 0x40) ? std::string(raw) : j.dump()});
    }
  } else if (subject == gatos::rpc::kCancel || subject == gatos::rpc::kRetry) {
    bool retry = subject == gatos::rpc::kRetry;
    auto req = gatos::SignUserRequest((pick & 0x40) ? p.worker : p.submitter, job, retry, epoch, p.now);
    nlohmann::json j = gatos::rpc::UserRequestJson(req);
    request = (pick & 0x80) ? WithRawField(j, "job", raw) : j.dump();
  } else if (subject == gatos::rpc::kStatus) {
    request = WithRawField(nlohmann::json{{"job", job}}, "job", (pick & 0x80) ? raw : std::string_view(job));
  } else if (subject == gatos::rpc::kList) {
    request = WithRawField(nlohmann::json{{"limit", epoch}}, "state", raw);
  } else if (subject == gatos::rpc::kPools) {
    request = (pick & 0x80) ? std::string(raw) : "{}";
  } else if (subject == gatos::rpc::kSubmit) {
    request = p.SubmitData("command: [\"/bin/echo\", " + JsonQuoteRaw(raw) + "]\ntimeout: " +
                           std::to_string(epoch) + "\n");
  } else if (subject == gatos::rpc::kForwardWitness) {
    // A witness of this ledger at a sequence the input picks, signed by a
    // key it names or not, naming a log commit it may not have; or the
    // raw bytes as its object batch.
    gatos::WitnessStatement w{p.root, epoch, (pick & 0x20) ? p.writer->head() : std::string(40, 'a'), "", p.now};
    auto c = gatos::BuildWitnessCommit(w, (pick & 0x40) ? p.worker : p.submitter);
    if (!c.ok()) abort();
    nlohmann::json header = {{"commit", c->id}, {"key", p.submitter.public_key().Hex()}};
    request = gatos::rpc::EncodeFrame(header, (pick & 0x80) ? std::string(raw) : gatos::EncodeObjectBatch({*c}));
  } else if (subject == gatos::rpc::kLocalSchedule) {
    // A schedule commit signed by the submitter whose template runs the
    // input; or the raw bytes as its object batch.
    gatos::ScheduleSpec spec;
    spec.name = "fuzz";
    spec.every_ms = 1000 * std::max<int64_t>(1, epoch);
    auto m = gatos::ParseManifest("command: [\"/bin/echo\", " + JsonQuoteRaw(raw) + "]\ntimeout: 30\n", "job.yaml");
    std::vector<gatos::GitObject> objects;
    if (m.ok()) {
      spec.job = *m;
      auto built = gatos::BuildScheduleCommit(spec, (pick & 0x40) ? "paused" : "active", "", p.submitter, p.now);
      if (built.ok()) objects = std::move(*built);
    }
    const std::string commit = objects.empty() ? std::string(40, 'a') : objects.front().id;
    request = gatos::rpc::EncodeFrame({{"commit", commit}},
                                      (pick & 0x80) || objects.empty() ? std::string(raw) : gatos::EncodeObjectBatch(objects));
  } else {
    // result, result-batch: a frame naming a commit, with raw batch bytes.
    request = gatos::rpc::EncodeFrame({{"commit", std::string(40, 'a')}, {"job", job}}, raw);
    if (subject == gatos::rpc::kResultBatch) request = gatos::rpc::EncodeBatch({request, std::string(raw)});
  }
  p.Reply(subject, request);
  return 0;
}
