// gatosd's local socket (<ledger>/gatos/gatosd.sock) for hooks and the CLI.
//
// Thread-safety: one accept thread and one thread per connection, owned here.
#ifndef GATOS_GATOSD_LOCAL_SERVER_H_
#define GATOS_GATOSD_LOCAL_SERVER_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gatos/ledger/job_service.h"
#include "gatos/nats/bus.h"
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "gatos/ledger/local_ledger.h"
#include "gatos/sys/log.h"
#include "request_queue.h"

namespace gatos::gatosd {

// Whether a read from `fd` would not block (more of a pipelined request).
inline bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// The local socket (<ledger>/gatos/gatosd.sock): hooks and the CLI on the
// ledger host. One thread accepts; one thread per connection reads a
// request, hands it to the ledger thread and writes the reply.
class LocalServer {
 public:
  static Result<std::unique_ptr<LocalServer>> Start(const std::string& path, RequestQueue* queue) {
    ::unlink(path.c_str());
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return UnavailableError("socket: " + std::string(std::strerror(errno)));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) {
      ::close(fd);
      return InvalidArgumentError("socket path too long: " + path);
    }
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    mode_t old = ::umask(0077);
    int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    ::umask(old);
    if (rc != 0 || ::listen(fd, 64) != 0) {
      std::string e = std::strerror(errno);
      ::close(fd);
      return UnavailableError("cannot listen on " + path + ": " + e);
    }
    return std::unique_ptr<LocalServer>(new LocalServer(fd, path, queue));
  }
  ~LocalServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    if (thread_.joinable()) thread_.join();
    ::unlink(path_.c_str());
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(5), [&] { return active_ == 0; });
  }

 private:
  LocalServer(int fd, std::string path, RequestQueue* queue) : fd_(fd), path_(std::move(path)), queue_(queue) {
    thread_ = std::thread([this] { Loop(); });
  }
  void Loop() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (stop_) return;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      timeval tv{60, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      {
        std::lock_guard<std::mutex> l(mu_);
        ++active_;
      }
      std::thread([this, c] {
        // A client may pipeline (a push of many jobs): every frame already
        // waiting is taken with the first, so they go to the ledger together
        // and land in one log batch. Replies go back in order from a thread
        // of their own, so the next frames are read (and decoded, and
        // written) while the refs of the ones before are still being written;
        // at most kMaxInFlight requests, or kMaxInFlightBytes of them, wait
        // for their replies.
        std::mutex mu;
        std::condition_variable cv;
        std::deque<std::pair<std::future<std::string>, size_t>> waiting;  // reply, request bytes
        size_t waiting_bytes = 0;
        bool reading = true;
        std::thread writer([&] {
          bool open = true;
          while (true) {
            std::future<std::string> f;
            size_t bytes;
            {
              std::unique_lock<std::mutex> l(mu);
              cv.wait(l, [&] { return !waiting.empty() || !reading; });
              if (waiting.empty()) return;
              f = std::move(waiting.front().first);
              bytes = waiting.front().second;
              waiting.pop_front();
            }
            if (open && !WriteReplyFrame(c, f.get()).ok()) {
              open = false;
              ::shutdown(c, SHUT_RD);  // the reader stops taking requests
            }
            if (!open) f.wait();  // answered anyway: the request may be applied
            {
              std::lock_guard<std::mutex> l(mu);
              waiting_bytes -= bytes;
            }
            cv.notify_all();  // room for the reader
          }
        });
        while (true) {
          std::vector<Request> reqs;
          std::vector<std::pair<std::future<std::string>, size_t>> replies;
          size_t batch_bytes = 0;
          bool eof = false;
          do {
            auto frame = ReadRequestFrame(c);
            if (!frame.ok()) {
              eof = true;
              break;
            }
            const size_t bytes = frame->first.size() + frame->second.size();
            batch_bytes += bytes;
            Request r;
            r.req = {frame->first, std::move(frame->second), SystemNowMs()};
            r.local = std::make_shared<std::promise<std::string>>();
            replies.emplace_back(r.local->get_future(), bytes);
            reqs.push_back(std::move(r));
          } while (reqs.size() < kMaxPipelined && batch_bytes < kMaxInFlightBytes && Readable(c));
          if (!reqs.empty()) queue_->PushAll(std::move(reqs));
          {
            std::unique_lock<std::mutex> l(mu);
            for (auto& f : replies) waiting.push_back(std::move(f));
            waiting_bytes += batch_bytes;
            if (eof) reading = false;
            cv.notify_all();
            if (eof) break;
            cv.wait(l, [&] { return waiting.size() < kMaxInFlight && waiting_bytes < kMaxInFlightBytes; });
          }
        }
        writer.join();
        ::close(c);
        std::lock_guard<std::mutex> l(mu_);
        --active_;
        cv_.notify_all();
      }).detach();
    }
  }

  static constexpr size_t kMaxPipelined = 1024;  // requests taken from one connection at once
  static constexpr size_t kMaxInFlight = 4096;   // requests of one connection waiting for replies
  static constexpr size_t kMaxInFlightBytes = 256u << 20;  // and their bytes (a frame is at most 64 MiB)
  int fd_;
  std::string path_;
  RequestQueue* queue_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int active_ = 0;
};

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_LOCAL_SERVER_H_
