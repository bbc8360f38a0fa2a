// The dashboard's HTML: pages rendered from the same JSON as their .json
// twins (so the two cannot disagree), and the static files embedded in the
// binary (no build step). Every string from the ledger goes through
// HtmlEscape; the only script is /static/app.js, and the
// Content-Security-Policy (http.cpp) allows no other.
//
// Thread-safety: pure functions.
#ifndef GATOS_GATOSD_DASHBOARD_HTML_H_
#define GATOS_GATOSD_DASHBOARD_HTML_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace gatos::gatosd {

// A whole page: layout, navigation and the body for `data` (which page it
// is follows from `live`: "overview", "jobs", "job:<hex>", "batches",
// "workers"; an error page when data has "error").
// `event_seq`: the newest log event when the page read the ledger; its
// event stream starts after it.
std::string RenderPageHtml(const std::string& title, const std::string& live, const nlohmann::json& data,
                           int64_t event_seq = 0);
// The sign-in form (POST /login); `message` is shown above it.
std::string RenderLoginHtml(const std::string& message);
// /static/<name>: content type and bytes; nullopt when there is no such file.
std::optional<std::pair<std::string, std::string>> StaticAsset(std::string_view name);

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_DASHBOARD_HTML_H_
