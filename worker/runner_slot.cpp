#include "runner_slot.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "gatos/model/clock.h"
#include "gatos/sys/log.h"

namespace gatos::worker {

namespace fs = std::filesystem;

namespace {

// Empties `dir` (a real directory, not a symlink); false if anything is left.
bool EmptyDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return false;
  std::vector<fs::path> entries;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    entries.push_back(it->path());
  }
  if (ec) return false;
  for (const auto& e : entries) {
    fs::remove_all(e, ec);  // does not follow symlinks
    if (ec) return false;
  }
  return fs::is_empty(dir, ec) && !ec;
}

}  // namespace

void ResetSlot(const std::string& slot) {
  std::error_code ec;
  bool clean = fs::is_directory(fs::symlink_status(slot, ec)) && EmptyDir(slot + "/work") &&
               EmptyDir(slot + "/out");
  if (clean) {
    size_t n = 0;
    for (auto it = fs::directory_iterator(slot, ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      ++n;
    clean = !ec && n == 2;
  }
  if (clean) return;
  if (fs::exists(fs::symlink_status(slot, ec))) {
    std::string trash = slot + ".trash-" + std::to_string(SystemNowMs());
    fs::rename(slot, trash, ec);
    if (ec) {
      Log("cannot move the workspace " + slot + " aside: " + ec.message());
    } else {
      fs::remove_all(trash, ec);
      if (ec)
        Log("cannot remove an old workspace, " + trash + ": " + ec.message() +
            "; remove it by hand");
    }
  }
  fs::create_directories(slot + "/work", ec);
  fs::create_directories(slot + "/out", ec);
  if (ec) Log("cannot create the workspace " + slot + ": " + ec.message());
}

}  // namespace gatos::worker
