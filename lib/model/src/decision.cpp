#include "gatos/model/decision.h"

namespace gatos {

std::string_view TransitionErrorName(TransitionError e) {
  switch (e) {
    case TransitionError::kNone:
      return "ok";
    case TransitionError::kLostRace:
      return "lost_race";
    case TransitionError::kStaleOwner:
      return "stale_owner";
    case TransitionError::kTerminal:
      return "terminal";
    case TransitionError::kCancelled:
      return "cancelled";
    case TransitionError::kInvalid:
      return "invalid";
    case TransitionError::kUnauthorized:
      return "unauthorized";
    case TransitionError::kRetry:
      return "retry";
    case TransitionError::kInternal:
      return "internal";
  }
  return "invalid";
}

TransitionError ParseTransitionError(std::string_view name) {
  for (TransitionError e :
       {TransitionError::kNone, TransitionError::kLostRace, TransitionError::kStaleOwner,
        TransitionError::kTerminal, TransitionError::kCancelled, TransitionError::kInvalid,
        TransitionError::kUnauthorized, TransitionError::kRetry, TransitionError::kInternal}) {
    if (TransitionErrorName(e) == name) return e;
  }
  return TransitionError::kInvalid;
}

Decision Decision::FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return {};
    case StatusCode::kAborted:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return Error(TransitionError::kRetry, s.message());
    case StatusCode::kPermissionDenied:
      return Error(TransitionError::kUnauthorized, s.message());
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return Error(TransitionError::kInvalid, s.message());
    default:
      return Error(TransitionError::kInternal, s.message());
  }
}

}  // namespace gatos
