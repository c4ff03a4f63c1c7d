// crc32c.hpp — CRC-32C (Castagnoli), the checksum of committed payloads
// (internal): the SSE4.2 crc32 instruction where the CPU has it, tables
// otherwise; both give the same value. Where the CPU has AVX-512 and
// VPCLMULQDQ, buffers of 256 bytes and more are folded by carry-less
// multiplication instead (about 2.5x the crc32 instruction's speed).
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

// crc32c_combine(x, 0, n), by tables up to n = 16 * 65535 (a few dozen cycles
// per 64 KiB, not a few thousand): the register x moved past n zero bytes. What lets pieces of
// a chunk, checksummed separately and in any order, be joined by xor (the
// in-place strategy's streamed writes).
std::uint32_t crc32c_shift(std::uint32_t x, std::uint32_t n) noexcept;

// Pieces of a message checksummed separately, in any order, on any thread:
// crc32c_piece() of each piece (its n bytes and how many bytes of the
// message follow it), xored together, then crc32c_join() with the message's
// length gives crc32c(0, message) — when the pieces cover it exactly once.
std::uint32_t crc32c_piece(const void* data, std::size_t n, std::uint32_t after) noexcept;
std::uint32_t crc32c_join(std::uint32_t pieces, std::uint64_t len) noexcept;

// Copies n bytes from src to dst and returns crc32c(crc, src, n), in one
// pass where crc32c_copy_streams(n): the whole 64-byte lines of dst are then
// written with non-temporal stores, hidden behind the folding, and the
// partial lines at its two ends, [dst, next 64-byte boundary) and [last
// boundary, dst + n), with ordinary stores that the caller writes back; no
// fence. Otherwise memcpy, then crc32c. (A streamed row costs its copy alone
// instead of its copy plus its checksum: 16 KiB rows into 32 MiB, 0.89 ms
// against 1.34 ms.)
bool crc32c_copy_streams(std::size_t n) noexcept;
std::uint32_t crc32c_copy_nt(void* dst, const void* src, std::size_t n, std::uint32_t crc) noexcept;

// The table implementation alone (what crc32c uses without SSE4.2); the tests
// hold the two to the same values.
std::uint32_t crc32c_portable(std::uint32_t crc, const void* data, std::size_t n) noexcept;

// True when crc32c uses the crc32 instruction on this CPU.
bool crc32c_accelerated() noexcept;

}  // namespace cairn::util
