// Reading and writing cgroup control files (small, one value each).
//
// Thread-safety: plain functions.
#ifndef GATOS_EXEC_SRC_CGROUP_FILES_H_
#define GATOS_EXEC_SRC_CGROUP_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace gatos::exec_internal {

// The file's contents (at most 4 KiB); false if it cannot be read.
bool ReadSmallFile(const std::string& path, std::string* out);
// Writes `value` in one write(2); 0 or the errno.
int WriteSmallFile(const std::string& path, std::string_view value);
// The file's first number (-1 when missing or not a number).
int64_t ReadNumber(const std::string& path);
// The number after `key` on the line starting with "key " of a flat-keyed
// file such as memory.events ("oom_kill 3"); -1 when absent.
int64_t ReadKeyed(const std::string& path, std::string_view key);

// Removes `dir` and every cgroup below it, deepest first. rmdir refuses a
// cgroup that holds a process, so only empty ones go.
void RemoveCgroupTree(const std::string& dir);

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_CGROUP_FILES_H_
