#include "gatos/log_audit.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "gatos/encoding.h"
#include "gatos/job_record.h"
#include "gatos/lease.h"
#include "gatos/ledger_checks.h"
#include "gatos/ledger_commits.h"
#include "gatos/log_format.h"
#include "gatos/manifest.h"
#include "gatos/policy.h"
#include "gatos/refs.h"
#include "gatos/result.h"
#include "gatos/rpc.h"
#include "gatos/sshsig.h"
#include "gatos/state_index.h"
#include "gatos/transition.h"
#include "gatos/witness.h"

namespace gatos {

// ---- the state file ----

std::string EncodeAuditState(const AuditState& s) {
  return "gatos-audit-state 1\nledger " + s.ledger_root + "\nhead " + s.head + "\nseq " + std::to_string(s.seq) +
         "\nverified-at " + FormatRfc3339Millis(s.verified_at_ms) + "\n";
}

namespace {

// Lines "key value" in exactly the order of `keys`, the first one the
// format's name with version 1; returns the values.
Result<std::vector<std::string>> ParseKeyLines(std::string_view text, const std::vector<const char*>& keys,
                                               const char* what) {
  if (text.size() > 4096) return InvalidArgumentError(std::string("a ") + what + " is at most 4096 bytes");
  std::vector<std::string> values;
  size_t pos = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string where = "line " + std::to_string(i + 1) + ": ";
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      return InvalidArgumentError(where + "expected \"" + keys[i] + " ...\" ending with a newline");
    }
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.substr(0, sp) != keys[i]) {
      return InvalidArgumentError(where + "expected \"" + keys[i] + " ...\"");
    }
    std::string v(line.substr(sp + 1));
    if (i == 0 && v != "1") {
      return InvalidArgumentError(where + "unknown " + what + " version \"" + v.substr(0, 20) + "\"");
    }
    values.push_back(std::move(v));
  }
  if (pos != text.size()) {
    return InvalidArgumentError("line " + std::to_string(keys.size() + 1) + ": unexpected text after " +
                                keys.back());
  }
  return values;
}

// The values of ParseKeyLines, read by type; errors name the line.
struct KeyLines {
  std::vector<std::string> v;
  static std::string Where(size_t i) { return "line " + std::to_string(i + 1) + ": "; }
  Result<std::string> Commit(size_t i) const {
    if (!IsLowerHex(v[i], 40)) return InvalidArgumentError(Where(i) + "expected a 40-hex commit id");
    return v[i];
  }
  Result<int64_t> Seq(size_t i) const {
    const std::string& s = v[i];
    if (s.empty() || s.size() > 18 || s[0] == '0' || s.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgumentError(Where(i) + "expected a positive sequence number");
    }
    return std::stoll(s);
  }
  Result<int64_t> Time(size_t i) const {
    auto t = ParseRfc3339Millis(v[i]);
    if (!t.ok()) return InvalidArgumentError(Where(i) + t.status().message());
    return *t;
  }
};

}  // namespace

Result<AuditState> ParseAuditState(std::string_view text) {
  GATOS_ASSIGN_OR_RETURN(auto values, ParseKeyLines(text, {"gatos-audit-state", "ledger", "head", "seq", "verified-at"},
                                                     "state file"));
  KeyLines k{std::move(values)};
  AuditState s;
  GATOS_ASSIGN_OR_RETURN(s.ledger_root, k.Commit(1));
  GATOS_ASSIGN_OR_RETURN(s.head, k.Commit(2));
  GATOS_ASSIGN_OR_RETURN(s.seq, k.Seq(3));
  GATOS_ASSIGN_OR_RETURN(s.verified_at_ms, k.Time(4));
  return s;
}

std::string EncodeMirrorRecord(const MirrorRecord& m) {
  return "gatos-mirror 1\nlog-before " + m.log_before + "\nseq-before " + std::to_string(m.seq_before) +
         "\nlog-after " + m.log_after + "\nseq-after " + std::to_string(m.seq_after) + "\nfetched-at " +
         FormatRfc3339Millis(m.fetched_at_ms) + "\n";
}

Result<MirrorRecord> ParseMirrorRecord(std::string_view text) {
  GATOS_ASSIGN_OR_RETURN(auto values, ParseKeyLines(text,
                                                     {"gatos-mirror", "log-before", "seq-before", "log-after",
                                                      "seq-after", "fetched-at"},
                                                     "mirror record"));
  KeyLines k{std::move(values)};
  MirrorRecord m;
  GATOS_ASSIGN_OR_RETURN(m.log_before, k.Commit(1));
  GATOS_ASSIGN_OR_RETURN(m.log_after, k.Commit(3));
  GATOS_ASSIGN_OR_RETURN(m.seq_before, k.Seq(2));
  GATOS_ASSIGN_OR_RETURN(m.seq_after, k.Seq(4));
  if (m.seq_after < m.seq_before) {
    return InvalidArgumentError(KeyLines::Where(4) + "seq-after is before seq-before (the log only grows)");
  }
  GATOS_ASSIGN_OR_RETURN(m.fetched_at_ms, k.Time(5));
  return m;
}

AuditState LogAuditReport::state() const {
  AuditState s;
  s.ledger_root = ledger_root;
  s.head = head;
  s.seq = seq;
  return s;
}

namespace {

std::string Short(const std::string& id) { return id.substr(0, 12); }

std::string SignatureProblem(const CommitInfo& c, const Ed25519PublicKey& key) {
  if (c.signature.empty()) return "it is not signed (no gpgsig header)";
  auto sig = ParseSshSignature(c.signature);
  if (!sig.ok()) return "gpgsig: " + sig.status().message();
  if (sig->key != key) return "it is signed by " + sig->key.WorkerId() + ", not by " + key.WorkerId();
  Status v = SshSigVerify(*sig, c.signed_data, kSignerNamespaceGit);
  if (!v.ok()) return "its SSH signature does not verify: " + v.message();
  return "";
}

bool Verifies(const std::string& key_hex, const std::string& payload, const std::string& sig_hex) {
  auto key = ParseWorkerId("ed25519:" + key_hex);
  auto sig = HexDecode(sig_hex);
  return key.ok() && sig.ok() && sig->size() == 64 && Ed25519Verify(*key, payload, sig->data()).ok();
}

// A transition: consecutive batch lines with the same kind and job, each
// ref at most once.
struct LoggedTransition {
  LogKind kind;
  std::string job_hex;
  std::vector<LogEntry> entries;
};

std::vector<LoggedTransition> Group(const std::vector<LogEntry>& entries) {
  std::vector<LoggedTransition> out;
  std::set<std::string> refs;
  for (const LogEntry& e : entries) {
    bool join = !out.empty() && !e.job_hex.empty() && out.back().kind == e.kind &&
                out.back().job_hex == e.job_hex && !e.ref.empty() && !refs.count(e.ref) &&
                !out.back().entries.back().ref.empty();
    if (!join) {
      out.push_back({e.kind, e.job_hex, {}});
      refs.clear();
    }
    out.back().entries.push_back(e);
    if (!e.ref.empty()) refs.insert(e.ref);
  }
  return out;
}

// The fields in which `index` (what the ledger wrote) and `replayed` differ.
std::string RecordDifference(const JobRecord& index, const JobRecord& replayed) {
  std::string out;
  auto field = [&](const char* name, const auto& a, const auto& b) {
    if (a == b) return;
    std::ostringstream os;
    os << (out.empty() ? "" : "; ") << name << ": index " << a << ", log " << b;
    out += os.str();
  };
  field("job_commit", index.job_commit, replayed.job_commit);
  field("submitter", index.submitter_hex, replayed.submitter_hex);
  field("submitted_ms", index.submitted_ms, replayed.submitted_ms);
  field("attempt", index.attempt, replayed.attempt);
  field("epoch", index.epoch, replayed.epoch);
  field("lease_commit", index.lease_commit, replayed.lease_commit);
  field("worker", index.worker_hex, replayed.worker_hex);
  field("expires_ms", index.expires_ms, replayed.expires_ms);
  field("requested_at_ms", index.requested_at_ms, replayed.requested_at_ms);
  field("claim_commit", index.claim_commit, replayed.claim_commit);
  field("claims", index.claims.size(), replayed.claims.size());
  field("cancel_commit", index.cancel_commit, replayed.cancel_commit);
  field("retry_commit", index.retry_commit, replayed.retry_commit);
  field("result_commit", index.result_commit, replayed.result_commit);
  field("result_status", index.result_status, replayed.result_status);
  field("attempts", index.attempts.size(), replayed.attempts.size());
  field("not_before_ms", index.not_before_ms, replayed.not_before_ms);
  field("finished_ms", index.finished_ms, replayed.finished_ms);
  field("pruned_ms", index.pruned_ms, replayed.pruned_ms);
  if (out.empty() && index.claims != replayed.claims) out = "claims";
  if (out.empty()) out = "attempts";
  return out;
}

std::string EntryText(const LogEntry& e) {
  std::string s = EncodeBatch({e});
  if (!s.empty()) s.pop_back();
  return s;
}

bool IsPushTarget(const std::string& ref) {
  return ref.rfind(kSubmitPrefix, 0) == 0 || ref.rfind(kResultsPushPrefix, 0) == 0 ||
         ref.rfind(kWitnessPushPrefix, 0) == 0;
}


// Reads refs straight from the repository's files, for the incremental run:
// a loose ref file, else a binary search of the sorted packed-refs file
// (mmap'ed). Cost per lookup: O(log refs), where asking libgit2 would load
// every packed ref first (seconds at a million jobs).
class RefReader {
 public:
  explicit RefReader(const std::string& repo) {
    git_dir_ = repo;
    if (std::filesystem::exists(repo + "/.git")) git_dir_ = repo + "/.git";
    int fd = ::open((git_dir_ + "/packed-refs").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (m != MAP_FAILED) {
        data_ = static_cast<const char*>(m);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    ::close(fd);
    std::string_view all(data_ ? data_ : "", size_);
    if (all.rfind("# pack-refs with:", 0) == 0) {
      std::string_view header = all.substr(0, all.find('\n'));
      sorted_ = header.find(" sorted") != std::string_view::npos;
    }
  }
  ~RefReader() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  RefReader(const RefReader&) = delete;
  RefReader& operator=(const RefReader&) = delete;

  // Every ref under `prefix` (ending with '/') with its value.
  std::map<std::string, std::string> Under(const std::string& prefix) {
    std::map<std::string, std::string> out;
    ForEachPacked(prefix, [&](std::string_view name, std::string_view id) { out[std::string(name)] = std::string(id); });
    std::error_code ec;
    std::string dir = git_dir_ + "/" + prefix;
    if (std::filesystem::is_directory(dir, ec)) {
      for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        std::string path = it->path().string();
        if (path.size() > 5 && path.compare(path.size() - 5, 5, ".lock") == 0) continue;
        std::string name = prefix + path.substr(dir.size());
        std::string v = Loose(name);
        if (!v.empty()) out[name] = v;
      }
    }
    return out;
  }
  // "" when absent.
  std::string Resolve(const std::string& name) {
    std::string v = Loose(name);
    if (!v.empty()) return v;
    std::string found;
    ForEachPacked(name, [&](std::string_view n, std::string_view id) {
      if (n == name) found = std::string(id);
    });
    return found;
  }

 private:
  std::string Loose(const std::string& name) {
    std::ifstream in(git_dir_ + "/" + name);
    std::string line;
    if (!in || !std::getline(in, line)) return "";
    return IsLowerHex(line, 40) ? line : "";
  }
  // Lines "<40 hex> <name>" of packed-refs whose name starts with `prefix`.
  template <typename Fn>
  void ForEachPacked(const std::string& prefix, Fn fn) {
    if (!data_) return;
    std::string_view all(data_, size_);
    auto line_at = [&](size_t pos) {
      size_t nl = all.find('\n', pos);
      return all.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    };
    auto name_of = [](std::string_view line) {
      return line.size() > 41 && line[40] == ' ' ? line.substr(41) : std::string_view();
    };
    size_t start = 0;
    if (sorted_) {
      // The first record line whose name is >= prefix.
      size_t lo = 0, hi = size_;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        size_t pos = mid == 0 ? 0 : all.find('\n', mid - 1);
        pos = pos == std::string_view::npos ? size_ : (mid == 0 ? 0 : pos + 1);
        while (pos < size_ && (all[pos] == '#' || all[pos] == '^')) {
          size_t nl = all.find('\n', pos);
          pos = nl == std::string_view::npos ? size_ : nl + 1;
        }
        if (pos >= size_ || name_of(line_at(pos)) >= prefix) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      size_t pos = lo == 0 ? 0 : all.find('\n', lo - 1);
      start = pos == std::string_view::npos ? size_ : (lo == 0 ? 0 : pos + 1);
    }
    for (size_t pos = start; pos < size_;) {
      std::string_view line = line_at(pos);
      pos += line.size() + 1;
      std::string_view name = name_of(line);
      if (name.empty()) continue;
      if (name.substr(0, prefix.size()) == prefix) {
        fn(name, line.substr(0, 40));
      } else if (sorted_ && name > prefix) {
        break;
      }
    }
  }

  std::string git_dir_;
  const char* data_ = nullptr;
  size_t size_ = 0;
  bool sorted_ = false;
};

struct PolicyState {
  std::string commit;
  Policy policy;
};

class Replay {
 public:
  Replay(Ledger& ledger, const LogAuditOptions& opt, LogAuditReport* rep)
      : ledger_(ledger), opt_(opt), rep_(rep), lookup_(LedgerLookup(&ledger)) {}

  Status Run();

 private:
  void Problem(std::string check, std::string detail, int64_t seq = 0, std::string job = "", std::string ref = "") {
    if (rep_->problems.size() >= kMaxProblems) {
      ++dropped_;
      return;
    }
    rep_->problems.push_back({std::move(check), std::move(detail), seq, std::move(job), std::move(ref)});
  }
  Status CollectCommits(std::vector<CommitInfo>* commits);
  Status LoadStart();
  Status VerifyCommit(const CommitInfo& c, const LogCommitInfo& info);
  // The batch record of a log commit; nullopt when its tree has none.
  Result<std::optional<std::string>> BatchText(const CommitInfo& c);
  void AddSettling(const std::vector<LogEntry>& entries);
  Status LoadSettlingBeforeStart();
  Result<std::optional<JobRecord>*> Record(const std::string& job);
  void ReplayTransition(const LoggedTransition& t, const CommitInfo& c, const LogCommitInfo& info,
                       const std::set<std::string>& parents, bool* batch_ok);
  // Each returns the new record or nullopt after reporting a problem.
  std::optional<JobRecord> Submit(const LoggedTransition& t, const std::optional<JobRecord>& old);
  std::optional<JobRecord> Lease(const LoggedTransition& t, const std::optional<JobRecord>& old);
  std::optional<JobRecord> ResultOf(const LoggedTransition& t, const std::optional<JobRecord>& old,
                                    const CommitInfo& c);
  TransitionRules Rules() const { return {&pol_.policy, now_}; }
  std::optional<JobRecord> UserRequest(const LoggedTransition& t, const std::optional<JobRecord>& old);
  std::optional<JobRecord> Other(const LoggedTransition& t, const std::optional<JobRecord>& old);
  void Note(const LoggedTransition& t, const std::set<std::string>& parents);
  void PolicyChange(const LoggedTransition& t);
  bool WorkerAllowed(const std::string& worker_hex, std::string* why);
  void CompareRefs();
  void CompareIndex();
  void CheckWitnesses();
  Result<std::string> LogCommitAt(int64_t seq);
  void Fail(const LoggedTransition& t, const std::string& check, const std::string& detail) {
    Problem(check, detail, seq_, t.job_hex, t.entries.empty() ? "" : t.entries.front().ref);
  }

  static constexpr size_t kMaxProblems = 10'000;

  Ledger& ledger_;
  const LogAuditOptions& opt_;
  LogAuditReport* rep_;
  ObjectLookup lookup_;
  size_t dropped_ = 0;

  // Replay state.
  int64_t seq_ = 0;      // the commit being replayed
  int64_t now_ = 0;      // its Log-Time
  std::string head_;
  PolicyState pol_;                         // in force now (changes inside a batch)
  Ed25519PublicKey batch_key_;              // signs the log commit and the ledger's commits of the batch
  std::optional<Ed25519PublicKey> rotated_key_;  // a rotation earlier in this batch signs later policy commits
  std::unordered_map<std::string, std::optional<JobRecord>> jobs_;  // replayed records (nullopt: no such job)
  std::map<std::string, std::string> notes_;  // other refs (batches/, witness/)
  std::set<std::string> touched_;
  // Settling window (LogAuditOptions::settling_after): every value each ref
  // held from that sequence on ("" = absent).
  std::unordered_map<std::string, std::set<std::string>> settling_;
  bool Settles(const std::string& ref, const std::string& have) {
    auto it = settling_.find(ref);
    if (it == settling_.end() || !it->second.count(have)) return false;
    ++rep_->refs_settling;
    return true;
  }
  std::map<int64_t, std::string> seq_commits_;  // sequence -> log commit, as far as known
  std::vector<std::pair<std::string, std::string>> logged_witnesses_;  // (ref, commit) from the log
  std::optional<StateIndex> start_index_;  // incremental: the index at the recorded head
  std::string start_tree_;
  std::map<std::string, std::vector<RunRecord>> runs_;  // per job, every epoch and attempt
  size_t max_result_bytes_ = 4 << 20;
};

Status Replay::CollectCommits(std::vector<CommitInfo>* commits) {
  GATOS_ASSIGN_OR_RETURN(head_, ledger_.ResolveRef(kLogRef));
  if (head_.empty()) {
    return NotFoundError(ledger_.path() + " has no " + std::string(kLogRef) +
                         "; is it a gatos ledger? A plain 'git clone' does not copy refs/gatos/*: use "
                         "'git clone --mirror LEDGER' or 'git fetch LEDGER \"refs/gatos/*:refs/gatos/*\"'");
  }
  rep_->head = head_;
  int64_t stop = opt_.since ? opt_.since->seq : 0;
  std::string cur = head_;
  int64_t expect = -1;  // the seq the next (older) commit must have
  while (true) {
    auto c = ledger_.ReadCommit(cur);
    if (!c.ok()) {
      return DataLossError("log commit " + cur + " cannot be read (" + c.status().message() +
                           "); is the clone complete?");
    }
    auto info = ParseLogMessage(c->message);
    if (!info.ok()) {
      Problem("log_message", "log commit " + Short(cur) + ": " + info.status().message());
      return OkStatus();
    }
    if (commits->empty()) rep_->seq = info->seq;
    if (expect >= 0 && info->seq != expect) {
      Problem("log_seq", "log commit " + Short(cur) + " has Log-Seq " + std::to_string(info->seq) +
                             " but its child has Log-Seq " + std::to_string(expect + 1) +
                             (info->seq < expect ? ": sequence numbers are missing (a gap)" : ": a repeated or reordered sequence"),
              info->seq);
      return OkStatus();
    }
    if (opt_.since && info->seq == stop) {
      if (cur != opt_.since->head) {
        Problem("log_rewritten",
                "the log was rewritten: its commit at sequence " + std::to_string(stop) + " is " + cur +
                    ", but the head verified last time (state file) was " + opt_.since->head +
                    " at that sequence; the history an auditor saw is gone",
                stop);
      }
      seq_commits_[info->seq] = cur;
      std::reverse(commits->begin(), commits->end());
      return OkStatus();
    }
    if (opt_.since && info->seq < stop) {
      Problem("log_rewritten", "the log was rolled back: its head is at sequence " + std::to_string(rep_->seq) +
                                   ", before the head verified last time (sequence " + std::to_string(stop) +
                                   ", commit " + opt_.since->head + ")",
              info->seq);
      return OkStatus();
    }
    seq_commits_[info->seq] = cur;
    expect = info->seq - 1;
    bool root = info->seq == 1;
    std::string parent = c->parents.empty() ? "" : c->parents[0];
    commits->push_back(std::move(*c));
    if (root) break;
    if (parent.empty()) {
      Problem("log_seq", "log commit " + Short(cur) + " (Log-Seq " + std::to_string(info->seq) +
                             ") has no parent: the log was truncated (its root must be Log-Seq 1)",
              info->seq);
      return OkStatus();
    }
    cur = parent;
  }
  std::reverse(commits->begin(), commits->end());
  return OkStatus();
}

Status Replay::LoadStart() {
  if (!opt_.since) return OkStatus();
  rep_->incremental = true;
  rep_->ledger_root = opt_.since->ledger_root;
  GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_.ReadCommit(opt_.since->head));
  GATOS_ASSIGN_OR_RETURN(LogCommitInfo info, ParseLogMessage(c.message));
  pol_.commit = info.policy_commit;
  GATOS_ASSIGN_OR_RETURN(pol_.policy, ledger_.ReadPolicyAt(pol_.commit));
  start_tree_ = c.tree;
  start_index_.emplace(&ledger_);
  start_index_->Reset(c.tree);
  seq_ = info.seq;
  return OkStatus();
}

Result<std::optional<JobRecord>*> Replay::Record(const std::string& job) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return &it->second;
  std::optional<JobRecord> r;
  if (start_index_) {
    auto got = start_index_->Get(job);
    if (!got.ok()) return got.status();
    r = std::move(*got);
  }
  return &jobs_.emplace(job, std::move(r)).first->second;
}

bool Replay::WorkerAllowed(const std::string& worker_hex, std::string* why) {
  auto key = ParseWorkerId("ed25519:" + worker_hex);
  if (!key.ok()) {
    *why = "Worker-Id: " + key.status().message();
    return false;
  }
  bool by_policy = opt_.verify.trust_policy_workers &&
                   pol_.policy.workers.FindKey(*key, kSignerNamespaceGit, now_ / 1000) != nullptr;
  bool by_extra = opt_.verify.extra_workers &&
                  opt_.verify.extra_workers->FindKey(*key, kSignerNamespaceGit, now_ / 1000) != nullptr;
  if (by_policy || by_extra) return true;
  *why = "worker ed25519:" + worker_hex + " is not allowed by " +
         (opt_.verify.trust_policy_workers ? "policy " + Short(pol_.commit) : std::string("--allowed-signers")) +
         " at " + FormatRfc3339Millis(now_);
  return false;
}

Status Replay::Run() {
  std::vector<CommitInfo> commits;
  GATOS_RETURN_IF_ERROR(CollectCommits(&commits));
  if (!rep_->problems.empty()) return OkStatus();
  GATOS_RETURN_IF_ERROR(LoadStart());
  rep_->from_seq = opt_.since ? opt_.since->seq + 1 : 1;
  rep_->settling_after = opt_.settling_after;
  GATOS_RETURN_IF_ERROR(LoadSettlingBeforeStart());
  for (const CommitInfo& c : commits) {
    auto info = ParseLogMessage(c.message);
    if (!info.ok()) {
      Problem("log_message", "log commit " + Short(c.id) + ": " + info.status().message());
      break;
    }
    if (info->seq != seq_ + 1) {
      Problem("log_seq", "log commit " + Short(c.id) + " has Log-Seq " + std::to_string(info->seq) + ", expected " +
                             std::to_string(seq_ + 1),
              info->seq);
      break;
    }
    seq_ = info->seq;
    now_ = info->time_ms;
    Status s = VerifyCommit(c, *info);
    if (!s.ok()) return s;
    ++rep_->commits;
    if (rep_->problems.size() >= kMaxProblems) break;
  }
  if (rep_->problems.empty()) {
    CompareRefs();
    CompareIndex();
  }
  rep_->jobs_touched = touched_.size();
  for (const auto& [job, runs] : runs_) {
    if (runs.size() > 1) rep_->reruns.push_back({job, runs});
  }
  if (opt_.witnesses) CheckWitnesses();
  if (dropped_) {
    rep_->problems.push_back({"too_many_problems", std::to_string(dropped_) + " more problems not listed", 0, "", ""});
  }
  return OkStatus();
}

Result<std::optional<std::string>> Replay::BatchText(const CommitInfo& c) {
  auto entries = ledger_.ReadTree(c.tree);
  if (!entries.ok()) return DataLossError("log commit " + Short(c.id) + ": " + entries.status().message());
  std::string blob;
  for (const auto& e : *entries) {
    if (e.name == "batch") blob = e.id;
  }
  if (blob.empty()) return std::optional<std::string>();
  auto text = ledger_.ReadBlob(blob, 256 << 20);
  if (!text.ok()) return DataLossError("log commit " + Short(c.id) + ": batch: " + text.status().message());
  return std::optional<std::string>(std::move(*text));
}

void Replay::AddSettling(const std::vector<LogEntry>& entries) {
  for (const LogEntry& e : entries) {
    if (e.ref.empty()) continue;
    auto& values = settling_[e.ref];
    values.insert(e.old_id);
    values.insert(e.new_id);
  }
}

Status Replay::LoadSettlingBeforeStart() {
  // An incremental run whose settling window opens before the recorded
  // head: the batches in between are not replayed, but their refs settle.
  if (!opt_.since || opt_.settling_after < 0 || opt_.settling_after >= opt_.since->seq) return OkStatus();
  std::string cur = opt_.since->head;
  for (int64_t seq = opt_.since->seq; seq > opt_.settling_after && !cur.empty(); --seq) {
    GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_.ReadCommit(cur));
    GATOS_ASSIGN_OR_RETURN(auto text, BatchText(c));
    if (text) {
      auto entries = DecodeBatch(*text);
      if (entries.ok()) AddSettling(*entries);
    }
    cur = c.parents.empty() ? "" : c.parents[0];
  }
  return OkStatus();
}

Status Replay::VerifyCommit(const CommitInfo& c, const LogCommitInfo& info) {
  // The key that signs this batch: the policy's in force before it; for the
  // root, the one its policy names (or the pinned one).
  if (info.seq == 1) {
    rep_->ledger_root = c.id;
    pol_.commit = info.policy_commit;
    auto p = ledger_.ReadPolicyAt(info.policy_commit);
    if (!p.ok()) {
      Problem("log_policy", "the first log commit's policy " + Short(info.policy_commit) +
                                " cannot be read: " + p.status().message(),
              1);
      return OkStatus();
    }
    pol_.policy = std::move(*p);
    if (opt_.verify.ledger_key && pol_.policy.ledger_key != *opt_.verify.ledger_key) {
      Problem("log_signature", "the ledger's first policy names ledger key " + pol_.policy.ledger_key.WorkerId() +
                                   ", not the pinned key " + opt_.verify.ledger_key->WorkerId(),
              1);
      return OkStatus();
    }
  }
  batch_key_ = pol_.policy.ledger_key;
  rotated_key_.reset();
  max_result_bytes_ = std::max<size_t>(max_result_bytes_, static_cast<size_t>(std::max<int64_t>(0, pol_.policy.settings.max_result_bytes)));
  if (std::string why = SignatureProblem(c, batch_key_); !why.empty()) {
    Problem("log_signature", "log commit " + Short(c.id) + " (Log-Seq " + std::to_string(info.seq) +
                                 ") is not signed by the ledger key in force " + batch_key_.WorkerId() + ": " + why,
            info.seq);
    return OkStatus();
  }
  if (info.ledger_key_hex != batch_key_.Hex()) {
    Problem("log_signature", "log commit " + Short(c.id) + " names Ledger-Key ed25519:" + info.ledger_key_hex +
                                 " but the ledger key in force is " + batch_key_.WorkerId(),
            info.seq);
  }
  std::string batch_text;
  {
    auto text = BatchText(c);
    if (!text.ok()) return text.status();
    if (!*text) {
      Problem("log_batch", "log commit " + Short(c.id) + " has no batch record in its tree", info.seq);
      return OkStatus();
    }
    batch_text = std::move(**text);
  }
  auto entries = DecodeBatch(batch_text);
  if (!entries.ok()) {
    Problem("log_batch", "log commit " + Short(c.id) + ": " + entries.status().message(), info.seq);
    return OkStatus();
  }
  if (opt_.settling_after >= 0 && info.seq > opt_.settling_after) AddSettling(*entries);
  std::set<std::string> parents(c.parents.begin(), c.parents.end());
  if (info.seq == 1) {
    if (entries->size() != 1 || (*entries)[0].kind != LogKind::kInit || (*entries)[0].ref != kPolicyRef ||
        !(*entries)[0].old_id.empty() || (*entries)[0].new_id != info.policy_commit) {
      Problem("log_batch", "the first log commit must record only init of refs/gatos/policy to its Policy", 1);
      return OkStatus();
    }
    // The root policy is signed by its own ledger key.
    auto pc = ledger_.ReadCommit(info.policy_commit);
    std::string why = pc.ok() ? SignatureProblem(*pc, pol_.policy.ledger_key) : pc.status().message();
    if (!why.empty()) {
      Problem("log_policy", "the first policy commit " + Short(info.policy_commit) +
                                " is not signed by the ledger key it names: " + why,
              1);
    }
    ++rep_->by_kind["init"];
    ++rep_->transitions;
    return OkStatus();
  }
  bool batch_ok = true;
  for (const LoggedTransition& t : Group(*entries)) {
    ++rep_->transitions;
    ++rep_->by_kind[std::string(LogKindName(t.kind))];
    ReplayTransition(t, c, info, parents, &batch_ok);
  }
  if (info.policy_commit != pol_.commit) {
    Problem("log_policy", "log commit " + Short(c.id) + " says the policy in force is " + Short(info.policy_commit) +
                              ", but its transitions leave " + Short(pol_.commit),
            info.seq);
  }
  // A rotation takes effect for the next batch.
  return OkStatus();
}

void Replay::ReplayTransition(const LoggedTransition& t, const CommitInfo& c, const LogCommitInfo& info,
                             const std::set<std::string>& parents, bool* batch_ok) {
  switch (t.kind) {
    case LogKind::kInit:
      Fail(t, "log_batch", "init appears after the first log commit");
      return;
    case LogKind::kPolicy:
      PolicyChange(t);
      return;
    case LogKind::kBatch:
    case LogKind::kWitness:
      Note(t, parents);
      return;
    default:
      break;
  }
  if (t.job_hex.empty()) {
    Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " transition without a job");
    return;
  }
  auto slot = Record(t.job_hex);
  if (!slot.ok()) {
    Fail(t, "index", "the recorded head's index: " + slot.status().message());
    return;
  }
  std::optional<JobRecord>& rec = **slot;
  touched_.insert(t.job_hex);
  std::optional<JobRecord> next;
  switch (t.kind) {
    case LogKind::kSubmit:
      next = Submit(t, rec);
      break;
    case LogKind::kClaim:
    case LogKind::kTakeover:
    case LogKind::kRenew:
      next = Lease(t, rec);
      break;
    case LogKind::kResult:
    case LogKind::kAttempt:
      next = ResultOf(t, rec, c);
      break;
    case LogKind::kCancel:
    case LogKind::kRetry:
      next = UserRequest(t, rec);
      break;
    default:
      next = Other(t, rec);
      break;
  }
  if (!next) {
    *batch_ok = false;
    return;
  }
  // The lines must be exactly the ref changes of the transition.
  std::vector<LogEntry> want = TransitionEntries(t.kind, rec, *next);
  if (want != t.entries) {
    std::string detail = "the batch lines of this " + std::string(LogKindName(t.kind)) +
                         " do not match the transition it records: recorded [";
    for (size_t i = 0; i < t.entries.size() && i < 4; ++i) detail += (i ? "; " : "") + EntryText(t.entries[i]);
    detail += "], the transition implies [";
    for (size_t i = 0; i < want.size() && i < 4; ++i) detail += (i ? "; " : "") + EntryText(want[i]);
    Fail(t, "log_batch", detail + "]");
    *batch_ok = false;
    return;
  }
  // Every commit named for the first time is a parent of the log commit.
  std::map<std::string, std::string> before = rec ? JobRefs(*rec) : std::map<std::string, std::string>{};
  std::set<std::string> known;
  for (const auto& [r, id] : before) known.insert(id);
  for (const LogEntry& e : t.entries) {
    if (!e.new_id.empty() && !known.count(e.new_id) && !parents.count(e.new_id)) {
      Fail(t, "log_parents", "log commit " + Short(c.id) + " records " + e.ref + " -> " + Short(e.new_id) +
                                 " but does not name that commit as a parent (a clone of the log alone would lack it)");
    }
  }
  (void)info;
  rec = std::move(next);
}

std::optional<JobRecord> Replay::Submit(const LoggedTransition& t, const std::optional<JobRecord>& old) {
  const LogEntry* e = nullptr;
  for (const auto& x : t.entries) {
    if (x.ref == JobRef(t.job_hex, "job")) e = &x;
  }
  if (old) {
    Fail(t, "transition", "job " + Short(t.job_hex) + " is submitted again (it exists since " +
                              FormatRfc3339Millis(old->submitted_ms) + ")");
    return std::nullopt;
  }
  if (!e || e->new_id.empty()) {
    Fail(t, "log_batch", "a submit must create " + JobRef(t.job_hex, "job"));
    return std::nullopt;
  }
  auto check = CheckJobCommit(lookup_, e->new_id, t.job_hex, pol_.policy, now_);
  if (!check.ok()) {
    Fail(t, "job_commit", "job commit " + Short(e->new_id) + " would not have been accepted under policy " +
                              Short(pol_.commit) + ": " + check.status().message());
    return std::nullopt;
  }
  {
    auto key = ParseWorkerId("ed25519:" + check->signer_key_hex);
    if (!key.ok() || !pol_.policy.submitters.FindKey(*key, kSignerNamespaceGit, now_ / 1000)) ++rep_->dev_mode_jobs;
  }
  AppliedTransition a;
  Decision d = gatos::ApplyTransition(t.job_hex, old, SubmitTransition{t.job_hex, e->new_id, check->signer_key_hex},
                                      Rules(), &a);
  if (!d.ok()) {
    Fail(t, "transition", "submit of job " + Short(t.job_hex) + ": " + d.message);
    return std::nullopt;
  }
  return a.record;
}

std::optional<JobRecord> Replay::Lease(const LoggedTransition& t, const std::optional<JobRecord>& old) {
  const bool renew = t.kind == LogKind::kRenew;
  const LogEntry* e = nullptr;
  for (const auto& x : t.entries) {
    if (x.ref == JobRef(t.job_hex, "lease")) e = &x;
  }
  if (!e || e->new_id.empty()) {
    Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " must move " + JobRef(t.job_hex, "lease"));
    return std::nullopt;
  }
  auto lc = ledger_.ReadCommit(e->new_id);
  if (!lc.ok()) {
    Fail(t, "lease_commit", "lease commit " + Short(e->new_id) + " cannot be read: " + lc.status().message());
    return std::nullopt;
  }
  auto info = ParseLeaseCommitMessage(lc->message);
  if (!info.ok()) {
    Fail(t, "lease_commit", "lease commit " + Short(e->new_id) + ": " + info.status().message());
    return std::nullopt;
  }
  if (std::string why = SignatureProblem(*lc, batch_key_); !why.empty()) {
    Fail(t, "lease_signature", "lease commit " + Short(e->new_id) + " is not signed by the ledger key: " + why);
    return std::nullopt;
  }
  std::string why;
  if (info->job_hex != t.job_hex) why = "it is a lease of job " + Short(info->job_hex);
  if (why.empty() && lc->tree != kEmptyTreeId) why = "it has a non-empty tree";
  AppliedTransition a;
  if (why.empty()) {
    Decision d = gatos::ApplyTransition(
        t.job_hex, old, LeaseTransition{renew, info->worker_hex, info->epoch, info->requested_at_ms, e->new_id},
        Rules(), &a);
    if (!d.ok()) {
      why = "the ledger's rules refuse it: " + d.message;
    } else if (a.kind != t.kind) {
      why = std::string("recorded as ") + (a.kind == LogKind::kTakeover ? "a claim but it takes over an expired lease"
                                                                          : "a takeover but no lease had expired");
    }
  }
  if (!why.empty()) {
    Fail(t, "transition", std::string(LogKindName(t.kind)) + " " + Short(e->new_id) + ": " + why);
    return std::nullopt;
  }
  std::vector<std::string> want_parents = {old->job_commit};
  if (!a.replaced_lease.empty()) want_parents.push_back(a.replaced_lease);
  if (lc->parents != want_parents) {
    Fail(t, "lease_commit", "lease commit " + Short(e->new_id) + " has the wrong parents (the job commit, then the lease it replaces)");
    return std::nullopt;
  }
  std::string payload = renew ? rpc::RenewPayload(t.job_hex, info->worker_hex, info->epoch, info->requested_at_ms)
                              : rpc::ClaimPayload(t.job_hex, info->worker_hex, info->epoch, info->requested_at_ms);
  if (!Verifies(info->worker_hex, payload, info->request_sig_hex)) {
    Fail(t, "request_sig", "lease commit " + Short(e->new_id) + ": Request-Sig does not verify for worker ed25519:" +
                               info->worker_hex + " over its " + (renew ? "renew" : "claim") + " request");
    return std::nullopt;
  }
  int64_t skew = info->requested_at_ms - now_;
  if (skew > rpc::kMaxRequestSkewMs || skew < -(rpc::kMaxRequestSkewMs + 60'000)) {
    Fail(t, "request_sig", "lease commit " + Short(e->new_id) + ": the request is dated " +
                               FormatRfc3339Millis(info->requested_at_ms) + ", too far from the batch time " +
                               FormatRfc3339Millis(now_));
    return std::nullopt;
  }
  if (!WorkerAllowed(info->worker_hex, &why)) {
    Fail(t, "worker_allowed", why);
    return std::nullopt;
  }
  if (info->expires_ms != a.record.expires_ms || info->attempt != old->attempt) {
    Fail(t, "lease_commit", "lease commit " + Short(e->new_id) + " says it expires at " +
                                FormatRfc3339Millis(info->expires_ms) + " (attempt " + std::to_string(info->attempt) +
                                "); the policy's lease from the batch time ends at " +
                                FormatRfc3339Millis(a.record.expires_ms) + " (attempt " +
                                std::to_string(old->attempt) + ")");
    return std::nullopt;
  }
  if (!renew) runs_[t.job_hex].push_back({a.record.attempt, a.record.epoch, a.record.worker_hex, "", "", false});
  return a.record;
}

std::optional<JobRecord> Replay::ResultOf(const LoggedTransition& t, const std::optional<JobRecord>& old,
                                          const CommitInfo& c) {
  std::string commit;
  for (const auto& x : t.entries) {
    if (!x.new_id.empty() && (x.ref == JobRef(t.job_hex, "result") || x.ref.find("/attempts/") != std::string::npos)) {
      commit = x.new_id;
    }
  }
  if (commit.empty()) {
    Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " must record a result commit");
    return std::nullopt;
  }
  ++rep_->results;
  ResultCheckLimits limits;
  limits.max_file_bytes = max_result_bytes_;
  ResultReport rr = CheckResultCommit(lookup_, commit, limits);
  if (const ResultCheck* bad = rr.first_failure()) {
    Fail(t, "result", "result " + Short(commit) + " " + bad->name + ": " + bad->detail);
    return std::nullopt;
  }
  const ParsedResult& p = rr.parsed;
  const PolicySettings& ps = pol_.policy.settings;
  // The backoff before the attempt it opens, as the ledger drew it: the
  // state index this log commit carries holds the job's next claim time.
  // (A result recorded as final is checked with the policy's shortest
  // backoff: whether it should have opened an attempt is the question.)
  int64_t backoff = old ? RetryBackoffMinMs(ps, old->attempt + 1) : 0;
  if (old && t.kind == LogKind::kAttempt) {
    StateIndex at(&ledger_);
    at.Reset(c.tree);
    auto rec = at.Get(t.job_hex);
    if (!rec.ok() || !*rec) {
      Fail(t, "index", "the state index of log commit " + Short(c.id) + " lacks job " + Short(t.job_hex) +
                           (rec.ok() ? "" : ": " + rec.status().message()));
      return std::nullopt;
    }
    backoff = (*rec)->not_before_ms - now_;
  }
  std::string why;
  AppliedTransition a;
  if (p.job_hex != t.job_hex) {
    why = "it is a result of job " + Short(p.job_hex);
  } else {
    Decision d = gatos::ApplyTransition(t.job_hex, old,
                                        ResultTransition{commit, p.worker_hex, p.epoch, p.parents, p.status,
                                                         p.poe.reason, p.poe.transient, backoff},
                                        Rules(), &a);
    if (!d.ok()) {
      why = old && !old->result_commit.empty()
                ? "the job already had its final result " + Short(old->result_commit) + " (" + old->result_status +
                      "); no attempt may follow it"
                : "the ledger's rules refuse it (fencing): " + d.message;
    } else if (a.unchanged) {
      why = "the log recorded this result before";
    }
  }
  if (!why.empty()) {
    Fail(t, "transition", std::string(LogKindName(t.kind)) + " " + Short(commit) + ": " + why);
    return std::nullopt;
  }
  if (!WorkerAllowed(p.worker_hex, &why)) {
    Fail(t, "worker_allowed", why);
    return std::nullopt;
  }
  if (opt_.verify.trusted_programs && !opt_.verify.trusted_programs->count(p.attest_program)) {
    Fail(t, "attest_program", "result " + Short(commit) + ": Attest-Program " + p.attest_program +
                                  " is not in the trusted programs list");
    return std::nullopt;
  }
  bool present = false;
  ResultCheck prov = CheckResultProvenance(ledger_, p, old->job_commit, max_result_bytes_,
                                           opt_.verify.require_provenance, &present);
  if (!prov.ok) {
    Fail(t, "provenance", "result " + Short(commit) + ": " + prov.detail);
    return std::nullopt;
  }
  // The same decision the ledger made (transition.h): a refused run is final.
  const bool retry = a.kind == LogKind::kAttempt;
  if (a.kind != t.kind) {
    std::string what = retry ? "recorded as the final result, but policy " + Short(pol_.commit) + " retries a " +
                                   p.status + " attempt " + std::to_string(old->attempt) + " of " +
                                   std::to_string(ps.max_attempts)
                             : "recorded as a retried attempt, but policy " + Short(pol_.commit) +
                                   " allows no retry of a " + p.status + " attempt " + std::to_string(old->attempt) +
                                   " (max_attempts " + std::to_string(ps.max_attempts) +
                                   (old->cancel_commit.empty() ? "" : ", the job is cancelled") +
                                   (p.poe.reason.empty() ? "" : ", the run was refused: a reason is final") + ")";
    Fail(t, "retry_policy", "result " + Short(commit) + " " + what);
    return std::nullopt;
  }
  auto& runs = runs_[t.job_hex];
  if (!runs.empty() && runs.back().epoch == p.epoch && runs.back().result_commit.empty()) {
    runs.back().status = p.status;
    runs.back().result_commit = commit;
    runs.back().final = !retry;
  }
  return a.record;
}

std::optional<JobRecord> Replay::UserRequest(const LoggedTransition& t, const std::optional<JobRecord>& old) {
  const bool retry = t.kind == LogKind::kRetry;
  std::string ref = JobRef(t.job_hex, retry ? "retry" : "cancel");
  std::string commit;
  for (const auto& x : t.entries) {
    if (x.ref == ref) commit = x.new_id;
  }
  if (commit.empty()) {
    Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " must move " + ref);
    return std::nullopt;
  }
  auto c = ledger_.ReadCommit(commit);
  auto info = c.ok() ? ParseUserRequestCommitMessage(c->message) : Result<UserRequestCommitInfo>(c.status());
  if (!info.ok()) {
    Fail(t, "request_commit", Short(commit) + ": " + info.status().message());
    return std::nullopt;
  }
  if (std::string why = SignatureProblem(*c, batch_key_); !why.empty()) {
    Fail(t, "request_commit", Short(commit) + " is not signed by the ledger key: " + why);
    return std::nullopt;
  }
  std::string why;
  AppliedTransition a;
  if (info->retry != retry || info->job_hex != t.job_hex) {
    why = "the commit is not a " + std::string(retry ? "re-run" : "cancel") + " of this job";
  } else {
    Transition tr = retry ? Transition(RetryTransition{info->requester_hex, info->attempt, commit})
                          : Transition(CancelTransition{info->requester_hex, commit});
    Decision d = gatos::ApplyTransition(t.job_hex, old, tr, Rules(), &a);
    if (!d.ok()) {
      why = "the ledger's rules refuse it: " + d.message;
    } else if (a.unchanged) {
      why = "the job was already cancelled";
    }
  }
  if (why.empty()) {
    std::vector<std::string> want_parents = {old->job_commit};
    if (retry) want_parents.push_back(old->result_commit);
    if (c->parents != want_parents) {
      why = "it has the wrong parents";
    } else if (!Verifies(info->requester_hex,
                         retry ? rpc::RetryPayload(t.job_hex, info->requester_hex, info->attempt, info->requested_at_ms)
                               : rpc::CancelPayload(t.job_hex, info->requester_hex, info->requested_at_ms),
                         info->request_sig_hex)) {
      why = "Request-Sig does not verify for ed25519:" + info->requester_hex;
    }
  }
  if (!why.empty()) {
    Fail(t, "transition", std::string(LogKindName(t.kind)) + " " + Short(commit) + ": " + why);
    return std::nullopt;
  }
  if (retry) {
    auto& runs = runs_[t.job_hex];
    if (!runs.empty()) runs.back().final = false;
  }
  return a.record;
}

std::optional<JobRecord> Replay::Other(const LoggedTransition& t, const std::optional<JobRecord>& old) {
  Transition tr;
  switch (t.kind) {
    case LogKind::kAbort: tr = AbortTransition{}; break;
    case LogKind::kRevoke: tr = RevokeTransition{}; break;
    case LogKind::kPrune: tr = PruneTransition{}; break;
    default:
      Fail(t, "transition", std::string(LogKindName(t.kind)) + " of job " + Short(t.job_hex) + ": unexpected kind");
      return std::nullopt;
  }
  AppliedTransition a;
  Decision d = gatos::ApplyTransition(t.job_hex, old, tr, Rules(), &a);
  std::string why = !d.ok() ? d.message : a.unchanged ? "the job was pruned already" : "";
  if (!why.empty()) {
    Fail(t, "transition", std::string(LogKindName(t.kind)) + " of job " + Short(t.job_hex) + ": " + why);
    return std::nullopt;
  }
  return a.record;
}

void Replay::PolicyChange(const LoggedTransition& t) {
  for (const LogEntry& e : t.entries) {
    if (e.ref != kPolicyRef || e.old_id != pol_.commit || e.new_id.empty()) {
      Fail(t, "log_policy", "a policy change must move refs/gatos/policy from the policy in force " + Short(pol_.commit));
      return;
    }
    auto c = ledger_.ReadCommit(e.new_id);
    if (!c.ok()) {
      Fail(t, "log_policy", "policy commit " + Short(e.new_id) + " cannot be read: " + c.status().message());
      return;
    }
    const Ed25519PublicKey& signer = rotated_key_ ? *rotated_key_ : batch_key_;
    if (std::string why = SignatureProblem(*c, signer); !why.empty()) {
      Fail(t, "log_policy", "policy commit " + Short(e.new_id) + " is not signed by the ledger key in force: " + why);
      return;
    }
    if (c->parents.size() != 1 || c->parents[0] != pol_.commit) {
      Fail(t, "log_policy", "policy commit " + Short(e.new_id) + " does not follow the policy in force");
      return;
    }
    auto p = ledger_.ReadPolicyAt(e.new_id);
    if (!p.ok()) {
      Fail(t, "log_policy", "policy commit " + Short(e.new_id) + ": " + p.status().message());
      return;
    }
    if (p->ledger_key != signer) rotated_key_ = p->ledger_key;
    pol_.commit = e.new_id;
    pol_.policy = std::move(*p);
  }
}

void Replay::Note(const LoggedTransition& t, const std::set<std::string>& parents) {
  for (const LogEntry& e : t.entries) {
    const char* prefix = t.kind == LogKind::kBatch ? kBatchPrefix : kWitnessPrefix;
    if (e.ref.rfind(prefix, 0) != 0 || e.new_id.empty()) {
      Fail(t, "log_batch", std::string(LogKindName(t.kind)) + " record must move a ref under " + prefix);
      continue;
    }
    auto it = notes_.find(e.ref);
    if (it != notes_.end() && it->second != e.old_id) {
      Fail(t, "log_batch", e.ref + " was " + Short(it->second) + ", the batch says it was " + Short(e.old_id));
    }
    notes_[e.ref] = e.new_id;
    if (!parents.count(e.new_id)) {
      Fail(t, "log_parents", e.ref + " -> " + Short(e.new_id) + " is not a parent of the log commit");
    }
    if (t.kind == LogKind::kBatch) {
      if (!e.old_id.empty()) Fail(t, "log_batch", "a batch record is written once: " + e.ref);
      auto c = ledger_.ReadCommit(e.new_id);
      std::string why = c.ok() ? SignatureProblem(*c, batch_key_) : c.status().message();
      if (!why.empty()) Fail(t, "batch_record", "batch record " + Short(e.new_id) + ": " + why);
    } else {
      auto w = CheckWitnessCommit(lookup_, e.new_id);
      std::string key = e.ref.substr(std::strlen(kWitnessPrefix));
      if (!w.ok()) {
        Fail(t, "witness_commit", e.ref + ": " + w.status().message());
      } else if (w->key_hex != key) {
        Fail(t, "witness_commit", e.ref + " holds a witness by ed25519:" + w->key_hex);
      }
      logged_witnesses_.emplace_back(e.ref, e.new_id);
    }
  }
}

void Replay::CompareRefs() {
  // What the replay says the refs are.
  std::map<std::string, std::string> want;
  if (!rep_->incremental) {
    want[kPolicyRef] = pol_.commit;
    for (const auto& [job, rec] : jobs_) {
      if (rec) {
        for (auto& [r, id] : JobRefs(*rec)) want.emplace(r, id);
      }
    }
    for (const auto& [r, id] : notes_) want[r] = id;
    RefReader reader(ledger_.path());
    std::set<std::string> seen;
    for (const auto& [r, have] : reader.Under("refs/gatos/")) {
      if (r == kLogRef || IsPushTarget(r)) continue;
      seen.insert(r);
      ++rep_->refs_checked;
      auto it = want.find(r);
      if ((it == want.end() || have != it->second) && Settles(r, have)) continue;
      std::string job, leaf;
      SplitJobRef(r, &job, &leaf);
      if (it == want.end()) {
        Problem("ref_extra", r + " -> " + Short(have) + " is not in the log (no logged transition created it)", 0, job, r);
      } else if (have != it->second) {
        Problem("ref_moved", r + " is " + Short(have) + " but the log says " + Short(it->second) +
                                 " (moved outside the log)",
                0, job, r);
      }
    }
    for (const auto& [r, id] : want) {
      if (seen.count(r) || Settles(r, "")) continue;
      std::string job, leaf;
      SplitJobRef(r, &job, &leaf);
      Problem("ref_missing", r + " is missing; the log says " + Short(id) + " (deleted outside the log)", 0, job, r);
    }
    return;
  }
  // Incremental: the refs of the jobs and records the new transitions touched.
  RefReader reader(ledger_.path());
  auto check = [&](const std::string& r, const std::string& id) {
    ++rep_->refs_checked;
    std::string have = reader.Resolve(r);
    if (have != id && Settles(r, have)) return;
    std::string job, leaf;
    SplitJobRef(r, &job, &leaf);
    if (have.empty() && !id.empty()) {
      Problem("ref_missing", r + " is missing; the log says " + Short(id) + " (deleted outside the log)", 0, job, r);
    } else if (!have.empty() && id.empty()) {
      Problem("ref_extra", r + " -> " + Short(have) + " is not in the log (no logged transition created it)", 0, job, r);
    } else if (have != id) {
      Problem("ref_moved", r + " is " + Short(have) + " but the log says " + Short(id) + " (moved outside the log)", 0,
              job, r);
    }
  };
  check(kPolicyRef, pol_.commit);
  for (const auto& [r, id] : notes_) check(r, id);
  for (const std::string& job : touched_) {
    const auto& rec = jobs_[job];
    std::map<std::string, std::string> want_job = rec ? JobRefs(*rec) : std::map<std::string, std::string>{};
    for (const auto& [r, id] : reader.Under(std::string(kJobsPrefix) + job + "/")) want_job.emplace(r, "");
    for (const auto& [r, id] : want_job) check(r, id);
  }
}

void Replay::CompareIndex() {
  auto head = ledger_.ReadCommit(head_);
  if (!head.ok()) return;
  StateIndex index(&ledger_);
  index.Reset(head->tree);
  auto same = [&](const std::string& job, const std::optional<JobRecord>& got) {
    const std::optional<JobRecord>& want = jobs_[job];
    if (!want && !got) return;
    if (!want || !got) {
      Problem("index", "the head's state index " + std::string(got ? "has" : "lacks") + " job " + Short(job) +
                           ", the log " + (want ? "has it" : "does not"),
              rep_->seq, job);
      return;
    }
    if (*want != *got) {
      Problem("index", "the head's state index record of job " + Short(job) +
                           " differs from the record the log's transitions produce (" +
                           RecordDifference(*got, *want) + ")",
              rep_->seq, job);
    }
  };
  if (!rep_->incremental) {
    std::set<std::string> seen;
    Status s = index.ForEachJob("", [&](const JobRecord& r) {
      seen.insert(r.job_hex);
      same(r.job_hex, r);
      return rep_->problems.size() < kMaxProblems;
    });
    if (!s.ok()) {
      Problem("index", "the head's state index cannot be read: " + s.message(), rep_->seq);
      return;
    }
    for (const auto& [job, rec] : jobs_) {
      if (rec && !seen.count(job)) same(job, std::nullopt);
    }
    return;
  }
  for (const std::string& job : touched_) {
    auto got = index.Get(job);
    if (!got.ok()) {
      Problem("index", "job " + Short(job) + ": " + got.status().message(), rep_->seq, job);
      continue;
    }
    same(job, *got);
  }
  // Only the touched jobs' records changed between the recorded head and this one.
  std::function<void(const std::string&, const std::string&, const std::string&, int)> diff =
      [&](const std::string& a, const std::string& b, const std::string& prefix, int depth) {
        if (a == b) return;
        auto ta = a.empty() ? Result<std::vector<TreeEntry>>(std::vector<TreeEntry>{}) : ledger_.ReadTree(a);
        auto tb = b.empty() ? Result<std::vector<TreeEntry>>(std::vector<TreeEntry>{}) : ledger_.ReadTree(b);
        if (!ta.ok() || !tb.ok()) {
          Problem("index", "the state index cannot be read under jobs/" + prefix, rep_->seq);
          return;
        }
        std::map<std::string, std::pair<std::string, std::string>> m;
        for (const auto& e : *ta) m[e.name].first = e.id;
        for (const auto& e : *tb) m[e.name].second = e.id;
        for (const auto& [name, ids] : m) {
          if (ids.first == ids.second) continue;
          if (depth == 4) {
            std::string job = prefix + name;
            if (!touched_.count(job)) {
              Problem("index", "the state index record of job " + Short(job) +
                                   " changed, but no new transition of the log touches it",
                      rep_->seq, job);
            }
          } else {
            diff(ids.first, ids.second, prefix + name, depth + 1);
          }
        }
      };
  auto sub = [&](const std::string& tree) -> std::string {
    auto t = ledger_.ReadTree(tree);
    if (!t.ok()) return "";
    for (const auto& e : *t) {
      if (e.name == "jobs") return e.id;
    }
    return "";
  };
  diff(sub(start_tree_), sub(head->tree), "", 0);
}

Result<std::string> Replay::LogCommitAt(int64_t seq) {
  auto it = seq_commits_.find(seq);
  if (it != seq_commits_.end()) return it->second;
  // Walk down from the nearest known later commit.
  auto up = seq_commits_.upper_bound(seq);
  if (up == seq_commits_.end()) return std::string();
  int64_t s = up->first;
  std::string cur = up->second;
  while (s > seq) {
    GATOS_ASSIGN_OR_RETURN(CommitInfo c, ledger_.ReadCommit(cur));
    if (c.parents.empty()) return std::string();
    cur = c.parents[0];
    --s;
    seq_commits_[s] = cur;
  }
  return cur;
}

void Replay::CheckWitnesses() {
  std::map<std::string, std::string> found;  // commit -> ref where it was seen
  for (const char* prefix : {kWitnessPrefix, kWitnessPushPrefix}) {
    auto refs = ledger_.ListRefs(prefix);
    if (!refs.ok()) continue;
    for (const auto& r : *refs) {
      auto v = ledger_.ResolveRef(r);
      if (v.ok() && !v->empty()) found.emplace(*v, r);
    }
  }
  for (const auto& [r, c] : logged_witnesses_) found.emplace(c, r + " (in the log)");
  std::map<int64_t, std::vector<const WitnessCheck*>> by_seq;
  rep_->witnesses.reserve(found.size());
  for (const auto& [commit, ref] : found) {
    WitnessCheck w;
    w.ref = ref;
    w.commit = commit;
    auto st = CheckWitnessCommit(lookup_, commit);
    if (!st.ok()) {
      w.detail = st.status().message();
      Problem("witness_invalid", ref + ": " + w.detail, 0, "", ref);
      rep_->witnesses.push_back(std::move(w));
      continue;
    }
    w.key_hex = st->key_hex;
    w.seq = st->seq;
    w.log_commit = st->log_commit;
    if (st->ledger_root != rep_->ledger_root) {
      w.detail = "about another ledger (" + Short(st->ledger_root) + "), not checked";
      w.ok = true;
      rep_->witnesses.push_back(std::move(w));
      continue;
    }
    if (st->seq > rep_->seq) {
      w.detail = "saw sequence " + std::to_string(st->seq) + " (" + Short(st->log_commit) + "), but this log ends at " +
                 std::to_string(rep_->seq);
      Problem("forked_history", "witness ed25519:" + st->key_hex.substr(0, 16) + "… " + w.detail +
                                    ": the log was rolled back or this copy is behind",
              st->seq, "", ref);
      rep_->forked = true;
    } else {
      auto at = LogCommitAt(st->seq);
      if (at.ok() && *at != st->log_commit) {
        w.detail = "saw " + st->log_commit + " at sequence " + std::to_string(st->seq) + ", this log has " + *at;
        Problem("forked_history", "witness ed25519:" + st->key_hex.substr(0, 16) + "… " + w.detail +
                                      ": the ledger showed different histories",
                st->seq, "", ref);
        rep_->forked = true;
      } else {
        w.ok = true;
        w.detail = "agrees with this log";
      }
    }
    rep_->witnesses.push_back(std::move(w));
  }
  for (const auto& w : rep_->witnesses) {
    if (!w.key_hex.empty()) by_seq[w.seq].push_back(&w);
  }
  for (const auto& [seq, ws] : by_seq) {
    for (size_t i = 1; i < ws.size(); ++i) {
      if (ws[i]->log_commit != ws[0]->log_commit) {
        Problem("forked_history", "two witnesses disagree at sequence " + std::to_string(seq) + ": ed25519:" +
                                      ws[0]->key_hex.substr(0, 16) + "… saw " + ws[0]->log_commit + ", ed25519:" +
                                      ws[i]->key_hex.substr(0, 16) + "… saw " + ws[i]->log_commit +
                                      ": proof that the ledger showed two histories",
                seq);
        rep_->forked = true;
      }
    }
  }
}

}  // namespace

Result<LogAuditReport> AuditLog(Ledger& ledger, const LogAuditOptions& options) {
  LogAuditReport rep;
  Replay replay(ledger, options, &rep);
  GATOS_RETURN_IF_ERROR(replay.Run());
  // A jobs_touched figure for the report.
  return rep;
}

nlohmann::json LogAuditReportToJson(const LogAuditReport& r) {
  using nlohmann::json;
  json problems = json::array();
  for (const auto& p : r.problems) {
    json j = {{"check", p.check}, {"detail", p.detail}};
    if (p.seq) j["seq"] = p.seq;
    if (!p.job_hex.empty()) j["job_id"] = "blake3:" + p.job_hex;
    if (!p.ref.empty()) j["ref"] = p.ref;
    problems.push_back(std::move(j));
  }
  json reruns = json::array();
  for (const auto& j : r.reruns) {
    json runs = json::array();
    for (const auto& x : j.runs) {
      runs.push_back({{"attempt", x.attempt},
                      {"epoch", x.epoch},
                      {"worker_id", "ed25519:" + x.worker_hex},
                      {"status", x.status},
                      {"result_commit", x.result_commit},
                      {"final", x.final}});
    }
    reruns.push_back({{"job_id", "blake3:" + j.job_hex}, {"runs", runs}});
  }
  json witnesses = json::array();
  for (const auto& w : r.witnesses) {
    witnesses.push_back({{"ref", w.ref},
                         {"commit", w.commit},
                         {"key", w.key_hex.empty() ? "" : "ed25519:" + w.key_hex},
                         {"seq", w.seq},
                         {"log_commit", w.log_commit},
                         {"ok", w.ok},
                         {"detail", w.detail}});
  }
  return {{"ok", r.ok()},
          {"ledger", r.ledger_root},
          {"head", r.head},
          {"seq", r.seq},
          {"from_seq", r.from_seq},
          {"incremental", r.incremental},
          {"log_commits", r.commits},
          {"transitions", r.transitions},
          {"results", r.results},
          {"jobs_touched", r.jobs_touched},
          {"refs_checked", r.refs_checked},
          {"refs_settling", r.refs_settling},
          {"settling_after", r.settling_after},
          {"dev_mode_jobs", r.dev_mode_jobs},
          {"by_kind", r.by_kind},
          {"forked", r.forked},
          {"problems", problems},
          {"reruns", reruns},
          {"witnesses", witnesses}};
}

}  // namespace gatos
