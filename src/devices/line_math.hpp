// line_math.hpp — cache-line arithmetic shared by the devices (internal).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn::devices {

inline constexpr std::size_t kLine = 64;

// Number of 64-byte cache lines the range [addr, addr+len) touches.
inline std::uint64_t lines_spanned(const void* addr, std::size_t len) {
  if (len == 0) return 0;
  auto a = reinterpret_cast<std::uintptr_t>(addr);
  return ((a + len + kLine - 1) / kLine) - (a / kLine);
}

}  // namespace cairn::devices
