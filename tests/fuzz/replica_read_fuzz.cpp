// libFuzzer target: the read handler every replica of a replicated ledger
// serves on gatos.replica.<name>.* and gatos.read.* (replica_reads.h), over
// real state (a random ledger from tests/support/random_ledger.h: jobs in
// every state, retried, cancelled, pruned). Anyone on the bus can send
// these bytes.
//
// Input: the first byte picks the read (status, list, logs) and the form.
//   bit 2 clear  the rest is the request as is (JSON, field types, sizes)
//   bit 2 set    a well-formed request for a job of the ledger (the second
//                byte picks it) whose other fields (attempt, stream,
//                offset, limit, state, after) come from the input
// Invariants: no crash or sanitizer report; every reply is a JSON object
// with a boolean "ok"; an ok reply names the replica and the log sequence
// it is as of (the ledger's).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gatos/ledger/writer.h"
#include "gatos/model/rpc.h"
#include "random_ledger.h"
#include "replica_reads.h"

namespace {

gatos::gatosd::ReplicaReader* g_reader = nullptr;
std::vector<std::string> g_jobs;
int64_t g_seq = 0;

int64_t Int(std::string_view& in) {
  int64_t v = 0;
  size_t n = std::min<size_t>(in.size(), 8);
  std::memcpy(&v, in.data(), n);
  in.remove_prefix(n);
  return v;
}

std::string Text(std::string_view& in) {
  size_t n = in.empty() ? 0 : static_cast<unsigned char>(in[0]) % 80;
  if (!in.empty()) in.remove_prefix(1);
  n = std::min(n, in.size());
  std::string s(in.substr(0, n));
  in.remove_prefix(n);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static char tmpl[] = "/tmp/gatos-replica-read-fuzz-XXXXXX";
  if (!mkdtemp(tmpl)) abort();
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
  });
  const std::string dir = std::string(tmpl) + "/ledger";
  std::filesystem::create_directories(dir);
  gatos::testing::SeededChoices choose(20261129);
  gatos::testing::RandomLedgerRun run = gatos::testing::RunRandomLedger(choose, 300, dir);
  if (!run.error.empty()) {
    fprintf(stderr, "setup: %s\n", run.error.c_str());
    abort();
  }
  const std::string ledger = dir + "/ledger.git";  // where RunRandomLedger makes it
  auto view = gatos::LedgerView::Open(ledger);
  if (!view.ok()) {
    fprintf(stderr, "setup: %s\n", view.status().message().c_str());
    abort();
  }
  g_seq = (*view)->seq();
  g_reader = new gatos::gatosd::ReplicaReader(ledger);
  auto listed = nlohmann::json::parse(g_reader->Answer(gatos::rpc::kList, R"({"limit":1000})", {{"name", "r1"}}));
  for (const auto& j : listed["jobs"]) g_jobs.push_back(j.value("job", "").substr(7));
  if (g_jobs.empty()) {
    fprintf(stderr, "setup: no jobs listed: %s\n", listed.dump().c_str());
    abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const uint8_t form = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  const char* subjects[] = {gatos::rpc::kStatus, gatos::rpc::kList, gatos::rpc::kLogs};
  const char* subject = subjects[form % 3];
  std::string request;
  if (form & 4) {
    nlohmann::json j = nlohmann::json::object();
    const std::string& job = g_jobs[in.empty() ? 0 : static_cast<unsigned char>(in[0]) % g_jobs.size()];
    if (!in.empty()) in.remove_prefix(1);
    if (subject == gatos::rpc::kList) {
      j["limit"] = Int(in);
      if (form & 8) j["state"] = Text(in);
      if (form & 16) j["after"] = (form & 32) ? job : Text(in);
    } else {
      j["job"] = (form & 32) ? Text(in) : job;
      if (subject == gatos::rpc::kLogs) {
        if (form & 8) j["attempt"] = Int(in);
        if (form & 16) j["stream"] = (form & 64) ? std::string("stderr") : Text(in);
        if (form & 64) j["offset"] = Int(in);
        if (form & 128) j["limit"] = Int(in);
      }
    }
    request = gatos::rpc::Dump(j);
  } else {
    request = std::string(in);
  }
  const std::string reply = g_reader->Answer(subject, request, {{"name", "r1"}, {"role", "follower"}});
  auto r = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (!r.is_object() || !r.contains("ok") || !r["ok"].is_boolean()) {
    fprintf(stderr, "reply is not a JSON object with ok: %s\n", reply.c_str());
    abort();
  }
  if (r["ok"].get<bool>()) {
    if (!r.contains("replica") || r["replica"].value("name", "") != "r1" ||
        r["replica"].value("log_seq", int64_t{-1}) != g_seq) {
      fprintf(stderr, "an ok reply without the replica and its log sequence: %s\n", reply.c_str());
      abort();
    }
  }
  return 0;
}
