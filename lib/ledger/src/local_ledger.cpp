#include "gatos/ledger/local_ledger.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace gatos {
namespace {

std::string Trim(std::string d) {
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d;
}

Status WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return UnavailableError(std::string("socket write: ") + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return OkStatus();
}

Status ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return UnavailableError(std::string("socket read: ") + std::strerror(errno));
    }
    if (r == 0) return UnavailableError("the peer closed the socket");
    p += r;
    n -= static_cast<size_t>(r);
  }
  return OkStatus();
}

Status WriteU32(int fd, size_t v) {
  if (v > kMaxSocketFrame) return InvalidArgumentError("frame of " + std::to_string(v) + " bytes is too large");
  char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
               static_cast<char>(v)};
  return WriteAll(fd, b, 4);
}

Result<std::string> ReadChunk(int fd) {
  unsigned char b[4];
  GATOS_RETURN_IF_ERROR(ReadAll(fd, reinterpret_cast<char*>(b), 4));
  size_t n = (size_t{b[0]} << 24) | (size_t{b[1]} << 16) | (size_t{b[2]} << 8) | b[3];
  if (n > kMaxSocketFrame) return InvalidArgumentError("frame of " + std::to_string(n) + " bytes is too large");
  std::string s(n, '\0');
  GATOS_RETURN_IF_ERROR(ReadAll(fd, s.data(), n));
  return s;
}

// Connects to gatosd's socket; -1 when nobody listens.
int Connect(const std::string& path, int timeout_ms) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) {
    ::close(fd);
    return -1;
  }
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

}  // namespace

std::string LedgerSocketPath(const std::string& ledger_dir) { return LedgerStateDir(ledger_dir) + "/gatosd.sock"; }
std::string LedgerPushPath(const std::string& ledger_dir) { return Trim(ledger_dir) + "/" + kPushDirName; }

Status WriteRequestFrame(int fd, const std::string& subject, const std::string& data) {
  GATOS_RETURN_IF_ERROR(WriteU32(fd, subject.size()));
  GATOS_RETURN_IF_ERROR(WriteAll(fd, subject.data(), subject.size()));
  GATOS_RETURN_IF_ERROR(WriteU32(fd, data.size()));
  return WriteAll(fd, data.data(), data.size());
}

Result<std::pair<std::string, std::string>> ReadRequestFrame(int fd) {
  GATOS_ASSIGN_OR_RETURN(std::string subject, ReadChunk(fd));
  if (subject.size() > 256) return InvalidArgumentError("subject too long");
  GATOS_ASSIGN_OR_RETURN(std::string data, ReadChunk(fd));
  return std::make_pair(std::move(subject), std::move(data));
}

Status WriteReplyFrame(int fd, const std::string& data) {
  GATOS_RETURN_IF_ERROR(WriteU32(fd, data.size()));
  return WriteAll(fd, data.data(), data.size());
}

Result<std::string> ReadReplyFrame(int fd) { return ReadChunk(fd); }

bool NotifyGatosd(const std::string& ledger_dir, const std::string& subject, const std::string& data) {
  int fd = Connect(LedgerSocketPath(Trim(ledger_dir)), 2000);
  if (fd < 0) return false;
  bool ok = WriteRequestFrame(fd, subject, data).ok() && ReadReplyFrame(fd).ok();
  ::close(fd);
  return ok;
}

Result<Ed25519PrivateKey> LoadLedgerKey(const std::string& ledger_dir) {
  std::string dir = LedgerStateDir(Trim(ledger_dir));
  auto key = ReadPrivateKeyFile(dir + "/ledger_key");
  if (!key.ok()) return key.status().WithContext("ledger key");
  auto view = LedgerView::Open(ledger_dir);
  if (!view.ok()) return key;  // no log yet (gatosd init): the key file is the key
  auto policy = (*view)->ReadPolicy();
  if (!policy.ok() || policy->ledger_key == key->public_key()) return key;
  auto next = ReadPrivateKeyFile(dir + "/ledger_key.next");
  if (next.ok() && next->public_key() == policy->ledger_key) {
    // A rotation was recorded but its key files not yet moved: finish it.
    std::string retired = dir + "/ledger_key.retired-" + std::to_string((*view)->seq());
    ::rename((dir + "/ledger_key").c_str(), retired.c_str());
    ::rename((dir + "/ledger_key.pub").c_str(), (retired + ".pub").c_str());
    ::rename((dir + "/ledger_key.next").c_str(), (dir + "/ledger_key").c_str());
    ::rename((dir + "/ledger_key.next.pub").c_str(), (dir + "/ledger_key.pub").c_str());
    return next;
  }
  return FailedPreconditionError("the ledger key in " + dir + "/ledger_key (" + key->public_key().WorkerId() +
                                 ") is not the key the policy names (" + policy->ledger_key.WorkerId() + ")");
}

Result<std::string> LocalLedgerRequest(const std::string& ledger_dir, const std::string& subject,
                                       const std::string& data, const LocalOptions& options, bool* via_gatosd) {
  GATOS_ASSIGN_OR_RETURN(std::vector<std::string> replies,
                         LocalLedgerRequests(ledger_dir, {{subject, data}}, options, via_gatosd));
  return std::move(replies.at(0));
}

namespace {

// Sends every request on one connection and reads the replies in order. A
// second thread writes, so neither side's socket buffer can fill while the
// other waits (gatosd reads what is there, applies it as one batch, replies).
// Returns the replies received before the connection failed, and the status.
Status Pipeline(int fd, const std::vector<std::pair<std::string, std::string>>& requests, size_t first,
                std::vector<std::string>* replies) {
  Status wrote = OkStatus();
  std::thread writer([&] {
    for (size_t i = first; i < requests.size() && wrote.ok(); ++i) {
      wrote = WriteRequestFrame(fd, requests[i].first, requests[i].second);
    }
    if (!wrote.ok()) ::shutdown(fd, SHUT_RD);  // unblock the reader below
  });
  Status read = OkStatus();
  for (size_t i = first; i < requests.size(); ++i) {
    auto reply = ReadReplyFrame(fd);
    if (!reply.ok()) {
      read = reply.status();
      break;
    }
    replies->push_back(std::move(*reply));
  }
  ::shutdown(fd, SHUT_RDWR);  // unblock the writer if the reader stopped early
  writer.join();
  return read.ok() ? wrote : read;
}

}  // namespace

Result<std::vector<std::string>> LocalLedgerRequests(const std::string& ledger_dir_in,
                                                     const std::vector<std::pair<std::string, std::string>>& requests,
                                                     const LocalOptions& options, bool* via_gatosd) {
  const std::string ledger_dir = Trim(ledger_dir_in);
  const std::string sock = LedgerSocketPath(ledger_dir);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
  Status last = UnavailableError("no answer");
  std::vector<std::string> replies;
  replies.reserve(requests.size());
  while (replies.size() < requests.size()) {
    int fd = Connect(sock, options.timeout_ms);
    if (fd >= 0) {
      size_t before = replies.size();
      Status s = Pipeline(fd, requests, replies.size(), &replies);
      ::close(fd);
      if (s.ok()) {
        if (via_gatosd) *via_gatosd = true;
        return replies;
      }
      // gatosd went away mid-request: the requests not answered may or may
      // not have been applied; every request is idempotent, so asking again
      // is safe.
      last = s;
      if (replies.size() > before) deadline = std::chrono::steady_clock::now() +
                                              std::chrono::milliseconds(options.timeout_ms);
    } else {
      auto key = LoadLedgerKey(ledger_dir);
      if (!key.ok()) return key.status();
      WriterOptions wo = options.writer;
      wo.lock_wait_ms = 0;
      auto writer = LedgerWriter::Open(ledger_dir, std::move(*key), wo);
      if (writer.ok()) {
        // The lock is ours: the rest in batches, as gatosd would apply them.
        JobService service(writer->get(), ServiceOptions{});
        constexpr size_t kBatch = 1024;
        while (replies.size() < requests.size()) {
          std::vector<ServiceRequest> reqs;
          for (size_t i = replies.size(); i < requests.size() && reqs.size() < kBatch; ++i) {
            reqs.push_back({requests[i].first, requests[i].second, SystemNowMs()});
          }
          for (auto& r : service.Handle(reqs)) replies.push_back(std::move(r));
        }
        if (via_gatosd) *via_gatosd = false;
        return replies;
      }
      if (writer.status().code() != StatusCode::kUnavailable) return writer.status();
      last = writer.status();  // gatosd is starting or stopping, or another CLI writes
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return UnavailableError("the ledger " + ledger_dir + " did not answer in " +
                              std::to_string(options.timeout_ms / 1000) + " s: " + last.message());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return replies;
}

}  // namespace gatos
