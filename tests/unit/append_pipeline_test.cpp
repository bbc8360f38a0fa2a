// AppendPipeline with a fake stream: records appended one at a time in
// submission order, each only after the one before it was acknowledged;
// the first failure fails every later record without sending it.
#include "gatos/ledger/append_pipeline.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "test_util.h"

namespace gatos {
namespace {

// A replicated log whose appends wait until the test releases them; one
// sequence can be made to fail (a fenced append).
class FakeStream {
 public:
  Status Append(int64_t seq, const std::string& record) {
    std::unique_lock<std::mutex> l(mu_);
    calls_.push_back(seq);
    ++in_append_;
    max_in_append_ = std::max(max_in_append_, in_append_);
    cv_.notify_all();
    cv_.wait(l, [&] { return released_ >= seq; });
    --in_append_;
    if (seq == fail_at_) return AbortedError("fenced: another leader appended");
    stored_.push_back(record);
    return OkStatus();
  }
  void Release(int64_t upto) {
    std::lock_guard<std::mutex> l(mu_);
    released_ = upto;
    cv_.notify_all();
  }
  // Waits until `seq` is being appended.
  void AwaitCall(int64_t seq) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !calls_.empty() && calls_.back() >= seq; });
  }
  std::vector<int64_t> calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }
  std::vector<std::string> stored() {
    std::lock_guard<std::mutex> l(mu_);
    return stored_;
  }
  int max_in_append() {
    std::lock_guard<std::mutex> l(mu_);
    return max_in_append_;
  }
  int64_t fail_at_ = -1;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> calls_;
  std::vector<std::string> stored_;
  int64_t released_ = 0;
  int in_append_ = 0, max_in_append_ = 0;
};

AppendPipeline::AppendFn Into(FakeStream* s) {
  return [s](int64_t seq, const std::string& record) { return s->Append(seq, record); };
}

TEST(AppendPipelineTest, AppendsInOrderOneAtATimeAndAcknowledgesAPrefix) {
  FakeStream stream;
  int changes = 0;
  std::mutex changes_mu;
  AppendPipeline p(Into(&stream), [&] {
    std::lock_guard<std::mutex> l(changes_mu);
    ++changes;
  });
  for (int64_t seq = 1; seq <= 3; ++seq) ASSERT_TRUE(p.Submit(seq, "record " + std::to_string(seq)).ok());
  stream.AwaitCall(1);
  EXPECT_EQ(p.acknowledged(), 0);
  EXPECT_EQ(p.outstanding(), 3u);
  EXPECT_EQ(stream.calls(), std::vector<int64_t>{1}) << "record 2 waits for record 1's acknowledgement";
  stream.Release(1);
  ASSERT_TRUE(p.WaitFor(1, std::chrono::seconds(30)));
  stream.AwaitCall(2);
  EXPECT_EQ(p.acknowledged(), 1);
  stream.Release(3);
  ASSERT_TRUE(p.WaitFor(3, std::chrono::seconds(30)));
  EXPECT_EQ(stream.calls(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(stream.stored(), (std::vector<std::string>{"record 1", "record 2", "record 3"}));
  EXPECT_EQ(stream.max_in_append(), 1);
  EXPECT_EQ(p.outstanding(), 0u);
  EXPECT_TRUE(p.failure().ok());
  // on_change runs after the acknowledgement is visible: wait for the last.
  EXPECT_TRUE(testing::PollFor(30000, [&] {
    std::lock_guard<std::mutex> l(changes_mu);
    return changes == 3;
  }));
}

TEST(AppendPipelineTest, TheFirstFailureFailsEveryLaterRecordWithoutSendingIt) {
  FakeStream stream;
  stream.fail_at_ = 2;
  AppendPipeline p(Into(&stream), nullptr);
  for (int64_t seq = 1; seq <= 4; ++seq) ASSERT_TRUE(p.Submit(seq, "r").ok());
  stream.Release(4);
  EXPECT_FALSE(p.WaitFor(4, std::chrono::seconds(30)));
  EXPECT_EQ(p.acknowledged(), 1);
  EXPECT_EQ(p.failure().code(), StatusCode::kAborted);
  EXPECT_NE(p.failure().message().find("fenced"), std::string::npos);
  EXPECT_EQ(stream.calls(), (std::vector<int64_t>{1, 2})) << "3 and 4 were never sent";
  EXPECT_EQ(p.outstanding(), 0u);
  Status again = p.Submit(5, "r");
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.message().find("fenced"), std::string::npos) << again.message();
  EXPECT_EQ(stream.calls().size(), 2u);
}

TEST(AppendPipelineTest, SequencesMustGrow) {
  FakeStream stream;
  stream.Release(100);
  AppendPipeline p(Into(&stream), nullptr);
  ASSERT_TRUE(p.Submit(5, "r").ok());
  EXPECT_EQ(p.Submit(5, "r").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Submit(4, "r").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(p.WaitFor(5, std::chrono::seconds(30)));
}

}  // namespace
}  // namespace gatos
