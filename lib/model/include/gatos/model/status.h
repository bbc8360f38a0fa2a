// Status and Result<T>: the error model of every public function of lib/.
//
// A small code set with fixed meaning (below; docs/ledger-format.md, section
// 4, maps them to the RPC error classes). No exception crosses a public lib/
// function; third-party exceptions are caught inside the module that calls
// the library and become a Status.
//
// Thread-safety: value types, safe to copy between threads.
#ifndef GATOS_STATUS_H_
#define GATOS_STATUS_H_

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gatos {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // malformed input: the caller must change it
  kNotFound,            // the named object or ref does not exist
  kAlreadyExists,       // create of something that exists
  kFailedPrecondition,  // state does not allow the operation (e.g. terminal job)
  kAborted,             // lost a compare-and-swap race; re-read and decide
  kUnavailable,         // transient: retry with backoff
  kDeadlineExceeded,    // a time or budget ran out
  kPermissionDenied,    // bad, missing or untrusted signature / not allowed
  kDataLoss,            // stored data is corrupt or inconsistent
  kInternal,            // a bug or an unexpected library failure
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const& { return message_; }
  // On a temporary (r.status().message(): Result::status() returns by
  // value) the message is moved out, so `const std::string& m =
  // r.status().message();` holds a string that lives as long as m does.
  std::string message() && { return std::move(message_); }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  // Returns a copy with `context + ": "` put in front of the message.
  Status WithContext(std::string_view context) const;

  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExistsError(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status AbortedError(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceededError(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status PermissionDeniedError(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
// `what`: strerror(errno) as a Status: Unavailable for ENOSPC, EIO and
// EDQUOT (the disk, not the caller), Internal otherwise. Read errno first.
Status ErrnoStatus(const std::string& what);

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result from OK status");
    if (std::get<Status>(v_).ok()) v_ = InternalError("Result built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? OkStatus() : std::get<Status>(v_); }

  T& value() & { assert(ok()); return std::get<T>(v_); }
  const T& value() const& { assert(ok()); return std::get<T>(v_); }
  T&& value() && { assert(ok()); return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T value_or(T fallback) const& { return ok() ? std::get<T>(v_) : std::move(fallback); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

namespace internal {
inline const Status& AsStatus(const Status& s) { return s; }
template <typename T>
Status AsStatus(const Result<T>& r) { return r.status(); }
}  // namespace internal

}  // namespace gatos

#define GATOS_CONCAT_INNER_(a, b) a##b
#define GATOS_CONCAT_(a, b) GATOS_CONCAT_INNER_(a, b)

#define GATOS_RETURN_IF_ERROR(expr)                                   \
  do {                                                                \
    ::gatos::Status gatos_status_ = ::gatos::internal::AsStatus(expr); \
    if (!gatos_status_.ok()) return gatos_status_;                    \
  } while (0)

#define GATOS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

// `lhs` must not contain a top-level comma (use an alias or `auto`); the
// expression may.
#define GATOS_ASSIGN_OR_RETURN(lhs, ...) \
  GATOS_ASSIGN_OR_RETURN_IMPL_(GATOS_CONCAT_(gatos_result_, __LINE__), lhs, (__VA_ARGS__))

#endif  // GATOS_STATUS_H_
