// Writes objects into the ledger repository as one pack file and its index
// (git's pack v2 and idx v2 formats, no deltas): one write and a couple of
// fsyncs for a whole batch of objects, where loose objects would cost a file
// (and an fsync) each. Packs are what git itself writes on fetch and push,
// so every git tool reads them.
//
// Thread-safety: pure functions of their arguments and the file system.
#ifndef GATOS_PACK_WRITER_H_
#define GATOS_PACK_WRITER_H_

#include <string>
#include <vector>

#include "gatos/git/git_object.h"
#include "gatos/model/status.h"

namespace gatos {

struct PackWriteOptions {
  // fdatasync the pack and index, and fsync objects/pack/ after renaming
  // them, before returning: the objects are durable when this returns OK.
  bool fsync = true;
  // zlib level per object. 0 stores (no compressor work): the ledger's
  // batches stay small, and `git repack` (which gatosd runs in the
  // background) compresses and deltifies them later.
  int blob_level = 0;
  int tree_level = 0;
  // Where the temporary files are created ("" = objects/pack itself); a
  // directory on the same file system, from which they are renamed into
  // objects/pack. See Ledger::SetSpool.
  std::string temp_dir;
  // With fsync: the directories are not synced here but appended to this
  // list, in the order they must be synced (temp_dir, then objects/pack),
  // for a caller that syncs them together with others (Ledger::CasRef).
  // The files themselves are durable when WritePack returns.
  std::vector<std::string>* deferred_dir_syncs = nullptr;
};

// Writes `objects` (duplicates by id are written once) to
// <git_dir>/objects/pack/pack-<checksum>.{pack,idx}: the pack first, then the
// index, each through a temporary file and a rename, so a reader never sees
// an index without its pack. Returns the pack's path. An empty list writes
// nothing and returns "". Internal/Unavailable on I/O errors (the message
// names the file); partial temporary files are removed.
// fsync of a directory, so that the names renamed or linked into it (or out
// of it) are durable. Unavailable on ENOSPC/EIO/EDQUOT, else Internal.
Status FsyncDirectory(const std::string& dir);

Result<std::string> WritePack(const std::string& git_dir, const std::vector<const GitObject*>& objects,
                              const PackWriteOptions& options);

}  // namespace gatos

#endif  // GATOS_PACK_WRITER_H_
