// What a request to change a job comes to: allowed, or refused with a class
// a client can act on. This is the one vocabulary of refusals: transitions
// (transition.h), the ledger's request and result checks, RPC replies and
// push rejections all use it.
//
// Why both Status and Decision: Status (status.h) says what went wrong inside
// a function (a file that did not open, a commit that did not parse), with
// codes in the manner of errno. A Decision is what the ledger answers a
// request, and its class is on the wire: the worker branches on it (stop on
// stale_owner, be quiet on lost_race, retry on retry, give up on invalid).
// Decision::FromStatus is the one place a Status becomes a Decision.
//
// Thread-safety: value types.
#ifndef GATOS_MODEL_DECISION_H_
#define GATOS_MODEL_DECISION_H_

#include <string>
#include <string_view>
#include <utility>

#include "gatos/model/status.h"

namespace gatos {

// Error classes carried in RPC replies and push rejections (PROTOCOL 4).
enum class TransitionError {
  kNone,
  kLostRace,      // another worker holds a live lease (normal, quiet)
  kStaleOwner,    // the caller no longer holds the lease: stop, write nothing
  kTerminal,      // the job already has a result or was aborted
  kCancelled,     // cancel requested: do not start
  kInvalid,       // malformed request or result: permanent
  kUnauthorized,  // bad or untrusted signature
  kRetry,         // transient (I/O, a batch that could not be written, backoff)
  kInternal,      // the ledger cannot apply it (a corrupt object): not worth retrying
};
std::string_view TransitionErrorName(TransitionError e);  // "lost_race", "stale_owner", ...
// An unknown name parses as kInvalid: a reply we cannot read is not retried.
TransitionError ParseTransitionError(std::string_view name);

struct Decision {
  TransitionError error = TransitionError::kNone;
  std::string message;

  bool ok() const { return error == TransitionError::kNone; }
  static Decision Error(TransitionError e, std::string m) { return Decision{e, std::move(m)}; }
  // Maps a Status faithfully: Aborted/Unavailable/DeadlineExceeded -> retry,
  // PermissionDenied -> unauthorized, InvalidArgument/NotFound -> invalid,
  // DataLoss/Internal/FailedPrecondition and anything else -> internal (a
  // corrupt ledger object is never something to retry). OK -> allowed.
  static Decision FromStatus(const Status& s);
};

}  // namespace gatos

#endif  // GATOS_MODEL_DECISION_H_
