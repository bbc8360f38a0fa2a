#include "gatos/job_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gatos {

namespace {
size_t Slot(JobState s) { return static_cast<size_t>(s); }

}  // namespace

namespace {
void EraseFrom(std::multimap<int64_t, std::string>* m, int64_t key, const std::string& hex) {
  auto range = m->equal_range(key);
  for (auto r = range.first; r != range.second; ++r) {
    if (r->second == hex) {
      m->erase(r);
      return;
    }
  }
}
}  // namespace

void JobIndex::Remove(const std::string& job_hex) {
  auto it = entries_.find(job_hex);
  if (it == entries_.end()) return;
  const IndexEntry& old = it->second;
  if (old.state == JobState::kPending) EraseFrom(&pending_by_publish_, old.last_published_ms, job_hex);
  --counts_[Slot(old.state)];
  by_state_[Slot(old.state)].erase(job_hex);
  if (old.state == JobState::kClaimed) EraseFrom(&lease_expiry_, old.lease_expires_ms, job_hex);
  entries_.erase(it);
}

void JobIndex::Put(IndexEntry e) {
  ++counts_[Slot(e.state)];
  by_state_[Slot(e.state)].insert(e.job_hex);
  if (e.state == JobState::kClaimed) lease_expiry_.emplace(e.lease_expires_ms, e.job_hex);
  if (e.state == JobState::kPending) pending_by_publish_.emplace(e.last_published_ms, e.job_hex);
  std::string key = e.job_hex;
  entries_[key] = std::move(e);
}

Result<size_t> JobIndex::Rebuild(Ledger& ledger, int64_t now_ms) {
  entries_.clear();
  counts_ = {};
  for (auto& s : by_state_) s.clear();
  lease_expiry_.clear();
  pending_by_publish_.clear();
  Status inner = OkStatus();
  Status s = ledger.ForEachJob([&](std::string_view hex) {
    if (!inner.ok()) return;
    auto snap = ledger.ReadJob(hex);
    if (!snap.ok()) {
      inner = snap.status();
      return;
    }
    IndexEntry e = EntryFromSnapshot(*snap, now_ms);
    e.seen_ms = now_ms;
    Put(std::move(e));
  });
  GATOS_RETURN_IF_ERROR(s);
  GATOS_RETURN_IF_ERROR(inner);
  return entries_.size();
}

Result<const IndexEntry*> JobIndex::Refresh(Ledger& ledger, const std::string& job_hex,
                                            int64_t now_ms, bool* is_new) {
  *is_new = false;
  auto snap = ledger.ReadJob(job_hex);
  if (!snap.ok()) {
    if (snap.status().code() == StatusCode::kNotFound) {
      Remove(job_hex);
      return static_cast<const IndexEntry*>(nullptr);
    }
    return snap.status();
  }
  IndexEntry e = EntryFromSnapshot(*snap, now_ms);
  auto it = entries_.find(job_hex);
  if (it == entries_.end()) {
    *is_new = true;
    e.seen_ms = now_ms;
  } else {
    e.seen_ms = it->second.seen_ms;
    e.last_published_ms = it->second.last_published_ms;
    e.published_epoch = it->second.published_epoch;
    Remove(job_hex);
  }
  Put(std::move(e));
  return &entries_.at(job_hex);
}

bool JobIndex::ApplyLease(const std::string& job_hex, const std::string& worker_hex, int64_t epoch,
                          int64_t expires_ms) {
  auto it = entries_.find(job_hex);
  if (it == entries_.end()) return false;
  IndexEntry e = it->second;
  Remove(job_hex);
  e.state = JobState::kClaimed;
  e.worker_hex = worker_hex;
  e.epoch = epoch;
  e.lease_expires_ms = expires_ms;
  Put(std::move(e));
  return true;
}

bool JobIndex::ApplyResult(const std::string& job_hex, const std::string& result_commit, JobState state) {
  auto it = entries_.find(job_hex);
  if (it == entries_.end()) return false;
  IndexEntry e = it->second;
  Remove(job_hex);
  e.state = state;
  e.result_commit = result_commit;
  Put(std::move(e));
  return true;
}

const IndexEntry* JobIndex::Find(const std::string& job_hex) const {
  auto it = entries_.find(job_hex);
  return it == entries_.end() ? nullptr : &it->second;
}

void JobIndex::MarkPublished(const std::string& job_hex, int64_t now_ms, int64_t epoch) {
  auto it = entries_.find(job_hex);
  if (it == entries_.end()) return;
  if (it->second.state == JobState::kPending) {
    EraseFrom(&pending_by_publish_, it->second.last_published_ms, job_hex);
    pending_by_publish_.emplace(now_ms, job_hex);
  }
  it->second.last_published_ms = now_ms;
  if (epoch >= 0) it->second.published_epoch = epoch;
}

std::vector<std::string> JobIndex::PendingNotPublishedSince(int64_t before_ms, size_t limit) const {
  std::vector<std::string> out;
  for (auto it = pending_by_publish_.begin();
       it != pending_by_publish_.end() && it->first < before_ms && out.size() < limit; ++it) {
    out.push_back(it->second);
  }
  return out;
}

std::vector<std::string> JobIndex::ExpiredLeases(int64_t now_ms, size_t limit) const {
  std::vector<std::string> out;
  for (auto it = lease_expiry_.begin(); it != lease_expiry_.end() && it->first <= now_ms; ++it) {
    if (out.size() >= limit) break;
    const IndexEntry& e = entries_.at(it->second);
    if (e.published_epoch < e.epoch) out.push_back(it->second);
  }
  return out;
}

std::vector<const IndexEntry*> JobIndex::List(std::optional<JobState> state, const std::string& after,
                                              size_t limit) const {
  std::vector<const IndexEntry*> out;
  auto take = [&](const std::set<std::string>& ids) {
    for (auto it = ids.upper_bound(after); it != ids.end() && out.size() < limit; ++it) {
      out.push_back(&entries_.at(*it));
    }
  };
  if (state) {
    take(by_state_[Slot(*state)]);
    return out;
  }
  // Merge the per-state sets in id order.
  std::vector<std::pair<std::set<std::string>::const_iterator, std::set<std::string>::const_iterator>> its;
  for (const auto& ids : by_state_) its.emplace_back(ids.upper_bound(after), ids.end());
  while (out.size() < limit) {
    int best = -1;
    for (size_t i = 0; i < its.size(); ++i) {
      if (its[i].first == its[i].second) continue;
      if (best < 0 || *its[i].first < *its[best].first) best = static_cast<int>(i);
    }
    if (best < 0) break;
    out.push_back(&entries_.at(*its[best].first));
    ++its[best].first;
  }
  return out;
}

std::string InboxPath(const std::string& ledger_dir) { return ledger_dir + "/gatos/inbox"; }

Status AppendInbox(const std::string& ledger_dir, const std::string& line) {
  std::string path = InboxPath(ledger_dir);
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError("cannot open " + path + ": " + std::strerror(errno));
  std::string data = line + "\n";
  ssize_t n = ::write(fd, data.data(), data.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(data.size())) {
    return UnavailableError("cannot append to " + path + ": " + std::strerror(err));
  }
  return OkStatus();
}

void InboxReader::SkipToEnd() {
  struct stat st;
  offset_ = ::stat(path_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  partial_.clear();
}

std::vector<std::string> InboxReader::ReadNew() {
  std::vector<std::string> lines;
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) return lines;
  if (static_cast<uint64_t>(st.st_size) < offset_) {  // replaced or rotated
    offset_ = 0;
    partial_.clear();
  }
  if (static_cast<uint64_t>(st.st_size) == offset_) return lines;
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return lines;
  char buf[65536];
  ssize_t n;
  while ((n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(offset_))) > 0) {
    offset_ += static_cast<uint64_t>(n);
    partial_.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  size_t start = 0, nl;
  while ((nl = partial_.find('\n', start)) != std::string::npos) {
    lines.push_back(partial_.substr(start, nl - start));
    start = nl + 1;
  }
  partial_.erase(0, start);
  return lines;
}

}  // namespace gatos
