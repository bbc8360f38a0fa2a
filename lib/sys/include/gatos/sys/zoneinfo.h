// Loads a time zone for a schedule (gatos/model/time_zone.h): "UTC", or the
// TZif file /usr/share/zoneinfo/<name> (the directory is $GATOS_ZONEINFO
// when set, for tests and systems that keep it elsewhere).
//
// Thread-safety: reads files; safe from any thread.
#ifndef GATOS_SYS_ZONEINFO_H_
#define GATOS_SYS_ZONEINFO_H_

#include <string_view>

#include "gatos/model/status.h"
#include "gatos/model/time_zone.h"

namespace gatos {

// InvalidArgument naming the zone when the name is malformed or no such
// zone is installed ("unknown time zone Mars/Olympus (no
// /usr/share/zoneinfo/Mars/Olympus; install tzdata)").
Result<TimeZone> LoadTimeZone(std::string_view name);

}  // namespace gatos

#endif  // GATOS_SYS_ZONEINFO_H_
