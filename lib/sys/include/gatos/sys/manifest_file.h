// A job manifest read from a file (the model, gatos/model/manifest.h, parses bytes
// and does no I/O).
//
// Thread-safety: a free function, safe from any thread.
#ifndef GATOS_MANIFEST_FILE_H_
#define GATOS_MANIFEST_FILE_H_

#include <string>

#include "gatos/model/manifest.h"
#include "gatos/model/status.h"

namespace gatos {

// Reads (ReadFileToString, at most limits.max_bytes: an oversize file is
// refused from its size alone) and parses a manifest file. NotFound if the
// file does not exist, PermissionDenied if it cannot be opened,
// InvalidArgument if it is not a regular file, is too large ("PATH:1:1:
// manifest: is N bytes, over the limit of M bytes (max_bytes) ...") or is
// invalid (ParseManifest's errors), Internal if a read fails.
Result<Manifest> LoadManifestFile(const std::string& path, const ManifestLimits& limits = {});

}  // namespace gatos

#endif  // GATOS_MANIFEST_FILE_H_
