#include "dashboard_state.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "gatos/git/ledger.h"
#include "gatos/ledger/writer.h"
#include "gatos/model/clock.h"
#include "gatos/model/log_format.h"
#include "gatos/model/refs.h"

namespace gatos::gatosd {

namespace {

std::string FirstPrincipal(const AllowedSigner& s) {
  for (const auto& p : s.principals) {
    if (!p.empty() && p[0] != '!') return p;
  }
  return "";
}

// The worker a finished job ran on, when the record no longer names a
// holder: the only worker that ever claimed it.
std::string LastWorker(const JobRecord& r) {
  if (!r.worker_hex.empty()) return r.worker_hex;
  if (r.claims.size() == 1) return r.claims.begin()->first;
  return "";
}

// Cursor of Recent(): "<submitted_ms>-<hex>".
bool ParseRecentCursor(const std::string& c, std::pair<int64_t, std::string>* out) {
  size_t dash = c.find('-');
  if (dash == std::string::npos || dash == 0 || dash > 18) return false;
  int64_t ms = 0;
  for (size_t i = 0; i < dash; ++i) {
    if (c[i] < '0' || c[i] > '9') return false;
    ms = ms * 10 + (c[i] - '0');
  }
  std::string hex = c.substr(dash + 1);
  if (hex.size() > 64) return false;
  *out = {ms, hex};
  return true;
}

}  // namespace

void LiveState::Seed(const LedgerWriter& w) {
  std::lock_guard<std::mutex> l(mu_);
  int64_t now = w.Now();
  for (const auto& [hex, r] : w.live()) {
    NoteLocked(r, 0, now, 0);
    if (!r.worker_hex.empty()) {
      // At start the last sighting known is the request of the lease held.
      Seen& seen = workers_seen_[r.worker_hex];
      if (r.requested_at_ms > seen.last_ms) {
        seen.last_ms = r.requested_at_ms;
        seen.kind = "lease";
      }
    }
  }
  head_.seq = w.seq();
  head_.log_commit = w.head();
  head_.stats = w.stats();
  head_.policy_commit = w.policy_commit();
  head_.lease_ms = w.policy().settings.lease_ms;
  worker_principals_.clear();
  submitter_principals_.clear();
  for (const auto& s : w.policy().workers.entries()) worker_principals_.emplace(s.key.Hex(), FirstPrincipal(s));
  for (const auto& s : w.policy().submitters.entries()) {
    submitter_principals_.emplace(s.key.Hex(), FirstPrincipal(s));
  }
}

void LiveState::SetPolicy(const Policy& policy, const std::string& commit) {
  std::lock_guard<std::mutex> l(mu_);
  head_.policy_commit = commit;
  head_.lease_ms = policy.settings.lease_ms;
  worker_principals_.clear();
  submitter_principals_.clear();
  for (const auto& s : policy.workers.entries()) worker_principals_.emplace(s.key.Hex(), FirstPrincipal(s));
  for (const auto& s : policy.submitters.entries()) submitter_principals_.emplace(s.key.Hex(), FirstPrincipal(s));
}

void LiveState::SetHead(int64_t seq, const std::string& log_commit, const IndexStats& stats) {
  std::lock_guard<std::mutex> l(mu_);
  head_.seq = seq;
  head_.log_commit = log_commit;
  head_.stats = stats;
}

void LiveState::Note(const JobRecord& r, int64_t seq, int64_t now_ms) {
  std::lock_guard<std::mutex> l(mu_);
  NoteLocked(r, seq, now_ms, seq ? now_ms : 0);
  Evict();
}

namespace {
void EraseFrom(std::map<std::string, std::set<std::pair<int64_t, std::string>>>& m, const std::string& key,
               const std::pair<int64_t, std::string>& v) {
  auto it = m.find(key);
  if (it == m.end()) return;
  it->second.erase(v);
  if (it->second.empty()) m.erase(it);
}
}  // namespace

void LiveState::Unlink(const JobSummary& s) {
  std::pair<int64_t, std::string> key{s.submitted_ms, s.job_hex};
  by_submitted_.erase(key);
  EraseFrom(by_submitter_, s.submitter_hex, key);
  if (!s.worker_hex.empty()) EraseFrom(by_worker_, s.worker_hex, key);
  EraseFrom(by_state_, std::string(JobStateName(s.state)), key);
  if (s.live) {
    --live_count_;
    live_by_state_[std::string(JobStateName(s.state))].erase(s.job_hex);
    if (!s.worker_hex.empty()) {
      auto it = live_by_worker_.find(s.worker_hex);
      if (it != live_by_worker_.end()) {
        it->second.erase(s.job_hex);
        if (it->second.empty()) live_by_worker_.erase(it);
      }
    }
  } else {
    finished_by_seq_.erase({s.changed_seq, s.job_hex});
  }
}

void LiveState::Link(const JobSummary& s) {
  std::pair<int64_t, std::string> key{s.submitted_ms, s.job_hex};
  by_submitted_.insert(key);
  by_submitter_[s.submitter_hex].insert(key);
  if (!s.worker_hex.empty()) by_worker_[s.worker_hex].insert(key);
  by_state_[std::string(JobStateName(s.state))].insert(key);
  if (s.live) {
    ++live_count_;
    live_by_state_[std::string(JobStateName(s.state))].insert(s.job_hex);
    if (!s.worker_hex.empty()) live_by_worker_[s.worker_hex].insert(s.job_hex);
  } else {
    finished_by_seq_.insert({s.changed_seq, s.job_hex});
  }
}

void LiveState::NoteLocked(const JobRecord& r, int64_t seq, int64_t now_ms, int64_t changed_ms) {
  JobSummary s;
  s.job_hex = r.job_hex;
  s.job_commit = r.job_commit;
  s.submitter_hex = r.submitter_hex;
  s.submitted_ms = r.submitted_ms;
  s.changed_ms = changed_ms;
  s.changed_seq = seq;
  s.finished_ms = r.finished_ms;
  s.attempt = r.attempt;
  s.state = RecordState(r, now_ms);
  s.live = s.state == JobState::kPending || s.state == JobState::kClaimed;
  s.worker_hex = s.live ? r.worker_hex : LastWorker(r);
  auto it = jobs_.find(r.job_hex);
  if (it != jobs_.end()) {
    if (s.worker_hex.empty() && !s.live) s.worker_hex = it->second.worker_hex;
    Unlink(it->second);
    it->second = s;
  } else {
    it = jobs_.emplace(r.job_hex, s).first;
  }
  Link(it->second);
}

void LiveState::Evict() {
  while (jobs_.size() - live_count_ > window_ && !finished_by_seq_.empty()) {
    auto oldest = *finished_by_seq_.begin();
    auto it = jobs_.find(oldest.second);
    if (it == jobs_.end()) {
      finished_by_seq_.erase(finished_by_seq_.begin());
      continue;
    }
    evicted_watermark_ = std::max(evicted_watermark_, it->second.changed_seq);
    Unlink(it->second);
    jobs_.erase(it);
  }
}

std::map<std::string, uint64_t> LiveState::Committed(LedgerWriter& w, int64_t seq, const std::string& log_commit,
                                                     const std::vector<LogEntry>& entries,
                                                     const std::map<std::string, JobRecord>& records,
                                                     int64_t now_ms) {
  std::map<std::string, uint64_t> series;
  // One change per (kind, job): consecutive lines of a transition.
  std::vector<std::pair<LogKind, std::string>> changes;
  for (const auto& e : entries) {
    if (!changes.empty() && changes.back().first == e.kind && changes.back().second == e.job_hex) continue;
    changes.push_back({e.kind, e.job_hex});
  }
  // Every job an entry names is one the batch changed: its record is in
  // `records`, as committed.
  bool policy_changed = false;
  for (const auto& change : changes) policy_changed |= change.first == LogKind::kPolicy;
  nlohmann::json ev_changes = nlohmann::json::array();
  size_t more = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [hex, r] : records) NoteLocked(r, seq, now_ms, now_ms);
    for (const auto& [kind, hex] : changes) {
      auto rec = records.find(hex);
      std::string state;
      if (rec != records.end()) state = std::string(JobStateName(RecordState(rec->second, now_ms)));
      switch (kind) {
        case LogKind::kSubmit: ++series["submit"]; break;
        case LogKind::kClaim:
        case LogKind::kTakeover:
        case LogKind::kRenew:
          if (kind != LogKind::kRenew) ++series["claim"];
          if (rec != records.end() && !rec->second.worker_hex.empty()) {
            Seen& seen = workers_seen_[rec->second.worker_hex];
            seen.last_ms = now_ms;
            seen.kind = std::string(LogKindName(kind));
          }
          break;
        case LogKind::kResult:
        case LogKind::kAbort:
          if (!state.empty()) ++series[state];
          if (rec != records.end()) {
            std::string wk = jobs_.count(hex) ? jobs_[hex].worker_hex : "";
            if (kind == LogKind::kResult && !wk.empty()) ++workers_seen_[wk].finished;
          }
          break;
        default: break;
      }
      if (ev_changes.size() < 100) {
        ev_changes.push_back({{"kind", LogKindName(kind)}, {"job", hex}, {"state", state}});
      } else {
        ++more;
      }
    }
    Evict();
    head_.seq = seq;
    head_.log_commit = log_commit;
    head_.stats = w.stats();
    if (policy_changed) {
      head_.policy_commit = w.policy_commit();
      head_.lease_ms = w.policy().settings.lease_ms;
      worker_principals_.clear();
      submitter_principals_.clear();
      for (const auto& s : w.policy().workers.entries()) worker_principals_.emplace(s.key.Hex(), FirstPrincipal(s));
      for (const auto& s : w.policy().submitters.entries()) {
        submitter_principals_.emplace(s.key.Hex(), FirstPrincipal(s));
      }
    }
    nlohmann::json counts = nlohmann::json::object();
    for (size_t i = 0; i < head_.stats.by_state.size(); ++i) {
      counts[std::string(JobStateName(static_cast<JobState>(i)))] = head_.stats.by_state[i];
    }
    nlohmann::json ev = {{"seq", seq}, {"time_ms", now_ms}, {"changes", ev_changes}, {"more", more},
                         {"counts", counts}};
    events_.push_back({seq, ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
    while (events_.size() > kEvents) events_.pop_front();
  }
  cv_.notify_all();
  return series;
}

bool LiveState::Backfilled(const JobRecord& r, int64_t seq, int64_t changed_ms, int64_t now_ms) {
  std::lock_guard<std::mutex> l(mu_);
  if (jobs_.size() - live_count_ >= window_) return false;
  if (jobs_.count(r.job_hex)) return true;
  JobState st = RecordState(r, now_ms);
  if (st == JobState::kPending || st == JobState::kClaimed) return true;  // live jobs come from the writer
  NoteLocked(r, seq, now_ms, changed_ms);
  return true;
}

LiveState::Head LiveState::head() const {
  std::lock_guard<std::mutex> l(mu_);
  return head_;
}

std::optional<JobSummary> LiveState::Find(const std::string& job_hex) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = jobs_.find(job_hex);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

namespace {
bool Matches(const JobSummary& s, const JobQuery& q) {
  if (!q.state.empty()) {
    if (q.state == "live") {
      if (!s.live) return false;
    } else if (JobStateName(s.state) != q.state) {
      return false;
    }
  }
  if (!q.submitter_hex.empty() && s.submitter_hex != q.submitter_hex) return false;
  if (!q.worker_hex.empty() && s.worker_hex != q.worker_hex) return false;
  if (q.since_ms && s.submitted_ms < q.since_ms) return false;
  if (q.until_ms && s.submitted_ms >= q.until_ms) return false;
  return true;
}
}  // namespace

JobPage LiveState::Live(const JobQuery& q) const {
  std::lock_guard<std::mutex> l(mu_);
  JobPage page;
  page.source = "live";
  static const std::set<std::string> kEmpty;
  // The smallest exact set that holds every match.
  std::vector<const std::set<std::string>*> sets;
  if (!q.worker_hex.empty()) {
    auto it = live_by_worker_.find(q.worker_hex);
    sets.push_back(it == live_by_worker_.end() ? &kEmpty : &it->second);
  } else if (q.state == "pending" || q.state == "claimed") {
    auto it = live_by_state_.find(q.state);
    sets.push_back(it == live_by_state_.end() ? &kEmpty : &it->second);
  } else {
    for (const char* st : {"pending", "claimed"}) {
      auto it = live_by_state_.find(st);
      if (it != live_by_state_.end()) sets.push_back(&it->second);
    }
  }
  // Merge the sets in id order from the cursor.
  std::vector<std::set<std::string>::const_iterator> its;
  for (const auto* s : sets) its.push_back(q.cursor.empty() ? s->begin() : s->upper_bound(q.cursor));
  while (true) {
    int best = -1;
    for (size_t i = 0; i < sets.size(); ++i) {
      if (its[i] == sets[i]->end()) continue;
      if (best < 0 || *its[i] < *its[static_cast<size_t>(best)]) best = static_cast<int>(i);
    }
    if (best < 0) break;
    const std::string& hex = *its[static_cast<size_t>(best)];
    ++its[static_cast<size_t>(best)];
    ++page.scanned;
    auto j = jobs_.find(hex);
    if (j == jobs_.end() || !Matches(j->second, q)) continue;
    if (page.jobs.size() == q.limit) {
      page.next = page.jobs.back().job_hex;
      break;
    }
    page.jobs.push_back(j->second);
  }
  return page;
}

JobPage LiveState::Recent(const JobQuery& q) const {
  std::lock_guard<std::mutex> l(mu_);
  JobPage page;
  page.source = "window";
  // Newest first, from the cursor or the until bound, whichever is older.
  std::pair<int64_t, std::string> start, cur;
  bool bounded = false;
  if (!q.cursor.empty() && ParseRecentCursor(q.cursor, &cur)) {
    start = cur;
    bounded = true;
  }
  if (q.until_ms) {
    std::pair<int64_t, std::string> until{q.until_ms, ""};
    if (!bounded || until < start) start = until;
    bounded = true;
  }
  static const TimeSet kEmpty;
  const TimeSet* set = &by_submitted_;
  auto narrow = [&](const std::map<std::string, TimeSet>& m, const std::string& key) {
    auto f = m.find(key);
    const TimeSet* cand = f == m.end() ? &kEmpty : &f->second;
    if (cand->size() < set->size()) set = cand;
  };
  if (!q.submitter_hex.empty()) narrow(by_submitter_, q.submitter_hex);
  if (!q.worker_hex.empty()) narrow(by_worker_, q.worker_hex);
  if (!q.state.empty() && q.state != "live") narrow(by_state_, q.state);
  auto it = bounded ? set->lower_bound(start) : set->end();
  while (it != set->begin()) {
    --it;
    if (q.since_ms && it->first < q.since_ms) break;  // older than the range: done
    ++page.scanned;
    auto j = jobs_.find(it->second);
    if (j == jobs_.end() || !Matches(j->second, q)) continue;
    if (page.jobs.size() == q.limit) {
      const JobSummary& last = page.jobs.back();
      page.next = std::to_string(last.submitted_ms) + "-" + last.job_hex;
      break;
    }
    page.jobs.push_back(j->second);
  }
  return page;
}

std::vector<WorkerSummary> LiveState::Workers() const {
  std::lock_guard<std::mutex> l(mu_);
  std::map<std::string, WorkerSummary> out;
  for (const auto& [key, principal] : worker_principals_) {
    WorkerSummary& w = out[key];
    w.key_hex = key;
    w.principal = principal;
    w.allowed = true;
  }
  for (const auto& [key, seen] : workers_seen_) {
    WorkerSummary& w = out[key];
    w.key_hex = key;
    w.last_seen_ms = seen.last_ms;
    w.last_kind = seen.kind;
    w.finished_since_start = seen.finished;
  }
  for (const auto& [key, jobs] : live_by_worker_) {
    WorkerSummary& w = out[key];
    w.key_hex = key;
    w.running = jobs.size();
    for (const auto& j : jobs) {
      if (w.running_jobs.size() == 20) break;
      w.running_jobs.push_back(j);
    }
  }
  std::vector<WorkerSummary> v;
  for (auto& [k, w] : out) v.push_back(std::move(w));
  return v;
}

std::string LiveState::PrincipalOf(const std::string& key_hex) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = worker_principals_.find(key_hex);
  if (it != worker_principals_.end()) return it->second;
  it = submitter_principals_.find(key_hex);
  return it == submitter_principals_.end() ? "" : it->second;
}

std::string LiveState::KeyOfPrincipal(const std::string& principal) const {
  std::lock_guard<std::mutex> l(mu_);
  std::string found;
  for (const auto* m : {&worker_principals_, &submitter_principals_}) {
    for (const auto& [key, p] : *m) {
      if (p != principal) continue;
      if (!found.empty() && found != key) return "";
      found = key;
    }
  }
  return found;
}

int64_t LiveState::evicted_watermark() const {
  std::lock_guard<std::mutex> l(mu_);
  return evicted_watermark_;
}
size_t LiveState::window_size() const {
  std::lock_guard<std::mutex> l(mu_);
  return jobs_.size() - live_count_;
}
size_t LiveState::live_size() const {
  std::lock_guard<std::mutex> l(mu_);
  return live_count_;
}

bool LiveState::WaitEvents(int64_t after_seq, int wait_ms, std::vector<LiveEvent>* out, bool* reset) const {
  std::unique_lock<std::mutex> l(mu_);
  *reset = false;
  auto have = [&] { return !events_.empty() && events_.back().seq > after_seq; };
  if (!cv_.wait_for(l, std::chrono::milliseconds(wait_ms), have)) return false;
  if (after_seq > 0 && events_.front().seq > after_seq + 1) *reset = true;
  for (const auto& e : events_) {
    if (e.seq > after_seq) out->push_back(e);
  }
  return true;
}

int64_t LiveState::last_event_seq() const {
  std::lock_guard<std::mutex> l(mu_);
  return events_.empty() ? head_.seq : events_.back().seq;
}

WindowBackfill::WindowBackfill(std::string ledger_dir, LiveState* live) : dir_(std::move(ledger_dir)), live_(live) {
  thread_ = std::thread([this] { Run(); });
}

WindowBackfill::~WindowBackfill() {
  stop_ = true;
  thread_.join();
}

void WindowBackfill::Run() {
  auto ledger = Ledger::Open(dir_);
  if (!ledger.ok()) return;  // the dashboard then knows only what happens from now on
  LiveState::Head head = live_->head();
  if (head.log_commit.empty()) return;
  auto top = (*ledger)->ReadCommit(head.log_commit);
  if (!top.ok()) return;
  StateIndex index(ledger->get());
  index.Reset(top->tree);  // records as of the head gatosd started from
  std::set<std::string> seen;
  std::string commit = head.log_commit;
  int64_t seq = head.seq;
  int64_t now = SystemNowMs();
  for (int64_t n = 0; n < kMaxBatches && !commit.empty() && !stop_; ++n, --seq) {
    auto c = (*ledger)->ReadCommit(commit);
    if (!c.ok()) return;
    auto text = (*ledger)->ReadFileAtCommit(commit, "batch", 64 << 20);
    if (text.ok()) {
      auto entries = DecodeBatch(*text);
      if (entries.ok()) {
        for (const auto& e : *entries) {
          if (e.job_hex.empty() || !seen.insert(e.job_hex).second) continue;
          auto rec = index.Get(e.job_hex);
          if (!rec.ok() || !*rec) continue;
          if (!live_->Backfilled(**rec, seq, c->time_s * 1000, now)) return;  // the window is full
        }
      }
    }
    commit = c->parents.empty() ? "" : c->parents[0];
  }
}

void LiveState::SetPools(std::string reply_json) {
  std::lock_guard<std::mutex> l(mu_);
  pools_ = std::move(reply_json);
}

std::string LiveState::pools() const {
  std::lock_guard<std::mutex> l(mu_);
  return pools_;
}

}  // namespace gatos::gatosd
