// Directories that hold gatos state (a worker's --state-dir, a ledger,
// `gatos up`'s --dir) are marked, so that no job names them, or anything in
// them, as a local input on any worker of the host (docs/inputs.md, "Local
// repositories"): they hold keys, other submitters' private mirrors and
// other jobs' workspaces.
//
// Thread-safety: free functions, safe from any thread.
#ifndef GATOS_PRIVATE_STATE_H_
#define GATOS_PRIVATE_STATE_H_

#include <string>

#include "gatos/model/status.h"

namespace gatos {

// The marker file's name.
inline constexpr char kPrivateMarker[] = ".gatos-private";

// Writes kPrivateMarker into `dir` (which must exist). Internal on failure.
Status MarkPrivate(const std::string& dir);

// Whether `canonical` (an absolute path without symlinks) is gatos state:
// it, or a directory above it, holds kPrivateMarker, or gatos/ledger_key (a
// ledger made before markers existed).
bool IsPrivateStatePath(const std::string& canonical);

}  // namespace gatos

#endif  // GATOS_PRIVATE_STATE_H_
