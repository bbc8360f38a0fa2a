#include "live_publisher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "gatos/model/clock.h"
#include "gatos/model/live_output.h"

namespace gatos::worker {

struct LivePublisher::LiveJob {
  LiveJob(const LiveLimits& limits, int64_t now_ms) : buffer(limits, now_ms) {}
  std::mutex mu;  // guards everything below
  LiveOutputBuffer buffer;
  std::string job_hex, output_subject, progress_subject, progress_file;
  int64_t attempt = 1;
  int64_t seq = 0;
  bool lines = true;
  bool ended = false;
  int64_t ended_ms = 0;
  // The progress file: how far it was read, an unfinished last line, the
  // latest report read and the one last published.
  int64_t progress_offset = 0;
  std::string partial;
  bool skipping_long_line = false;
  std::optional<Progress> latest, sent;
  int64_t sent_ms = 0;
};

namespace {

constexpr size_t kProgressReadBytes = 64 * 1024;

int64_t MonoNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reads what the job appended to its progress file since `job->progress_offset`;
// keeps the last valid report in job->latest. The job controls the file:
// no symlink is followed, only a regular file is read, at most
// kProgressReadBytes per call, and only parsed counters are kept (a line
// that is not a progress report is ignored; nothing of it is published).
void ReadProgress(LivePublisher::LiveJob* job) {
  if (job->progress_file.empty()) return;
  int fd = ::open(job->progress_file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return;
  }
  if (st.st_size < job->progress_offset) {  // rewritten from the start
    job->progress_offset = 0;
    job->partial.clear();
    job->skipping_long_line = false;
  }
  std::string buf(kProgressReadBytes, '\0');
  ssize_t n = ::pread(fd, buf.data(), buf.size(), job->progress_offset);
  ::close(fd);
  if (n <= 0) return;
  buf.resize(static_cast<size_t>(n));
  job->progress_offset += n;
  size_t start = 0;
  for (;;) {
    size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    if (!job->skipping_long_line) {
      job->partial.append(buf, start, nl - start);
      auto p = ParseProgressLine(job->partial);
      if (p.ok() && *p) job->latest = std::move(**p);
    }
    job->partial.clear();
    job->skipping_long_line = false;
    start = nl + 1;
  }
  if (!job->skipping_long_line) job->partial.append(buf, start, std::string::npos);
  if (job->partial.size() > kMaxProgressLineBytes) {
    job->partial.clear();
    job->skipping_long_line = true;
  }
}

}  // namespace

LivePublisher::LivePublisher(Bus* bus, const LiveLimits& limits) : bus_(bus), limits_(limits) {}

LivePublisher::~LivePublisher() { Stop(); }

void LivePublisher::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void LivePublisher::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<LivePublisher::LiveJob> LivePublisher::Begin(const std::string& job_hex,
                                                             int64_t attempt,
                                                             const std::string& owner_hex,
                                                             bool lines,
                                                             const std::string& progress_file) {
  auto job = std::make_shared<LiveJob>(limits_, MonoNowMs());
  job->job_hex = job_hex;
  job->output_subject = LiveSubject(owner_hex, job_hex, LiveKind::kOutput);
  job->progress_subject = LiveSubject(owner_hex, job_hex, LiveKind::kProgress);
  job->attempt = attempt;
  job->lines = lines;
  job->progress_file = progress_file;
  std::lock_guard<std::mutex> l(mu_);
  jobs_.push_back(job);
  return job;
}

std::function<void(int, std::string_view)> LivePublisher::Tap(const std::shared_ptr<LiveJob>& job) {
  if (!job->lines) return {};
  LiveJob* j = job.get();  // the job outlives its execution: End() comes after Wait()
  return [j](int stream, std::string_view bytes) {
    std::lock_guard<std::mutex> l(j->mu);
    j->buffer.Append(stream, bytes);
  };
}

void LivePublisher::End(const std::shared_ptr<LiveJob>& job) {
  std::lock_guard<std::mutex> l(job->mu);
  job->ended = true;
  job->ended_ms = MonoNowMs();
}

LivePublisher::Stats LivePublisher::stats() const {
  return Stats{messages_.load(), bytes_.load(), dropped_.load(), failed_.load()};
}

void LivePublisher::Send(LiveJob& job, const LiveMessage& m) {
  Status s = bus_->Publish(m.kind == LiveKind::kOutput ? job.output_subject : job.progress_subject,
                           EncodeLiveMessage(m));
  if (!s.ok()) {
    ++failed_;
    return;
  }
  ++messages_;
  if (m.kind == LiveKind::kOutput) bytes_ += static_cast<int64_t>(m.data.size());
}

bool LivePublisher::Service(LiveJob& job, int64_t now_ms, bool stopping) {
  std::vector<LiveMessage> out;
  bool done = false;
  {
    std::lock_guard<std::mutex> l(job.mu);
    const int64_t wall = SystemNowMs();
    if (job.lines && job.buffer.HasPending()) {
      for (LiveChunk& c : job.buffer.Take(now_ms)) {
        LiveMessage m;
        m.job_hex = job.job_hex;
        m.attempt = job.attempt;
        m.seq = job.seq++;
        m.kind = LiveKind::kOutput;
        m.stream = c.stream == 1 ? "stdout" : "stderr";
        m.offset = c.offset;
        m.data = std::move(c.data);
        m.at_ms = wall;
        out.push_back(std::move(m));
      }
    }
    // An ended job's progress no longer matters (its result is on the way):
    // ended jobs cost no system call here.
    if (!job.ended) ReadProgress(&job);
    if (job.latest &&
        (!job.sent || FormatProgressLine(*job.latest) != FormatProgressLine(*job.sent)) &&
        job.buffer.TakeProgressSlot(now_ms)) {
      Progress p = job.sent ? WithRates(*job.sent, job.sent_ms, *job.latest, now_ms) : *job.latest;
      job.sent = p;
      job.sent_ms = now_ms;
      LiveMessage m;
      m.job_hex = job.job_hex;
      m.attempt = job.attempt;
      m.seq = job.seq++;
      m.kind = LiveKind::kProgress;
      m.progress = std::move(p);
      m.at_ms = wall;
      out.push_back(std::move(m));
    }
    done = stopping || (job.ended && (!job.buffer.HasPending() || now_ms - job.ended_ms > 1000));
    if (done) dropped_ += job.buffer.dropped_bytes();
  }
  for (const LiveMessage& m : out) Send(job, m);
  return done;
}

void LivePublisher::Loop() {
  std::vector<std::shared_ptr<LiveJob>> jobs;
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::milliseconds(kTickMs), [&] { return stop_; });
      stopping = stop_;
      jobs.assign(jobs_.begin(), jobs_.end());
    }
    const int64_t now = MonoNowMs();
    std::vector<LiveJob*> finished;
    for (const auto& j : jobs) {
      if (Service(*j, now, stopping)) finished.push_back(j.get());
    }
    jobs.clear();
    if (!finished.empty()) {
      std::lock_guard<std::mutex> l(mu_);
      jobs_.remove_if([&](const std::shared_ptr<LiveJob>& j) {
        for (LiveJob* f : finished) {
          if (f == j.get()) return true;
        }
        return false;
      });
    }
    if (stopping) return;
  }
}

}  // namespace gatos::worker
