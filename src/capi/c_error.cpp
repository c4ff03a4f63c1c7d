// c_error.cpp — per-thread storage of the C API's last error message.
#include "capi/c_error.hpp"

#include <cstdio>

namespace cairn::capi {
namespace {

thread_local std::string t_message;
thread_local char t_fallback[256];
thread_local const char* t_current = "";

}  // namespace

int fail(const char* fn, int code, std::string_view text) noexcept {
  try {
    t_message.assign(fn);
    t_message += ": ";
    t_message.append(text);
    t_current = t_message.c_str();
  } catch (...) {
    std::snprintf(t_fallback, sizeof t_fallback, "%s: %.*s", fn, static_cast<int>(text.size()), text.data());
    t_current = t_fallback;
  }
  return code;
}

const char* current_message() noexcept { return t_current; }

}  // namespace cairn::capi
