// KvBucket: a JetStream key-value bucket, the little of it a replicated
// ledger's election needs (gatos/model/election.h; docs/replication.md).
//
// Codes, beside those of bus.h (Unavailable when not connected or
// JetStream does not answer):
//   Create  AlreadyExists when the key exists (another replica leads)
//   Update  Aborted when `last` is not the key's current revision (someone
//           else wrote it, or it expired); Unavailable when JetStream
//           answers "temporarily unavailable" (10008) instead
//   Get     nullopt when the key does not exist (or expired)
//
// Thread-safety: thread-safe (nats.c's kvStore is). A KvBucket must be
// destroyed before the Bus it came from.
#ifndef GATOS_NATS_KV_BUCKET_H_
#define GATOS_NATS_KV_BUCKET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gatos/model/status.h"
#include "gatos/nats/bus.h"

namespace gatos {

struct KvBucketConfig {
  std::string name;     // [A-Za-z0-9_-]+
  int64_t ttl_ms = 0;   // how long a key lives after its last write (0: forever; else >= 100)
  int replicas = 1;     // 1..5; at most the cluster's size
  bool file_storage = true;
  // How long a call waits for JetStream's answer (0: the Bus's
  // jetstream_timeout_ms). An election keeps its calls well inside a
  // lease, so that an unanswered keep can be retried in it.
  int64_t timeout_ms = 0;
};

class KvBucket {
 public:
  struct Entry {
    std::string value;
    uint64_t revision = 0;
  };
  struct Impl;  // kv_bucket.cpp

  // Opens the bucket, creating it when missing. FailedPrecondition when a
  // bucket of that name exists with another TTL or replica count.
  static Result<std::unique_ptr<KvBucket>> Open(Bus& bus, const KvBucketConfig& config);
  // Binds to a bucket that exists, whatever its settings (a reader).
  // NotFound when it does not.
  static Result<std::unique_ptr<KvBucket>> OpenExisting(Bus& bus, const std::string& name);
  ~KvBucket();
  KvBucket(const KvBucket&) = delete;
  KvBucket& operator=(const KvBucket&) = delete;

  Result<uint64_t> Create(const std::string& key, std::string_view value);
  Result<uint64_t> Update(const std::string& key, std::string_view value, uint64_t last);
  Result<std::optional<Entry>> Get(const std::string& key);
  // The revision of the key's last write, asked of the bucket's stream
  // leader (not a direct get, which any node of the stream may answer,
  // one gone silent included); nullopt when the key does not exist,
  // expired or was deleted.
  Result<std::optional<uint64_t>> LastRevision(const std::string& key);
  // Every key under `prefix` that exists now, with its last value, asked of
  // the bucket's stream leader as LastRevision is (one stream info request,
  // then one read per key; no consumer, so no proposal to the cluster).
  // Sorted by key.
  Result<std::vector<std::pair<std::string, Entry>>> LatestUnder(const std::string& prefix);
  // Writes the key whatever it holds.
  Status Put(const std::string& key, std::string_view value);
  // Every key the bucket holds now (none: empty).
  Result<std::vector<std::string>> Keys();
  const std::string& name() const;

 private:
  explicit KvBucket(std::unique_ptr<Impl> impl);
  // The key's last message from the stream leader: nullopt when it does
  // not exist, expired or was deleted. `what` names the call in errors.
  Result<std::optional<Entry>> LastEntry(const std::string& key, const std::string& what);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gatos

#endif  // GATOS_NATS_KV_BUCKET_H_
