// hash.hpp — the non-cryptographic hashes cairn uses to detect corruption and
// to fingerprint state (internal): checkpoint bodies, the apps' final-state
// checksums, the crash explorer's file images, and (seeded) the on-media
// checksum of pool metadata, pool::checksum64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cairn::util {

inline std::uint64_t rotl64(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// A bijective finaliser: every input bit reaches every output bit.
inline std::uint64_t mix64(std::uint64_t h) {
  h ^= h >> 31;
  h *= 0xD6E8FEB86659FD93ULL;
  h ^= h >> 29;
  h *= 0x9E3779B97F4A7C15ULL;
  return h ^ (h >> 32);
}

// A 64-bit hash of n bytes for detecting corruption (not an adversary): four
// independent lanes over 32-byte stripes so the multiplications overlap
// (several GB/s); every step of a lane is a bijection, so changing any one
// word changes the result.
inline std::uint64_t hash_bytes(const void* data, std::size_t n, std::uint64_t seed = 0) {
  constexpr std::uint64_t kA = 0xA0761D6478BD642FULL, kB = 0xE7037ED1A0B428DBULL;
  const auto* p = static_cast<const unsigned char*>(data);
  auto load = [p](std::size_t i) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    return w;
  };
  std::uint64_t l[4] = {seed ^ kA, seed + kB, rotl64(seed, 17) ^ kB, ~seed};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) l[k] = rotl64(l[k] + load(i + 8 * static_cast<std::size_t>(k)) * kB, 29) * kA;
  std::uint64_t h = rotl64(l[0], 1) + rotl64(l[1], 7) + rotl64(l[2], 12) + rotl64(l[3], 18) + n;
  for (; i + 8 <= n; i += 8) h = rotl64(h ^ (load(i) * kB), 27) * kA;
  for (; i < n; ++i) h = rotl64(h ^ (static_cast<std::uint64_t>(p[i]) * kA), 11) * kB;
  return mix64(h);
}

// Folds one hash into a running one (order matters).
inline std::uint64_t hash_combine(std::uint64_t acc, std::uint64_t h) { return mix64(acc ^ h) + 0x9E3779B97F4A7C15ULL; }

}  // namespace cairn::util
