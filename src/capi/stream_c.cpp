// stream_c.cpp — the stream part of the C API (cairn_stream_*, include/cairn/cairn.h) over cairn::stream.
#include <cerrno>
#include <cstring>
#include <string>

#include "cairn/cairn.h"
#include "cairn/stream.hpp"
#include "capi/c_error.hpp"
#include "util/io.hpp"

using cairn::capi::fail;
using cairn::capi::guard;
using cairn::capi::null_arg;
namespace cs = cairn::stream;

extern "C" {

FILE* cairn_stream_open(const char* uri, const char* mode, size_t size_hint) {
  FILE* out = nullptr;
  const int rc = guard("cairn_stream_open", [&]() -> int {
    errno = EINVAL;
    if (uri == nullptr) return null_arg("cairn_stream_open", "uri is NULL");
    if (mode == nullptr) return null_arg("cairn_stream_open", "mode is NULL");
    const std::string m(mode);
    cs::Mode md;
    if (m == "r" || m == "rb")
      md = cs::Mode::read;
    else if (m == "w" || m == "wb")
      md = cs::Mode::write;
    else
      return fail("cairn_stream_open", CAIRN_E_INVALID_ARGUMENT,
                  "mode '" + m + "' is not supported: streams open with \"r\" or \"w\"");
    cs::OpenOptions o;
    o.size_hint = size_hint;
    errno = 0;
    auto s = cs::Stream::open(uri, md, o);
    if (!s.ok()) {
      errno = cairn::util::errno_from_errc(s.error().code);
      return fail("cairn_stream_open", s.error());
    }
    out = s.value()->release();
    return 0;
  });
  if (rc < 0 && errno == 0) errno = EIO;
  return out;
}

int cairn_stream_view(FILE* stream, const void** data, size_t* length) {
  return guard("cairn_stream_view", [&]() -> int {
    if (stream == nullptr || data == nullptr || length == nullptr)
      return null_arg("cairn_stream_view", "stream, data or length is NULL");
    auto v = cs::view(stream);
    if (!v.ok()) return fail("cairn_stream_view", v.error());
    *data = v.value().data();
    *length = v.value().size();
    return 0;
  });
}

int cairn_stream_wait(const char* uri, double timeout_seconds) {
  return guard("cairn_stream_wait", [&]() -> int {
    if (uri == nullptr) return null_arg("cairn_stream_wait", "uri is NULL");
    if (auto r = cs::wait(uri, timeout_seconds); !r.ok()) return fail("cairn_stream_wait", r.error());
    return 0;
  });
}

int cairn_stream_remove(const char* uri) {
  return guard("cairn_stream_remove", [&]() -> int {
    if (uri == nullptr) return null_arg("cairn_stream_remove", "uri is NULL");
    if (auto r = cs::remove(uri); !r.ok()) return fail("cairn_stream_remove", r.error());
    return 0;
  });
}

const char* cairn_stream_errormsg(void) { return cs::last_error_message().c_str(); }

}  // extern "C"
