// crc32c_test.cpp — CRC-32C: the published check values, the accelerated
// path against the tables at every length and alignment around its lanes,
// and chaining.
#include "util/crc32c.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

using cairn::util::crc32c;
using cairn::util::crc32c_combine;
using cairn::util::crc32c_join;
using cairn::util::crc32c_piece;
using cairn::util::crc32c_portable;
using cairn::util::crc32c_shift;

// RFC 3720 (iSCSI), B.4, and the usual check value.
TEST(Crc32c, PublishedValues) {
  EXPECT_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_portable(0, "123456789", 9), 0xE3069283u);
  std::uint8_t b[32];
  std::memset(b, 0, sizeof b);
  EXPECT_EQ(crc32c(0, b, sizeof b), 0x8A9136AAu);
  std::memset(b, 0xFF, sizeof b);
  EXPECT_EQ(crc32c(0, b, sizeof b), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) b[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(crc32c(0, b, sizeof b), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) b[i] = static_cast<std::uint8_t>(31 - i);
  EXPECT_EQ(crc32c(0, b, sizeof b), 0x113FDB5Cu);
  EXPECT_EQ(crc32c(0, b, 0), 0u);
}

TEST(Crc32c, AcceleratedMatchesTheTablesAtEveryLengthAndAlignment) {
  std::vector<std::uint8_t> buf(3 * 3 * 4096 + 64);
  std::uint32_t x = 12345;
  for (auto& v : buf) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<std::uint8_t>(x >> 24);
  }
  for (std::size_t align = 0; align < 8; ++align)
    for (std::size_t n : {0,   1,   7,   8,    9,    63,    64,    255,   256,   257,   271,   272,   319,  320,
                          511, 512, 527, 4095, 4096, 12287, 12288, 12289, 12295, 16400, 24576, 24583, 36864})
      ASSERT_EQ(crc32c(0, buf.data() + align, n), crc32c_portable(0, buf.data() + align, n))
          << "length " << n << " at offset " << align;
  // Any start register, any length and alignment (the folding path starts
  // from the register xored into its first bytes).
  std::mt19937_64 rng(5);
  for (int i = 0; i < 3000; ++i) {
    const std::size_t align = rng() % 64, n = rng() % (buf.size() - align);
    const auto start = static_cast<std::uint32_t>(rng());
    ASSERT_EQ(crc32c(start, buf.data() + align, n), crc32c_portable(start, buf.data() + align, n))
        << "length " << n << " at offset " << align << " from " << start;
  }
}

TEST(Crc32c, ChainsAndSeesEveryFlippedBit) {
  std::vector<std::uint8_t> buf(20000, 0x5A);
  const std::uint32_t whole = crc32c(0, buf.data(), buf.size());
  for (std::size_t cut : {0, 1, 5000, 12288, 19999, 20000}) {
    EXPECT_EQ(crc32c(crc32c(0, buf.data(), cut), buf.data() + cut, buf.size() - cut), whole) << cut;
    EXPECT_EQ(cairn::util::crc32c_combine(crc32c(0, buf.data(), cut), crc32c(0, buf.data() + cut, buf.size() - cut),
                                          buf.size() - cut),
              whole)
        << cut;
  }
  for (std::size_t byte : {0, 100, 12287, 12288, 19999})
    for (int bit = 0; bit < 8; ++bit) {
      buf[byte] ^= static_cast<std::uint8_t>(1u << bit);
      EXPECT_NE(crc32c(0, buf.data(), buf.size()), whole) << byte << ":" << bit;
      buf[byte] ^= static_cast<std::uint8_t>(1u << bit);
    }
}

TEST(Crc32c, ShiftByTablesMatchesTheCombine) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const auto x = static_cast<std::uint32_t>(rng());
    const auto n = static_cast<std::uint32_t>(i < 100 ? i : rng() % (i % 2 == 0 ? 1u << 16 : 1u << 21));
    ASSERT_EQ(crc32c_shift(x, n), crc32c_combine(x, 0, n)) << "n = " << n;
  }
  EXPECT_EQ(crc32c_shift(0x12345678u, 1u << 20), crc32c_combine(0x12345678u, 0, 1u << 20));
}

// A message cut into pieces at random places, the pieces joined in a random
// order, gives the CRC of the whole; a missing or doubled piece does not.
TEST(Crc32c, PiecesJoinedInAnyOrderGiveTheWholeCrc) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t len = 1 + rng() % (64 * 1024);
    std::vector<unsigned char> msg(len);
    for (auto& b : msg) b = static_cast<unsigned char>(rng());
    std::vector<std::size_t> cuts{0, len};
    for (int c = 0; c < 5; ++c) cuts.push_back(rng() % len);
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::pair<std::size_t, std::size_t>> pieces;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i)
      if (cuts[i + 1] > cuts[i]) pieces.emplace_back(cuts[i], cuts[i + 1] - cuts[i]);
    std::shuffle(pieces.begin(), pieces.end(), rng);
    std::uint32_t acc = 0;
    for (const auto& [at, n] : pieces)
      acc ^= crc32c_piece(msg.data() + at, n, static_cast<std::uint32_t>(len - at - n));
    ASSERT_EQ(crc32c_join(acc, len), crc32c(0, msg.data(), len)) << "length " << len;
    if (pieces.size() > 1) {
      const auto& [at, n] = pieces[0];
      EXPECT_NE(crc32c_join(acc ^ crc32c_piece(msg.data() + at, n, static_cast<std::uint32_t>(len - at - n)), len),
                crc32c(0, msg.data(), len));
    }
  }
}

}  // namespace

// The fused copy writes exactly [dst, dst + n), byte for byte, at every
// alignment of either end, and returns the CRC of what it copied.
TEST(Crc32c, CopyWithChecksumCopiesExactlyAndChecksumsTheSource) {
  std::mt19937_64 rng(3);
  std::vector<unsigned char> src(40000), dst(40200);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t s_at = rng() % 64, d_at = rng() % 128;
    const std::size_t n = trial < 40 ? trial * 7 % 600 : rng() % (src.size() - s_at);
    std::fill(dst.begin(), dst.end(), 0xA5);
    const auto start = static_cast<std::uint32_t>(rng());
    ASSERT_EQ(cairn::util::crc32c_copy_nt(dst.data() + d_at, src.data() + s_at, n, start),
              crc32c(start, src.data() + s_at, n))
        << "length " << n;
    ASSERT_EQ(std::memcmp(dst.data() + d_at, src.data() + s_at, n), 0) << "length " << n;
    for (std::size_t i = 0; i < dst.size(); ++i) {
      if (i >= d_at && i < d_at + n) continue;
      ASSERT_EQ(dst[i], 0xA5) << "byte " << i << " outside the copy, length " << n;
    }
  }
}
