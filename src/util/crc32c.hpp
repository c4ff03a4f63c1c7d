// crc32c.hpp — CRC-32C (Castagnoli), the checksum of committed payloads
// (internal): the SSE4.2 crc32 instruction where the CPU has it, tables
// otherwise; both give the same value.
//
// Why CRC-32C and not util::hash_bytes: it is what storage uses for data at
// rest (iSCSI, ext4 metadata, Btrfs), it detects every burst of up to 32 bits
// and every odd number of flipped bits, and one core computes it at memory
// speed with the crc32 instruction (three interleaved lanes, combined).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn::util {

// Extends `crc` (0 to start) over n bytes: crc32c(crc32c(0, a), b) is the
// CRC of a followed by b. crc32c(0, "123456789", 9) == 0xE3069283.
std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t n) noexcept;

// The CRC of a followed by b from crc32c(0, a) and crc32c(0, b) and b's
// length: parts computed on several threads joined in order. O(log len_b).
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) noexcept;

// The table implementation alone (what crc32c uses without SSE4.2); the tests
// hold the two to the same values.
std::uint32_t crc32c_portable(std::uint32_t crc, const void* data, std::size_t n) noexcept;

// True when crc32c uses the crc32 instruction on this CPU.
bool crc32c_accelerated() noexcept;

}  // namespace cairn::util
