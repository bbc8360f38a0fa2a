// libFuzzer target: the triggers' parsers (gatos/model/trigger.h), as
// gatosd reads `git ls-remote` output and its recorded positions, and the
// ref patterns schedule.yaml carries. The first byte picks one:
//   0: ParseLsRemote: every accepted ref maps to an object id;
//   1: ParseWatchPositions: what parses encodes and parses back the same;
//   2: "PATTERN\nREF": a pattern RefPatternProblem accepts matches without
//      crashing, matches itself when it has no '*', and when WatchedRefs
//      keeps REF, the job a move of it fires is a valid manifest and its
//      positions encode and parse.
// Nothing crashes or hangs on any input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gatos/model/git_input.h"
#include "gatos/model/manifest.h"
#include "gatos/model/trigger.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto r = gatos::ParseLsRemote(in);
      if (!r.ok()) return 0;
      for (const auto& [ref, id] : *r) Check(gatos::IsGitCommitId(id) && !ref.empty());
      gatos::WatchedRefs({"/srv/x", {"refs/heads/*"}}, *r);
      return 0;
    }
    case 1: {
      auto p = gatos::ParseWatchPositions(in);
      if (!p.ok()) return 0;
      auto again = gatos::ParseWatchPositions(gatos::EncodeWatchPositions(*p));
      Check(again.ok() && *again == *p);
      return 0;
    }
    default: {
      const size_t nl = in.find('\n');
      const std::string_view pattern = in.substr(0, nl);
      const std::string_view ref =
          nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
      if (!gatos::RefPatternProblem(pattern).empty()) return 0;
      const bool m = gatos::RefPatternMatches(pattern, ref);
      if (pattern.find('*') == std::string_view::npos)
        Check(gatos::RefPatternMatches(pattern, pattern));
      // What gatosd fires for it: only the refs WatchedRefs keeps.
      auto watched = gatos::WatchedRefs({"/srv/x", {std::string(pattern)}},
                                        {{std::string(ref), std::string(40, 'a')}});
      Check(watched.size() <= 1 && (watched.empty() || m));
      static const gatos::Manifest kTemplate =
          *gatos::ParseManifest("command: [x]\ntimeout: 5\n", "job.yaml");
      for (const auto& [r, id] : watched) {
        gatos::Manifest fired = gatos::TriggeredManifest(kTemplate, "t", "/srv/x", r, id);
        Check(gatos::ParseManifest(gatos::ManifestJson(fired).dump(), "job.yaml").ok());
        gatos::WatchPositions p{std::string(40, '1'), {{"/srv/x", watched}}};
        Check(gatos::ParseWatchPositions(gatos::EncodeWatchPositions(p)).ok());
      }
      return 0;
    }
  }
}
