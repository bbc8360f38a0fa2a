#include "gatos/worker/offer_settlement.h"

namespace gatos::worker {

OfferSettlement SettleRefusedClaim(TransitionError error) {
  using Verb = OfferSettlement::Verb;
  switch (error) {
    case TransitionError::kLostRace:
    case TransitionError::kTerminal:
    case TransitionError::kCancelled:
      return {Verb::kAck, 0, false};
    case TransitionError::kUnauthorized:
      return {Verb::kNak, 5000, true};
    case TransitionError::kInvalid:
    case TransitionError::kInternal:
      return {Verb::kTerm, 0, true};
    default:
      return {Verb::kNak, 500, false};
  }
}

}  // namespace gatos::worker
