// format.hpp — the PM-octree's on-media format (internal): the tree header,
// the commit records, family blocks and child references.
//
// All in one cairn pool:
//   root slot 0 -> tree header (written once at create): magic, layout,
//                  dims, data_size, block size, chunk size, chunk table
//   root slot 1 -> the commit record of the last persisted version, one of
//                  the record places after the header (two; three with
//                  keep_previous): generation g uses place g % places, so
//                  the live record is never overwritten. A record holds the
//                  generation, the root block, the number of chunks, the
//                  CRC-32C of those chunk-table entries and a checksum.
//   chunk table -> offsets of the chunks (arena extents of chunk_bytes),
//                  append-only; entries past the committed count are free
//   chunk       -> family blocks of block_bytes, no chunk header
//   block       -> {code of the parent octant, generation, CRC-32C} then
//                  2^d slots {child reference, payload}; the CRC covers the
//                  whole block but itself and is written when the block is
//                  persisted (a DRAM block, or a pool block the working
//                  version is still writing, has none yet)
// A child reference is 0 (a leaf), a pool offset (even) or a DRAM address
// with bit 0 set (C0; only the working version has those).
//
// Layout 2 (this one) added the block CRC and the chunk table's CRC; a pool
// of layout 1 is refused (Errc::wrong_version).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cairn/extended/pool.hpp"
#include "cairn/octree.hpp"
#include "util/crc32c.hpp"

namespace cairn::octree::detail {

inline constexpr std::uint64_t kTreeMagic = 0x45455254434F4D50ull;  // "PMOCTREE"
inline constexpr std::uint64_t kRecordMagic = 0x44524F434552544Full;
inline constexpr std::uint32_t kTreeLayout = 2;
inline constexpr unsigned kHeaderSlot = 0, kRecordSlot = 1;
inline constexpr std::uint64_t kNoParent = ~std::uint64_t{0};  // the root block's parent code
inline constexpr std::size_t kHeaderBytes = 128, kRecordBytes = 128;
// Header flag: the version before the committed one is kept intact
// (Options::keep_previous). Pools without it have 0 there. Such a tree has
// three record places (generation g in place g % 3), so that the record of
// the kept version is not overwritten by the next persist before its commit
// point either: a crash during that persist still finds it.
inline constexpr std::uint64_t kKeepsPrevious = 1;
inline std::uint64_t record_places(std::uint64_t flags) { return (flags & kKeepsPrevious) != 0 ? 3 : 2; }
inline std::uint64_t record_at(std::uint64_t meta, std::uint64_t flags, std::uint64_t generation) {
  return meta + kHeaderBytes + (generation % record_places(flags)) * kRecordBytes;
}

struct TreeHeader {
  std::uint64_t magic;
  std::uint32_t layout;
  std::uint32_t dims;
  std::uint32_t data_size;
  std::uint32_t block_bytes;
  std::uint64_t chunk_bytes;
  std::uint64_t chunk_table;     // offset of the table
  std::uint64_t chunk_capacity;  // entries
  std::uint64_t flags;           // kKeepsPrevious
  std::uint64_t reserved[8];
  std::uint64_t checksum;
};
static_assert(sizeof(TreeHeader) == kHeaderBytes);

struct Record {
  std::uint64_t magic;
  std::uint64_t generation;
  std::uint64_t root;         // root block
  std::uint64_t chunk_count;  // table entries in use
  std::uint64_t depth;        // finest level ever reached (an upper bound)
  std::uint64_t table_crc;    // CRC-32C of the chunk_count table entries
  std::uint64_t reserved[9];
  std::uint64_t checksum;
};
static_assert(sizeof(Record) == kRecordBytes);

inline std::uint64_t header_checksum(const TreeHeader& h) {
  return pool::checksum64(&h, offsetof(TreeHeader, checksum));
}
inline std::uint64_t record_checksum(const Record& r) { return pool::checksum64(&r, offsetof(Record, checksum)); }

struct BlockHeader {
  std::uint64_t code;   // the parent octant (kNoParent for the root block)
  std::uint32_t epoch;  // the generation that wrote the block
  std::uint32_t crc;    // block_crc, written when the block is persisted
};
static_assert(sizeof(BlockHeader) == 16 && offsetof(BlockHeader, crc) == 12);

// A family block's CRC-32C: every byte of it but the CRC field.
inline std::uint32_t block_crc(const std::byte* block, std::size_t block_bytes) {
  return util::crc32c(util::crc32c(0, block, offsetof(BlockHeader, crc)), block + sizeof(BlockHeader),
                      block_bytes - sizeof(BlockHeader));
}

using Ref = std::uint64_t;
inline bool in_dram(Ref r) { return (r & 1) != 0; }

// An octant's locational code: level, then the coordinates (19 bits each).
inline std::uint64_t pack(const Octant& o) {
  return (static_cast<std::uint64_t>(o.level) << 57) | (static_cast<std::uint64_t>(o.x) << 38) |
         (static_cast<std::uint64_t>(o.y) << 19) | o.z;
}
inline Octant unpack(std::uint64_t c) {
  constexpr std::uint64_t m = (1u << 19) - 1;
  return {static_cast<int>(c >> 57), static_cast<std::uint32_t>((c >> 38) & m),
          static_cast<std::uint32_t>((c >> 19) & m), static_cast<std::uint32_t>(c & m)};
}

// child_of (cairn/octree.hpp), inline: the walks compute it for every slot.
inline Octant child_octant(const Octant& o, int c) {
  const std::uint32_t h = o.length() >> 1;
  return {o.level + 1, o.x + ((c & 1) ? h : 0), o.y + ((c & 2) ? h : 0), o.z + ((c & 4) ? h : 0)};
}

// Bytes of a family block, and of one slot {child reference, payload}.
inline std::size_t block_bytes_for(int dims, std::uint32_t data_size, std::size_t& stride) {
  stride = 8 + (static_cast<std::size_t>(data_size) + 7) / 8 * 8;
  return sizeof(BlockHeader) + (std::size_t{1} << dims) * stride;
}

}  // namespace cairn::octree::detail
