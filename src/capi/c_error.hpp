// c_error.hpp — the C API's error plumbing shared by every src/capi/ file:
// per-thread messages, negated codes, and guard() which keeps exceptions out of C.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <system_error>

#include "cairn/cairn.h"
#include "cairn/error.hpp"

namespace cairn::capi {

// Records "<fn>: <text>" as this thread's message (cairn_errormsg) and returns
// code. Never throws: if the message cannot be built, a truncated copy goes to
// a fixed per-thread buffer.
int fail(const char* fn, int code, std::string_view text) noexcept;
inline int fail(const char* fn, const Error& e) noexcept { return fail(fn, -static_cast<int>(e.code), e.message); }
inline int null_arg(const char* fn, const char* what) noexcept {
  return fail(fn, CAIRN_E_INVALID_ARGUMENT, std::string_view(what));
}

// This thread's last message; "" if none.
const char* current_message() noexcept;

// Runs f (returning int) and turns any escaping exception into a code.
template <class F>
int guard(const char* fn, F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(fn, CAIRN_E_NO_MEMORY, "out of memory");
  } catch (const std::system_error& e) {
    return fail(fn, CAIRN_E_IO, std::string("system error: ") + e.what());
  } catch (const std::exception& e) {
    return fail(fn, CAIRN_E_INTERNAL, std::string("unexpected internal error: ") + e.what());
  } catch (...) {
    return fail(fn, CAIRN_E_INTERNAL, "unexpected internal error of unknown type");
  }
}

}  // namespace cairn::capi
