// libFuzzer target: what crosses the bus and the job's progress file
// (gatos/model/live_output.h): ParseLiveMessage, ParseProgressLine and
// EscapeForTerminal on arbitrary bytes.
// Invariants: no crash; an accepted message encodes to text that parses back
// to the same message; an accepted progress line formats to a line that
// parses back to the same counters; escaped text holds no control byte other
// than '\n' and '\t', and escaping is idempotent on its own output.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/model/live_output.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = gatos::ParseLiveMessage(text);
  if (m.ok()) {
    auto again = gatos::ParseLiveMessage(gatos::EncodeLiveMessage(*m));
    if (!again.ok() || !(*again == *m)) abort();
  }
  auto p = gatos::ParseProgressLine(text);
  if (p.ok() && p->has_value()) {
    auto again = gatos::ParseProgressLine(gatos::FormatProgressLine(**p));
    if (!again.ok() || !again->has_value() || !(**again == **p)) abort();
  }
  const std::string shown = gatos::EscapeForTerminal(text);
  for (unsigned char c : shown) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) abort();
  }
  if (gatos::EscapeForTerminal(shown) != shown) abort();
  return 0;
}
