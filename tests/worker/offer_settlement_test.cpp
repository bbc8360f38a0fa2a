// How each refused claim's offer is settled on the job stream.
#include "gatos/worker/offer_settlement.h"

#include <gtest/gtest.h>

namespace gatos::worker {
namespace {

using Verb = OfferSettlement::Verb;

TEST(WorkerOfferSettlement, EveryRefusalHasItsAnswer) {
  struct Row {
    TransitionError error;
    OfferSettlement settlement;
  };
  const Row rows[] = {
      {TransitionError::kLostRace, {Verb::kAck, 0, false}},
      {TransitionError::kTerminal, {Verb::kAck, 0, false}},
      {TransitionError::kCancelled, {Verb::kAck, 0, false}},
      {TransitionError::kUnauthorized, {Verb::kNak, 5000, true}},
      {TransitionError::kInvalid, {Verb::kTerm, 0, true}},
      {TransitionError::kInternal, {Verb::kTerm, 0, true}},
      {TransitionError::kRetry, {Verb::kNak, 500, false}},
      {TransitionError::kStaleOwner, {Verb::kNak, 500, false}},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(SettleRefusedClaim(r.error), r.settlement) << TransitionErrorName(r.error);
  }
}

TEST(WorkerOfferSettlement, UnverifiedGrantsAreOfferedAgainLaterAndMalformedOffersNever) {
  EXPECT_EQ(kSettleUnverifiedGrant, (OfferSettlement{Verb::kNak, 5000, true}));
  EXPECT_EQ(kSettleMalformedOffer, (OfferSettlement{Verb::kTerm, 0, true}));
}

}  // namespace
}  // namespace gatos::worker
