// The ledger's time format: RFC 3339 UTC with milliseconds, as in trailers,
// poe.json and replies ("2026-11-22T02:01:47.123Z").
//
// Thread-safety: pure functions.
#ifndef GATOS_MODEL_TIME_FORMAT_H_
#define GATOS_MODEL_TIME_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "gatos/model/status.h"

namespace gatos {

std::string FormatRfc3339Millis(int64_t unix_ms);
// Accepts "YYYY-MM-DDTHH:MM:SS[.fff...]Z" (UTC only).
Result<int64_t> ParseRfc3339Millis(std::string_view text);

}  // namespace gatos

#endif  // GATOS_MODEL_TIME_FORMAT_H_
