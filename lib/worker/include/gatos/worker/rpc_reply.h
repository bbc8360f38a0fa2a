// What the worker makes of gatosd's replies (PROTOCOL section 4): every
// outcome in the error classes it branches on (decision.h TransitionError),
// with transport failures folded into kRetry, so that each caller handles
// one vocabulary. The bus calls themselves are the program's.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_WORKER_RPC_REPLY_H_
#define GATOS_WORKER_RPC_REPLY_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/decision.h"
#include "gatos/model/status.h"

namespace gatos::worker {

// The outcome of one request.
struct Reply {
  TransitionError error = TransitionError::kNone;
  std::string message;
  nlohmann::json body;  // the reply's fields when ok()
  // The request could not be sent at all because of its size (the bus's
  // max payload): sending it again cannot help.
  bool too_large = false;
  bool ok() const { return error == TransitionError::kNone; }
};

// A reply message to a request on `subject` (a malformed one is kRetry,
// naming the subject).
Reply ReplyOf(std::string_view data, std::string_view subject);

// A request that got no reply: kRetry with the bus's message; `too_large`
// when the bus refused it for its size (InvalidArgument from Bus::Request).
Reply NoReply(const Status& transport);

// The replies to a batch request of `entries` entries (rpc::EncodeBatch),
// one per entry, in order: each entry's own reply (parsed as a reply on
// `single`); the one reply of a request refused as a whole, for every entry;
// or, for a reply that is neither (or an ok that is not a batch), kRetry
// "malformed reply on <batch>" for every entry.
std::vector<Reply> RepliesOfBatch(std::string_view data, size_t entries, std::string_view single,
                                  std::string_view batch);

}  // namespace gatos::worker

#endif  // GATOS_WORKER_RPC_REPLY_H_
