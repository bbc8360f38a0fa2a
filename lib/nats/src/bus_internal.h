// What the files of gatos_nats other than bus.cpp need of a Bus: its
// JetStream context and bus.cpp's translation of nats.c errors.
#ifndef GATOS_NATS_SRC_BUS_INTERNAL_H_
#define GATOS_NATS_SRC_BUS_INTERNAL_H_

#include <nats/nats.h>

#include <string_view>

#include "gatos/nats/bus.h"

namespace gatos::nats_internal {

jsCtx* JetStream(Bus::Impl& impl);
natsConnection* Connection(Bus::Impl& impl);
bool Connected(const Bus::Impl& impl);
// The server's max payload (0 when not connected).
int64_t MaxPayload(Bus::Impl& impl);
// "<what>: <library text> [JetStream error N]" with the code bus.h
// documents. On the thread of the failing call, right after it.
Status FromNatsError(natsStatus s, std::string_view what, jsErrCode jerr = static_cast<jsErrCode>(0));

}  // namespace gatos::nats_internal

#endif  // GATOS_NATS_SRC_BUS_INTERNAL_H_
