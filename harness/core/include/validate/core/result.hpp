#pragma once
// Errors on user input are values, never exceptions: every fallible call returns a Status or a
// Result<T> whose message names the file, tensor or API call. Only main() turns them into exit codes.
#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace validate {

struct Error {
  std::string message;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e.message)), failed_(true) {}  // NOLINT: implicit by design
  static Status ok() { return {}; }
  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return error_; }

 private:
  std::string error_;
  bool failed_ = false;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error e) : v_(std::move(e)) {}      // NOLINT
  Result(Status s) : v_(Error{s.message()}) { assert(!s.is_ok()); }  // NOLINT: forward a failure
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() & { assert(is_ok()); return std::get<0>(v_); }
  const T& value() const& { assert(is_ok()); return std::get<0>(v_); }
  T&& value() && { assert(is_ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const std::string& message() const { assert(!is_ok()); return std::get<1>(v_).message; }
  Status status() const { return is_ok() ? Status::ok() : Status(Error{message()}); }

 private:
  std::variant<T, Error> v_;
};

// Prefixes context ("reading ref/x.npy: ") onto an error, leaving success untouched.
inline Error with_context(const std::string& context, const std::string& message) {
  return Error{context + ": " + message};
}

}  // namespace validate

#define VALIDATE_TRY(expr)                  \
  do {                                      \
    ::validate::Status _st = (expr);        \
    if (!_st.is_ok()) return _st;           \
  } while (0)
