// What the worker answers JetStream for a job offer it did not run
// (PROTOCOL section 4): ack (never again: someone else has the job, or it is
// over), nak with a delay (offer it again later, to anyone), or term (never
// again: it can never be claimed). Acks of offers the worker runs are sent
// at once, before the job starts.
//
//   the claim lost a race, the job is terminal or cancelled   ack (quiet)
//   unauthorized (this worker is not, or not yet, allowed)    nak 5 s, logged
//   invalid or internal (the ledger will never grant it)      term, logged
//   anything else (retryable, stale owner)                    nak 0.5 s
//   a grant the ledger did not sign                           nak 5 s, logged
//   an offer that does not decode                             term, logged
//
// Thread-safety: pure functions.
#ifndef GATOS_WORKER_OFFER_SETTLEMENT_H_
#define GATOS_WORKER_OFFER_SETTLEMENT_H_

#include "gatos/model/decision.h"

namespace gatos::worker {

struct OfferSettlement {
  enum class Verb { kAck, kNak, kTerm };
  Verb verb = Verb::kAck;
  int delay_ms = 0;  // kNak: redelivered after this long
  bool log = false;  // worth a line in the worker's log
  bool operator==(const OfferSettlement&) const = default;
};

// For an offer whose claim the ledger refused with `error` (not kNone).
OfferSettlement SettleRefusedClaim(TransitionError error);
// For an offer whose grant did not verify against the ledger's keys.
inline constexpr OfferSettlement kSettleUnverifiedGrant{OfferSettlement::Verb::kNak, 5000, true};
// For an offer that is not a pending-job message at all.
inline constexpr OfferSettlement kSettleMalformedOffer{OfferSettlement::Verb::kTerm, 0, true};

}  // namespace gatos::worker

#endif  // GATOS_WORKER_OFFER_SETTLEMENT_H_
