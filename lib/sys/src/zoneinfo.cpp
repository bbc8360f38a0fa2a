#include "gatos/sys/zoneinfo.h"

#include <cstdlib>
#include <string>

#include "gatos/sys/file.h"

namespace gatos {

Result<TimeZone> LoadTimeZone(std::string_view name) {
  if (name == "UTC") return TimeZone::Utc();
  if (std::string p = ZoneNameProblem(name); !p.empty()) {
    return InvalidArgumentError("unknown time zone \"" + std::string(name.substr(0, 64)) + "\": the name " + p);
  }
  const char* dir = std::getenv("GATOS_ZONEINFO");
  const std::string path = std::string(dir && *dir ? dir : "/usr/share/zoneinfo") + "/" + std::string(name);
  auto bytes = ReadFileToString(path, 1 << 20);
  if (!bytes.ok()) {
    return InvalidArgumentError("unknown time zone " + std::string(name) + " (no " + path +
                                "; a name like Europe/Paris, and tzdata installed)");
  }
  return TimeZone::FromTzif(name, *bytes);
}

}  // namespace gatos
