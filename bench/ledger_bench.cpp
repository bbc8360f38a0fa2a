// ledger_bench: the ledger's write path at 1k, 100k and 1M jobs
// (docs/benchmarks.md, section 1).
//
// For each size N it makes a ledger with `gatosd init`, fills it with N
// finished jobs through the real write path (LedgerWriter, batches of 1,000:
// signed jobs, signed claims, signed results with provenance), reports how
// long that took and the disk bytes per job, and writes out what the fill left
// dirty (syncfs, timed). Then:
//
//  1. In-process, through the JobService (gatosd's request handlers, without
//     NATS), with fsync as configured:
//     - group commit: 4,000 new jobs submitted, claimed and reported in
//       batches of --batch requests, each batch authenticated on another
//       thread while the one before is written, as gatosd does:
//       transitions/s per kind; the latency of a request in a batch is the
//       batch's, from its preparation to its reply (p50/p99);
//     - one request at a time (batch of 1): p50/p99 of submit, claim,
//       renew, result and status.
//  2. With a real nats-server and `gatosd serve` on the ledger:
//     - gatosd restart to ready (SIGTERM, start, first answer on its socket);
//     - one stock `git push` of one job to the front door (LEDGER/push),
//       once gatosd's background repack has taken the packs the runs above
//       left: p50/p99, and the bytes of the push's ref advertisement.
//
// Prints figures; never passes or fails on a time.
//
//   ledger_bench [--jobs 1000,100000] [--dir DIR] [--batch 256] [--no-fsync] [--no-wal]
//                [--keep] [--skip-push] [--skip-gatosd] [--windows]
//   ledger_bench --ledger DIR [...]   measure a ledger filled before (for
//                                     example by dashboard_bench --keep: a
//                                     million jobs take a while to fill)
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "gatos/crypto/signed_request.h"
#include "gatos/git/result.h"
#include "gatos/ledger/job_service.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/maintenance.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/blake3.h"
#include "gatos/model/manifest.h"
#include "gatos/model/rpc.h"
#include "gatos/model/time_format.h"
#include "gatos/sys/dir_layout.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/process.h"
#include "populate.h"

namespace gatos {
namespace {

using bench::Die;
using bench::Must;
using bench::SelfDir;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }



double Pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

bool FsyncHonestHere(const std::string& dir) {
  struct statvfs s;
  // tmpfs ignores fsync; say which file system the figures are from.
  return ::statvfs(dir.c_str(), &s) == 0;
}

// Writes out everything dirty on the file system under `dir`: how long it
// took, or why it could not.
std::string SyncFileSystem(const std::string& dir) {
  auto t0 = std::chrono::steady_clock::now();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::syncfs(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok)
    return std::string("failed (") + std::strerror(err) +
           "); the first phases may measure its writeback";
  char buf[32];
  std::snprintf(buf, sizeof buf, "in %.1f s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return buf;
}

// The file system under `dir`: `stat -f` names ext4 "ext2/ext3", and whether
// it has a journal changes the figures a lot (operations.md, "File systems").
std::string FsType(const std::string& dir) {
  switch (gatos::FileSystemOf(dir)) {
    case gatos::DirFileSystem::kExt4Journaled:
      return "ext4 with a journal";
    case gatos::DirFileSystem::kExt4NoJournal:
      return "ext4 without a journal";
    case gatos::DirFileSystem::kOther:
      break;
  }
  auto r = RunAndCapture({"stat", "-f", "-c", "%T", dir}, {}, "", std::chrono::seconds(5));
  if (!r.ok()) return "?";
  std::string t = r->out;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t;
}

// ---- in-process: the JobService over the writer ----

struct Signed {
  std::string hex, frame, commit;
};

// Submit frames for jobs that are not in the ledger yet.
std::vector<Signed> NewJobs(const bench::BenchKeys& keys, int64_t first, int64_t n) {
  std::vector<Signed> out;
  for (int64_t i = first; i < first + n; ++i) {
    std::string yaml = "command: [\"/bin/sh\", \"-c\", \"echo " + std::to_string(i) + " >> file\"]\ntimeout: 60\n";
    std::vector<GitObject> objects;
    std::string tree = Must(BuildTreeObjects({{"job.yaml", yaml, false}}, &objects), "tree");
    std::string hex = JobIdHex(Must(ParseManifest(yaml, "job.yaml"), "manifest"));
    GitObject c = Must(BuildCommitObject(tree, {}, "bench\n\nJob-Id: blake3:" + hex + "\n", "b", "b@x",
                                         SystemNowMs(), &keys.submitter),
                       "commit");
    objects.insert(objects.begin(), c);
    out.push_back({hex, rpc::EncodeFrame(json{{"commit", c.id}}, EncodeObjectBatch(objects)), c.id});
  }
  return out;
}

std::string ResultFrame(const bench::BenchKeys& keys, int w, const std::string& hex, const std::string& job_commit,
                        const std::string& lease_commit, int64_t epoch) {
  const auto& key = keys.workers[static_cast<size_t>(w)];
  ResultBuildInput in;
  in.job_commit = job_commit;
  in.lease_commit = lease_commit;
  in.poe.job_id = "blake3:" + hex;
  in.poe.worker_id = key.public_key().WorkerId();
  in.poe.lease_epoch = epoch;
  in.poe.status = "succeeded";
  in.poe.exit_code = 0;
  in.poe.runner_program = Blake3Tagged("bench worker");
  in.poe.runner_version = "0.1.0";
  in.poe.runner_platform = "linux-x86_64";
  in.poe.stdout_cap = 1 << 20;
  in.poe.started_at = FormatRfc3339Millis(SystemNowMs());
  in.poe.finished_at = in.poe.started_at;
  in.files = {{"stdout", ""}, {"stderr", ""}};
  in.time_ms = SystemNowMs();
  BuiltResult b = Must(BuildResult(in, key), "result");
  return rpc::EncodeFrame(json{{"commit", b.commit_id}}, EncodeObjectBatch(b.objects));
}

struct PhaseFigures {
  std::string kind;
  size_t requests = 0;
  double seconds = 0;
  std::vector<double> batch_ms;
  double mono_start = 0, mono_end = 0;  // CLOCK_MONOTONIC, seconds
};

// --windows: each phase also prints when it ran, on the clock that
// `perf record -k CLOCK_MONOTONIC` stamps samples with (steady_clock's on
// Linux), so that `perf script --time A,B` shows that phase alone.
bool g_windows = false;

void PrintPhase(const PhaseFigures& p) {
  std::printf("  %-8s %6zu requests in %6.3f s  %8.0f transitions/s  batch p50 %7.2f ms  p99 %7.2f ms\n",
              p.kind.c_str(), p.requests, p.seconds, p.requests / p.seconds, Pct(p.batch_ms, 0.5),
              Pct(p.batch_ms, 0.99));
  if (g_windows) std::printf("    %s window (CLOCK_MONOTONIC): %.6f,%.6f\n", p.kind.c_str(), p.mono_start, p.mono_end);
}

// Runs requests through the service in batches of `batch`, as gatosd does:
// the next batch is prepared (decoded, signatures verified) on another
// thread while the ledger thread applies this one. Checks each reply. A
// request's latency is its batch's, from the start of its preparation to
// the end of its application.
PhaseFigures RunBatches(LedgerWriter& w, JobService& s, const std::string& kind, const std::string& subject,
                        const std::vector<std::string>& data, size_t batch, std::vector<json>* replies) {
  PhaseFigures f;
  f.kind = kind;
  struct Prepared {
    PreparedBatch batch;
    Clock::time_point started;
  };
  auto prepare = [&](size_t i) {
    Prepared p;
    p.started = Clock::now();
    std::vector<ServiceRequest> reqs;
    for (size_t k = i; k < std::min(data.size(), i + batch); ++k) reqs.push_back({subject, data[k], 0});
    p.batch = s.Prepare(reqs);
    return p;
  };
  // Replies are checked after the clock stops: gatosd sends them as they
  // are, and parsing thousands of grants here would be the bench's own cost
  // on the ledger thread.
  std::vector<std::string> all;
  all.reserve(data.size());
  auto t0 = Clock::now();
  std::future<Prepared> next = std::async(std::launch::async, prepare, 0);
  std::mutex mu;  // batch_ms is appended to on the writer's view thread
  for (size_t i = 0; i < data.size(); i += batch) {
    Prepared cur = next.get();
    if (i + batch < data.size()) next = std::async(std::launch::async, prepare, i + batch);
    auto out = s.Finish(std::move(cur.batch));
    // As gatosd: a batch is answered once its view refs are written.
    w.AfterViews([&, started = cur.started] {
      std::lock_guard<std::mutex> l(mu);
      f.batch_ms.push_back(Since(started) * 1000);
    });
    for (auto& r : out) all.push_back(std::move(r));
    (void)s.TakeEvents();
  }
  w.FlushViews();
  f.seconds = Since(t0);
  f.mono_start = std::chrono::duration<double>(t0.time_since_epoch()).count();
  f.mono_end = f.mono_start + f.seconds;
  f.requests = data.size();
  for (const auto& r : all) {
    json j = json::parse(r);
    if (!j.value("ok", false)) Die(kind + " refused: " + j.value("message", ""));
    if (replies) replies->push_back(std::move(j));
  }
  return f;
}

// --no-wal: batches durable by their own syncs (pack, then log ref) instead
// of the write-ahead log; for comparison.
bool g_wal = true;

void InProcess(const std::string& dir, const bench::BenchKeys& keys, int64_t first, size_t batch, bool fsync) {
  WriterOptions wo;
  wo.fsync = fsync;
  wo.wal = g_wal;
  wo.async_views = true;  // as gatosd runs it
  auto t0 = Clock::now();
  auto writer = Must(LedgerWriter::Open(dir, Must(LoadLedgerKey(dir), "key"), wo), "open writer");
  std::printf("  writer open (restart from the log, %zu live jobs): %.1f ms\n", writer->live().size(), Since(t0) * 1000);
  JobService service(writer.get(), ServiceOptions{});
  constexpr int64_t kLoad = 4000;
  auto jobs = NewJobs(keys, first, kLoad);
  std::vector<std::string> submits, claims;
  for (const auto& j : jobs) submits.push_back(j.frame);
  for (size_t i = 0; i < jobs.size(); ++i) {
    claims.push_back(rpc::Dump(
        rpc::LeaseRequestJson(SignLeaseRequest(keys.workers[i % 2], jobs[i].hex, 1, SystemNowMs(), false))));
  }
  std::vector<json> granted;
  std::vector<PhaseFigures> phases;
  phases.push_back(RunBatches(*writer, service, "submit", rpc::kSubmit, submits, batch, nullptr));
  phases.push_back(RunBatches(*writer, service, "claim", rpc::kClaim, claims, batch, &granted));
  std::vector<std::string> results;
  for (size_t i = 0; i < jobs.size(); ++i) {
    results.push_back(ResultFrame(keys, static_cast<int>(i % 2), jobs[i].hex, jobs[i].commit,
                                  granted[i]["lease_commit"], 1));
  }
  phases.push_back(RunBatches(*writer, service, "result", rpc::kResult, results, batch, nullptr));
  std::printf("  group commit, batches of %zu (fsync %s%s):\n", batch, fsync ? "on" : "off",
              fsync ? (g_wal ? ", write-ahead log" : ", no write-ahead log: six syncs per batch") : "");
  size_t total = 0;
  double secs = 0;
  for (const auto& p : phases) {
    PrintPhase(p);
    total += p.requests;
    secs += p.seconds;
  }
  std::printf("  %-8s %6zu transitions in %6.3f s  %8.0f transitions/s\n", "all", total, secs, total / secs);

  // One request at a time: the latency of a lone request.
  constexpr int kSingle = 200;
  auto singles = NewJobs(keys, first + kLoad, kSingle);
  std::vector<double> sub, clm, ren, res, sta;
  for (int i = 0; i < kSingle; ++i) {
    auto once = [&](const std::string& subject, const std::string& data, std::vector<double>* into) {
      auto t = Clock::now();
      auto r = service.Handle(std::vector<ServiceRequest>{{subject, data, 0}});
      writer->FlushViews();  // answered once its refs are written
      into->push_back(Since(t) * 1000);
      (void)service.TakeEvents();
      json j = json::parse(r[0]);
      if (!j.value("ok", false)) Die(subject + ": " + j.value("message", ""));
      return j;
    };
    const Signed& s = singles[static_cast<size_t>(i)];
    once(rpc::kSubmit, s.frame, &sub);
    json g = once(rpc::kClaim,
                  rpc::Dump(rpc::LeaseRequestJson(SignLeaseRequest(keys.workers[0], s.hex, 1, SystemNowMs(), false))),
                  &clm);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a renewal is a later request
    once(rpc::kRenew,
         rpc::Dump(rpc::LeaseRequestJson(SignLeaseRequest(keys.workers[0], s.hex, 1, SystemNowMs(), true))), &ren);
    once(rpc::kResult, ResultFrame(keys, 0, s.hex, s.commit, g["lease_commit"], 1), &res);
    once(rpc::kStatus, rpc::Dump(json{{"job", s.hex}}), &sta);
  }
  std::printf("  one request at a time (%d each), ms:\n", kSingle);
  for (auto [name, v] : {std::pair{"submit", &sub}, std::pair{"claim", &clm}, std::pair{"renew", &ren},
                         std::pair{"result", &res}, std::pair{"status", &sta}}) {
    std::printf("    %-7s p50 %7.3f  p99 %7.3f\n", name, Pct(*v, 0.5), Pct(*v, 0.99));
  }
}

// ---- with gatosd: restart and git push ----

int FreePort() {
  for (int p = 14222 + static_cast<int>(getpid() % 1000); p < 30000; ++p) {
    auto r = RunAndCapture({"sh", "-c", "! (exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(p) + ") 2>/dev/null"}, {},
                           "", std::chrono::seconds(2));
    if (r.ok() && r->status.ok()) return p;
  }
  Die("no free port");
}

bool SocketAnswers(const std::string& dir) {
  LocalOptions lo;
  lo.timeout_ms = 200;
  // A status of an unknown job: answered by gatosd only (no fallback: the
  // lock is held), and cheap.
  int fd_ok = ::access(LedgerSocketPath(dir).c_str(), F_OK) == 0;
  if (!fd_ok) return false;
  auto r = LocalLedgerRequest(dir, rpc::kStatus, rpc::Dump(json{{"job", std::string(64, '0')}}), lo);
  return r.ok();
}

void WithGatosd(const std::string& dir, const std::string& scratch, const bench::BenchKeys& keys, bool fsync,
                bool skip_push) {
  int port = FreePort();
  SpawnOptions no = SpawnOptions::WithLog(scratch + "/nats.log", SIGKILL);
  Process nats = Must(Process::Spawn({"nats-server", "-js", "-a", "127.0.0.1", "-p", std::to_string(port), "-sd",
                                      scratch + "/nats"},
                                     no),
                      "nats-server");
  std::string url = "nats://127.0.0.1:" + std::to_string(port);
  std::vector<std::string> argv = {SelfDir() + "/gatosd", "serve", "--ledger", dir, "--nats", url};
  if (!fsync) argv.push_back("--no-fsync");
  std::vector<double> restart_ms;
  Process gatosd;
  for (int round = 0; round < 3; ++round) {
    auto t = Clock::now();
    gatosd = Must(Process::Spawn(argv, SpawnOptions::WithLog(scratch + "/gatosd.log", SIGKILL)), "gatosd");
    while (!SocketAnswers(dir)) {
      if (!gatosd.running()) Die("gatosd exited; see " + scratch + "/gatosd.log");
      if (Since(t) > 120) Die("gatosd did not become ready");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    restart_ms.push_back(Since(t) * 1000);
    if (round < 2) gatosd.Stop(SIGTERM, std::chrono::seconds(30));
  }
  std::printf("  gatosd start to ready (first answer on its socket): %.0f / %.0f / %.0f ms\n", restart_ms[0],
              restart_ms[1], restart_ms[2]);
  if (!skip_push) {
    // The runs above wrote a pack per batch (and per single request): a
    // running gatosd keeps the count near its repack threshold (32) in the
    // background, and every git process of a push opens each pack's index.
    // Measure the push against the store gatosd keeps, not the bench's.
    {
      size_t before = CountPacks(dir);
      auto t = Clock::now();
      while (CountPacks(dir) > 64 && Since(t) < 1800) std::this_thread::sleep_for(std::chrono::seconds(1));
      std::printf("  packs before the pushes: %zu -> %zu (waited %.0f s for gatosd's background repack)\n", before,
                  CountPacks(dir), Since(t));
    }
    std::string work = scratch + "/pushwork";
    fs::create_directories(work);
    SpawnOptions go;
    go.env = Environment::CurrentWith({{"GIT_CONFIG_NOSYSTEM", "1"},
                                       {"HOME", scratch},
                                       {"GIT_AUTHOR_NAME", "b"},
                                       {"GIT_AUTHOR_EMAIL", "b@x"},
                                       {"GIT_COMMITTER_NAME", "b"},
                                       {"GIT_COMMITTER_EMAIL", "b@x"}});
    go.cwd = work;
    auto git = [&](std::vector<std::string> a) {
      a.insert(a.begin(), "git");
      // A push to a big ledger can take minutes (receive-pack reads every
      // ref to hide it); report it rather than give up.
      auto r = RunAndCapture(a, go, "", std::chrono::seconds(1800));
      if (!r.ok() || !r->status.ok()) {
        Die("git " + a[1] + ": " + (r.ok() ? r->status.ToString() + " " + r->err : r.status().message()));
      }
      return r->out + r->err;
    };
    git({"init", "-q"});
    git({"config", "gpg.format", "ssh"});
    git({"config", "user.signingkey", dir + "/bench-keys/submitter"});
    std::vector<double> push_ms;
    size_t adv_bytes = 0;
    for (int i = 0; i < 20; ++i) {
      std::string yaml = "command: [\"/bin/echo\", \"push " + std::to_string(i) + " " +
                         std::to_string(SystemNowMs()) + "\"]\ntimeout: 5\n";
      std::ofstream(work + "/job.yaml") << yaml;
      std::string hex = JobIdHex(Must(ParseManifest(yaml, "job.yaml"), "manifest"));
      git({"add", "job.yaml"});
      git({"commit", "-q", "-S", "-m", "push bench", "-m", "Job-Id: blake3:" + hex});
      std::string trace = scratch + "/trace";
      std::remove(trace.c_str());
      go.env.Set("GIT_TRACE_PACKET", i == 0 ? trace : "");
      auto t = Clock::now();
      std::string out = git({"push", LedgerPushPath(dir), "HEAD:refs/gatos/submit/p" + std::to_string(i)});
      push_ms.push_back(Since(t) * 1000);
      if (out.find("accepted job") == std::string::npos) Die("push not accepted: " + out);
      if (i == 0) {
        std::ifstream in(trace);
        std::string line;
        while (std::getline(in, line)) {
          // "packet:         push< ..." : what receive-pack sent.
          if (line.find("packet:") != std::string::npos && line.find("push< ") != std::string::npos) {
            adv_bytes += line.size() - line.find("push< ") - 6;
          }
        }
      }
    }
    go.env.Unset("GIT_TRACE_PACKET");
    std::printf("  git push of one job (20 pushes): p50 %.1f ms  p99 %.1f ms; protocol bytes received by the "
                "pusher: %zu\n",
                Pct(push_ms, 0.5), Pct(push_ms, 0.99), adv_bytes);
  }
  gatosd.Stop(SIGTERM, std::chrono::seconds(30));
  nats.Stop(SIGTERM, std::chrono::seconds(10));
}

}  // namespace
}  // namespace gatos

int main(int argc, char** argv) {
  using namespace gatos;
  Flags flags;
  if (!flags.Parse({argv + 1, argv + argc}, {{"jobs"}, {"dir"}, {"batch"}, {"no-fsync", 0, false}, {"no-wal", 0, false},
                                             {"keep", 0, false}, {"skip-push", 0, false},
                                             {"skip-gatosd", 0, false}, {"ledger"}, {"windows", 0, false}})) {
    std::cerr << "ledger_bench: " << flags.error() << "\n";
    return 2;
  }
  if (flags.help()) {
    std::cout << "usage: ledger_bench [--jobs 1000,100000,1000000] [--dir DIR] [--batch 256] [--no-fsync] [--no-wal] [--keep]"
                 " [--skip-push] [--skip-gatosd] [--windows]\n"
                 "       ledger_bench --ledger DIR [--batch 256] [--no-fsync] [--skip-push] [--skip-gatosd] [--windows]\n"
                 "  --windows: print each phase's CLOCK_MONOTONIC window (perf record -k CLOCK_MONOTONIC;\n"
                 "  perf script --time START,END)\n"
                 "  --ledger DIR: measure a ledger filled before (bench keys in DIR/bench-keys, as\n"
                 "  populate writes them); it gains the 4,200 jobs the measurement submits\n";
    return 0;
  }
  std::vector<int64_t> sizes;
  {
    std::stringstream ss(flags.GetOr("jobs", "1000,100000"));
    std::string item;
    while (std::getline(ss, item, ',')) sizes.push_back(std::stoll(item));
  }
  int64_t batch = 256;
  if (!flags.GetInt("batch", 1, 65536, &batch)) Die(flags.error());
  bool fsync = !flags.Has("no-fsync");
  g_wal = !flags.Has("no-wal");
  g_windows = flags.Has("windows");
  std::string base = flags.GetOr("dir", "");
  if (base.empty()) {
    std::string tmpl = "/tmp/gatos-ledger-bench-XXXXXX";
    if (!mkdtemp(tmpl.data())) Die("mkdtemp");
    base = tmpl;
  }
  if (flags.Has("ledger")) {
    std::string dir = flags.GetOr("ledger", "");
    auto view = Must(LedgerView::Open(dir), "open " + dir);
    auto st = Must(view->index().Stats(), "index stats");
    view.reset();
    std::string scratch = base + "/scratch-ledger";
    fs::remove_all(scratch);
    fs::create_directories(scratch);
    auto keys = Must(bench::EnsureBenchKeys(dir), "keys");
    uint64_t bytes = DiskBytes(dir);
    std::printf("ledger_bench: %s (%s), fsync %s, %u CPUs\n", dir.c_str(), FsType(dir).c_str(),
                fsync ? "on" : "off", std::thread::hardware_concurrency());
    std::printf("\n== %lld jobs in the ledger (filled before); %.0f disk bytes per job\n",
                static_cast<long long>(st.jobs), static_cast<double>(bytes) / static_cast<double>(st.jobs));
    // Job numbers far from any fill's, and from an earlier run's on the same ledger.
    InProcess(dir, keys, 2'000'000'000 + SystemNowMs() % 1'000'000'000, static_cast<size_t>(batch), fsync);
    if (!flags.Has("skip-gatosd")) WithGatosd(dir, scratch, keys, fsync, flags.Has("skip-push"));
    fs::remove_all(scratch);
    if (flags.GetOr("dir", "").empty()) fs::remove_all(base);
    return 0;
  }
  fs::create_directories(base);
  std::printf("ledger_bench: %s (%s), fsync %s, %u CPUs\n", base.c_str(), FsType(base).c_str(), fsync ? "on" : "off",
              std::thread::hardware_concurrency());
  (void)FsyncHonestHere;
  for (int64_t n : sizes) {
    std::string dir = base + "/ledger-" + std::to_string(n) + ".git";
    std::string scratch = base + "/scratch-" + std::to_string(n);
    fs::remove_all(dir);
    fs::remove_all(scratch);
    fs::create_directories(scratch);
    auto init = RunAndCapture({SelfDir() + "/gatosd", "init", dir}, {}, "", std::chrono::seconds(60));
    if (!init.ok() || !init->status.ok()) Die("gatosd init failed");
    auto keys = Must(bench::EnsureBenchKeys(dir), "keys");
    bench::PopulateOptions po;
    po.jobs = n;
    po.batch = 1000;
    auto pop = Must(bench::Populate(dir, keys, po), "populate");
    uint64_t bytes = DiskBytes(dir);
    std::printf("\n== %lld jobs: populated in %.1f s (%.0f jobs/s, 3 transitions each); %.0f disk bytes per job\n",
                static_cast<long long>(n), pop.seconds, n / pop.seconds, static_cast<double>(bytes) / n);
    // What the fill left dirty is written before anything is measured: a
    // million jobs leave gigabytes for writeback, which would otherwise run
    // during the first phases (the fill is not what they measure).
    std::printf("  fill written out (syncfs) %s\n", SyncFileSystem(dir).c_str());
    InProcess(dir, keys, n + 1'000'000'000, static_cast<size_t>(batch), fsync);
    if (!flags.Has("skip-gatosd")) WithGatosd(dir, scratch, keys, fsync, flags.Has("skip-push"));
    if (!flags.Has("keep")) {
      fs::remove_all(dir);
      fs::remove_all(scratch);
    }
  }
  if (!flags.Has("keep") && flags.GetOr("dir", "").empty()) fs::remove_all(base);
  return 0;
}
