// The only translation unit that includes <nats/nats.h> (nats.c 3.4.1, Debian 12).
//
// nats.c facts this file relies on (read from its sources):
//  - The last-error text is per thread: read it right after the failing
//    call, on the calling thread (FromNats below).
//  - natsMsg_Ack and friends use msg->sub without taking a reference, so a
//    JsMessage keeps its pull subscription alive (shared PullConsumer::State).
//  - js_PullSubscribe that *creates* the consumer marks it "delete on
//    unsubscribe" (jsi->dc), durable or not. We therefore create/update the
//    consumer with js_AddConsumer/js_UpdateConsumer first and only bind to it.
//  - An async subscription's on-complete callback runs on its delivery thread
//    after the last handler call, also when the connection closes; it owns the
//    handler closure.
//  - Concurrent natsSubscription_Fetch on one subscription is an error.
#include "gatos/model/nats_cluster.h"
#include "gatos/nats/bus.h"

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

namespace gatos {
namespace {

constexpr int64_t kNanosPerMilli = 1000000;
// Bounds for shutdown paths; a stuck callback must not hang a destructor.
constexpr auto kCallbackQuiesceTimeout = std::chrono::seconds(5);
constexpr int64_t kCloseFlushTimeoutMs = 1000;

struct OptionsDeleter {
  void operator()(natsOptions* p) const { natsOptions_Destroy(p); }
};
struct ConnectionDeleter {
  void operator()(natsConnection* p) const { natsConnection_Destroy(p); }
};
struct JsCtxDeleter {
  void operator()(jsCtx* p) const { jsCtx_Destroy(p); }
};
struct SubscriptionDeleter {
  void operator()(natsSubscription* p) const { natsSubscription_Destroy(p); }
};
struct MsgDeleter {
  void operator()(natsMsg* p) const { natsMsg_Destroy(p); }
};
struct StreamInfoDeleter {
  void operator()(jsStreamInfo* p) const { jsStreamInfo_Destroy(p); }
};
struct ConsumerInfoDeleter {
  void operator()(jsConsumerInfo* p) const { jsConsumerInfo_Destroy(p); }
};
struct PubAckDeleter {
  void operator()(jsPubAck* p) const { jsPubAck_Destroy(p); }
};
struct MetaDataDeleter {
  void operator()(jsMsgMetaData* p) const { jsMsgMetaData_Destroy(p); }
};

using OptionsPtr = std::unique_ptr<natsOptions, OptionsDeleter>;
using ConnectionPtr = std::unique_ptr<natsConnection, ConnectionDeleter>;
using JsCtxPtr = std::unique_ptr<jsCtx, JsCtxDeleter>;
using SubscriptionPtr = std::unique_ptr<natsSubscription, SubscriptionDeleter>;
using MsgPtr = std::unique_ptr<natsMsg, MsgDeleter>;
using StreamInfoPtr = std::unique_ptr<jsStreamInfo, StreamInfoDeleter>;
using ConsumerInfoPtr = std::unique_ptr<jsConsumerInfo, ConsumerInfoDeleter>;
using PubAckPtr = std::unique_ptr<jsPubAck, PubAckDeleter>;
using MetaDataPtr = std::unique_ptr<jsMsgMetaData, MetaDataDeleter>;

StatusCode CodeFor(natsStatus s, jsErrCode jerr) {
  switch (static_cast<int>(jerr)) {
    case JSStreamNotFoundErr:
    case JSConsumerNotFoundErr:
      return StatusCode::kNotFound;
    case JSStreamMessageExceedsMaximumErr:
      return StatusCode::kInvalidArgument;
    // An expected-last-sequence header that does not match: a fence.
    case JSStreamWrongLastSequenceErr:
      return StatusCode::kAborted;
    case JSNotEnabledErr:
    case JSNotEnabledForAccountErr:
    case JSClusterNotAvailErr:
    // Too few cluster members known for the replicas asked: a cluster still
    // forming, or one that lost nodes. Retry.
    case JSClusterNoPeersErr:
      return StatusCode::kUnavailable;
    default:
      break;
  }
  switch (s) {
    case NATS_NO_SERVER:
    case NATS_CONNECTION_CLOSED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_STALE_CONNECTION:
    case NATS_IO_ERROR:
    case NATS_NO_RESPONDERS:
    case NATS_SLOW_CONSUMER:
    case NATS_DRAINING:
    case NATS_NOT_YET_CONNECTED:
    case NATS_TIMEOUT:  // callers that mean DeadlineExceeded map it themselves
      return StatusCode::kUnavailable;
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_NOT_PERMITTED:
      return StatusCode::kPermissionDenied;
    case NATS_INVALID_ARG:
    case NATS_INVALID_SUBJECT:
    case NATS_INVALID_TIMEOUT:
    case NATS_ADDRESS_MISSING:
    case NATS_MAX_PAYLOAD:
    case NATS_INVALID_QUEUE_NAME:
      return StatusCode::kInvalidArgument;
    case NATS_NOT_FOUND:
      return StatusCode::kNotFound;
    default:
      return StatusCode::kInternal;
  }
}

// Builds "<what>: <library text> [JetStream error N]", preferring the
// library's detailed last-error text (minus its "(file.c:123): " prefix)
// over the generic status text. Must run on the thread that made the failing
// call, right after it (nats.c keeps the last error per thread).
Status FromNats(natsStatus s, std::string_view what, jsErrCode jerr = static_cast<jsErrCode>(0),
                std::string_view hint = {}) {
  std::string text = natsStatus_GetText(s);
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  if (last == s && detail != nullptr && *detail != '\0') {
    std::string_view d(detail);
    if (!d.empty() && d.front() == '(') {
      size_t end = d.find("): ");
      if (end != std::string_view::npos) d.remove_prefix(end + 3);
    }
    if (!d.empty()) text = std::string(d);
  }
  std::string message(what);
  message += ": ";
  message += text;
  if (jerr != 0) message += " [JetStream error " + std::to_string(static_cast<int>(jerr)) + "]";
  if (!hint.empty()) {
    message += "; ";
    message += hint;
  }
  return Status(CodeFor(s, jerr), std::move(message));
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::map<std::string, std::string> ReadHeaders(natsMsg* msg) {
  std::map<std::string, std::string> headers;
  const char** keys = nullptr;
  int count = 0;
  // NATS_NOT_FOUND just means "no headers".
  if (natsMsgHeader_Keys(msg, &keys, &count) != NATS_OK) return headers;
  for (int i = 0; i < count; ++i) {
    const char* value = nullptr;
    if (natsMsgHeader_Get(msg, keys[i], &value) == NATS_OK && value != nullptr) {
      headers[keys[i]] = value;
    }
  }
  free(static_cast<void*>(keys));
  return headers;
}

Message ToMessage(natsMsg* msg) {
  Message m;
  m.subject = natsMsg_GetSubject(msg);
  if (const char* reply = natsMsg_GetReply(msg)) m.reply = reply;
  if (const char* data = natsMsg_GetData(msg)) {
    m.data.assign(data, static_cast<size_t>(natsMsg_GetDataLength(msg)));
  }
  m.headers = ReadHeaders(msg);
  return m;
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------
// Bus::Impl

struct Bus::Impl {
  BusOptions options;
  ConnectionPtr conn;
  JsCtxPtr js;

  // Set by the closed callback; ~Bus waits for it so no library callback
  // can reach a freed Impl.
  std::mutex mu;
  std::condition_variable cv;
  bool closed = false;
  std::atomic<bool> shutting_down{false};
  // Connection attempts abandoned because of the nats.c signature bug below.
  std::atomic<int> zero_led_signatures{0};

  // nats.c before 3.8.0 base64-encodes the nonce's signature only when its
  // first byte is not zero (src[0] == '\0' was its emptiness test; fixed
  // upstream in 3.8.0): one Ed25519 signature in 256 was silently left out
  // of CONNECT, and that connection failed authentication.
  static bool LibraryDropsZeroLedSignatures() {
    static const bool drops = nats_GetVersionNumber() < 0x030800;
    return drops;
  }

  bool Connected() const {
    return conn != nullptr && natsConnection_Status(conn.get()) == NATS_CONN_STATUS_CONNECTED;
  }

  Status NotConnected(std::string_view what) const {
    return UnavailableError(std::string(what) + ": not connected to " + options.url +
                            " (reconnecting or closed); retry later");
  }

  static void OnDisconnected(natsConnection*, void* closure) {
    auto* self = static_cast<Impl*>(closure);
    if (!self->shutting_down && self->options.on_disconnected) self->options.on_disconnected();
  }
  static void OnReconnected(natsConnection*, void* closure) {
    auto* self = static_cast<Impl*>(closure);
    if (!self->shutting_down && self->options.on_reconnected) self->options.on_reconnected();
  }
  static void OnClosed(natsConnection*, void* closure) {
    auto* self = static_cast<Impl*>(closure);
    std::lock_guard<std::mutex> lock(self->mu);
    self->closed = true;
    self->cv.notify_all();
  }
  static void OnAsyncError(natsConnection* nc, natsSubscription*, natsStatus err, void* closure) {
    auto* self = static_cast<Impl*>(closure);
    if (self->shutting_down || !self->options.on_async_error) return;
    const char* text = nullptr;
    natsConnection_GetLastError(nc, &text);
    std::string message = natsStatus_GetText(err);
    if (text && *text) message += std::string(": ") + text;
    self->options.on_async_error(message);
  }
  // nats.c frees the signature it is given (malloc'ed here).
  static natsStatus SignNonce(char** err, unsigned char** sig, int* len, const char* nonce, void* closure) {
    auto* self = static_cast<Impl*>(closure);
    std::string s = self->options.sign_nonce(nonce ? std::string_view(nonce) : std::string_view());
    if (s.empty()) {
      *err = strdup("no signature for the server's nonce");
      return NATS_ERR;
    }
    // Without a nonce (a server that asks for no authentication) nothing
    // checks the signature, and signing "" gives the same one every time.
    const bool server_checks = nonce != nullptr && *nonce != '\0';
    if (server_checks && s[0] == '\0' && LibraryDropsZeroLedSignatures()) {
      // The CONNECT would go out without "sig" and the server would refuse
      // it as an authorization violation (and a second one in a row makes
      // nats.c give up reconnecting). Fail this attempt instead: the next
      // one gets a new nonce, so a new signature.
      self->zero_led_signatures.fetch_add(1);
      *err = strdup("the signature of this nonce starts with a zero byte, which this nats.c drops; retrying");
      return NATS_ERR;
    }
    *sig = static_cast<unsigned char*>(std::malloc(s.size()));
    if (!*sig) return NATS_NO_MEMORY;
    std::memcpy(*sig, s.data(), s.size());
    *len = static_cast<int>(s.size());
    return NATS_OK;
  }
};

Result<std::unique_ptr<Bus>> Bus::Connect(const BusOptions& options) {
  if (options.url.empty()) return InvalidArgumentError("Bus::Connect: empty NATS url");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const std::string what = "connect to NATS at " + options.url;

  natsOptions* raw_opts = nullptr;
  natsStatus s = natsOptions_Create(&raw_opts);
  if (s != NATS_OK) return FromNats(s, what + ": natsOptions_Create");
  OptionsPtr opts(raw_opts);
  auto urls = SplitNatsUrls(options.url);
  if (!urls.ok()) return InvalidArgumentError("Bus::Connect: " + urls.status().message());
  std::vector<const char*> servers;
  for (const auto& u : *urls) servers.push_back(u.c_str());
  s = natsOptions_SetServers(opts.get(), servers.data(), static_cast<int>(servers.size()));
  // Try the members in the order given (the first is the nearest, say), not
  // shuffled; reconnects go to any member that answers.
  if (s == NATS_OK) s = natsOptions_SetNoRandomize(opts.get(), true);
  if (s == NATS_OK && !options.name.empty())
    s = natsOptions_SetName(opts.get(), options.name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts.get(), options.connect_timeout_ms);
  if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts.get(), true);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts.get(), options.max_reconnect);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts.get(), options.reconnect_wait_ms);
  if (s == NATS_OK && options.ping_interval_ms > 0) {
    s = natsOptions_SetPingInterval(opts.get(), options.ping_interval_ms);
  }
  if (s == NATS_OK && options.max_pings_out > 0) s = natsOptions_SetMaxPingsOut(opts.get(), options.max_pings_out);
  if (s == NATS_OK)
    s = natsOptions_SetDisconnectedCB(opts.get(), &Impl::OnDisconnected, impl.get());
  if (s == NATS_OK) s = natsOptions_SetReconnectedCB(opts.get(), &Impl::OnReconnected, impl.get());
  if (s == NATS_OK) s = natsOptions_SetClosedCB(opts.get(), &Impl::OnClosed, impl.get());
  if (s == NATS_OK) s = natsOptions_SetErrorHandler(opts.get(), &Impl::OnAsyncError, impl.get());
  if (s == NATS_OK && !options.nkey_public.empty() && options.sign_nonce) {
    s = natsOptions_SetNKey(opts.get(), options.nkey_public.c_str(), &Impl::SignNonce, impl.get());
  }
  if (s == NATS_OK && !options.inbox_prefix.empty()) {
    s = natsOptions_SetCustomInboxPrefix(opts.get(), options.inbox_prefix.c_str());
  }
  bool tls = options.url.find("tls://") != std::string::npos;
  if (s == NATS_OK && tls) s = natsOptions_SetSecure(opts.get(), true);
  if (s == NATS_OK && tls && !options.tls_ca_file.empty()) {
    s = natsOptions_LoadCATrustedCertificates(opts.get(), options.tls_ca_file.c_str());
  }
  if (s != NATS_OK) return FromNats(s, what + ": invalid options");

  natsConnection* raw_conn = nullptr;
  // An attempt abandoned for a zero-led signature (see SignNonce) is tried
  // again; each try has a fresh nonce, so eight in a row fail with odds of
  // 2^-64.
  for (int attempt = 0;; ++attempt) {
    int dropped = impl->zero_led_signatures.load();
    s = natsConnection_Connect(&raw_conn, opts.get());
    if (s == NATS_OK || attempt == 7 || impl->zero_led_signatures.load() == dropped) break;
  }
  // On failure nats.c releases the connection without running callbacks.
  if (s != NATS_OK) {
    return FromNats(s, what, static_cast<jsErrCode>(0), "is nats-server running there?");
  }
  impl->conn.reset(raw_conn);
  // From here on the connection may call back into impl: only ~Bus may
  // release it (it waits for the closed callback).
  std::unique_ptr<Bus> bus(new Bus(std::move(impl)));

  jsOptions js_opts;
  jsOptions_Init(&js_opts);
  js_opts.Wait = options.jetstream_timeout_ms;
  jsCtx* raw_js = nullptr;
  s = natsConnection_JetStream(&raw_js, bus->impl_->conn.get(), &js_opts);
  if (s != NATS_OK) return FromNats(s, what + ": JetStream context");
  bus->impl_->js.reset(raw_js);
  return bus;
}

Bus::Bus(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Bus::~Bus() {
  if (!impl_ || !impl_->conn) return;
  impl_->shutting_down = true;
  // Core publishes are fire-and-forget; give them a bounded chance to leave.
  if (impl_->Connected()) natsConnection_FlushTimeout(impl_->conn.get(), kCloseFlushTimeoutMs);
  // Flush + Close rather than Drain: a drain waits for every pull
  // subscription's queue to be consumed (until its timeout), and pending
  // JetStream messages are redelivered anyway.
  natsConnection_Close(impl_->conn.get());
  impl_->js.reset();
  impl_->conn.reset();
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (!impl_->cv.wait_for(lock, kCallbackQuiesceTimeout, [this] { return impl_->closed; })) {
    // The library still holds our closure pointer; leaking beats a
    // use-after-free on a library thread.
    lock.unlock();
    (void)impl_.release();
  }
}

bool Bus::connected() const { return impl_->Connected(); }

std::string Bus::ConnectionState() const {
  natsConnection* nc = impl_->conn.get();
  if (nc == nullptr) return "closed";
  std::string out;
  switch (natsConnection_Status(nc)) {
    case NATS_CONN_STATUS_CONNECTED: {
      char url[256] = {0};
      out = natsConnection_GetConnectedUrl(nc, url, sizeof(url)) == NATS_OK ? std::string("connected to ") + url
                                                                             : std::string("connected");
      break;
    }
    case NATS_CONN_STATUS_RECONNECTING:
      out = "reconnecting";
      break;
    case NATS_CONN_STATUS_CLOSED:
      out = "closed (the library stopped reconnecting)";
      break;
    case NATS_CONN_STATUS_CONNECTING:
      out = "connecting";
      break;
    default:
      out = "draining";
      break;
  }
  natsStatistics* stats = nullptr;
  uint64_t reconnects = 0;
  if (natsStatistics_Create(&stats) == NATS_OK) {
    if (natsConnection_GetStats(nc, stats) == NATS_OK) {
      (void)natsStatistics_GetCounts(stats, nullptr, nullptr, nullptr, nullptr, &reconnects);
    }
    natsStatistics_Destroy(stats);
  }
  out += " (" + std::to_string(reconnects) + " reconnects";
  const char* last = nullptr;
  if (natsConnection_GetLastError(nc, &last) != NATS_OK && last != nullptr && *last != '\0') {
    out += "; last error: " + std::string(last);
  }
  return out + ")";
}
const std::string& Bus::url() const { return impl_->options.url; }

// ---------------------------------------------------------------------------
// Core NATS

Status Bus::Flush(int timeout_ms) {
  const std::string what = "Flush to " + impl_->options.url;
  if (!impl_->Connected()) return impl_->NotConnected(what);
  natsStatus s = natsConnection_FlushTimeout(impl_->conn.get(), timeout_ms);
  if (s == NATS_TIMEOUT) {
    return DeadlineExceededError(what + ": no answer within " + std::to_string(timeout_ms) + " ms");
  }
  if (s != NATS_OK) return FromNats(s, what);
  return OkStatus();
}

Status Bus::Publish(const std::string& subject, std::string_view data) {
  natsStatus s = natsConnection_Publish(impl_->conn.get(), subject.c_str(), data.data(),
                                        static_cast<int>(data.size()));
  if (s != NATS_OK) return FromNats(s, "Publish to " + Quote(subject));
  return OkStatus();
}

Result<Message> Bus::Request(const std::string& subject, std::string_view data, int timeout_ms) {
  const std::string what = "Request to " + Quote(subject);
  if (!impl_->Connected()) return impl_->NotConnected(what);
  natsMsg* raw_reply = nullptr;
  natsStatus s = natsConnection_Request(&raw_reply, impl_->conn.get(), subject.c_str(), data.data(),
                                        static_cast<int>(data.size()), timeout_ms);
  MsgPtr reply(raw_reply);
  if (s == NATS_TIMEOUT) {
    return DeadlineExceededError(what + ": no reply within " + std::to_string(timeout_ms) + " ms");
  }
  if (s == NATS_NO_RESPONDERS) {
    return UnavailableError(what + ": no responders (nobody subscribes to this subject)");
  }
  if (s != NATS_OK) return FromNats(s, what);
  return ToMessage(reply.get());
}

Status Bus::Respond(const Message& request, std::string_view data) {
  if (request.reply.empty()) {
    return InvalidArgumentError("Respond to message on " + Quote(request.subject) +
                                ": it has no reply subject (not sent with Request)");
  }
  natsStatus s = natsConnection_Publish(impl_->conn.get(), request.reply.c_str(), data.data(),
                                        static_cast<int>(data.size()));
  if (s != NATS_OK) return FromNats(s, "Respond to request on " + Quote(request.subject));
  return OkStatus();
}

// Shared by the Subscription handle and the library's delivery thread. The
// library owns one reference (a heap shared_ptr passed as closure), released
// by the on-complete callback after the last handler call.
struct Bus::Subscription::State {
  Handler handler;
  SubscriptionPtr sub;
  std::string subject;

  std::mutex mu;
  std::condition_variable cv;
  bool completed = false;
  std::atomic<std::thread::id> delivering_thread{};

  static void OnMessage(natsConnection*, natsSubscription*, natsMsg* raw_msg, void* closure) {
    MsgPtr msg(raw_msg);
    auto& self = *static_cast<std::shared_ptr<State>*>(closure);
    if (!msg) return;
    self->delivering_thread = std::this_thread::get_id();
    try {
      self->handler(ToMessage(msg.get()));
    } catch (...) {
      // A throwing handler breaks its contract; an exception unwinding
      // through nats.c's delivery thread would terminate the process.
    }
    self->delivering_thread = std::thread::id();
  }
  static void OnComplete(void* closure) {
    auto* holder = static_cast<std::shared_ptr<State>*>(closure);
    {
      std::lock_guard<std::mutex> lock((*holder)->mu);
      (*holder)->completed = true;
      (*holder)->cv.notify_all();
    }
    delete holder;
  }
};

Bus::Subscription::Subscription(std::shared_ptr<State> state) : state_(std::move(state)) {}

Bus::Subscription::~Subscription() {
  if (!state_ || !state_->sub) return;
  // Fails harmlessly when the connection is already closed (the
  // subscription was closed with it).
  natsSubscription_Unsubscribe(state_->sub.get());
  if (state_->delivering_thread.load() == std::this_thread::get_id()) return;  // inside handler
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait_for(lock, kCallbackQuiesceTimeout, [this] { return state_->completed; });
}

namespace {

Result<std::unique_ptr<Bus::Subscription>> SubscribeImpl(natsConnection* conn,
                                                         const std::string& subject,
                                                         const std::string* queue,
                                                         Bus::Handler handler) {
  const std::string what = (queue ? "QueueSubscribe to " : "Subscribe to ") + Quote(subject) +
                           (queue ? " in queue " + Quote(*queue) : std::string());
  if (!handler) return InvalidArgumentError(what + ": empty handler");
  auto state = std::make_shared<Bus::Subscription::State>();
  state->handler = std::move(handler);
  state->subject = subject;
  auto* holder = new std::shared_ptr<Bus::Subscription::State>(state);

  natsSubscription* raw_sub = nullptr;
  natsStatus s =
      queue ? natsConnection_QueueSubscribe(&raw_sub, conn, subject.c_str(), queue->c_str(),
                                            &Bus::Subscription::State::OnMessage, holder)
            : natsConnection_Subscribe(&raw_sub, conn, subject.c_str(),
                                       &Bus::Subscription::State::OnMessage, holder);
  if (s != NATS_OK) {
    Status status = FromNats(s, what);
    delete holder;  // no subscription, so no callback can use it
    return status;
  }
  state->sub.reset(raw_sub);
  s = natsSubscription_SetOnCompleteCB(raw_sub, &Bus::Subscription::State::OnComplete, holder);
  if (s != NATS_OK) {
    // Already closed (connection closing): a handler call may be in flight,
    // so the holder is leaked rather than freed under it.
    Status status = FromNats(s, what + ": set completion callback");
    natsSubscription_Unsubscribe(raw_sub);
    return status;
  }
  return std::make_unique<Bus::Subscription>(std::move(state));
}

}  // namespace

Result<std::unique_ptr<Bus::Subscription>> Bus::Subscribe(const std::string& subject,
                                                          Handler handler) {
  return SubscribeImpl(impl_->conn.get(), subject, nullptr, std::move(handler));
}

Result<std::unique_ptr<Bus::Subscription>> Bus::QueueSubscribe(const std::string& subject,
                                                               const std::string& queue,
                                                               Handler handler) {
  return SubscribeImpl(impl_->conn.get(), subject, &queue, std::move(handler));
}

// ---------------------------------------------------------------------------
// JetStream: streams

Status Bus::EnsureStream(const StreamConfig& config) {
  const std::string what = "EnsureStream " + Quote(config.name);
  if (config.name.empty()) return InvalidArgumentError(what + ": empty stream name");
  if (config.subjects.empty()) return InvalidArgumentError(what + ": no subjects");
  if (!impl_->Connected()) return impl_->NotConnected(what);

  std::vector<const char*> subjects;
  for (const auto& subject : config.subjects) subjects.push_back(subject.c_str());
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = config.name.c_str();
  cfg.Subjects = subjects.data();
  cfg.SubjectsLen = static_cast<int>(subjects.size());
  cfg.Retention = config.work_queue ? js_WorkQueuePolicy : js_LimitsPolicy;
  cfg.Storage = config.file_storage ? js_FileStorage : js_MemoryStorage;
  cfg.Duplicates = config.duplicate_window_ms * kNanosPerMilli;
  cfg.MaxMsgSize = static_cast<int32_t>(config.max_msg_size);
  cfg.MaxAge = config.max_age_ms * kNanosPerMilli;
  cfg.MaxBytes = config.max_bytes;
  if (config.replicas < 1 || config.replicas > 5) {
    return InvalidArgumentError(what + ": replicas must be 1..5, not " + std::to_string(config.replicas));
  }
  cfg.Replicas = config.replicas;

  // Two rounds: a concurrent creator can win between our lookup and add.
  for (int round = 0; round < 2; ++round) {
    jsErrCode jerr = static_cast<jsErrCode>(0);
    jsStreamInfo* raw_info = nullptr;
    natsStatus s =
        js_GetStreamInfo(&raw_info, impl_->js.get(), config.name.c_str(), nullptr, &jerr);
    StreamInfoPtr info(raw_info);
    if (s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr) {
      jsStreamInfo* raw_added = nullptr;
      jerr = static_cast<jsErrCode>(0);
      s = js_AddStream(&raw_added, impl_->js.get(), &cfg, nullptr, &jerr);
      StreamInfoPtr added(raw_added);
      if (s == NATS_OK) return OkStatus();
      if (jerr == JSStreamNameExistErr && round == 0) continue;
      if (jerr != 0 && CodeFor(s, jerr) == StatusCode::kInternal) {
        return Status(StatusCode::kFailedPrecondition,
                      FromNats(s, what + ": create", jerr).message());
      }
      return FromNats(s, what + ": create", jerr);
    }
    if (s != NATS_OK) return FromNats(s, what + ": lookup", jerr);

    const jsStreamConfig* have = info->Config;
    std::vector<std::string> have_subjects;
    for (int i = 0; i < have->SubjectsLen; ++i) have_subjects.emplace_back(have->Subjects[i]);
    const bool same = Sorted(have_subjects) == Sorted(config.subjects) &&
                      have->Retention == cfg.Retention && have->Storage == cfg.Storage &&
                      have->Duplicates == cfg.Duplicates && have->MaxMsgSize == cfg.MaxMsgSize &&
                      have->MaxAge == cfg.MaxAge && have->MaxBytes == cfg.MaxBytes && std::max<int64_t>(have->Replicas, 1) == cfg.Replicas;
    if (same) return OkStatus();

    jsStreamInfo* raw_updated = nullptr;
    jerr = static_cast<jsErrCode>(0);
    s = js_UpdateStream(&raw_updated, impl_->js.get(), &cfg, nullptr, &jerr);
    StreamInfoPtr updated(raw_updated);
    if (s == NATS_OK) return OkStatus();
    Status status = FromNats(s, what + ": update of existing stream", jerr,
                             "delete the stream or choose another name if the server cannot "
                             "change this setting");
    // The server answered and refused: a configuration conflict, not a bug.
    if (jerr != 0 && status.code() == StatusCode::kInternal) {
      return Status(StatusCode::kFailedPrecondition, status.message());
    }
    return status;
  }
  return AbortedError(what + ": stream kept changing while being created");
}

Result<Bus::StreamState> Bus::GetStreamState(const std::string& stream) {
  if (!impl_->Connected()) return impl_->NotConnected("GetStreamState " + Quote(stream));
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsStreamInfo* raw_info = nullptr;
  natsStatus s = js_GetStreamInfo(&raw_info, impl_->js.get(), stream.c_str(), nullptr, &jerr);
  StreamInfoPtr info(raw_info);
  if (s != NATS_OK) return FromNats(s, "GetStreamState " + Quote(stream), jerr);
  StreamState state;
  state.messages = info->State.Msgs;
  state.bytes = info->State.Bytes;
  state.first_sequence = info->State.FirstSeq;
  state.last_sequence = info->State.LastSeq;
  state.consumers = info->State.Consumers;
  if (info->Config) state.replicas = std::max<int64_t>(info->Config->Replicas, 1);
  if (info->Cluster) {
    if (info->Cluster->Leader) state.leader = info->Cluster->Leader;
    for (int i = 0; i < info->Cluster->ReplicasLen; ++i) {
      if (info->Cluster->Replicas[i] && info->Cluster->Replicas[i]->Current) ++state.current_replicas;
    }
  }
  return state;
}

Result<Bus::PublishAck> Bus::JsPublish(const std::string& subject, std::string_view data,
                                       const std::string& msg_id,
                                       const std::map<std::string, std::string>& headers) {
  const std::string what =
      "JsPublish to " + Quote(subject) +
      (msg_id.empty() ? std::string() : " (Nats-Msg-Id " + Quote(msg_id) + ")");
  // Fail fast instead of letting the library buffer the publish while it
  // reconnects and then time out waiting for the ack.
  if (!impl_->Connected()) return impl_->NotConnected(what);

  natsMsg* raw_msg = nullptr;
  natsStatus s = natsMsg_Create(&raw_msg, subject.c_str(), nullptr, data.data(),
                                static_cast<int>(data.size()));
  if (s != NATS_OK) return FromNats(s, what + ": build message");
  MsgPtr msg(raw_msg);
  for (const auto& [key, value] : headers) {
    s = natsMsgHeader_Set(msg.get(), key.c_str(), value.c_str());
    if (s != NATS_OK) return FromNats(s, what + ": header " + Quote(key));
  }
  jsPubOptions pub_opts;
  jsPubOptions_Init(&pub_opts);
  if (!msg_id.empty()) pub_opts.MsgId = msg_id.c_str();
  pub_opts.MaxWait = impl_->options.jetstream_timeout_ms;

  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsPubAck* raw_ack = nullptr;
  s = js_PublishMsg(&raw_ack, impl_->js.get(), msg.get(), &pub_opts, &jerr);
  PubAckPtr ack(raw_ack);
  if (s == NATS_NO_RESPONDERS) {
    return UnavailableError(what +
                            ": no responders (no stream captures this subject, or JetStream "
                            "is not ready yet)");
  }
  if (s == NATS_TIMEOUT) {
    return UnavailableError(what + ": no acknowledgement within " +
                            std::to_string(impl_->options.jetstream_timeout_ms) + " ms");
  }
  if (s != NATS_OK) return FromNats(s, what, jerr);
  PublishAck result;
  result.duplicate = ack->Duplicate;
  result.sequence = ack->Sequence;
  return result;
}

// ---------------------------------------------------------------------------
// JetStream: pull consumers

struct Bus::PullConsumer::State {
  SubscriptionPtr sub;
  std::string stream;
  std::string durable;
  std::string url;
  natsConnection* conn = nullptr;  // not owned; the subscription holds a reference
  std::mutex fetch_mu;             // nats.c refuses concurrent Fetch on one sub
};

struct Bus::JsMessage::State {
  // Keeps the subscription alive: natsMsg_Ack uses msg->sub unreferenced.
  std::shared_ptr<PullConsumer::State> consumer;
  MsgPtr msg;
  std::string subject;
  std::string data;
  uint64_t num_delivered = 0;
  uint64_t stream_sequence = 0;
};

Bus::JsMessage::JsMessage(std::unique_ptr<State> state) : state_(std::move(state)) {}
Bus::JsMessage::~JsMessage() = default;

const std::string& Bus::JsMessage::subject() const { return state_->subject; }
const std::string& Bus::JsMessage::data() const { return state_->data; }
uint64_t Bus::JsMessage::num_delivered() const { return state_->num_delivered; }
uint64_t Bus::JsMessage::stream_sequence() const { return state_->stream_sequence; }

std::string Bus::JsMessage::header(const std::string& name) const {
  const char* value = nullptr;
  if (natsMsgHeader_Get(state_->msg.get(), name.c_str(), &value) != NATS_OK || !value) return "";
  return value;
}

namespace {
Status Settle(natsStatus s, const char* verb, const std::string& subject, uint64_t sequence) {
  if (s == NATS_OK) return OkStatus();
  return FromNats(
      s, std::string(verb) + " of message " + std::to_string(sequence) + " on " + Quote(subject));
}
}  // namespace

Status Bus::JsMessage::Ack() {
  return Settle(natsMsg_Ack(state_->msg.get(), nullptr), "Ack", state_->subject,
                state_->stream_sequence);
}

Status Bus::JsMessage::Nak(int delay_ms) {
  natsStatus s = delay_ms > 0 ? natsMsg_NakWithDelay(state_->msg.get(), delay_ms, nullptr)
                              : natsMsg_Nak(state_->msg.get(), nullptr);
  return Settle(s, "Nak", state_->subject, state_->stream_sequence);
}

Status Bus::JsMessage::Term() {
  return Settle(natsMsg_Term(state_->msg.get(), nullptr), "Term", state_->subject,
                state_->stream_sequence);
}

Status Bus::JsMessage::InProgress() {
  return Settle(natsMsg_InProgress(state_->msg.get(), nullptr), "InProgress", state_->subject,
                state_->stream_sequence);
}

Bus::PullConsumer::PullConsumer(std::shared_ptr<State> state) : state_(std::move(state)) {}

// The subscription is unsubscribed when the last JsMessage fetched through it
// is gone (shared state). The consumer was created by us, not by
// js_PullSubscribe, so unsubscribing does not delete it on the server.
Bus::PullConsumer::~PullConsumer() = default;

Result<std::vector<std::unique_ptr<Bus::JsMessage>>> Bus::PullConsumer::Fetch(int max_messages,
                                                                              int timeout_ms) {
  return DoFetch(max_messages, timeout_ms, false);
}

Result<std::vector<std::unique_ptr<Bus::JsMessage>>> Bus::PullConsumer::FetchAvailable(int max_messages,
                                                                                     int timeout_ms) {
  return DoFetch(max_messages, timeout_ms, true);
}

Result<std::vector<std::unique_ptr<Bus::JsMessage>>> Bus::PullConsumer::DoFetch(int max_messages,
                                                                                int timeout_ms,
                                                                                bool available) {
  const std::string what =
      "Fetch from consumer " + Quote(state_->durable) + " of stream " + Quote(state_->stream);
  if (max_messages <= 0 || timeout_ms <= 0) {
    return InvalidArgumentError(what + ": max_messages and timeout_ms must be positive");
  }
  std::vector<std::unique_ptr<JsMessage>> out;
  std::lock_guard<std::mutex> lock(state_->fetch_mu);
  if (natsConnection_Status(state_->conn) != NATS_CONN_STATUS_CONNECTED) {
    return UnavailableError(what + ": not connected to " + state_->url +
                            " (reconnecting or closed); retry later");
  }
  natsMsgList list{};
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s;
  if (available) {
    // natsSubscription_Fetch with a batch of two or more waits for the whole
    // batch (or the timeout) once nothing is pending; this request ends with
    // the first messages there are (the server's 404 after them).
    jsFetchRequest req;
    jsFetchRequest_Init(&req);
    req.Batch = max_messages;
    req.NoWait = true;
    req.Expires = static_cast<int64_t>(timeout_ms) * 1000000;
    s = natsSubscription_FetchRequest(&list, state_->sub.get(), &req);
    if (s == NATS_NOT_FOUND) return out;  // nothing in time
  } else {
    s = natsSubscription_Fetch(&list, state_->sub.get(), max_messages, timeout_ms, &jerr);
  }
  if (s == NATS_TIMEOUT) return out;  // nothing arrived in time
  if (s == NATS_NO_RESPONDERS) {
    return UnavailableError(what +
                            ": no responders (JetStream not ready, or the consumer is gone)");
  }
  if (s != NATS_OK) return FromNats(s, what, jerr);
  for (int i = 0; i < list.Count; ++i) {
    auto state = std::make_unique<JsMessage::State>();
    state->consumer = state_;
    state->msg.reset(list.Msgs[i]);
    list.Msgs[i] = nullptr;  // ownership moved; natsMsgList_Destroy skips NULLs
    natsMsg* m = state->msg.get();
    state->subject = natsMsg_GetSubject(m);
    if (const char* data = natsMsg_GetData(m)) {
      state->data.assign(data, static_cast<size_t>(natsMsg_GetDataLength(m)));
    }
    jsMsgMetaData* raw_meta = nullptr;
    if (natsMsg_GetMetaData(&raw_meta, m) == NATS_OK) {
      MetaDataPtr meta(raw_meta);
      state->num_delivered = meta->NumDelivered;
      state->stream_sequence = meta->Sequence.Stream;
    }
    out.push_back(std::make_unique<JsMessage>(std::move(state)));
  }
  natsMsgList_Destroy(&list);
  return out;
}

namespace {

bool SameConsumer(const jsConsumerConfig& have, const jsConsumerConfig& want) {
  auto str = [](const char* s) { return std::string(s ? s : ""); };
  return str(have.FilterSubject) == str(want.FilterSubject) && have.AckWait == want.AckWait &&
         have.MaxDeliver == want.MaxDeliver && have.MaxAckPending == want.MaxAckPending &&
         have.AckPolicy == want.AckPolicy;
}

}  // namespace

Result<std::unique_ptr<Bus::PullConsumer>> Bus::PullSubscribe(const ConsumerConfig& config) {
  const std::string what =
      "PullSubscribe consumer " + Quote(config.durable) + " of stream " + Quote(config.stream);
  if (config.stream.empty() || config.durable.empty()) {
    return InvalidArgumentError(what + ": stream and durable names are required");
  }
  if (!impl_->Connected()) return impl_->NotConnected(what);
  jsConsumerConfig cc;
  jsConsumerConfig_Init(&cc);
  cc.Durable = config.durable.c_str();
  cc.AckPolicy = js_AckExplicit;
  cc.DeliverPolicy = js_DeliverAll;
  cc.ReplayPolicy = js_ReplayInstant;
  cc.AckWait = config.ack_wait_ms * kNanosPerMilli;
  cc.MaxDeliver = config.max_deliver;
  cc.MaxAckPending = config.max_ack_pending;
  if (!config.filter_subject.empty()) cc.FilterSubject = config.filter_subject.c_str();

  bool ready = false;
  for (int round = 0; round < 2 && !ready; ++round) {
    jsErrCode jerr = static_cast<jsErrCode>(0);
    jsConsumerInfo* raw_info = nullptr;
    natsStatus s = js_GetConsumerInfo(&raw_info, impl_->js.get(), config.stream.c_str(),
                                      config.durable.c_str(), nullptr, &jerr);
    ConsumerInfoPtr info(raw_info);
    if (jerr == JSStreamNotFoundErr) return FromNats(s, what + ": lookup", jerr);
    if (config.bind_only) {
      if (s != NATS_OK) return FromNats(s, what + ": lookup (bind only: gatosd creates this consumer)", jerr);
      ready = true;
      break;
    }
    if (s == NATS_NOT_FOUND || jerr == JSConsumerNotFoundErr) {
      jsConsumerInfo* raw_added = nullptr;
      jerr = static_cast<jsErrCode>(0);
      s = js_AddConsumer(&raw_added, impl_->js.get(), config.stream.c_str(), &cc, nullptr, &jerr);
      ConsumerInfoPtr added(raw_added);
      if (s == NATS_OK) {
        ready = true;
        break;
      }
      if (jerr == JSConsumerNameExistErr && round == 0) continue;  // lost a creation race
      Status status = FromNats(s, what + ": create", jerr);
      if (jerr != 0 && status.code() == StatusCode::kInternal) {
        return Status(StatusCode::kFailedPrecondition, status.message());
      }
      return status;
    }
    if (s != NATS_OK) return FromNats(s, what + ": lookup", jerr);
    if (!SameConsumer(*info->Config, cc)) {
      jsConsumerInfo* raw_updated = nullptr;
      jerr = static_cast<jsErrCode>(0);
      s = js_UpdateConsumer(&raw_updated, impl_->js.get(), config.stream.c_str(), &cc, nullptr,
                            &jerr);
      ConsumerInfoPtr updated(raw_updated);
      if (s != NATS_OK) {
        Status status = FromNats(s, what + ": update of existing consumer", jerr,
                                 "delete the consumer or choose another durable name");
        if (jerr != 0 && status.code() == StatusCode::kInternal) {
          return Status(StatusCode::kFailedPrecondition, status.message());
        }
        return status;
      }
    }
    ready = true;
  }
  if (!ready) return AbortedError(what + ": consumer kept changing while being created");

  // Bind to the existing consumer (Stream + Consumer): the library then does
  // not own it and will not delete it on unsubscribe.
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = config.stream.c_str();
  so.Consumer = config.durable.c_str();
  natsSubscription* raw_sub = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s =
      js_PullSubscribe(&raw_sub, impl_->js.get(),
                       config.filter_subject.empty() ? nullptr : config.filter_subject.c_str(),
                       config.durable.c_str(), nullptr, &so, &jerr);
  if (s != NATS_OK) return FromNats(s, what + ": bind", jerr);
  auto state = std::make_shared<PullConsumer::State>();
  state->sub.reset(raw_sub);
  state->stream = config.stream;
  state->durable = config.durable;
  state->url = impl_->options.url;
  state->conn = impl_->conn.get();
  return std::make_unique<PullConsumer>(std::move(state));
}

Result<Bus::ConsumerState> Bus::GetConsumerState(const std::string& stream,
                                                 const std::string& durable) {
  const std::string what = "GetConsumerState " + Quote(durable) + " of stream " + Quote(stream);
  if (!impl_->Connected()) return impl_->NotConnected(what);
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsConsumerInfo* raw_info = nullptr;
  natsStatus s = js_GetConsumerInfo(&raw_info, impl_->js.get(), stream.c_str(), durable.c_str(),
                                    nullptr, &jerr);
  ConsumerInfoPtr info(raw_info);
  if (s != NATS_OK) return FromNats(s, what, jerr);
  ConsumerState state;
  state.num_pending = info->NumPending;
  state.num_ack_pending = info->NumAckPending;
  state.num_redelivered = info->NumRedelivered;
  state.delivered_stream_sequence = info->Delivered.Stream;
  state.ack_floor_stream_sequence = info->AckFloor.Stream;
  return state;
}

// ---------------------------------------------------------------------------
// For the library's other files (bus_internal.h)

namespace nats_internal {
jsCtx* JetStream(Bus::Impl& impl) { return impl.js.get(); }
natsConnection* Connection(Bus::Impl& impl) { return impl.conn.get(); }
bool Connected(const Bus::Impl& impl) { return impl.Connected(); }
int64_t MaxPayload(Bus::Impl& impl) { return impl.conn ? natsConnection_GetMaxPayload(impl.conn.get()) : 0; }
Status FromNatsError(natsStatus s, std::string_view what, jsErrCode jerr) { return FromNats(s, what, jerr); }
}  // namespace nats_internal

}  // namespace gatos
