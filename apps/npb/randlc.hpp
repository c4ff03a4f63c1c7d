// randlc.hpp — the NAS Parallel Benchmarks pseudorandom number generator.
//
// NPB specifies a linear congruential generator x(k+1) = a * x(k) mod 2^46
// with a = 5^13, returning x(k+1) * 2^-46 in (0, 1). The reference code does
// the modular product in double precision by splitting the operands into
// 23-bit halves; every step is exact there, so an exact integer version gives
// the same numbers bit for bit. Seeds and multipliers are integers < 2^46.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn::npb {

inline constexpr std::uint64_t kRandMultiplier = 1220703125;  // 5^13
inline constexpr std::uint64_t kRandSeed = 314159265;         // seed of CG and MG
inline constexpr std::uint64_t kRandModulusMask = (std::uint64_t{1} << 46) - 1;

// (a * x) mod 2^46 without overflow: split a into 23-bit halves.
constexpr std::uint64_t mul_mod46(std::uint64_t a, std::uint64_t x) {
  const std::uint64_t a_hi = a >> 23, a_lo = a & ((std::uint64_t{1} << 23) - 1);
  const std::uint64_t x_hi = x >> 23, x_lo = x & ((std::uint64_t{1} << 23) - 1);
  // a*x = a_hi*x_hi*2^46 + (a_hi*x_lo + a_lo*x_hi)*2^23 + a_lo*x_lo; the first term vanishes mod 2^46.
  const std::uint64_t mid = (a_hi * x_lo + a_lo * x_hi) & ((std::uint64_t{1} << 23) - 1);
  return ((mid << 23) + a_lo * x_lo) & kRandModulusMask;
}

// a^n mod 2^46 by repeated squaring (NPB's "power").
constexpr std::uint64_t pow_mod46(std::uint64_t a, std::uint64_t n) {
  std::uint64_t result = 1;
  while (n != 0) {
    if (n & 1) result = mul_mod46(result, a);
    a = mul_mod46(a, a);
    n >>= 1;
  }
  return result;
}

inline constexpr double kTwoPowMinus46 = 1.0 / static_cast<double>(std::uint64_t{1} << 46);

// Advances x to a*x mod 2^46 and returns the new x scaled into (0, 1).
inline double randlc(std::uint64_t& x, std::uint64_t a = kRandMultiplier) {
  x = mul_mod46(a, x);
  return static_cast<double>(x) * kTwoPowMinus46;
}

// n successive randlc values into y[0..n).
void vranlc(std::size_t n, std::uint64_t& x, std::uint64_t a, double* y);

}  // namespace cairn::npb
