// The ledger's signed log as a test reads it: every log commit from the head
// back to the root, oldest first, with its parsed message and batch record
// (docs/ledger-format.md, "The log"). Fails the test on a malformed log.
#ifndef GATOS_TESTS_SUPPORT_LOG_READER_H_
#define GATOS_TESTS_SUPPORT_LOG_READER_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "gatos/git/ledger.h"
#include "gatos/model/log_format.h"
#include "gatos/model/refs.h"
#include "gatos/model/time_format.h"

namespace gatos::testing {

struct LogCommit {
  std::string id;
  CommitInfo commit;
  LogCommitInfo info;
  std::vector<LogEntry> entries;
};

inline std::vector<LogCommit> ReadLog(Ledger& l) {
  std::vector<LogCommit> out;
  auto head = l.ResolveRef(kLogRef);
  EXPECT_TRUE(head.ok()) << head.status().ToString();
  std::string cur = head.ok() ? *head : "";
  while (!cur.empty()) {
    LogCommit c;
    c.id = cur;
    auto commit = l.ReadCommit(cur);
    EXPECT_TRUE(commit.ok()) << cur;
    if (!commit.ok()) break;
    c.commit = *commit;
    auto info = ParseLogMessage(c.commit.message);
    EXPECT_TRUE(info.ok()) << cur << ": " << info.status().ToString();
    if (!info.ok()) break;
    c.info = *info;
    auto tree = l.ReadTree(c.commit.tree);
    EXPECT_TRUE(tree.ok()) << cur;
    for (size_t i = 0; tree.ok() && i < tree->size(); ++i) {
      const auto& e = (*tree)[i];
      if (e.name != "batch") continue;
      auto blob = l.ReadBlob(e.id, 1 << 26);
      auto entries = blob.ok() ? DecodeBatch(*blob) : Result<std::vector<LogEntry>>(blob.status());
      EXPECT_TRUE(entries.ok()) << cur << ": " << entries.status().ToString();
      if (entries.ok()) c.entries = *entries;
    }
    out.push_back(c);
    cur = c.info.seq > 1 ? c.commit.parents[0] : "";
  }
  return {out.rbegin(), out.rend()};
}

// In the signed log of the ledger at `dir`: each of `acked` ("blake3:<hex>")
// adopted once and given exactly one final result; no job with two results.
inline void ExpectOneSubmitAndOneResultEach(const std::string& dir, const std::vector<std::string>& acked) {
  auto ledger = Ledger::Open(dir);
  ASSERT_TRUE(ledger.ok()) << dir;
  std::map<std::string, int> submits, results;
  for (const auto& c : ReadLog(**ledger)) {
    std::string last;  // one transition may span several lines
    for (const auto& e : c.entries) {
      const std::string key = std::to_string(static_cast<int>(e.kind)) + e.job_hex;
      if (key == last) continue;
      last = key;
      if (e.kind == LogKind::kSubmit) ++submits[e.job_hex];
      if (e.kind == LogKind::kResult) ++results[e.job_hex];
    }
  }
  int lost = 0, doubled = 0;
  for (const auto& id : acked) {
    const std::string hex = id.substr(id.find(':') + 1);
    if (submits[hex] != 1 || results[hex] != 1) {
      ADD_FAILURE() << dir << ": " << id << ": " << submits[hex] << " submits, " << results[hex] << " results in the log";
      ++lost;
    }
  }
  for (const auto& [hex, n] : results) doubled += n > 1;
  EXPECT_EQ(lost, 0) << dir;
  EXPECT_EQ(doubled, 0) << dir;
  std::cout << "[log] " << dir << ": " << acked.size() << " acknowledged, lost " << lost << ", double results "
            << doubled << "\n";
}

// The ticks a schedule fired, from `git log --format=%(trailers:key=
// Fired-At,valueonly,separator=)` of its refs/gatos/fires/<name>, sorted;
// a tick fired twice fails the test (`what` names the ledger or schedule).
inline std::vector<int64_t> FiredTicks(const std::string& git_log, const std::string& what) {
  std::istringstream in(git_log);
  std::vector<int64_t> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto t = ParseRfc3339Millis(line);
    EXPECT_TRUE(t.ok()) << line;
    if (t.ok()) out.push_back(*t);
  }
  std::sort(out.begin(), out.end());
  EXPECT_EQ(std::set<int64_t>(out.begin(), out.end()).size(), out.size()) << what << ": a tick fired twice";
  return out;
}

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_LOG_READER_H_
