// The one log line format of the gatos daemons (gatosd, gatos-worker, gatos up):
//
//   <program>[<instance>]: <RFC 3339 UTC time with milliseconds> <text>
//   gatos-worker[w1]: 2025-01-31T12:00:00.123Z claimed job 0123456789ab (epoch 1)
//   gatosd: 2025-01-31T12:00:00.123Z serving ledger /srv/ledger.git on nats://...
//
// written to stderr with one write(2) per line.
//
// Switching a program's own Log() over (gatosd/server.cpp, worker/worker.cpp):
// delete the local `void Log(const std::string&)`, include "gatos/sys/log.h", and
// the calls `Log("...")` stay as they are. Name the program once:
//
//   gatos::SetLogProgram("gatosd");                      // in Serve() / main
//   gatos::SetLogProgram("gatos-worker", opts_.name);    // "gatos-worker[w1]"
//
// (Before any call the program name is the executable's file name.)
//
// What goes into `text` is the caller's: never an environment variable's
// value, a key or a token. Log() makes the text one line: it drops trailing
// newlines, writes other control characters as \n, \r, \xNN (so that a
// user-supplied string cannot forge a line), replaces invalid UTF-8 and cuts
// the text at kMaxLogText bytes on a character boundary (TruncateUtf8).
//
// Thread-safety: every function here is safe from any thread; lines from
// different threads never interleave.
#ifndef GATOS_LOG_H_
#define GATOS_LOG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gatos {

inline constexpr size_t kMaxLogText = 16 * 1024;

// "gatosd", or with an instance, "gatos-worker[w1]".
void SetLogProgram(std::string_view program, std::string_view instance = {});
std::string LogProgram();

// The line Log() writes, without its newline; `text` is cleaned as above.
std::string FormatLogLine(std::string_view program, int64_t unix_ms, std::string_view text);

// Writes FormatLogLine(LogProgram(), now, text) and a newline to stderr.
void Log(std::string_view text);

}  // namespace gatos

#endif  // GATOS_LOG_H_
