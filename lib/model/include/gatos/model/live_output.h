// Live output and progress of a running job (docs/protocol.md, "Live output
// and progress"): what a worker publishes on core NATS while a job runs, the
// subject it goes to, and the progress line protocol a job writes.
//
// Best effort by design: messages may be lost, reordered or forged by anyone
// allowed to publish on the bus. The signed result in the ledger stays the
// record; these messages are display data only. Every parser here takes
// hostile bytes: bounded sizes, strict fields, never an exception.
//
// Subjects: gatos.live.<owner>.<job-hex>.output (chunks of output) and
// gatos.live.<owner>.<job-hex>.progress (progress reports), where <owner> is
// the 64-hex key that signed the job commit, or "unsigned" (dev mode). NATS
// permissions (nats_auth.h) let a submitter subscribe only under its own
// key, operators and the ledger everywhere, and workers publish. Two
// subjects so that gatosd hears every job's progress (for `gatos status`)
// without receiving every job's output.
//
// Thread-safety: pure functions.
#ifndef GATOS_MODEL_LIVE_OUTPUT_H_
#define GATOS_MODEL_LIVE_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

inline constexpr char kLiveSubjectPrefix[] = "gatos.live.";
inline constexpr char kUnsignedOwner[] = "unsigned";
// Bounds of one message: what a publisher never exceeds and a parser refuses.
inline constexpr size_t kMaxLiveMessageBytes = 64 * 1024;
inline constexpr size_t kMaxLiveChunkBytes = 16 * 1024;  // raw bytes before base64
inline constexpr size_t kMaxProgressCounters = 8;
inline constexpr size_t kMaxProgressLineBytes = 1024;

enum class LiveKind { kOutput, kProgress };

// "gatos.live.<owner>.<job>.output|progress". `owner_hex` "" = kUnsignedOwner.
std::string LiveSubject(std::string_view owner_hex, std::string_view job_hex, LiveKind kind);
// Both subjects of one job: "gatos.live.<owner>.<job>.*".
std::string LiveJobSubjects(std::string_view owner_hex, std::string_view job_hex);
// Every job's progress reports (what gatosd subscribes to).
inline constexpr char kAllProgressSubjects[] = "gatos.live.*.*.progress";
// The owner token a subscriber for `owner_hex` uses ("" = kUnsignedOwner).
std::string LiveOwnerToken(std::string_view owner_hex);

// One counter of a progress report: `done` of `total` (total 0 = unknown),
// and the rate per second the worker measured between reports (0 = unknown).
struct ProgressCounter {
  std::string name;  // [a-z][a-z0-9_]{0,31}
  int64_t done = 0;
  int64_t total = 0;
  double rate = 0;
  bool operator==(const ProgressCounter&) const = default;
};

// A job's latest progress report.
struct Progress {
  std::vector<ProgressCounter> counters;  // 1..kMaxProgressCounters, distinct names
  bool operator==(const Progress&) const = default;
};

// The progress line protocol (docs/worker-execution.md, "Progress"): one
// report per line, whitespace-separated `NAME=DONE` or `NAME=DONE/TOTAL`
// tokens, NAME as above, numbers decimal integers 0..2^53. Lines starting
// with '#' and empty lines are ignored (nullopt). InvalidArgument for
// anything else (over kMaxProgressLineBytes, a bad token, a repeated name,
// DONE > TOTAL when TOTAL > 0, more than kMaxProgressCounters).
Result<std::optional<Progress>> ParseProgressLine(std::string_view line);
// The line for `p` (rates are not part of the line protocol).
std::string FormatProgressLine(const Progress& p);

struct LiveMessage {
  std::string job_hex;
  int64_t attempt = 1;
  int64_t seq = 0;  // per job attempt, from 0, in publishing order
  LiveKind kind = LiveKind::kOutput;
  // kOutput: which stream, the byte offset of `data` in it (bytes between
  // the previous chunk's end and this offset were not published: the rate
  // limit dropped them), and the bytes (at most kMaxLiveChunkBytes).
  std::string stream;  // "stdout" | "stderr"
  int64_t offset = 0;
  std::string data;
  // kProgress.
  Progress progress;
  int64_t at_ms = 0;  // the worker's clock when it was published
  bool operator==(const LiveMessage&) const = default;
};

// Canonical JSON text of `m` (data base64). Always within kMaxLiveMessageBytes
// for data within kMaxLiveChunkBytes.
std::string EncodeLiveMessage(const LiveMessage& m);
// InvalidArgument for anything that is not exactly a message EncodeLiveMessage
// could have written (size, JSON, fields, types, ranges, base64).
Result<LiveMessage> ParseLiveMessage(std::string_view text);

// Escapes bytes for display on a terminal: keeps printable ASCII, UTF-8
// sequences that decode to printable characters, '\n' and '\t'; every other
// byte (ESC, other C0/C1 controls, DEL, invalid UTF-8) becomes "\xNN". So
// output from a job or from the bus cannot move the cursor, change the
// title or hide text.
std::string EscapeForTerminal(std::string_view bytes);

// "objects 1200/5000 (24%, 300/s)  bytes 1.2 MiB/8.0 MiB ..." for people.
std::string DescribeProgress(const Progress& p);

}  // namespace gatos

#endif  // GATOS_MODEL_LIVE_OUTPUT_H_
