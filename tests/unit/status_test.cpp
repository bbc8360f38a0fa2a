#include "gatos/model/status.h"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <utility>

namespace gatos {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  GATOS_ASSIGN_OR_RETURN(int h, Half(x));
  GATOS_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  GATOS_RETURN_IF_ERROR(Half(x));
  return OkStatus();
}

TEST(StatusTest, OkAndErrorCarryCodeAndMessage) {
  EXPECT_TRUE(OkStatus().ok());
  Status s = AbortedError("lost race on refs/gatos/jobs/x/lease");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(s.ToString(), "ABORTED: lost race on refs/gatos/jobs/x/lease");
  EXPECT_EQ(s.WithContext("claim").message(), "claim: lost race on refs/gatos/jobs/x/lease");
}

TEST(StatusTest, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "odd: 3");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).message(), "odd: 5");
}

// Result::status() returns a Status by value; a reference to its message
// must not dangle once the temporary is gone (it did in three callers: the
// worker printed the first bytes of a connect error as heap garbage).
TEST(StatusTest, AMessageTakenFromATemporaryStatusOutlivesIt) {
  static_assert(std::is_same_v<decltype(std::declval<Status>().message()), std::string>,
                "message() of a temporary must return a value");
  static_assert(std::is_same_v<decltype(std::declval<const Status&>().message()), const std::string&>);
  Result<int> r = InvalidArgumentError(std::string(200, 'x') + " connect to NATS failed");
  const std::string& m = r.status().message();
  std::string other(200, 'y');  // reuses the freed heap block, if there were one
  EXPECT_EQ(m, std::string(200, 'x') + " connect to NATS failed");
  EXPECT_EQ(other, std::string(200, 'y'));
}

}  // namespace
}  // namespace gatos
