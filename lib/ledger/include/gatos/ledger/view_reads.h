// The read requests a replica of a replicated ledger answers from its own
// repository (docs/replication.md, "Reads from any replica"): status, list
// and logs, answered from a LedgerView, as the CLI answers them on a ledger
// directory. The replies have the leader's format (service_status.cpp).
//
// Thread-safety: a function of its arguments; the view is the caller's.
#ifndef GATOS_LEDGER_VIEW_READS_H_
#define GATOS_LEDGER_VIEW_READS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gatos/ledger/writer.h"
#include "gatos/model/policy.h"

namespace gatos {

// True for rpc::kStatus, rpc::kList and rpc::kLogs.
bool IsViewRead(std::string_view subject);

// The reply (JSON text, ok or an error reply) to a read request `data` on
// `subject` (rpc::kStatus, kList or kLogs) from `view` under `policy` (the
// view's). Every object of `annotate` is added to an ok reply, at its top
// level (a replica adds what it is and how far it has applied). Never
// throws: a malformed request or subject gets an error reply.
std::string ViewReadReply(LedgerView& view, const Policy& policy, std::string_view subject,
                          std::string_view data, int64_t now_ms, const nlohmann::json& annotate);

}  // namespace gatos

#endif  // GATOS_LEDGER_VIEW_READS_H_
