#include "gatos/worker/rpc_reply.h"

#include <utility>

#include "gatos/model/rpc.h"

namespace gatos::worker {

Reply ReplyOf(std::string_view data, std::string_view subject) {
  Reply r;
  Decision err;
  auto body = rpc::ParseReply(data, subject, &err);
  r.error = err.error;
  r.message = err.message;
  if (body.ok()) r.body = std::move(*body);
  return r;
}

Reply NoReply(const Status& transport) {
  Reply r;
  r.error = TransitionError::kRetry;
  r.message = transport.message();
  r.too_large = transport.code() == StatusCode::kInvalidArgument;
  return r;
}

std::vector<Reply> RepliesOfBatch(std::string_view data, size_t entries, std::string_view single,
                                  std::string_view batch) {
  const Reply malformed{
      TransitionError::kRetry, "malformed reply on " + std::string(batch), {}, false};
  if (!rpc::IsBatch(data)) {  // the whole batch was refused
    Reply whole = ReplyOf(data, batch);
    return std::vector<Reply>(entries, whole.ok() ? malformed : whole);
  }
  auto replies = rpc::DecodeBatch(data);
  if (!replies.ok() || replies->size() != entries) return std::vector<Reply>(entries, malformed);
  std::vector<Reply> out;
  out.reserve(entries);
  for (std::string_view r : *replies) out.push_back(ReplyOf(r, single));
  return out;
}

}  // namespace gatos::worker
