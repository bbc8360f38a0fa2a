// The one bounded file reader and the one atomic file writer of every gatos
// program (leveldb's ReadFileToString and SetCurrentFile are the pattern):
// each returns its error, and a durable write that fails never leaves a file
// that says it succeeded.
//
//   Result<std::string> text = ReadFileToString(path, 1 << 20);
//   Status s = WriteFileAtomically(dir + "/state", bytes);  // temp, fsync, rename, fsync dir
//
// Thread-safety: free functions, safe from any thread on different paths.
#ifndef GATOS_FILE_H_
#define GATOS_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "gatos/model/blake3.h"
#include "gatos/model/status.h"

namespace gatos {

struct ReadFileOptions {
  // The bytes may be a secret (a key, a token): every buffer that held them
  // is wiped before an error returns, and messages never quote them.
  bool secret = false;
  // Only a regular file (the default): a FIFO, a device or a directory is
  // InvalidArgument, and opening never blocks on a FIFO.
  bool regular_only = true;
};

// The whole file, at most `limit` bytes. Errors name the path:
//   NotFound          no such file
//   PermissionDenied  not readable by this process
//   InvalidArgument   larger than `limit` ("... is N bytes, over the limit of
//                     M"), or not a regular file
//   Internal          a read failed (nothing read is returned: a file read
//                     halfway is never parsed)
Result<std::string> ReadFileToString(const std::string& path, size_t limit, const ReadFileOptions& options = {});

// Replaces `path` with `data` durably: a temporary file beside it (mode
// `mode`), written and fsynced, renamed over `path`, then its directory
// fsynced. On any error `path` is unchanged (the temporary file is removed)
// and the error says which step failed. With `sync` false the fsyncs are
// skipped (for files that need only atomicity).
Status WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode = 0644, bool sync = true);

// BLAKE3 of a file's contents, read in 64 KiB blocks. NotFound or Internal.
Result<Digest32> Blake3File(const std::string& path);

}  // namespace gatos

#endif  // GATOS_FILE_H_
