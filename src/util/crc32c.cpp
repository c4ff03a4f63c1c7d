// crc32c.cpp — CRC-32C: slicing-by-8 tables, and the SSE4.2 crc32 instruction
// over three interleaved lanes whose CRCs are combined with a table-driven
// "append kLane zero bytes" operator.
//
// The CRC register (before the final inversion) is linear over GF(2) in the
// register and the data together: the register after A then B, started from
// s, is shift(register after A from s, |B|) xor (register after B from 0),
// where shift(x, n) appends n zero bytes to x. That is what lets three
// independent lanes (the crc32 instruction has a latency of 3 cycles and a
// throughput of 1) be computed at once and joined.
#include "util/crc32c.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cairn::util {

namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;  // Castagnoli, bit-reflected
constexpr std::size_t kLane = 4096;           // bytes per lane of the interleaved loop

struct Tables {
  std::uint32_t slice[8][256];  // slice[k][b]: b followed by k zero bytes
  std::uint32_t shift[4][256];  // shift[k][b]: register (b << 8k) after kLane zero bytes

  Tables() {
    for (std::uint32_t b = 0; b < 256; ++b) {
      std::uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c & 1) != 0 ? (c >> 1) ^ kPoly : c >> 1;
      slice[0][b] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (std::uint32_t b = 0; b < 256; ++b) slice[k][b] = (slice[k - 1][b] >> 8) ^ slice[0][slice[k - 1][b] & 0xFF];
    // The operator is linear: its image of each of the 32 register bits, then
    // of each byte value at each byte position by xor of those images.
    std::uint32_t image[32];
    for (int bit = 0; bit < 32; ++bit) {
      std::uint32_t x = std::uint32_t{1} << bit;
      for (std::size_t i = 0; i < kLane; ++i) x = (x >> 8) ^ slice[0][x & 0xFF];
      image[bit] = x;
    }
    for (int k = 0; k < 4; ++k)
      for (std::uint32_t b = 0; b < 256; ++b) {
        std::uint32_t x = 0;
        for (int j = 0; j < 8; ++j)
          if ((b >> j) & 1) x ^= image[8 * k + j];
        shift[k][b] = x;
      }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

std::uint64_t load64(const unsigned char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// The raw register (no inversions) over n bytes, by tables.
std::uint32_t raw_portable(std::uint32_t s, const unsigned char* p, std::size_t n) {
  const Tables& t = tables();
  for (; n >= 8; n -= 8, p += 8) {
    const std::uint64_t w = load64(p);
    const std::uint32_t lo = s ^ static_cast<std::uint32_t>(w);
    const auto hi = static_cast<std::uint32_t>(w >> 32);
    s = t.slice[7][lo & 0xFF] ^ t.slice[6][(lo >> 8) & 0xFF] ^ t.slice[5][(lo >> 16) & 0xFF] ^ t.slice[4][lo >> 24] ^
        t.slice[3][hi & 0xFF] ^ t.slice[2][(hi >> 8) & 0xFF] ^ t.slice[1][(hi >> 16) & 0xFF] ^ t.slice[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) s = (s >> 8) ^ t.slice[0][(s ^ *p) & 0xFF];
  return s;
}

#if defined(__x86_64__)
std::uint32_t shift_lane(const Tables& t, std::uint32_t x) {
  return t.shift[0][x & 0xFF] ^ t.shift[1][(x >> 8) & 0xFF] ^ t.shift[2][(x >> 16) & 0xFF] ^ t.shift[3][x >> 24];
}

__attribute__((target("sse4.2"))) std::uint32_t raw_sse42(std::uint32_t s, const unsigned char* p, std::size_t n) {
  for (; n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0; --n, ++p) s = _mm_crc32_u8(s, *p);
  if (n >= 3 * kLane) {
    const Tables& t = tables();
    for (; n >= 3 * kLane; n -= 3 * kLane, p += 3 * kLane) {
      std::uint64_t a = s, b = 0, c = 0;
      for (std::size_t i = 0; i < kLane; i += 8) {
        a = _mm_crc32_u64(a, load64(p + i));
        b = _mm_crc32_u64(b, load64(p + kLane + i));
        c = _mm_crc32_u64(c, load64(p + 2 * kLane + i));
      }
      s = shift_lane(t, shift_lane(t, static_cast<std::uint32_t>(a)) ^ static_cast<std::uint32_t>(b)) ^
          static_cast<std::uint32_t>(c);
    }
  }
  std::uint64_t w = s;
  for (; n >= 8; n -= 8, p += 8) w = _mm_crc32_u64(w, load64(p));
  s = static_cast<std::uint32_t>(w);
  for (; n > 0; --n, ++p) s = _mm_crc32_u8(s, *p);
  return s;
}

bool have_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

// a * b modulo the polynomial, both bit-reflected (x^0 is the top bit).
std::uint32_t multiply_mod(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (std::uint32_t bit = 0x80000000u; bit != 0; bit >>= 1) {
    if ((a & bit) != 0) product ^= b;
    b = (b & 1) != 0 ? (b >> 1) ^ kPoly : b >> 1;  // b * x
  }
  return product;
}

// x^n modulo the polynomial, bit-reflected.
std::uint32_t x_pow_mod(std::uint64_t n) {
  std::uint32_t result = 0x80000000u, power = 0x40000000u;  // x^0, x^1
  for (; n != 0; n >>= 1) {
    if ((n & 1) != 0) result = multiply_mod(result, power);
    power = multiply_mod(power, power);
  }
  return result;
}

#if defined(__x86_64__)
// Folding with carry-less multiplication (VPCLMULQDQ over 512-bit registers),
// the way storage stacks reach tens of bytes per cycle. A 16-byte block B
// followed by D more bytes of the message contributes B(x) x^(8D) to the
// message's polynomial; modulo the polynomial that is a product of B's two
// 64-bit halves with two 32-bit constants, a value of at most 95 bits that is
// xored into the block D bytes further on. The register keeps its meaning
// through every fold: the message's CRC is that of the last block alone, so
// the crc32 instruction finishes it (no Barrett reduction).
//
// Bit-reflected, the 128 bits of a block loaded little-endian hold x^(127-i)
// at bit i, relative to the block's end; a 64-bit half L times a constant c
// (x^(31-j) at bit j) lands x^33 lower than the block needs. Hence the
// constants for a fold over D bytes: x^(8D+31) for the low half (its bits are
// x^64 higher) and x^(8D-33) for the high half.
struct FoldConstants {
  std::uint64_t by256[2], by64[2], by16[2];
  FoldConstants() {
    const auto set = [](std::uint64_t(&k)[2], std::uint64_t bytes) {
      k[0] = x_pow_mod(8 * bytes + 31);
      k[1] = x_pow_mod(8 * bytes - 33);
    };
    set(by256, 256);
    set(by64, 64);
    set(by16, 16);
  }
};

const FoldConstants& fold_constants() {
  static const FoldConstants k;
  return k;
}

bool have_vpclmul() {
  static const bool yes =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("sse4.2");
  return yes;
}

constexpr std::size_t kFoldMin = 256;  // below this the crc32 lanes are as fast

// Macros, not functions: a function returning a 512-bit vector would change
// the ABI for callers compiled without AVX-512 (and warn).
#define CAIRN_FOLD512(acc, k, next) \
  _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00), _mm512_clmulepi64_epi128(acc, k, 0x11), next, 0x96)
#define CAIRN_FOLD128(acc, k, next) \
  _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)), next)
#define CAIRN_LOAD512(at) _mm512_loadu_si512(at)

// With `to`, also copies the n bytes there in the same pass: the whole
// 64-byte lines of the destination with non-temporal stores as their bytes
// are folded (the stores drain while the CPU multiplies), the partial lines
// at either end with ordinary stores.
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2"))) std::uint32_t raw_fold(std::uint32_t s,
                                                                                   const unsigned char* p,
                                                                                   std::size_t n,
                                                                                   unsigned char* to = nullptr) {
  const std::size_t head = to == nullptr ? 0 : std::min(n, (64 - reinterpret_cast<std::uintptr_t>(to) % 64) % 64);
  const std::size_t lines = to == nullptr ? 0 : (n - head) / 64, tail = to == nullptr ? 0 : n - head - 64 * lines;
  unsigned char* const out = to + head;
  const unsigned char* const in = p + head;
  std::size_t line = 0;
  if (to != nullptr) std::memcpy(to, p, head);
#define CAIRN_STREAM(count)                                         \
  for (std::size_t q = 0; q < (count) && line < lines; ++q, ++line) \
  _mm512_stream_si512(reinterpret_cast<__m512i*>(out + 64 * line), CAIRN_LOAD512(in + 64 * line))
  const FoldConstants& k = fold_constants();
  const auto ll = [](std::uint64_t c) { return static_cast<long long>(c); };
  const __m512i k256 = _mm512_set4_epi64(ll(k.by256[1]), ll(k.by256[0]), ll(k.by256[1]), ll(k.by256[0]));
  const __m512i k64 = _mm512_set4_epi64(ll(k.by64[1]), ll(k.by64[0]), ll(k.by64[1]), ll(k.by64[0]));
  const __m128i k16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.by16));
  // The start register is the same as xoring it into the first four bytes.
  __m512i a0 = _mm512_xor_si512(CAIRN_LOAD512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(s))));
  __m512i a1 = CAIRN_LOAD512(p + 64), a2 = CAIRN_LOAD512(p + 128), a3 = CAIRN_LOAD512(p + 192);
  p += 256, n -= 256;
  CAIRN_STREAM(4);
  for (; n >= 256; p += 256, n -= 256) {
    CAIRN_STREAM(4);
    a0 = CAIRN_FOLD512(a0, k256, CAIRN_LOAD512(p));
    a1 = CAIRN_FOLD512(a1, k256, CAIRN_LOAD512(p + 64));
    a2 = CAIRN_FOLD512(a2, k256, CAIRN_LOAD512(p + 128));
    a3 = CAIRN_FOLD512(a3, k256, CAIRN_LOAD512(p + 192));
  }
  __m512i a = CAIRN_FOLD512(CAIRN_FOLD512(CAIRN_FOLD512(a0, k64, a1), k64, a2), k64, a3);
  for (; n >= 64; p += 64, n -= 64) a = CAIRN_FOLD512(a, k64, CAIRN_LOAD512(p));
  alignas(64) unsigned char last[64];
  _mm512_store_si512(last, a);
  __m128i x = _mm_load_si128(reinterpret_cast<const __m128i*>(last));
  for (int i = 1; i < 4; ++i)
    x = CAIRN_FOLD128(x, k16, _mm_load_si128(reinterpret_cast<const __m128i*>(last + 16 * i)));
  for (; n >= 16; p += 16, n -= 16) x = CAIRN_FOLD128(x, k16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  std::uint64_t w = _mm_crc32_u64(0, static_cast<std::uint64_t>(_mm_cvtsi128_si64(x)));
  w = _mm_crc32_u64(w, static_cast<std::uint64_t>(_mm_extract_epi64(x, 1)));
  s = static_cast<std::uint32_t>(w);
  for (; n > 0; --n, ++p) s = _mm_crc32_u8(s, *p);
  if (to != nullptr) {
    CAIRN_STREAM(lines);
    std::memcpy(out + 64 * lines, in + 64 * lines, tail);
  }
  return s;
}
#undef CAIRN_STREAM
#undef CAIRN_FOLD512
#undef CAIRN_FOLD128
#undef CAIRN_LOAD512
#endif

}  // namespace

// Appending n zero bytes multiplies the register by x^(8n); with the
// inversions of the start and the end, crc(a b) = crc(a) x^(8 |b|) + crc(b).
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) noexcept {
  std::uint32_t power = 0x00800000u;  // x^8: one byte
  std::uint32_t shifted = crc_a;
  for (; len_b != 0; len_b >>= 1) {
    if ((len_b & 1) != 0) shifted = multiply_mod(shifted, power);
    power = multiply_mod(power, power);
  }
  return shifted ^ crc_b;
}

std::uint32_t crc32c_portable(std::uint32_t crc, const void* data, std::size_t n) noexcept {
  return ~raw_portable(~crc, static_cast<const unsigned char*>(data), n);
}

bool crc32c_copy_streams(std::size_t n) noexcept {
#if defined(__x86_64__)
  return n >= kFoldMin && have_vpclmul();
#else
  (void)n;
  return false;
#endif
}

std::uint32_t crc32c_copy_nt(void* dst, const void* src, std::size_t n, std::uint32_t crc) noexcept {
#if defined(__x86_64__)
  if (crc32c_copy_streams(n))
    return ~raw_fold(~crc, static_cast<const unsigned char*>(src), n, static_cast<unsigned char*>(dst));
#endif
  std::memcpy(dst, src, n);
  return crc32c(crc, src, n);
}

std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t n) noexcept {
#if defined(__x86_64__)
  if (n >= kFoldMin && have_vpclmul()) return ~raw_fold(~crc, static_cast<const unsigned char*>(data), n);
  if (have_sse42()) return ~raw_sse42(~crc, static_cast<const unsigned char*>(data), n);
#endif
  return crc32c_portable(crc, data, n);
}

namespace {

// ops[j][d][k][b]: the register whose byte k is b, shifted past d * 16^j zero
// bytes. A shift by n < 2^16 bytes is one operator per hex digit of n.
struct ShiftTables {
  std::uint32_t ops[4][16][4][256];
  ShiftTables() {
    for (int j = 0; j < 4; ++j)
      for (std::uint32_t d = 0; d < 16; ++d) {
        const std::uint64_t n = std::uint64_t{d} << (4 * j);
        std::uint32_t image[32];
        for (int bit = 0; bit < 32; ++bit) image[bit] = crc32c_combine(std::uint32_t{1} << bit, 0, n);
        for (int k = 0; k < 4; ++k)
          for (std::uint32_t b = 0; b < 256; ++b) {
            std::uint32_t x = 0;
            for (int i = 0; i < 8; ++i)
              if ((b >> i) & 1) x ^= image[8 * k + i];
            ops[j][d][k][b] = x;
          }
      }
  }
};

const ShiftTables& shift_tables() {
  static const ShiftTables t;
  return t;
}

}  // namespace

std::uint32_t crc32c_shift(std::uint32_t x, std::uint32_t n) noexcept {
  // Up to 16 steps of 65535 bytes (a whole SlotStore chunk is 65536) by
  // tables; beyond that the square-and-multiply of crc32c_combine.
  if (n > 16u * 0xFFFFu) return crc32c_combine(x, 0, n);
  const ShiftTables& t = shift_tables();
  for (; n != 0;) {
    std::uint32_t step = std::min(n, 0xFFFFu);
    n -= step;
    for (int j = 0; j < 4 && step != 0; ++j, step >>= 4) {
      const auto& op = t.ops[j][step & 15];
      x = op[0][x & 0xFF] ^ op[1][(x >> 8) & 0xFF] ^ op[2][(x >> 16) & 0xFF] ^ op[3][x >> 24];
    }
  }
  return x;
}

// In the register before its inversions (raw), a CRC is linear in the data:
// the raw register of the message from zero is the xor of each piece's raw
// register from zero moved past the bytes after it; the inversions add the
// start register moved past the whole message.
std::uint32_t crc32c_piece(const void* data, std::size_t n, std::uint32_t after) noexcept {
  return crc32c_shift(~crc32c(0xFFFFFFFFu, data, n), after);
}

std::uint32_t crc32c_join(std::uint32_t pieces, std::uint64_t len) noexcept {
  const std::uint32_t start = len <= 16u * 0xFFFFu ? crc32c_shift(0xFFFFFFFFu, static_cast<std::uint32_t>(len))
                                                   : crc32c_combine(0xFFFFFFFFu, 0, len);
  return ~(start ^ pieces);
}

bool crc32c_accelerated() noexcept {
#if defined(__x86_64__)
  return have_sse42();
#else
  return false;
#endif
}

}  // namespace cairn::util
