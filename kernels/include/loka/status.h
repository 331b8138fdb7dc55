// ============================================================================
// loka/status.h — error values that cross every layer boundary.
//
// LoKA never lets an exception cross a library boundary and never aborts on
// bad input: every fallible operation returns a Status or a Result<T> whose
// message is one line naming the file, node or tensor at fault. `assert` is
// reserved for programmer errors.
// ============================================================================
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace loka {

/// Outcome of a fallible operation: ok, or a one-line message.
class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  bool is_ok() const { return !message_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  /// The one-line reason; empty when ok. By value: Result::status() returns a
  /// temporary, and a reference into it would dangle.
  std::string message() const { return message_ ? *message_ : std::string(); }
  /// Prefixes context ("node 'gemm_3': ") to an error; ok stays ok.
  Status with_context(const std::string& context) const {
    return is_ok() ? *this : Status(context + *message_);
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

/// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(state_).is_ok() && "Result built from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return is_ok(); }
  T& value() & { assert(is_ok()); return std::get<T>(state_); }
  const T& value() const& { assert(is_ok()); return std::get<T>(state_); }
  T&& value() && { assert(is_ok()); return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(state_); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace loka

/// Returns early from the enclosing function when `expr` (a Status) failed.
#define LOKA_RETURN_IF_ERROR(expr)                       \
  do {                                                   \
    ::loka::Status loka_status_ = (expr);                \
    if (!loka_status_.is_ok()) return loka_status_;      \
  } while (0)

#define LOKA_CONCAT_INNER_(a, b) a##b
#define LOKA_CONCAT_(a, b) LOKA_CONCAT_INNER_(a, b)
/// `LOKA_ASSIGN_OR_RETURN(auto x, make_x());` — unwraps a Result or returns its Status.
#define LOKA_ASSIGN_OR_RETURN(lhs, expr)                                   \
  auto LOKA_CONCAT_(loka_result_, __LINE__) = (expr);                      \
  if (!LOKA_CONCAT_(loka_result_, __LINE__).is_ok())                       \
    return LOKA_CONCAT_(loka_result_, __LINE__).status();                  \
  lhs = std::move(LOKA_CONCAT_(loka_result_, __LINE__)).value()
