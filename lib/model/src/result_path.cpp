#include "gatos/model/result_path.h"

#include <string>

#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"

namespace gatos {

namespace {

std::string Quoted(std::string_view path) {
  return "result file path \"" + TruncateUtf8(path, 200) + "\"";
}

}  // namespace

Status CheckResultPath(std::string_view path) {
  if (!IsValidUtf8(path)) return InvalidArgumentError(Quoted(path) + " is not valid UTF-8");
  if (path.find('\0') != std::string_view::npos)
    return InvalidArgumentError(Quoted(path) + " holds a NUL byte");
  for (size_t start = 0;;) {
    const size_t slash = path.find('/', start);
    const std::string_view part =
        path.substr(start, slash == std::string_view::npos ? path.npos : slash - start);
    if (part.empty() || part == "." || part == ".." || part == ".git") {
      return InvalidArgumentError(
          Quoted(path) +
          " has an empty, '.', '..' or '.git' component, which a result tree may not hold");
    }
    if (slash == std::string_view::npos) return OkStatus();
    start = slash + 1;
  }
}

}  // namespace gatos
