// The JetStream objects of the job plane (rpc.h names the subjects): the
// workers' shared durable consumer.
//
// Thread-safety: pure functions.
#ifndef GATOS_JOB_STREAM_H_
#define GATOS_JOB_STREAM_H_

#include <string_view>

#include "gatos/nats/bus.h"

namespace gatos::rpc {

// The workers' shared durable consumer. gatosd creates it at start and every
// worker binds to it; both must ask for the same settings, or each would
// reconfigure it for the other.
Bus::ConsumerConfig WorkerConsumerConfig();
// The same for the offers of one pool ("default" or "": the one above).
Bus::ConsumerConfig WorkerConsumerConfig(std::string_view pool);

}  // namespace gatos::rpc

#endif  // GATOS_JOB_STREAM_H_
