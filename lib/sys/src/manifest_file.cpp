#include "gatos/sys/manifest_file.h"

#include "gatos/sys/file.h"

namespace gatos {

Result<Manifest> LoadManifestFile(const std::string& path, const ManifestLimits& limits) {
  Result<std::string> data = ReadFileToString(path, limits.max_bytes);
  if (!data.ok()) {
    const std::string& m = data.status().message();
    const size_t is = m.find(" is ");
    if (data.status().code() == StatusCode::kInvalidArgument && m.find("over the limit") != std::string::npos &&
        is != std::string::npos) {
      return InvalidArgumentError(path + ":1:1: manifest:" + m.substr(is) +
                                  " bytes (max_bytes); keep large data in inputs referenced by hash");
    }
    if (data.status().code() == StatusCode::kInvalidArgument) {
      return InvalidArgumentError(path + ":1:1: manifest: is not a regular file; expected a file");
    }
    return data.status();
  }
  return ParseManifest(*data, path, ManifestFormat::kAuto, limits);
}

}  // namespace gatos
