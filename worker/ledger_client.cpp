#include "ledger_client.h"

#include "gatos/model/rpc.h"

namespace gatos::worker {

Reply LedgerClient::Call(const char* subject, const std::string& data, int timeout_ms) {
  auto m = bus_->Request(subject, data, timeout_ms);
  if (!m.ok()) return NoReply(m.status());
  return ReplyOf(m->data, subject);
}

std::vector<Reply> LedgerClient::CallMany(const char* single, const char* batch,
                                          const std::vector<std::string>& entries, int timeout_ms) {
  if (entries.size() == 1) return {Call(single, entries[0], timeout_ms)};
  auto m = bus_->Request(batch, rpc::EncodeBatch(entries), timeout_ms);
  if (!m.ok()) return std::vector<Reply>(entries.size(), NoReply(m.status()));
  return RepliesOfBatch(m->data, entries.size(), single, batch);
}

}  // namespace gatos::worker
