#include "gatos/scan/scanner.h"

#include <fnmatch.h>
#include <git2.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <unordered_set>
#include <variant>

#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/scan/detector.h"
#include "gatos/scan/fingerprint.h"
#include "gatos/scan/mirror.h"
#include "git/git_util.h"
#include "gatos/scan/object_source.h"
#include "gatos/scan/pack_store.h"
#include "scan_run.h"
#include "secret_history.h"
#include "tree_walker.h"

namespace gatos::scan {
namespace {
struct RepoFree {
  void operator()(git_repository* r) const { git_repository_free(r); }
};
struct RevwalkFree {
  void operator()(git_revwalk* w) const { git_revwalk_free(w); }
};
struct RefFree {
  void operator()(git_reference* r) const { git_reference_free(r); }
};
struct ObjectFree {
  void operator()(git_object* o) const { git_object_free(o); }
};
struct OdbObjectFree {
  void operator()(git_odb_object* o) const { git_odb_object_free(o); }
};
struct StrArrayFree {
  void operator()(git_strarray* a) const { git_strarray_dispose(a); }
};
using RepoPtr = std::unique_ptr<git_repository, RepoFree>;

// Each scanning thread's cache of delta bases (git's default is 96 MiB),
// and the walk's, for trees.
constexpr size_t kWorkerCacheBytes = 64 << 20;
constexpr size_t kWalkCacheBytes = 64 << 20;

// One scanning thread: owns its object source (libgit2 handle and pack
// reader) and its detector scratch.
void ScanWorker(const std::string& mirror, const PackStore* store, const Detector& detector,
                const ScanOptions& opts, Queue<BlobRun>* jobs, Queue<WriterItem>* results,
                RunState* run) {
  Result<std::unique_ptr<ObjectSource>> source =
      ObjectSource::Open(mirror, store, kWorkerCacheBytes);
  Result<std::unique_ptr<Detector::Scratch>> scratch = detector.NewScratch();
  for (const Status& s : {source.status(), scratch.status()}) {
    if (!s.ok()) {
      run->Problem(s.message());
      run->stop = true;
    }
  }
  if (run->stop) {
    BlobRun r;
    while (jobs->Pop(&r)) run->blobs_not_reached += r.size();
    return;
  }
  std::vector<Match> matches;
  auto record = [&](const std::string_view data, BlobRecord* rec) {
    for (const Match& m : matches) {
      StoredFinding f;
      f.rule_id = detector.rules().rules[m.rule].id;
      f.start = m.start;
      f.end = m.end;
      f.line = m.line;
      f.fingerprint = Fingerprint(opts.fingerprint_key, data.substr(m.start, m.end - m.start));
      rec->findings.push_back(std::move(f));
    }
    run->findings_new += rec->findings.size();
  };
  BlobRun blob_run;
  while (jobs->Pop(&blob_run)) {
    for (BlobJob& job : blob_run) {
      if (run->stop || run->PastDeadline()) {
        ++run->blobs_not_reached;
        continue;
      }
      BlobRecord rec;
      rec.blob = git::OidHex(job.oid);
      rec.commit = job.commit;
      rec.path = std::move(job.path);
      const std::string where = " (first seen in commit " + job.commit + ")";
      uint64_t len = 0;
      if (Status s = (*source)->Size(job.oid, job.loc, ObjectKind::kBlob, &len); !s.ok()) {
        run->Problem(s.message() + where);
        ++run->blobs_not_reached;
        continue;
      }
      rec.size = len;
      if (len > opts.max_blob_bytes) {
        rec.outcome = BlobOutcome::kTooLarge;
        ++run->blobs_skipped_too_large;
        run->bytes_skipped_too_large += len;
        results->Push(std::move(rec));
        continue;
      }
      std::string_view data;
      if (Status s =
              (*source)->Read(job.oid, job.loc, ObjectKind::kBlob, opts.max_blob_bytes, &data);
          !s.ok()) {
        run->Problem(s.message() + where);
        ++run->blobs_not_reached;
        continue;
      }
      rec.size = data.size();
      matches.clear();
      if (std::memchr(data.data(), '\0', std::min<size_t>(data.size(), kBinaryProbeBytes))) {
        // Binary content is not scanned, but its path can still be a finding
        // (a PKCS#12 bundle is binary by nature).
        detector.ScanPathRules(rec.path, data.size(), &matches);
        record(data, &rec);
        rec.outcome = BlobOutcome::kBinary;
        ++run->blobs_skipped_binary;
        run->bytes_skipped_binary += data.size();
        results->Push(std::move(rec));
        continue;
      }
      if (Status s = detector.Scan(data, rec.path, scratch->get(), &matches); !s.ok()) {
        run->Problem("scanning blob " + rec.blob + ": " + s.message());
        ++run->blobs_not_reached;
        continue;
      }
      record(data, &rec);
      ++run->blobs_scanned;
      run->bytes_scanned += data.size();
      results->Push(std::move(rec));
      if (opts.pace_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(opts.pace_ms));
    }
  }
}

// The single SQLite writer: batches results into transactions.
void Writer(const std::string& db_path, const std::string& policy, const std::string& repo_key,
            Queue<WriterItem>* results, RunState* run) {
  Result<std::unique_ptr<DoneLedger>> ledger = DoneLedger::Open(db_path);
  if (!ledger.ok()) {
    run->Problem(ledger.status().message());
    run->stop = true;
  }
  std::vector<WriterItem> items;
  bool closed = false;
  while (!closed) {
    items.clear();
    results->PopSome(&items, 8192, std::chrono::milliseconds(200), &closed);
    if (items.empty() || !ledger.ok()) continue;
    std::vector<BlobRecord> blobs;
    std::vector<BlobLocation> locations;
    for (WriterItem& it : items) {
      if (auto* b = std::get_if<BlobRecord>(&it)) {
        blobs.push_back(std::move(*b));
      } else {
        locations.push_back(std::move(std::get<BlobLocation>(it)));
      }
    }
    if (Status s = (*ledger)->CommitBatch(policy, repo_key, blobs, locations); !s.ok()) {
      run->Problem(s.message());
      run->stop = true;
    }
  }
}

struct SelectedRef {
  std::string name;
  git_oid tip;
};

Result<std::vector<SelectedRef>> SelectRefs(git_repository* repo, const std::string& repo_key,
                                            const std::vector<std::string>& wanted,
                                            std::vector<std::string>* notes) {
  git_strarray names{};
  if (int rc = git_reference_list(&names, repo); rc != 0) {
    return git::GitError(rc, "listing refs of the mirror of " + repo_key);
  }
  std::unique_ptr<git_strarray, StrArrayFree> guard(&names);
  std::vector<std::string> all(names.strings, names.strings + names.count);
  std::sort(all.begin(), all.end());
  std::set<std::string> chosen;
  if (wanted.empty()) {
    for (const std::string& n : all) {
      if (n.starts_with("refs/heads/") || n.starts_with("refs/tags/")) chosen.insert(n);
    }
  } else {
    for (const std::string& w : wanted) {
      bool any = false;
      for (const std::string& n : all) {
        bool hit = w.find_first_of("*?[") != std::string::npos
                       ? fnmatch(w.c_str(), n.c_str(), 0) == 0
                       : (n == w || n == "refs/heads/" + w || n == "refs/tags/" + w);
        if (hit) {
          chosen.insert(n);
          any = true;
        }
      }
      if (!any) {
        std::string avail;
        for (size_t i = 0; i < all.size() && i < 10; ++i) avail += (i ? ", " : "") + all[i];
        return NotFoundError(
            "--ref " + w + " matches no ref of " + repo_key +
            (all.empty() ? " (it has no refs)" : " (refs include: " + avail + ")"));
      }
    }
  }
  std::vector<SelectedRef> out;
  for (const std::string& n : chosen) {
    git_reference* r = nullptr;
    if (int rc = git_reference_lookup(&r, repo, n.c_str()); rc != 0) {
      return git::GitError(rc, "reading ref " + n + " of " + repo_key);
    }
    std::unique_ptr<git_reference, RefFree> ref(r);
    git_object* o = nullptr;
    if (git_reference_peel(&o, ref.get(), GIT_OBJECT_COMMIT) != 0) {
      git_error_clear();
      notes->push_back("ref " + n + " does not point to a commit; not scanned");
      continue;
    }
    std::unique_ptr<git_object, ObjectFree> obj(o);
    out.push_back({n, *git_object_id(obj.get())});
  }
  return out;
}

std::string PathForJson(const std::string& path, bool* escaped) {
  *escaped = !IsValidUtf8(path);
  if (!*escaped) return path;
  // Not UTF-8: percent-encode bytes >= 0x80 and '%' so the text is lossless.
  std::string out;
  static const char* kHex = "0123456789ABCDEF";
  for (unsigned char c : path) {
    if (c >= 0x80 || c == '%') {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

Status WriteFileAtomic(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return UnavailableError("cannot write " + tmp +
                              " (check the output directory exists and is writable)");
    }
    out << data;
    out.flush();
    if (!out) return UnavailableError("error writing " + tmp + " (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return UnavailableError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return OkStatus();
}

}  // namespace

std::string PolicyHash(const RuleSet& rules, uint64_t max_blob_bytes, const Digest32& key) {
  nlohmann::json settings = {
      // 2: path rules, line allow-lists and inline gatos:allow changed what
      // a blob yields.
      {"scanner", "gatos-scan/2"},
      {"max_blob_bytes", max_blob_bytes},
      {"binary_probe_bytes", kBinaryProbeBytes},
      // Identifies the key (fingerprints depend on it) without revealing it.
      {"fingerprint_key_id", Fingerprint(key, "gatos-scan fingerprint key id")},
  };
  Result<std::string> s = CanonicalJson(settings);
  Blake3Hasher h;
  h.Update(CanonicalRuleSet(rules));
  h.Update("\n");
  h.Update(s.ok() ? *s : settings.dump());
  return TaggedDigest(h.Finalize());
}

Result<ScanReport> RunScan(const ScanOptions& opts) {
  const Clock::time_point started = Clock::now();
  git::EnsureInit();
  if (opts.state_dir.empty()) {
    return InvalidArgumentError("no state directory: give --state-dir DIR or set GATOS_STATE_DIR");
  }
  std::error_code ec;
  std::filesystem::create_directories(opts.state_dir, ec);
  if (ec) {
    return UnavailableError("cannot create state directory " + opts.state_dir + ": " +
                            ec.message());
  }
  GATOS_ASSIGN_OR_RETURN(std::unique_ptr<Detector> detector,
                         Detector::Create(opts.rules, opts.state_dir + "/hs-cache"));
  RepoTarget target;
  if (opts.prepared) {
    if (!opts.refs.empty()) {
      return InvalidArgumentError(
          "a prepared repository names its own commit; --ref does not apply");
    }
    if (opts.prepared->key.empty() || opts.prepared->ref.empty()) {
      return InvalidArgumentError("a prepared repository needs a key and a ref name");
    }
    target.key = opts.prepared->key;
    target.local = true;
    // The worker's mirror belongs to the worker, not to the (sandboxed) job
    // user; it is read-only here, so ownership adds nothing.
    git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
  } else {
    GATOS_ASSIGN_OR_RETURN(target, NormalizeRepo(opts.repo));
  }

  RunState run;
  if (opts.max_seconds) {
    run.deadline = started + std::chrono::milliseconds(
                                 static_cast<int64_t>(std::max(0.0, *opts.max_seconds) * 1000));
  }
  ScanReport report;
  report.repo_key = target.key;
  report.policy_hash = PolicyHash(opts.rules, opts.max_blob_bytes, opts.fingerprint_key);
  report.rules_version = opts.rules.version;
  report.rules_count = opts.rules.rules.size();
  const std::string& policy = report.policy_hash;

  MirrorLock lock;
  if (!opts.prepared) GATOS_RETURN_IF_ERROR(SyncMirror(target, opts.state_dir, &lock));
  const std::string mirror =
      opts.prepared ? opts.prepared->path : MirrorPath(target, opts.state_dir);
  const std::string db_path = opts.state_dir + "/scan.sqlite";
  GATOS_ASSIGN_OR_RETURN(std::unique_ptr<DoneLedger> ledger, DoneLedger::Open(db_path));

  git_repository* raw = nullptr;
  if (int rc = git_repository_open_bare(&raw, mirror.c_str()); rc != 0) {
    return git::GitError(rc, "opening mirror " + mirror + " of " + target.key);
  }
  RepoPtr repo(raw);
  std::vector<std::string> notes;
  std::vector<SelectedRef> refs;
  if (opts.prepared) {
    GATOS_ASSIGN_OR_RETURN(git_oid tip, git::ParseOid(opts.prepared->commit));
    git_object* o = nullptr;
    if (git_object_lookup(&o, repo.get(), &tip, GIT_OBJECT_COMMIT) != 0) {
      git_error_clear();
      return NotFoundError("commit " + opts.prepared->commit + " is not in the repository of " +
                           target.key);
    }
    git_object_free(o);
    refs.push_back({opts.prepared->ref, tip});
  } else {
    GATOS_ASSIGN_OR_RETURN(refs, SelectRefs(repo.get(), target.key, opts.refs, &notes));
  }
  for (std::string& n : notes) run.Problem(std::move(n));
  const size_t note_count = run.problems.size();

  git_revwalk* wraw = nullptr;
  if (int rc = git_revwalk_new(&wraw, repo.get()); rc != 0) {
    return git::GitError(rc, "starting a commit walk of " + target.key);
  }
  std::unique_ptr<git_revwalk, RevwalkFree> walk(wraw);
  // Oldest first, so a blob's recorded location is (close to) the commit
  // that introduced it, and an incremental run records what a full one would.
  git_revwalk_sorting(walk.get(), GIT_SORT_TOPOLOGICAL | GIT_SORT_TIME | GIT_SORT_REVERSE);
  bool anything = false;
  for (const SelectedRef& r : refs) {
    RefReport rr;
    rr.name = r.name;
    rr.tip = git::OidHex(r.tip);
    GATOS_ASSIGN_OR_RETURN(rr.watermark_before, ledger->Watermark(target.key, r.name, policy));
    rr.watermark_after = rr.watermark_before;
    bool hide = false;
    git_oid wm{};
    if (rr.watermark_before) {
      if (*rr.watermark_before == rr.tip) {
        report.refs.push_back(std::move(rr));
        continue;  // up to date
      }
      Result<git_oid> parsed = git::ParseOid(*rr.watermark_before);
      if (parsed.ok()) {
        wm = *parsed;
        // 1: tip descends from the watermark. 0, or an error because the
        // watermark commit was pruned from the mirror: history was rewritten.
        hide = git_graph_descendant_of(repo.get(), &r.tip, &wm) == 1;
        git_error_clear();
      }
      rr.force_pushed = !hide;
      report.force_pushed |= rr.force_pushed;
    }
    if (int rc = git_revwalk_push(walk.get(), &r.tip); rc != 0) {
      return git::GitError(rc, "walking " + r.name + " of " + target.key);
    }
    anything = true;
    // Hiding is global to the walk, which is right: everything reachable from
    // a watermark was completely scanned under this policy.
    if (hide && git_revwalk_hide(walk.get(), &wm) != 0) {
      return git::GitError("hiding the watermark of " + r.name + " in " + target.key);
    }
    report.refs.push_back(std::move(rr));
  }

  const unsigned threads =
      opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
  // The packs read directly by the scanning threads (libgit2 for the rest).
  const std::unique_ptr<PackStore> store = PackStore::Open(mirror);
  Queue<BlobRun> jobs(16);  // runs of up to 512 blobs
  Queue<WriterItem> results(8192);
  std::thread writer(Writer, db_path, policy, target.key, &results, &run);
  std::vector<std::thread> workers;
  for (unsigned i = 0; i < threads; ++i) {
    workers.emplace_back(ScanWorker, mirror, store.get(), std::cref(*detector), std::cref(opts),
                         &jobs, &results, &run);
  }
  std::atomic<bool> progress_done{false};
  std::thread progress;
  if (opts.progress) {
    progress = std::thread([&] {
      auto next = Clock::now() + std::chrono::seconds(1);
      while (!progress_done) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (Clock::now() >= next) {
          opts.progress(run.Snapshot());
          next += std::chrono::seconds(1);
        }
      }
    });
  }

  bool walk_finished = true;
  // The walk reads commits and trees through its own source (and cache).
  Result<std::unique_ptr<ObjectSource>> source =
      ObjectSource::Open(mirror, store.get(), kWalkCacheBytes);
  if (anything && !source.ok()) {
    run.Problem(source.status().message());
    walk_finished = false;
  } else if (anything) {
    // A first scan under this policy has nothing done: skip the lookups.
    Result<bool> any_done = ledger->AnyDone(policy);
    TreeWalker walker(source->get(), !any_done.ok() || *any_done ? ledger.get() : nullptr, policy,
                      opts, &jobs, &results, &run);
    git_oid oid;
    int rc;
    while ((rc = git_revwalk_next(&oid, walk.get())) == 0) {
      if (run.PastDeadline() || !walker.WalkCommit(oid)) {
        walk_finished = false;
        break;
      }
    }
    if (rc != 0 && rc != GIT_ITEROVER) {
      run.Problem(git::GitError(rc, "walking commits of " + target.key).message());
      walk_finished = false;
    }
    // Blobs collected before the walk stopped are scanned all the same.
    walker.Flush();
  }
  jobs.Close();
  for (std::thread& t : workers) t.join();
  results.Close();
  writer.join();
  progress_done = true;
  if (progress.joinable()) progress.join();

  report.counters = run.Snapshot();
  const bool problems_after_notes = run.problems.size() > note_count;
  report.complete = walk_finished && !run.stop && !problems_after_notes;
  report.budget_exhausted = run.budget_hit;
  report.partial_reasons = run.problems;

  // The listing (every finding recorded for this repository), with where
  // each one sits in history: read before the watermarks move, so a
  // failure here leaves the run partial.
  Result<std::vector<ListedFinding>> listed = ledger->ListFindings(target.key, policy);
  if (!listed.ok()) return listed.status();
  std::vector<git_oid> tips;
  for (const SelectedRef& r : refs) tips.push_back(r.tip);
  Status annotated = source.ok() ? AnnotateSecretHistory(repo.get(), source->get(), tips, &*listed)
                                 : source.status();
  if (Status s = annotated; !s.ok()) {
    report.complete = false;
    report.partial_reasons.push_back(s.message());
  }

  if (report.complete) {
    // All batches are committed (the writer has joined): now, and only now,
    // the watermarks move, all in one transaction.
    std::vector<std::pair<std::string, std::string>> advance;
    for (RefReport& r : report.refs) {
      if (r.watermark_before != r.tip) advance.emplace_back(r.name, r.tip);
      r.watermark_after = r.tip;
    }
    if (Status s = ledger->AdvanceWatermarks(target.key, policy, advance); !s.ok()) {
      report.complete = false;
      report.partial_reasons.push_back(s.message());
      for (RefReport& r : report.refs) r.watermark_after = r.watermark_before;
    }
  }

  std::map<std::string, size_t> rule_index;
  for (size_t i = 0; i < opts.rules.rules.size(); ++i) rule_index[opts.rules.rules[i].id] = i;
  for (ListedFinding& f : *listed) {
    auto it = rule_index.find(f.finding.rule_id);
    if (it != rule_index.end() && detector->PathAllowlisted(it->second, f.path)) {
      ++report.findings_allowlisted;
      continue;
    }
    if (opts.baseline.Accepts(f.finding.rule_id, f.finding.fingerprint)) {
      report.accepted.push_back(std::move(f));
    } else {
      report.findings.push_back(std::move(f));
    }
  }
  auto by_location = [](const ListedFinding& a, const ListedFinding& b) {
    return std::tie(a.path, a.finding.line, a.finding.start, a.finding.rule_id, a.blob, a.commit) <
           std::tie(b.path, b.finding.line, b.finding.start, b.finding.rule_id, b.blob, b.commit);
  };
  std::sort(report.findings.begin(), report.findings.end(), by_location);
  std::sort(report.accepted.begin(), report.accepted.end(), by_location);
  std::vector<FindingLocation> locations;
  for (const ListedFinding& f : report.findings) locations.push_back(ToLocation(f));
  report.secrets = GroupBySecret(std::move(locations));
  report.baseline_used = !opts.baseline.empty();
  for (const Rule& r : opts.rules.rules) report.rules.push_back({r.id, r.description});
  report.elapsed_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return report;
}

FindingLocation ToLocation(const ListedFinding& f) {
  FindingLocation l;
  l.rule = f.finding.rule_id;
  l.fingerprint = f.finding.fingerprint;
  l.blob = f.blob;
  l.commit = f.commit;
  l.path = PathForJson(f.path, &l.path_percent);
  l.line = f.finding.line;
  l.start = f.finding.start;
  l.end = f.finding.end;
  if (f.commit_time != 0) l.commit_time = f.commit_time;
  if (f.commit_rank >= 0) l.commit_rank = f.commit_rank;
  l.at_tip = f.at_tip;
  return l;
}

std::string FindingJson(const ListedFinding& f) {
  nlohmann::json j = LocationJson(ToLocation(f));
  Result<std::string> s = CanonicalJson(j);
  return s.ok() ? *s : j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string SecretsJsonl(const ScanReport& r) {
  std::string out;
  for (const SecretGroup& g : r.secrets) {
    nlohmann::json j = GroupJson(g, /*with_locations=*/true);
    Result<std::string> s = CanonicalJson(j);
    out += (s.ok() ? *s : j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) + "\n";
  }
  return out;
}

std::string SummaryJson(const ScanReport& r) {
  const ScanCounters& c = r.counters;
  nlohmann::json refs = nlohmann::json::array();
  for (const RefReport& ref : r.refs) {
    nlohmann::json j = {{"ref", ref.name},
                        {"tip", ref.tip},
                        {"force_pushed", ref.force_pushed},
                        {"watermark_before", nullptr},
                        {"watermark_after", nullptr}};
    if (ref.watermark_before) j["watermark_before"] = *ref.watermark_before;
    if (ref.watermark_after) j["watermark_after"] = *ref.watermark_after;
    refs.push_back(std::move(j));
  }
  nlohmann::json j = {
      {"tool", std::string("gatos-scan ") + kScannerVersion},
      {"repo", r.repo_key},
      {"status", r.complete ? "complete" : "partial"},
      {"partial_reasons", r.partial_reasons},
      {"policy_hash", r.policy_hash},
      {"rules_version", r.rules_version},
      {"rules_count", r.rules_count},
      {"commits_walked", c.commits_walked},
      {"blobs_seen", c.blobs_seen},
      {"blobs_scanned", c.blobs_scanned},
      {"bytes_scanned", c.bytes_scanned},
      {"blobs_skipped_done", c.blobs_skipped_done},
      {"blobs_skipped_binary", c.blobs_skipped_binary},
      {"bytes_skipped_binary", c.bytes_skipped_binary},
      {"blobs_skipped_too_large", c.blobs_skipped_too_large},
      {"bytes_skipped_too_large", c.bytes_skipped_too_large},
      {"blobs_not_reached", c.blobs_not_reached},
      {"findings", r.findings.size()},
      {"secrets", r.secrets.size()},
      {"secrets_at_tip", std::count_if(r.secrets.begin(), r.secrets.end(),
                                       [](const SecretGroup& g) { return g.at_tip == true; })},
      {"findings_new", c.findings_new},
      {"findings_allowlisted", r.findings_allowlisted},
      {"findings_baselined", r.accepted.size()},
      {"force_pushed", r.force_pushed},
      {"refs", std::move(refs)},
      {"elapsed_ms", static_cast<int64_t>(r.elapsed_seconds * 1000)},
  };
  Result<std::string> s = CanonicalJson(j);
  return s.ok() ? *s : j.dump();
}

Status WriteOutputs(const ScanReport& r, const std::string& dir) {
  std::string lines;
  for (const ListedFinding& f : r.findings) lines += FindingJson(f) + "\n";
  GATOS_RETURN_IF_ERROR(WriteFileAtomic(dir + "/findings.jsonl", lines));
  GATOS_RETURN_IF_ERROR(WriteFileAtomic(dir + "/secrets.jsonl", SecretsJsonl(r)));
  GATOS_RETURN_IF_ERROR(WriteFileAtomic(dir + "/findings.sarif", SarifJson(r) + "\n"));
  return WriteFileAtomic(dir + "/summary.json", SummaryJson(r) + "\n");
}

}  // namespace gatos::scan
