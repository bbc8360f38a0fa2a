#include "gatos/sys/log.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <mutex>

#include "gatos/model/clock.h"
#include "gatos/model/encoding.h"
#include "gatos/model/time_format.h"  // FormatRfc3339Millis

namespace gatos {
namespace {

std::mutex& LogMutex() {
  static std::mutex mu;
  return mu;
}

std::string& ProgramName() {
  static std::string name = program_invocation_short_name ? program_invocation_short_name : "gatos";
  return name;
}

}  // namespace

void SetLogProgram(std::string_view program, std::string_view instance) {
  std::string name(program);
  if (!instance.empty()) name += "[" + TruncateUtf8(instance, 128) + "]";
  std::lock_guard<std::mutex> l(LogMutex());
  ProgramName() = std::move(name);
}

std::string LogProgram() {
  std::lock_guard<std::mutex> l(LogMutex());
  return ProgramName();
}

std::string FormatLogLine(std::string_view program, int64_t unix_ms, std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  const std::string clean = TruncateUtf8(text, kMaxLogText);
  std::string line;
  line.reserve(program.size() + 28 + clean.size());
  line.append(program).append(": ").append(FormatRfc3339Millis(unix_ms)).append(" ");
  for (char ch : clean) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      line += ch;
    } else if (c == '\t') {
      line += '\t';
    } else if (c == '\n') {
      line += "\\n";
    } else if (c == '\r') {
      line += "\\r";
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      line += esc;
    }
  }
  return line;
}

void Log(std::string_view text) {
  std::string line = FormatLogLine(LogProgram(), SystemNowMs(), text);
  line += '\n';
  std::lock_guard<std::mutex> l(LogMutex());
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is gone: nothing to tell anyone
    off += static_cast<size_t>(n);
  }
}

}  // namespace gatos
