// cairn/error.hpp — typed errors and the Result<T> type every fallible call returns.
//
// Recoverable failures (bad input, full devices, foreign files) are values, not
// exceptions: a call returns Result<T> holding either a T or an Error with a code
// and a message that names the object, says what is wrong and what to do.
// Bugs (violated preconditions) trip assertions instead.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace cairn {

// Stable numeric codes; the C API returns their negation.
enum class Errc : int {
  ok = 0,
  invalid_argument = 1,   // a bad option or parameter
  not_found = 2,          // the file does not exist
  permission_denied = 3,  // the file cannot be opened with the needed access
  is_directory = 4,       // the path names a directory
  too_small = 5,          // requested or found pool size below the minimum
  truncated = 6,          // the file is shorter than its header says
  foreign_file = 7,       // bad magic: not a cairn pool
  wrong_version = 8,      // another on-media layout version
  corrupted = 9,          // stored data fails its checks (magic, checksum, geometry): pool, state or checkpoint
  out_of_space = 10,      // a fixed-capacity structure is full: the pool's arena, or a pointer table
  device_full = 11,       // the file system ran out of space (ENOSPC, EFBIG)
  already_exists = 12,    // create refused to overwrite an existing file
  io_error = 13,          // any other system call failure
  poisoned = 14,          // an earlier persist failed; the pool refuses further commits
  not_ready = 15,         // the call needs a step that has not happened (e.g. arena rebuild)
  layout_mismatch = 16,   // restoring into a different registration layout
  no_version = 17,        // nothing committed yet
  unsupported = 18,       // the platform or build lacks a needed feature
  busy = 19,              // another live process or thread holds it (a stream being written)
};

const char* errc_name(Errc code) noexcept;

struct Error {
  Errc code = Errc::ok;
  std::string message;
};

// Thrown by Result<T>::value() when the result holds an error: a program that
// does not check a result fails with the error's own message ("what()" is
// "cairn: <code name>: <message>"), not with std::bad_variant_access.
class BadResultAccess : public std::logic_error {
 public:
  BadResultAccess(const Error& e) : std::logic_error(describe(e)), error_(e) {}  // NOLINT(google-explicit-constructor)
  const Error& error() const noexcept { return error_; }

 private:
  static std::string describe(const Error& e) { return std::string("cairn: ") + errc_name(e.code) + ": " + e.message; }
  Error error_;
};

// A minimal expected<T, Error>: C++20 has no std::expected. value() on an
// error throws BadResultAccess carrying the error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & {
    check();
    return std::get<0>(v_);
  }
  const T& value() const& {
    check();
    return std::get<0>(v_);
  }
  T&& value() && {
    check();
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  void check() const {
    if (!ok()) throw BadResultAccess(std::get<1>(v_));
  }
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const noexcept { return err_.code == Errc::ok; }
  explicit operator bool() const noexcept { return ok(); }
  // Throws BadResultAccess if the call failed: for code that treats any
  // failure as fatal (examples, tests, tools).
  void value() const {
    if (!ok()) throw BadResultAccess(err_);
  }
  const Error& error() const& { return err_; }
  Error&& error() && { return std::move(err_); }

 private:
  Error err_;
};

inline Error make_error(Errc code, std::string message) { return Error{code, std::move(message)}; }

}  // namespace cairn
