#include "gatos/worker/output_collection.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "gatos/model/encoding.h"
#include "gatos/model/result_path.h"
#include "gatos/sys/file.h"

namespace gatos::worker {

namespace fs = std::filesystem;

namespace {

constexpr char kNoneKept[] = "; no output file was kept";

}  // namespace

OutputLimits OutputLimitsFor(int64_t max_result_bytes, size_t other_files) {
  OutputLimits l;
  l.max_bytes = static_cast<size_t>(std::max<int64_t>(0, max_result_bytes));
  const size_t taken = other_files + 1;  // and poe.json
  l.max_files = l.result_max_files > taken ? l.result_max_files - taken : 0;
  return l;
}

Status CollectOutputs(const std::string& out_dir, const OutputLimits& limits,
                      std::vector<ResultFile>* files) {
  std::error_code ec;
  if (!fs::exists(out_dir, ec)) return OkStatus();
  size_t total = 0;
  std::vector<ResultFile> found;
  for (auto it = fs::recursive_directory_iterator(out_dir, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    // The result tree's root is depth 0 and outputs/ depth 1, so a
    // directory at iterator depth d becomes a tree at depth d + 2.
    if (it->is_directory(ec) && !it->is_symlink(ec) &&
        static_cast<size_t>(it.depth()) + 2 > limits.result_max_depth) {
      return InvalidArgumentError("outputs are nested deeper than the " +
                                  std::to_string(limits.result_max_depth) +
                                  " levels a result tree may have" + kNoneKept);
    }
    if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
    const std::string path = "outputs/" + fs::relative(it->path(), out_dir, ec).generic_string();
    if (Status s = CheckResultPath(path); !s.ok())
      return InvalidArgumentError(s.message() + kNoneKept);
    if (found.size() >= limits.max_files) {
      return InvalidArgumentError("more than " + std::to_string(limits.max_files) +
                                  " output files (a result holds at most " +
                                  std::to_string(limits.result_max_files) + " files)" + kNoneKept);
    }
    const uintmax_t size = it->file_size(ec);
    total += size;
    if (ec || total > limits.max_bytes) {
      return InvalidArgumentError("outputs exceed this ledger's result limit of " +
                                  std::to_string(limits.max_bytes) + " bytes" + kNoneKept);
    }
    auto data = ReadFileToString(it->path().string(), limits.max_bytes);
    if (!data.ok()) {
      return InternalError("cannot read the output file \"" + TruncateUtf8(path, 200) +
                           "\": " + data.status().message() + kNoneKept);
    }
    found.push_back({path, std::move(*data), false});
  }
  if (ec) return InternalError("cannot read the output directory: " + ec.message() + kNoneKept);
  for (auto& f : found) files->push_back(std::move(f));
  return OkStatus();
}

}  // namespace gatos::worker
