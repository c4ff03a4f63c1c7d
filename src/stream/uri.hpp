// uri.hpp — the stream URI schemes (internal), shared by the streams and staging.
#pragma once

#include <string_view>

namespace cairn::stream::detail {

// True when `s` names its place itself (file:, mem:, pmem:); a plain name goes
// through $CAIRN_STREAM_PREFIX.
inline bool has_scheme(std::string_view s) {
  return s.starts_with("file:") || s.starts_with("mem:") || s.starts_with("pmem:");
}

}  // namespace cairn::stream::detail
