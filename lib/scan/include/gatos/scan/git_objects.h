// Parsing raw git objects the walk reads itself (no libgit2 object per
// tree): tree entries and a commit's tree id. Inputs come from a possibly
// hostile repository: every length is checked.
//
// Thread-safety: pure functions.
#ifndef GATOS_SCAN_SRC_GIT_OBJECTS_H_
#define GATOS_SCAN_SRC_GIT_OBJECTS_H_

#include <git2.h>

#include <cstdint>
#include <string_view>

namespace gatos::scan {

struct TreeEntry {
  uint32_t mode = 0;       // e.g. 040000 tree, 0100644 file, 0120000 link, 0160000 submodule
  std::string_view name;   // raw bytes, not necessarily UTF-8
  git_oid id{};
};

// The next entry of the raw tree bytes in `*rest` ("<octal mode> <name>\0"
// and a 20-byte id), consuming it. False at the end, or when the bytes are
// not a tree (then `*bad` is set).
bool NextTreeEntry(std::string_view* rest, TreeEntry* e, bool* bad);

// The tree of a raw commit (its first line, "tree <40 hex>"); false when
// the commit does not start so.
bool CommitTreeId(std::string_view commit, git_oid* tree);

inline bool IsTreeMode(uint32_t mode) { return (mode & 0170000) == 0040000; }
// Files and symbolic links are blobs; submodules (0160000) are commits of
// other repositories.
inline bool IsBlobMode(uint32_t mode) {
  return (mode & 0170000) == 0100000 || (mode & 0170000) == 0120000;
}

}  // namespace gatos::scan

#endif  // GATOS_SCAN_SRC_GIT_OBJECTS_H_
