#include "gatos/nats/job_stream.h"

#include "gatos/model/rpc.h"

namespace gatos::rpc {

Bus::ConsumerConfig WorkerConsumerConfig() {
  Bus::ConsumerConfig cc;
  cc.stream = kStream;
  cc.durable = kWorkerDurable;
  cc.filter_subject = kPendingSubject;
  cc.ack_wait_ms = 30'000;
  cc.max_ack_pending = 10'000;
  return cc;
}

}  // namespace gatos::rpc
