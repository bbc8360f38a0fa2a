// Where a file system puts the directories a program creates by the
// thousand (a ledger's job refs, a worker's job slots).
//
// Thread-safety: stateless; safe from any thread.
#ifndef GATOS_DIR_LAYOUT_H_
#define GATOS_DIR_LAYOUT_H_

#include <string>

namespace gatos {

// Marks `dir` as the top of a directory hierarchy (FS_TOPDIR_FL, chattr +T),
// so that ext4 spreads the directories created in it over its block groups
// (the Orlov allocator) instead of putting each in its parent's group. Files
// go to their directory's group, so the inodes a job's directory takes and
// frees stay out of the groups everyone else allocates from. That matters on
// ext4 without a journal, where every new inode skips the inodes its group
// freed in the last minutes, checking each: in a group where thousands were
// freed (temporary files, workspaces, pruned refs) one file creation took
// 0.2-0.7 ms on this project's VM instead of ~0.02 ms. Best effort: false
// with `why` set when the file system has no such flag or refuses it
// (nothing else changes then).
bool SpreadSubdirectories(const std::string& dir, std::string* why);

// The file system `path` is on, as far as the spreading above cares.
enum class DirFileSystem {
  kOther,           // not ext4 (or unknown): the flag is best effort
  kExt4Journaled,   // ext4 with a journal: no recently-freed inode checks
  kExt4NoJournal,   // ext4 without one: spreading pays (above)
};
DirFileSystem FileSystemOf(const std::string& path);

// For a directory that gets a new subdirectory per job (the ledger's
// refs/gatos/jobs): spreads them (SpreadSubdirectories) unless `dir` is on
// ext4 with a journal, where it takes the flag off instead. There the
// Orlov allocator's look over every block group costs more per directory
// than it saves (view_fs_bench on a journaled ext4 of 1 TB: 114-144 us per
// job's refs with the flag, 98-103 without; on this project's VM, ext4
// without a journal, 198-206 with and 76-220 without, depending on how many
// inodes the group freed lately). Best effort, as above.
bool LayOutPerJobDirectories(const std::string& dir, std::string* why);

}  // namespace gatos

#endif  // GATOS_DIR_LAYOUT_H_
