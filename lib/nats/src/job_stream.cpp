#include "gatos/nats/job_stream.h"

#include "gatos/model/rpc.h"

namespace gatos::rpc {

Bus::ConsumerConfig WorkerConsumerConfig() { return WorkerConsumerConfig(""); }

Bus::ConsumerConfig WorkerConsumerConfig(std::string_view pool) {
  Bus::ConsumerConfig cc;
  cc.stream = kStream;
  cc.durable = WorkerDurableFor(pool);
  cc.filter_subject = PendingSubjectFor(pool);
  cc.ack_wait_ms = 30'000;
  cc.max_ack_pending = 10'000;
  return cc;
}

}  // namespace gatos::rpc
