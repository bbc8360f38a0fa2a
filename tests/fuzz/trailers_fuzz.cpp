// libFuzzer target: ParseCommitMessage on arbitrary bytes.
// Invariants: no crash; an accepted message formats to text that parses back
// to the same trailers (the body may lose trailing whitespace only).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/model/trailers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gatos::Result<gatos::CommitMessage> m = gatos::ParseCommitMessage(text);
  if (!m.ok() || m->trailers.empty()) return 0;
  gatos::Result<gatos::CommitMessage> again =
      gatos::ParseCommitMessage(gatos::FormatCommitMessage(*m));
  if (!again.ok() || again->trailers != m->trailers) abort();
  (void)gatos::FindTrailer(m->trailers, "Job-Id");
  (void)gatos::RequireUniqueTrailer(m->trailers, "Status");
  return 0;
}
