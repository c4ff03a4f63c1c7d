// crc32c_test.cpp — CRC-32C: the published check values, the accelerated
// path against the tables at every length and alignment around its lanes,
// and chaining.
#include "util/crc32c.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using cairn::util::crc32c;
using cairn::util::crc32c_portable;

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
    for (std::size_t n : {0, 1, 7, 8, 9, 63, 64, 4095, 4096, 12287, 12288, 12289, 12295, 24576, 24583, 36864})
      ASSERT_EQ(crc32c(0, buf.data() + align, n), crc32c_portable(0, buf.data() + align, n))
          << "length " << n << " at offset " << align;
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

}  // namespace
