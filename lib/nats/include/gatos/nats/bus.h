// Bus: the message bus (core NATS and JetStream) behind one small interface.
//
// Only lib/src/nats/bus.cpp includes <nats/nats.h>; every natsStatus is
// translated there into a gatos::Status whose message names the call and the
// subject or stream that failed.
//
// Error codes used by every call below:
//   Unavailable       no server, connection lost or reconnecting (every call
//                     except Publish/Respond fails fast then, without
//                     waiting), JetStream not answering (no responders, or a
//                     timeout on a JetStream API call): retry with backoff.
//   DeadlineExceeded  Request() waited timeout_ms for a reply.
//   InvalidArgument   bad subject, payload larger than the server allows.
//   NotFound          the named stream or consumer does not exist.
//   FailedPrecondition the server refused a configuration (a change it cannot
//                     make, subjects overlapping another stream, ...).
//   Internal          anything else the library reports.
//
// Thread-safety: Bus is thread-safe (the NATS connection is). Subscription
// and PullConsumer are thread-safe (Fetch calls are serialized). JsMessage
// belongs to one thread at a time.
//
// Callbacks (Handler, on_disconnected, on_reconnected) run on NATS library
// threads: they must decode and enqueue only, never block long or touch git.
#ifndef GATOS_BUS_H_
#define GATOS_BUS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

class KvBucket;      // kv_bucket.h
class RecordStream;  // record_stream.h

struct BusOptions {
  // "nats://host:port"; the members of a cluster comma separated
  // ("nats://a:4222,nats://b:4222"), tls:// for TLS. The client connects to
  // one of them and, when it goes away, reconnects to any other (and to
  // members the cluster announces).
  std::string url;
  std::string name;  // connection name shown by the server (monitoring)
  int connect_timeout_ms = 2000;
  int max_reconnect = -1;  // -1: reconnect forever
  int reconnect_wait_ms = 250;
  // A PING every ping_interval_ms; a server that left max_pings_out of them
  // unanswered is taken for gone and the client reconnects elsewhere. With
  // the library's defaults (2 minutes, 2) a server that went silent (its
  // host cut off the network: no reset, no close) held the connection, and
  // every request on it timed out, for 4 to 6 minutes; with these, 6 s at
  // most.
  int ping_interval_ms = 2000;
  int max_pings_out = 2;
  // Bound on every JetStream API call (EnsureStream, PullSubscribe, ...) and
  // on waiting for a JsPublish acknowledgement.
  int jetstream_timeout_ms = 5000;
  // Optional; run on a library thread (enqueue only). Not called for the
  // final close in ~Bus.
  std::function<void()> on_disconnected;
  std::function<void()> on_reconnected;
  // Optional; run on a library thread with the server's asynchronous error
  // (a permissions violation, a slow consumer): log it, do not block.
  std::function<void(const std::string& error)> on_async_error;
  // Authentication with an nkey (an Ed25519 key): its public form ("U...")
  // and a function that signs the server's nonce with it (raw 64 bytes).
  // bus_identity.h fills both from a key. Empty: connect anonymously.
  std::string nkey_public;
  std::function<std::string(std::string_view nonce)> sign_nonce;
  // Replies to this client's requests arrive under this prefix (its NATS
  // permissions allow subscribing only there). Empty: the library default.
  std::string inbox_prefix;
  // For tls:// URLs: the CA certificates that sign the servers' certificates
  // (PEM). Empty: the system's trust store.
  std::string tls_ca_file;
};

struct Message {
  std::string subject;
  std::string reply;  // empty unless the sender expects a reply (Request)
  std::string data;
  std::map<std::string, std::string> headers;  // first value of each header
};

class Bus {
 public:
  // Connects once; a server that is down at this point is an error
  // (Unavailable, message names the URL), not a background retry. After a
  // successful connect the Bus reconnects by itself (BusOptions) and
  // re-establishes its subscriptions.
  static Result<std::unique_ptr<Bus>> Connect(const BusOptions& options);

  Bus(const Bus&) = delete;
  Bus& operator=(const Bus&) = delete;
  // Flushes what was published, closes the connection and waits (bounded)
  // until the library has finished with callbacks into this object.
  // Subscriptions and consumers should be destroyed first; those that
  // outlive the Bus stop receiving and their calls return Unavailable.
  ~Bus();

  // ---- Core NATS (at most once) ----

  // Round trip to the server: everything sent before (including
  // subscriptions) has been processed when it returns OK. Unavailable when
  // not connected; DeadlineExceeded after timeout_ms.
  Status Flush(int timeout_ms);

  // Queues the message for sending; while reconnecting it is buffered by
  // the library (bounded buffer), so OK does not mean delivered.
  Status Publish(const std::string& subject, std::string_view data);

  // Returns the first reply. DeadlineExceeded after timeout_ms; Unavailable
  // at once when the server reports that nobody subscribes to `subject`, or
  // when not connected.
  Result<Message> Request(const std::string& subject, std::string_view data, int timeout_ms);

  // Replies to a message received through a Handler. InvalidArgument when
  // the request carries no reply subject.
  Status Respond(const Message& request, std::string_view data);

  // Must not throw (an exception is swallowed to protect the library thread).
  using Handler = std::function<void(Message)>;

  // Keeps a subscription alive; unsubscribes on destruction. Once the
  // destructor returns, the handler is not running and will not be called
  // again (unless the destructor runs inside that handler, or the handler
  // is stuck for more than 5 s). Thread-safe.
  class Subscription {
   public:
    struct State;  // defined in bus.cpp
    explicit Subscription(std::shared_ptr<State> state);
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

   private:
    std::shared_ptr<State> state_;
  };

  // Handlers of one subscription are called one at a time, in arrival order.
  Result<std::unique_ptr<Subscription>> Subscribe(const std::string& subject, Handler handler);
  // Each message goes to exactly one member of the queue group.
  Result<std::unique_ptr<Subscription>> QueueSubscribe(const std::string& subject,
                                                       const std::string& queue, Handler handler);

  // ---- JetStream (at least once) ----

  struct StreamConfig {
    std::string name;
    std::vector<std::string> subjects;
    bool work_queue = false;  // work-queue retention; otherwise limits
    int64_t duplicate_window_ms = 120000;
    bool file_storage = true;
    int64_t max_msg_size = -1;  // -1: the server's max_payload
    int64_t max_age_ms = 0;     // 0: keep messages forever (limits retention)
    int64_t max_bytes = -1;     // -1: no limit; else the oldest messages go first
    // Copies kept by a JetStream cluster (1..5; 3 on a 3-node cluster
    // survives the loss of one node). An existing stream is scaled to it.
    int replicas = 1;
  };
  // Creates the stream, or updates it when it exists with other settings.
  // Idempotent. FailedPrecondition when the server refuses the change (for
  // example retention or storage of an existing stream).
  Status EnsureStream(const StreamConfig& config);

  struct StreamState {
    uint64_t messages = 0;
    uint64_t bytes = 0;
    uint64_t first_sequence = 0;
    uint64_t last_sequence = 0;
    int64_t consumers = 0;
    int64_t replicas = 1;          // as configured
    std::string leader;            // the server leading the stream ("" on a single server)
    int64_t current_replicas = 0;  // followers caught up with the leader
  };
  // NotFound when the stream does not exist.
  Result<StreamState> GetStreamState(const std::string& stream);

  struct PublishAck {
    bool duplicate = false;  // the msg_id was seen inside the window: not stored again
    uint64_t sequence = 0;   // stream sequence (of the original when duplicate)
  };
  // Publishes and waits for the stream's acknowledgement. A non-empty msg_id
  // is sent as Nats-Msg-Id, so a repeat inside the stream's duplicate window
  // is acknowledged with duplicate=true and not stored twice. Unavailable on
  // timeout, when not connected, or when no stream captures `subject`
  // (JetStream answers nobody); InvalidArgument when the message is larger
  // than the stream or server allows.
  Result<PublishAck> JsPublish(const std::string& subject, std::string_view data,
                               const std::string& msg_id,
                               const std::map<std::string, std::string>& headers = {});

  // A message fetched from a pull consumer. Settle it exactly once with
  // Ack, Nak or Term (later calls are no-ops); InProgress extends ack_wait
  // and may be repeated. An unsettled message is redelivered after
  // ack_wait. Acks are sent without waiting for the server: a lost ack
  // means a redelivery, never a loss. Not thread-safe.
  class JsMessage {
   public:
    struct State;  // defined in bus.cpp
    explicit JsMessage(std::unique_ptr<State> state);
    ~JsMessage();
    JsMessage(const JsMessage&) = delete;
    JsMessage& operator=(const JsMessage&) = delete;

    const std::string& subject() const;
    const std::string& data() const;
    // First value of header `name`, or "" when absent.
    std::string header(const std::string& name) const;
    // 1 on first delivery, 2 on the first redelivery, ...
    uint64_t num_delivered() const;
    uint64_t stream_sequence() const;

    Status Ack();
    // Asks for redelivery, after delay_ms when > 0.
    Status Nak(int delay_ms = 0);
    // Never redeliver this message.
    Status Term();
    // Still working: restarts the ack_wait timer.
    Status InProgress();

   private:
    std::unique_ptr<State> state_;
  };

  // A durable pull consumer bound to an existing JetStream consumer.
  // Destroying it does not delete the server-side consumer. Thread-safe:
  // concurrent Fetch calls are serialized.
  class PullConsumer {
   public:
    struct State;  // defined in bus.cpp
    explicit PullConsumer(std::shared_ptr<State> state);
    ~PullConsumer();
    PullConsumer(const PullConsumer&) = delete;
    PullConsumer& operator=(const PullConsumer&) = delete;

    // Waits up to timeout_ms for up to max_messages. An empty vector means
    // nothing arrived in time (not an error). Unavailable when not
    // connected or JetStream does not answer.
    Result<std::vector<std::unique_ptr<JsMessage>>> Fetch(int max_messages, int timeout_ms);

    // Waits up to timeout_ms for one message, then returns at once with up
    // to max_messages of what the consumer has: one round trip, never a wait
    // for a full batch (JetStream's no_wait with an expiry, a one-shot pull
    // since nats-server 2.9). An empty vector means nothing arrived in time.
    Result<std::vector<std::unique_ptr<JsMessage>>> FetchAvailable(int max_messages, int timeout_ms);

   private:
    Result<std::vector<std::unique_ptr<JsMessage>>> DoFetch(int max_messages, int timeout_ms, bool available);
    std::shared_ptr<State> state_;
  };

  struct ConsumerConfig {
    std::string stream;
    std::string durable;
    std::string filter_subject;  // empty: every subject of the stream
    int64_t ack_wait_ms = 30000;
    int64_t max_deliver = -1;  // -1: unlimited
    int max_ack_pending = 1000;
    // Only bind to a consumer someone else created (never create or change
    // it): what a client with restricted NATS permissions can do.
    bool bind_only = false;
  };
  // Creates the durable consumer (explicit ack, deliver all) or updates it
  // when its settings differ, then binds a pull subscription to it.
  // NotFound when the stream does not exist; FailedPrecondition when the
  // server refuses to change an existing consumer.
  Result<std::unique_ptr<PullConsumer>> PullSubscribe(const ConsumerConfig& config);

  struct ConsumerState {
    uint64_t num_pending = 0;     // in the stream, not yet delivered
    int64_t num_ack_pending = 0;  // delivered, not yet acked
    int64_t num_redelivered = 0;
    uint64_t delivered_stream_sequence = 0;
    uint64_t ack_floor_stream_sequence = 0;
  };
  // NotFound when the stream or consumer does not exist.
  Result<ConsumerState> GetConsumerState(const std::string& stream, const std::string& durable);

  // True while the connection is up (false while reconnecting).
  bool connected() const;
  const std::string& url() const;
  // For log lines: "connected to nats://b:4222 (3 reconnects)",
  // "reconnecting (...)", "closed: <the library's last error>".
  std::string ConnectionState() const;

  struct Impl;  // defined in bus.cpp

 private:
  // The library's other JetStream objects reach the connection's JetStream
  // context (lib/nats/src/bus_internal.h).
  friend class KvBucket;
  friend class RecordStream;
  explicit Bus(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gatos

#endif  // GATOS_BUS_H_
