// dashboard_bench: how long gatosd's dashboard takes to render each page
// against a ledger of N jobs (docs/dashboard.md, "Benchmark"). Prints figures;
// never passes or fails on a time.
//
// The ledger is filled through the real write path (bench/support/populate.h:
// signed jobs, claims and results with provenance), plus 1,000 jobs left
// pending. With --keep the ledger stays in --dir and a later run with the
// same --jobs reuses it (populating 1M jobs takes hours on 2 cores); a kept
// ledger that a stopped run left half full is filled up from where it was.
//
// The dashboard is the one gatosd serves (gatosd/dashboard.h) with its
// LiveState seeded as gatosd seeds it (the writer's live set) and its
// window filled with 50,000 finished jobs, as after a day of traffic. Each
// page is rendered in process (no socket): what is measured is the read path
// and the rendering, HTML or JSON.
//
//   "warm": the same committed head for every request (the index's directory
//           cache kept), as between two log batches;
//   "moved": the head moves before every request (alternating between the
//           last two log commits), so every request starts with a cold index
//           cache, as when a batch lands between any two page views;
//   job pages pick a different job each time (no cached verdict or name).
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "dashboard.h"
#include "dashboard_state.h"
#include "gatos/ledger/local_ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/clock.h"
#include "gatos/model/log_format.h"
#include "gatos/model/refs.h"
#include "gatos/sys/flags.h"
#include "gatos/sys/process.h"
#include "metrics.h"
#include "populate.h"

namespace fs = std::filesystem;
using namespace gatos;
using gatos::gatosd::Dashboard;
using gatos::gatosd::HttpRequest;
using gatos::gatosd::LiveState;
using gatos::gatosd::Metrics;

namespace {

using bench::Die;
using bench::Must;
using bench::SelfDir;



struct Figures {
  double first_ms = 0, p50 = 0, p99 = 0, max = 0;
  size_t bytes = 0;
  int code = 0;
};

Figures Time(const std::function<std::string()>& path, const std::function<void()>& before,
             Dashboard& d, int reps) {
  Figures f;
  std::vector<double> ms;
  for (int i = 0; i <= reps; ++i) {
    if (before) before();
    HttpRequest r;
    r.method = "GET";
    std::string target = path();
    size_t q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = target.substr(q + 1);
    auto t0 = std::chrono::steady_clock::now();
    auto resp = d.Handle(r);
    double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i == 0) {
      f.first_ms = took;
      f.code = resp.code;
      f.bytes = resp.body.size();
      continue;
    }
    ms.push_back(took);
    if (resp.code != f.code) f.code = resp.code;
  }
  std::sort(ms.begin(), ms.end());
  f.p50 = ms[ms.size() / 2];
  f.p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  f.max = ms.back();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!flags.Parse({argv + 1, argv + argc}, {{"jobs"}, {"dir"}, {"reps"}, {"keep", 0, false}, {"no-provenance", 0, false}})) {
    Die(flags.error());
  }
  if (flags.help()) {
    std::cout << "usage: dashboard_bench [--jobs 1000,100000] [--dir DIR] [--reps 200] [--keep] [--no-provenance]\n"
                 "  --no-provenance: results without attestation.intoto.json (a quicker fill; the pages\n"
                 "  read the same index, commits and blobs)\n";
    return 0;
  }
  std::vector<int64_t> sizes;
  {
    std::stringstream ss(flags.GetOr("jobs", "1000,100000"));
    std::string item;
    while (std::getline(ss, item, ',')) sizes.push_back(std::stoll(item));
  }
  int64_t reps = 200;
  if (!flags.GetInt("reps", 1, 100000, &reps)) Die(flags.error());
  std::string base = flags.GetOr("dir", "");
  bool temp = base.empty();
  if (temp) {
    std::string tmpl = "/tmp/gatos-dashboard-bench-XXXXXX";
    if (!mkdtemp(tmpl.data())) Die("mkdtemp");
    base = tmpl;
  }
  fs::create_directories(base);
  std::printf("dashboard_bench: %s, %u CPUs, %lld requests per page\n", base.c_str(),
              std::thread::hardware_concurrency(), static_cast<long long>(reps));

  for (int64_t n : sizes) {
    std::string dir = base + "/dash-" + std::to_string(n) + ".git";
    bool reuse = false;
    int64_t have = 0;  // jobs already in a kept ledger that a stopped run left
    if (fs::exists(dir)) {
      auto v = LedgerView::Open(dir);
      if (v.ok()) {
        auto st = (*v)->index().Stats();
        reuse = st.ok() && st->jobs >= n;
        if (st.ok() && !reuse && flags.Has("keep")) have = st->jobs;
      }
      if (!reuse && have == 0) fs::remove_all(dir);
    }
    if (!reuse) {
      if (have == 0) {
        auto init = RunAndCapture({SelfDir() + "/gatosd", "init", dir}, {}, "", std::chrono::seconds(60));
        if (!init.ok() || !init->status.ok()) Die("gatosd init failed");
      } else {
        std::printf("\n== %lld jobs: continuing %s from %lld jobs (--keep)\n", static_cast<long long>(n),
                    dir.c_str(), static_cast<long long>(have));
      }
      auto keys = Must(bench::EnsureBenchKeys(dir), "keys");
      bench::PopulateOptions po;
      po.first = have;
      po.jobs = n - have;
      po.batch = 1000;
      po.provenance = !flags.Has("no-provenance");
      auto pop = Must(bench::Populate(dir, keys, po), "populate");
      bench::PopulateOptions pending;
      pending.jobs = 1000;
      pending.first = n;
      pending.results = false;
      pending.progress = false;
      Must(bench::Populate(dir, keys, pending), "populate pending");
      std::printf("\n== %lld jobs: populated in %.1f s (%.0f jobs/s)\n", static_cast<long long>(n), pop.seconds,
                  static_cast<double>(pop.jobs) / pop.seconds);
    } else {
      std::printf("\n== %lld jobs: reusing %s\n", static_cast<long long>(n), dir.c_str());
    }

    // The dashboard's memory, as gatosd builds it.
    LiveState live;
    Metrics metrics;
    std::string head, previous;
    std::vector<std::string> finished;
    std::string worker, submitter, deep;
    {
      auto t0 = std::chrono::steady_clock::now();
      auto w = Must(LedgerWriter::Open(dir, Must(LoadLedgerKey(dir), "ledger key")), "open writer");
      double open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      t0 = std::chrono::steady_clock::now();
      live.Seed(*w);
      double seed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      int64_t now = SystemNowMs();
      size_t window = 0;
      int64_t seq = 1;
      Status s = w->index().ForEachJob("", [&](const JobRecord& r) {
        if (!r.result_commit.empty()) {
          live.Note(r, seq++, now);
          finished.push_back(r.job_hex);
          if (worker.empty() && !r.claims.empty()) worker = r.claims.begin()->first;
          if (submitter.empty()) submitter = r.submitter_hex;
        }
        return ++window < LiveState::kDefaultWindow;
      });
      if (!s.ok()) Die(s.message());
      head = w->head();
      auto c = Must(w->ledger().ReadCommit(head), "log head");
      previous = c.parents.at(0);
      live.SetHead(w->seq(), head, w->stats());
      for (int i = 0; i < 60; ++i) metrics.CountSeries("succeeded", 100 + i, now - i * 60000);
      std::printf("writer open %.2f s, LiveState seeded with %zu live jobs in %.3f s; window %zu finished jobs\n",
                  open_s, live.live_size(), seed_s, live.window_size());
    }
    Dashboard d({dir, ""}, &live, &metrics);
    {
      // A cursor 20 pages into that filter.
      gatos::gatosd::JobQuery q;
      q.submitter_hex = submitter;
      q.worker_hex = worker;
      q.limit = 50 * 20;
      auto page = live.Recent(q);
      if (!page.jobs.empty()) deep = std::to_string(page.jobs.back().submitted_ms) + "-" + page.jobs.back().job_hex;
    }
    std::mt19937_64 rng(42);
    auto any_job = [&] { return finished[rng() % finished.size()]; };
    std::string mid = finished[finished.size() / 2];
    bool flip = false;
    auto move_head = [&] {
      flip = !flip;
      live.SetHead(live.head().seq, flip ? previous : head, live.head().stats);
    };
    auto keep_head = [&] { live.SetHead(live.head().seq, head, live.head().stats); };
    struct Case {
      std::string name;
      std::function<std::string()> path;
    };
    std::vector<Case> cases = {
        {"/ (overview)", [] { return std::string("/"); }},
        {"/overview.json", [] { return std::string("/overview.json"); }},
        {"/jobs (first page, index)", [] { return std::string("/jobs"); }},
        {"/jobs?after=<mid> (index)", [&] { return "/jobs?after=" + mid; }},
        {"/jobs?q=<4 hex> (index)", [&] { return "/jobs?q=" + any_job().substr(0, 4); }},
        {"/jobs?state=pending (live)", [] { return std::string("/jobs?state=pending"); }},
        {"/jobs?state=succeeded&worker=W (window)", [&] { return "/jobs?state=succeeded&worker=" + worker; }},
        {"/jobs?submitter=S&worker=W&since=1d (window)",
         [&] { return "/jobs?since=1d&submitter=" + submitter + "&worker=" + worker; }},
        {"  the same, page 20 (after=)", [&] { return "/jobs?since=1d&submitter=" + submitter + "&worker=" + worker + "&after=" + deep; }},
        {"/jobs/<random job>", [&] { return "/jobs/" + any_job(); }},
        {"/jobs/<random job>.json", [&] { return "/jobs/" + any_job() + ".json"; }},
        {"/workers", [] { return std::string("/workers"); }},
        {"/batches", [] { return std::string("/batches"); }},
    };
    std::printf("%-48s %6s %9s | %8s %8s %8s | %8s %8s %8s\n", "page", "code", "bytes", "warm p50", "p99", "max",
                "moved p50", "p99", "max");
    for (const auto& c : cases) {
      Figures warm = Time(c.path, keep_head, d, static_cast<int>(reps));
      Figures moved = Time(c.path, move_head, d, static_cast<int>(reps));
      keep_head();
      std::printf("%-48s %6d %9zu | %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f  ms\n", c.name.c_str(), warm.code,
                  warm.bytes, warm.p50, warm.p99, warm.max, moved.p50, moved.p99, moved.max);
    }
    if (!flags.Has("keep")) fs::remove_all(dir);
  }
  if (temp && !flags.Has("keep")) fs::remove_all(base);
  return 0;
}
