// Result<T>: a value or an Error (Mesos stout's Try, in small). Status is
// Result<void>. Lookups that may simply find nothing use std::optional.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <variant>

#include "common/error.h"

namespace cp {

// A broken invariant is a bug: abort loudly. Never reached by untrusted input.
#define CP_CHECK(cond, msg)                                                               \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "CHECK failed at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, msg); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(implicit)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    CP_CHECK(ok(), "value() on an error Result");
    return std::get<0>(v_);
  }
  const T& value() const& {
    CP_CHECK(ok(), "value() on an error Result");
    return std::get<0>(v_);
  }
  T&& value() && {
    CP_CHECK(ok(), "value() on an error Result");
    return std::get<0>(std::move(v_));
  }
  const Error& error() const {
    CP_CHECK(!ok(), "error() on an ok Result");
    return std::get<1>(v_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(implicit)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    CP_CHECK(!ok_, "error() on an ok Status");
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;
inline Status ok_status() { return Status(); }

// Propagate an error: CP_TRY(expr) for Status, CP_ASSIGN(var, expr) for Result<T>.
#define CP_TRY(expr)                              \
  do {                                            \
    auto _cp_status = (expr);                     \
    if (!_cp_status.ok()) return _cp_status.error(); \
  } while (0)

#define CP_CONCAT_INNER(a, b) a##b
#define CP_CONCAT(a, b) CP_CONCAT_INNER(a, b)
#define CP_ASSIGN(lhs, expr) CP_ASSIGN_IMPL(CP_CONCAT(_cp_result_, __LINE__), lhs, expr)
#define CP_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                   \
  if (!tmp.ok()) return tmp.error();   \
  lhs = std::move(tmp).value()

}  // namespace cp
