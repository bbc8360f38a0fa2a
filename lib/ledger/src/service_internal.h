// Internals of JobService shared by its files: job_service.cpp (the batch
// pipeline: prepare, finish, after the batch), service_decode.cpp (what each
// request asks for), service_status.cpp (read-only replies) and
// service_timers.cpp (offers, expiries, aborts, pruning).
#ifndef GATOS_LEDGER_SRC_SERVICE_INTERNAL_H_
#define GATOS_LEDGER_SRC_SERVICE_INTERNAL_H_

#include "gatos/ledger/job_service.h"

#include "gatos/ledger/witness.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "gatos/crypto/keys.h"
#include "gatos/git/result.h"
#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/poe.h"
#include "gatos/model/trailers.h"
#include "gatos/model/transition.h"
#include "gatos/sys/parallel.h"

namespace gatos {
namespace service_internal {

using nlohmann::json;

inline std::string Short(const std::string& hex) { return hex.substr(0, 12); }

inline std::string ErrorText(TransitionError e, std::string_view m) { return rpc::Dump(rpc::ErrorReply(e, m)); }
inline std::string ErrorText(const Decision& o) { return ErrorText(o.error, o.message); }
inline std::string Invalid(std::string_view m) { return ErrorText(TransitionError::kInvalid, m); }

inline bool IsLocalPush(const std::string& subject) {
  return subject == rpc::kLocalPushSubmit || subject == rpc::kLocalPushResult;
}

inline std::string KindOf(const std::string& subject) {
  size_t dot = subject.rfind('.');
  return dot == std::string::npos ? subject : subject.substr(dot + 1);
}

inline std::string Objects(const std::vector<GitObject>& objects) {
  std::string batch = EncodeObjectBatch(objects);
  return Base64Encode(reinterpret_cast<const uint8_t*>(batch.data()), batch.size());
}

// The class of an error reply, for metrics; "ok" for an ok reply.
inline std::string OutcomeOf(const std::string& reply) {
  if (reply.find("\"ok\":false") == std::string::npos) return "ok";
  size_t e = reply.find("\"error\":\"");
  if (e == std::string::npos) return "error";
  size_t end = reply.find('"', e + 9);
  return reply.substr(e + 9, end - e - 9);
}

}  // namespace service_internal
}  // namespace gatos

#endif  // GATOS_LEDGER_SRC_SERVICE_INTERNAL_H_
