// gatos logs: a job's captured output, from its signed result, or followed
// live (-f) from what its worker publishes on NATS (live_output.h).
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <iostream>
#include <mutex>

#include "commands.h"
#include "gatos/model/encoding.h"
#include "gatos/model/live_output.h"
#include "gatos/model/rpc.h"
#include "gatos/model/status.h"
#include "gatos/sys/flags.h"
#include "ledger_client.h"

namespace gatos::cli {
namespace {

using nlohmann::json;

constexpr int kExitWaitTimeout = 3;  // as gatos wait

constexpr char kHelp[] =
    "usage: gatos logs JOB-ID --ledger DIR|nats://HOST:PORT [--attempt N] [--stderr|--both]\n"
    "                  [-f] [--timeout S] [--json]\n\n"
    "Prints a job's captured output: the stdout (or stderr, or both: each to its\n"
    "own stream; one alone goes to stdout) kept in the\n"
    "signed result of its latest finished attempt (--attempt N: that attempt).\n"
    "A result keeps the first bytes of each stream up to the ledger's output cap;\n"
    "when the cap cut a stream, a note on stderr says so.\n\n"
    "-f follows a running job (needs --ledger nats://): prints its output as its\n"
    "worker publishes it (best effort, rate-limited: a gap is noted on stderr),\n"
    "then, when the job ends, whatever the result holds beyond what was shown,\n"
    "and its final state. Exit status as gatos wait: 0 succeeded, 1 failed, timed\n"
    "out or aborted, 3 when --timeout ran out. A scan job publishes progress, not\n"
    "lines. Only the job's submitter and operators may follow a job (NATS\n"
    "permissions; GATOS_NATS_KEY names the key).\n\n"
    "Output is shown as the job wrote it when piped; on a terminal, control\n"
    "characters are escaped (\\xNN), so output cannot drive the terminal.\n"
    "--json prints {job, attempt, status, exit_code, signal, result_commit, stdout:\n"
    "{data, size, truncated, cap}, stderr: {...}} (data as text; bytes that are\n"
    "not UTF-8 replaced).\n";

struct Selection {
  bool out = true, err = false;
  bool Has(int stream) const { return stream == 1 ? out : err; }
  // Where a stream is printed: one stream alone goes to stdout (to pipe it);
  // with --both each goes to its own.
  int Fd(int stream) const { return out && err ? stream : 1; }
};

const char* StreamName(int stream) { return stream == 1 ? "stdout" : "stderr"; }

// Writes job output to fd 1 or 2: raw when piped, escaped on a terminal.
void Emit(int fd, std::string_view bytes) {
  if (bytes.empty()) return;
  FILE* f = fd == 1 ? stdout : stderr;
  if (::isatty(fd)) {
    std::string shown = EscapeForTerminal(bytes);
    std::fwrite(shown.data(), 1, shown.size(), f);
  } else {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
  }
  std::fflush(f);
}

struct StreamText {
  std::string data;
  int64_t size = 0;
  bool truncated = false;
  int64_t cap = 0;
};

// Every page of one stream of an attempt from `offset` on; `head` gets the
// first reply (attempt, status, exit code).
Result<StreamText> ReadStream(const std::string& target, const std::string& hex, int64_t attempt,
                              int stream, int64_t offset, Bus* bus, json* head) {
  StreamText out;
  for (int pages = 0;; ++pages) {
    json req = {{"job", hex}, {"stream", StreamName(stream)}, {"offset", offset}};
    if (attempt > 0) req["attempt"] = attempt;
    GATOS_ASSIGN_OR_RETURN(json reply, JobLogsPage(target, req, bus));
    if (!reply.value("ok", false)) {
      std::string m = reply.value("message", "logs refused");
      if (m.find("no job") != std::string::npos) return NotFoundError(m);
      // No such attempt, or none with a result yet: what was asked for is not there.
      return reply.value("error", "") == "invalid" ? InvalidArgumentError(m)
                                                   : FailedPreconditionError(m);
    }
    if (head && head->is_null()) *head = reply;
    auto bytes = Base64Decode(reply.value("data", ""));
    if (!bytes.ok()) return InternalError("gatosd sent output that is not base64");
    out.data.append(bytes->begin(), bytes->end());
    out.size = reply.value("size", int64_t{0});
    out.truncated = reply.value("truncated", false);
    out.cap = reply.value("cap", int64_t{0});
    attempt = reply.value("attempt", attempt);
    offset += static_cast<int64_t>(bytes->size());
    if (bytes->empty() || offset >= out.size || pages > 100000) break;
  }
  return out;
}

void NoteCap(int stream, const StreamText& t) {
  if (!t.truncated) return;
  std::cerr << "gatos logs: note: " << StreamName(stream)
            << " was cut at the output cap: the result keeps its first " << t.cap << " bytes\n";
}

int ExitForState(const std::string& state) { return state == "succeeded" ? kExitOk : kExitFailure; }

int PrintFinished(const std::string& target, const std::string& hex, int64_t attempt, Selection sel,
                  bool as_json) {
  json head;
  json out;
  for (int stream : {1, 2}) {
    if (!sel.Has(stream)) continue;
    auto t = ReadStream(target, hex, attempt, stream, 0, nullptr, &head);
    if (!t.ok()) {
      return ReportError(t.status().message(), t.status().code() == StatusCode::kInvalidArgument
                                                   ? kExitUsage
                                                   : kExitFailure);
    }
    if (as_json) {
      out[StreamName(stream)] = {
          {"data", t->data}, {"size", t->size}, {"truncated", t->truncated}, {"cap", t->cap}};
    } else {
      Emit(sel.Fd(stream), t->data);
      NoteCap(stream, *t);
    }
  }
  if (as_json) {
    out["job"] = "blake3:" + hex;
    for (const char* k : {"attempt", "status", "exit_code", "signal", "result_commit"}) {
      if (head.contains(k)) out[k] = head[k];
    }
    std::cout << rpc::Dump(out) << "\n";
  }
  return kExitOk;
}

// What a follower received, for the main thread.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<LiveMessage> messages;
  std::string refused;  // the server's refusal of the subscription, if any
  int64_t ignored = 0;  // messages that were not valid live messages of this job
};

int Follow(const std::string& target, const std::string& hex, Selection sel, double timeout_s,
           bool as_json) {
  if (ClassifyLedger(target) != LedgerKind::kNats) {
    return UsageError("logs", "-f needs --ledger nats://HOST:PORT: live output travels on NATS");
  }
  auto st = JobStatus(target, hex);
  if (!st.ok()) return ReportError(st.status().message(), kExitFailure);
  auto inbox = std::make_shared<Inbox>();
  auto bus = ConnectGatosd(target, [inbox](const std::string& error) {
    if (error.find("ermission") == std::string::npos) return;
    std::lock_guard<std::mutex> l(inbox->mu);
    inbox->refused = error;
    inbox->cv.notify_all();
  });
  if (!bus.ok()) return ReportError(bus.status().message(), kExitFailure);
  // The job's owner decides the subject; without one (dev mode) any owner.
  std::string owner = st->value("submitter", "");
  if (owner.rfind("ed25519:", 0) == 0) owner = owner.substr(8);
  const std::string subject = owner.empty() ? std::string(kLiveSubjectPrefix) + "*." + hex + ".*"
                                            : LiveJobSubjects(owner, hex);
  auto sub = (*bus)->Subscribe(subject, [inbox, hex](Message m) {
    // Anyone allowed to publish here may send anything: display data only.
    auto parsed = ParseLiveMessage(m.data);
    std::lock_guard<std::mutex> l(inbox->mu);
    if (!parsed.ok() || parsed->job_hex != hex || inbox->messages.size() >= 4096) {
      ++inbox->ignored;
      return;
    }
    inbox->messages.push_back(std::move(*parsed));
    inbox->cv.notify_all();
  });
  if (!sub.ok()) return ReportError(sub.status().message(), kExitFailure);
  (void)(*bus)->Flush(2000);

  int64_t attempt = st->value("attempt", int64_t{1});
  int64_t shown[3] = {0, 0, 0};  // next offset to show, per stream
  bool progress_shown = false;
  const bool progress_tty = ::isatty(2) && !as_json;
  auto clear_progress = [&] {
    if (progress_shown) std::fputs("\r\x1b[K", stderr);
    progress_shown = false;
  };
  auto handle = [&](const LiveMessage& m) {
    if (m.attempt < attempt) return;
    if (m.attempt > attempt) {
      attempt = m.attempt;
      shown[1] = shown[2] = 0;
      if (!as_json) std::cerr << "gatos logs: attempt " << attempt << "\n";
    }
    if (m.kind == LiveKind::kProgress) {
      if (!progress_tty) return;
      std::string line = EscapeForTerminal(DescribeProgress(m.progress));
      std::fprintf(stderr, "\r\x1b[K%s", line.substr(0, 200).c_str());
      std::fflush(stderr);
      progress_shown = true;
      return;
    }
    int stream = m.stream == "stdout" ? 1 : 2;
    if (!sel.Has(stream) || as_json) return;
    int64_t end = m.offset + static_cast<int64_t>(m.data.size());
    if (end <= shown[stream]) return;  // already shown
    clear_progress();
    if (m.offset > shown[stream]) {
      std::cerr << "gatos logs: [" << (m.offset - shown[stream]) << " bytes of "
                << StreamName(stream) << " not shown live]\n";
      shown[stream] = m.offset;
    }
    Emit(sel.Fd(stream),
         std::string_view(m.data).substr(static_cast<size_t>(shown[stream] - m.offset)));
    shown[stream] = end;
  };

  const auto start = std::chrono::steady_clock::now();
  auto next_poll = start;
  for (;;) {
    std::deque<LiveMessage> batch;
    std::string refused;
    {
      std::unique_lock<std::mutex> l(inbox->mu);
      inbox->cv.wait_until(l, next_poll,
                           [&] { return !inbox->messages.empty() || !inbox->refused.empty(); });
      batch.swap(inbox->messages);
      refused = inbox->refused;
    }
    for (const LiveMessage& m : batch) handle(m);
    if (!refused.empty()) {
      clear_progress();
      return ReportError("the NATS server refused to show this job's output to this key: " +
                             EscapeForTerminal(refused) +
                             "\nonly the job's submitter and the ledger's operators may follow it",
                         kExitFailure);
    }
    auto now = std::chrono::steady_clock::now();
    if (now < next_poll) continue;
    next_poll = now + std::chrono::milliseconds(250);
    auto cur = JobStatus(target, hex);
    if (!cur.ok()) {
      if (cur.status().code() == StatusCode::kUnavailable) continue;  // gatosd restarting
      clear_progress();
      return ReportError(cur.status().message(), kExitFailure);
    }
    std::string state = cur->value("state", "");
    auto js = ParseJobState(state);
    if (js && IsTerminal(*js)) {
      clear_progress();
      if (as_json) {
        int rc = PrintFinished(target, hex, 0, sel, true);
        return rc != kExitOk ? rc : ExitForState(state);
      }
      // What the result holds beyond what was shown live (the result is the record).
      bool has_result = cur->contains("result_commit");
      int64_t final_attempt = cur->value("attempt", attempt);
      if (has_result) {
        for (int stream : {1, 2}) {
          if (!sel.Has(stream)) continue;
          int64_t from = final_attempt == attempt ? shown[stream] : 0;
          auto t = ReadStream(target, hex, final_attempt, stream, from, bus->get(), nullptr);
          if (!t.ok()) {
            std::cerr << "gatos logs: cannot read the result's " << StreamName(stream) << ": "
                      << t.status().message() << "\n";
            continue;
          }
          Emit(sel.Fd(stream), t->data);
          NoteCap(stream, *t);
        }
      }
      std::string line = "gatos logs: blake3:" + hex + " " + state;
      for (const auto& a : (*cur)["attempts"]) {
        if (a.value("n", int64_t{0}) != final_attempt) continue;
        if (a.contains("exit_code"))
          line += ", exit code " + std::to_string(a.value("exit_code", int64_t{0}));
        if (a.contains("signal"))
          line += ", signal " + std::to_string(a.value("signal", int64_t{0}));
      }
      std::cerr << line << "\n";
      return ExitForState(state);
    }
    if (cur->value("attempt", attempt) > attempt) {
      attempt = cur->value("attempt", attempt);
      shown[1] = shown[2] = 0;
    }
    double waited = std::chrono::duration<double>(now - start).count();
    if (timeout_s >= 0 && waited >= timeout_s) {
      clear_progress();
      std::cerr << "gatos logs: blake3:" << hex << " not finished after " << timeout_s << " s\n";
      return kExitWaitTimeout;
    }
  }
}

}  // namespace

int RunLogs(const Args& args) {
  Flags flags;
  if (!flags.Parse(args, {{"ledger"},
                          {"attempt"},
                          {"timeout"},
                          {"stderr", 0, false},
                          {"both", 0, false},
                          {"follow", 'f', false},
                          {"json", 0, false}})) {
    return UsageError("logs", flags.error());
  }
  if (flags.help()) {
    std::cout << kHelp;
    return kExitOk;
  }
  auto target = LedgerTarget(flags.Get("ledger"));
  if (!target) return UsageError("logs", "--ledger is required (or set GATOS_LEDGER)");
  if (flags.positional().size() != 1) return UsageError("logs", "expects one JOB-ID");
  auto hex = ParseJobArg(flags.positional()[0]);
  if (!hex.ok()) return ReportError(hex.status().message(), kExitUsage);
  if (flags.Has("stderr") && flags.Has("both"))
    return UsageError("logs", "--stderr and --both exclude each other");
  Selection sel;
  if (flags.Has("stderr")) sel = {false, true};
  if (flags.Has("both")) sel = {true, true};
  int64_t attempt = 0;
  if (flags.Get("attempt") && !flags.GetInt("attempt", 1, 1'000'000, &attempt)) {
    return UsageError("logs", flags.error());
  }
  double timeout_s = -1;
  if (auto t = flags.Get("timeout")) {
    char* end = nullptr;
    timeout_s = std::strtod(t->c_str(), &end);
    if (*end || timeout_s < 0)
      return UsageError("logs", "--timeout must be a number of seconds >= 0");
  }
  if (flags.Has("follow")) {
    if (attempt)
      return UsageError("logs", "-f follows the current attempt; --attempt is for finished ones");
    return Follow(*target, *hex, sel, timeout_s, flags.Has("json"));
  }
  return PrintFinished(*target, *hex, attempt, sel, flags.Has("json"));
}

}  // namespace gatos::cli
