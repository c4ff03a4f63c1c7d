// patterns.hpp — version patterns for tests (header-only): fill a buffer
// with words that depend on a version and the word's index, and check that
// a buffer holds exactly that version, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn::testing {

inline std::uint64_t pattern_word(std::uint64_t version, std::size_t i) { return version * 0x9E3779B97F4A7C15ULL + i; }

inline void fill(void* p, std::size_t bytes, std::uint64_t version) {
  auto* w = static_cast<std::uint64_t*>(p);
  for (std::size_t i = 0; i < bytes / 8; ++i) w[i] = pattern_word(version, i);
}

inline bool matches(const void* p, std::size_t bytes, std::uint64_t version) {
  const auto* w = static_cast<const std::uint64_t*>(p);
  for (std::size_t i = 0; i < bytes / 8; ++i)
    if (w[i] != pattern_word(version, i)) return false;
  return true;
}

}  // namespace cairn::testing
