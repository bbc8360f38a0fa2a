// libFuzzer target: ParseCommitMessage on arbitrary bytes, and the lease
// commit codec (ParseLeaseCommitMessage, with its Job-Limits trailers).
// Invariants: no crash; an accepted message formats to text that parses back
// to the same trailers (the body may lose trailing whitespace only); an
// accepted lease commit formats to one that parses back to the same lease.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/model/job_limits.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/trailers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (gatos::Result<gatos::LeaseCommitInfo> lease = gatos::ParseLeaseCommitMessage(text);
      lease.ok()) {
    gatos::Result<gatos::LeaseCommitInfo> back =
        gatos::ParseLeaseCommitMessage(gatos::FormatLeaseCommitMessage(*lease));
    if (!back.ok() || *back != *lease) abort();
  }
  if (gatos::Result<gatos::JobLimits> l = gatos::ParseJobLimits(text); l.ok()) {
    if (gatos::FormatJobLimits(*l) != text) abort();
  }
  gatos::Result<gatos::CommitMessage> m = gatos::ParseCommitMessage(text);
  if (!m.ok() || m->trailers.empty()) return 0;
  gatos::Result<gatos::CommitMessage> again =
      gatos::ParseCommitMessage(gatos::FormatCommitMessage(*m));
  if (!again.ok() || again->trailers != m->trailers) abort();
  (void)gatos::FindTrailer(m->trailers, "Job-Id");
  (void)gatos::RequireUniqueTrailer(m->trailers, "Status");
  return 0;
}
