// error.cpp — names of the error codes.
#include "cairn/error.hpp"

namespace cairn {

const char* errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::ok: return "ok";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::not_found: return "not_found";
    case Errc::permission_denied: return "permission_denied";
    case Errc::is_directory: return "is_directory";
    case Errc::too_small: return "too_small";
    case Errc::truncated: return "truncated";
    case Errc::foreign_file: return "foreign_file";
    case Errc::wrong_version: return "wrong_version";
    case Errc::corrupted: return "corrupted";
    case Errc::out_of_space: return "out_of_space";
    case Errc::device_full: return "device_full";
    case Errc::already_exists: return "already_exists";
    case Errc::io_error: return "io_error";
    case Errc::poisoned: return "poisoned";
    case Errc::not_ready: return "not_ready";
    case Errc::layout_mismatch: return "layout_mismatch";
    case Errc::no_version: return "no_version";
    case Errc::unsupported: return "unsupported";
    case Errc::busy: return "busy";
  }
  return "unknown";
}

}  // namespace cairn
