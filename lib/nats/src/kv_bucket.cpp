#include "gatos/nats/kv_bucket.h"

#include <algorithm>

#include "bus_internal.h"

namespace gatos {
namespace {

constexpr int64_t kNanosPerMilli = 1'000'000;

struct EntryDeleter {
  void operator()(kvEntry* e) const { kvEntry_Destroy(e); }
};
struct StatusDeleter {
  void operator()(kvStatus* s) const { kvStatus_Destroy(s); }
};
using EntryPtr = std::unique_ptr<kvEntry, EntryDeleter>;
using KvStatusPtr = std::unique_ptr<kvStatus, StatusDeleter>;

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// A call the server answered with an error (not a lost connection or a
// timeout): with an expected revision, a revision that did not match.
bool ServerRefused(natsStatus s) { return s == NATS_ERR; }

}  // namespace

struct KvBucket::Impl {
  Bus::Impl* bus = nullptr;
  kvStore* kv = nullptr;
  jsCtx* js = nullptr;  // own context (KvBucketConfig::timeout_ms), or null: the Bus's
  int64_t timeout_ms = 0;
  std::string name;
  ~Impl() {
    if (kv) kvStore_Destroy(kv);
    if (js) jsCtx_Destroy(js);
  }
};

KvBucket::KvBucket(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KvBucket::~KvBucket() = default;
const std::string& KvBucket::name() const { return impl_->name; }

Result<std::unique_ptr<KvBucket>> KvBucket::Open(Bus& bus, const KvBucketConfig& config) {
  const std::string what = "KV bucket " + Quote(config.name);
  if (config.name.empty()) return InvalidArgumentError(what + ": empty name");
  if (config.ttl_ms != 0 && config.ttl_ms < 100) {
    return InvalidArgumentError(what + ": a TTL of " + std::to_string(config.ttl_ms) + " ms is below 100 ms");
  }
  if (config.replicas < 1 || config.replicas > 5) {
    return InvalidArgumentError(what + ": replicas must be 1..5, not " + std::to_string(config.replicas));
  }
  Bus::Impl& b = *bus.impl_;
  if (!nats_internal::Connected(b)) return UnavailableError(what + ": not connected to NATS; retry later");
  auto impl = std::make_unique<Impl>();
  impl->bus = &b;
  impl->name = config.name;
  jsCtx* js = nats_internal::JetStream(b);
  if (config.timeout_ms > 0) {
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = config.timeout_ms;
    natsStatus made = natsConnection_JetStream(&impl->js, nats_internal::Connection(b), &jo);
    if (made != NATS_OK) return nats_internal::FromNatsError(made, what + ": JetStream context");
    js = impl->js;
    impl->timeout_ms = config.timeout_ms;
  }
  natsStatus s = js_KeyValue(&impl->kv, js, config.name.c_str());
  if (s == NATS_NOT_FOUND) {
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = config.name.c_str();
    kc.History = 1;
    kc.TTL = config.ttl_ms * kNanosPerMilli;  // nanoseconds in nats.c 3.4
    kc.Replicas = config.replicas;
    kc.StorageType = config.file_storage ? js_FileStorage : js_MemoryStorage;
    s = js_CreateKeyValue(&impl->kv, js, &kc);
    if (s != NATS_OK) {
      // A concurrent creator may have won.
      natsStatus again = js_KeyValue(&impl->kv, js, config.name.c_str());
      if (again != NATS_OK) return nats_internal::FromNatsError(s, what + ": create");
    }
  } else if (s != NATS_OK) {
    return nats_internal::FromNatsError(s, what + ": lookup");
  }
  // An existing bucket must have the TTL asked for: the election's safety
  // rests on it.
  kvStatus* raw = nullptr;
  s = kvStore_Status(&raw, impl->kv);
  KvStatusPtr st(raw);
  if (s != NATS_OK) return nats_internal::FromNatsError(s, what + ": status");
  const int64_t have_ttl = kvStatus_TTL(st.get()) / kNanosPerMilli;
  const int64_t have_replicas = kvStatus_Replicas(st.get());
  if (have_ttl != config.ttl_ms || std::max<int64_t>(have_replicas, 1) != config.replicas) {
    return FailedPreconditionError(what + " exists with a TTL of " + std::to_string(have_ttl) + " ms and " +
                                   std::to_string(have_replicas) + " replicas, not " +
                                   std::to_string(config.ttl_ms) + " ms and " + std::to_string(config.replicas) +
                                   "; delete it (nats kv del " + config.name + ") when no replica runs");
  }
  return std::unique_ptr<KvBucket>(new KvBucket(std::move(impl)));
}

Result<std::unique_ptr<KvBucket>> KvBucket::OpenExisting(Bus& bus, const std::string& name) {
  const std::string what = "KV bucket " + Quote(name);
  Bus::Impl& b = *bus.impl_;
  if (!nats_internal::Connected(b)) return UnavailableError(what + ": not connected to NATS; retry later");
  auto impl = std::make_unique<Impl>();
  impl->bus = &b;
  impl->name = name;
  natsStatus s = js_KeyValue(&impl->kv, nats_internal::JetStream(b), name.c_str());
  if (s == NATS_NOT_FOUND) return NotFoundError(what + " does not exist");
  if (s != NATS_OK) return nats_internal::FromNatsError(s, what + ": lookup");
  return std::unique_ptr<KvBucket>(new KvBucket(std::move(impl)));
}

Status KvBucket::Put(const std::string& key, std::string_view value) {
  const std::string what = "put " + Quote(key) + " in KV bucket " + Quote(impl_->name);
  if (!nats_internal::Connected(*impl_->bus)) return UnavailableError(what + ": not connected to NATS; retry later");
  uint64_t rev = 0;
  natsStatus s = kvStore_Put(&rev, impl_->kv, key.c_str(), value.data(), static_cast<int>(value.size()));
  if (s != NATS_OK) return nats_internal::FromNatsError(s, what);
  return OkStatus();
}

Result<std::vector<std::string>> KvBucket::Keys() {
  const std::string what = "keys of KV bucket " + Quote(impl_->name);
  if (!nats_internal::Connected(*impl_->bus)) return UnavailableError(what + ": not connected to NATS; retry later");
  kvKeysList list{};
  natsStatus s = kvStore_Keys(&list, impl_->kv, nullptr);
  std::vector<std::string> out;
  if (s == NATS_NOT_FOUND) return out;  // no keys
  if (s != NATS_OK) return nats_internal::FromNatsError(s, what);
  for (int i = 0; i < list.Count; ++i) out.emplace_back(list.Keys[i]);
  kvKeysList_Destroy(&list);
  return out;
}

Result<uint64_t> KvBucket::Create(const std::string& key, std::string_view value) {
  const std::string what = "create " + Quote(key) + " in KV bucket " + Quote(impl_->name);
  if (!nats_internal::Connected(*impl_->bus)) return UnavailableError(what + ": not connected to NATS; retry later");
  // Read first: a create the server refuses (the key exists) is a failed
  // proposal in the bucket's Raft group, and replicas that try every 250 ms
  // while another leads make hundreds a minute. nats-server 2.9 counts
  // them per node (clfs); after the bucket's stream changed leader, the
  // counts of the nodes differed and the new leader stalled every write
  // ("has high message lag"): no keep, no create, no leader for minutes.
  // A read is no proposal; the create below stays the only arbiter (a
  // read may be stale either way).
  auto existing = LastRevision(key);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    return AlreadyExistsError(what + ": it exists (revision " + std::to_string(**existing) + ")");
  }
  uint64_t rev = 0;
  natsStatus s = kvStore_Create(&rev, impl_->kv, key.c_str(), value.data(), static_cast<int>(value.size()));
  if (s == NATS_OK) return rev;
  Status failed = nats_internal::FromNatsError(s, what);
  if (!ServerRefused(s)) return failed;
  auto e = Get(key);
  if (e.ok() && e->has_value()) {
    return AlreadyExistsError(what + ": it exists (revision " + std::to_string((*e)->revision) + ")");
  }
  return Status(StatusCode::kAborted, failed.message());
}

Result<std::optional<KvBucket::Entry>> KvBucket::LastEntry(const std::string& key, const std::string& what) {
  if (!nats_internal::Connected(*impl_->bus)) return UnavailableError(what + ": not connected to NATS; retry later");
  const std::string stream = "KV_" + impl_->name;
  const std::string subject = "$KV." + impl_->name + "." + key;
  jsOptions jo;
  jsOptions_Init(&jo);
  if (impl_->timeout_ms > 0) jo.Wait = impl_->timeout_ms;
  natsMsg* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetLastMsg(&raw, impl_->js ? impl_->js : nats_internal::JetStream(*impl_->bus), stream.c_str(),
                               subject.c_str(), &jo, &jerr);
  std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
  if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return std::optional<Entry>();
  if (s != NATS_OK) return nats_internal::FromNatsError(s, what, jerr);
  // A delete or a purge leaves a marker, not a value.
  const char* op = nullptr;
  if (natsMsgHeader_Get(msg.get(), "KV-Operation", &op) == NATS_OK && op != nullptr) {
    const std::string o(op);
    if (o == "DEL" || o == "PURGE") return std::optional<Entry>();
  }
  Entry e;
  if (const char* d = natsMsg_GetData(msg.get())) e.value.assign(d, static_cast<size_t>(natsMsg_GetDataLength(msg.get())));
  e.revision = natsMsg_GetSequence(msg.get());
  return std::optional<Entry>(std::move(e));
}

Result<std::optional<uint64_t>> KvBucket::LastRevision(const std::string& key) {
  GATOS_ASSIGN_OR_RETURN(std::optional<Entry> e,
                         LastEntry(key, "read the last revision of " + Quote(key) + " in KV bucket " + Quote(impl_->name)));
  if (!e) return std::optional<uint64_t>();
  return std::optional<uint64_t>(e->revision);
}

Result<std::vector<std::pair<std::string, KvBucket::Entry>>> KvBucket::LatestUnder(const std::string& prefix) {
  const std::string what = "read the keys under " + Quote(prefix) + " in KV bucket " + Quote(impl_->name);
  if (!nats_internal::Connected(*impl_->bus)) return UnavailableError(what + ": not connected to NATS; retry later");
  const std::string stream = "KV_" + impl_->name;
  const std::string subjects = "$KV." + impl_->name + ".";
  const std::string filter = subjects + prefix + ">";
  jsOptions jo;
  jsOptions_Init(&jo);
  if (impl_->timeout_ms > 0) jo.Wait = impl_->timeout_ms;
  jo.Stream.Info.SubjectsFilter = filter.c_str();
  jsStreamInfo* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&raw, impl_->js ? impl_->js : nats_internal::JetStream(*impl_->bus), stream.c_str(),
                                  &jo, &jerr);
  std::unique_ptr<jsStreamInfo, void (*)(jsStreamInfo*)> info(raw, jsStreamInfo_Destroy);
  if (s != NATS_OK) return nats_internal::FromNatsError(s, what, jerr);
  std::vector<std::string> keys;
  if (const jsStreamStateSubjects* list = info->State.Subjects) {
    for (int i = 0; i < list->Count; ++i) {
      const char* subject = list->List[i].Subject;
      if (subject == nullptr || std::string_view(subject).substr(0, subjects.size()) != subjects) continue;
      keys.emplace_back(subject + subjects.size());
    }
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::pair<std::string, Entry>> out;
  for (const auto& key : keys) {
    GATOS_ASSIGN_OR_RETURN(std::optional<Entry> e, LastEntry(key, what));
    if (e) out.emplace_back(key, std::move(*e));  // expired or deleted since: not there
  }
  return out;
}

Result<uint64_t> KvBucket::Update(const std::string& key, std::string_view value, uint64_t last) {
  const std::string what = "update " + Quote(key) + " in KV bucket " + Quote(impl_->name) + " at revision " +
                           std::to_string(last);
  if (!nats_internal::Connected(*impl_->bus)) return UnavailableError(what + ": not connected to NATS; retry later");
  uint64_t rev = 0;
  natsStatus s =
      kvStore_Update(&rev, impl_->kv, key.c_str(), value.data(), static_cast<int>(value.size()), last);
  if (s == NATS_OK) return rev;
  Status failed = nats_internal::FromNatsError(s, what);
  if (ServerRefused(s)) {
    // JetStream's "temporarily unavailable" (10008: its meta group or the
    // bucket's stream electing a leader) is not a refusal of the revision.
    if (failed.message().find("temporarily unavailable") != std::string::npos) {
      return Status(StatusCode::kUnavailable, failed.message());
    }
    return Status(StatusCode::kAborted, failed.message() + " (someone else wrote it, or it expired)");
  }
  return failed;
}

Result<std::optional<KvBucket::Entry>> KvBucket::Get(const std::string& key) {
  const std::string what = "get " + Quote(key) + " from KV bucket " + Quote(impl_->name);
  if (!nats_internal::Connected(*impl_->bus)) return UnavailableError(what + ": not connected to NATS; retry later");
  kvEntry* raw = nullptr;
  natsStatus s = kvStore_Get(&raw, impl_->kv, key.c_str());
  EntryPtr e(raw);
  if (s == NATS_NOT_FOUND) return std::optional<Entry>();
  if (s != NATS_OK) return nats_internal::FromNatsError(s, what);
  Entry out;
  if (const void* v = kvEntry_Value(e.get())) {
    out.value.assign(static_cast<const char*>(v), static_cast<size_t>(kvEntry_ValueLen(e.get())));
  }
  out.revision = kvEntry_Revision(e.get());
  return std::optional<Entry>(std::move(out));
}

}  // namespace gatos
