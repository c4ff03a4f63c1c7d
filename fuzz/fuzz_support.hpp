// fuzz_support.hpp — what every fuzz target shares: a scratch directory per
// process under /dev/shm, the sparse pool image an input encodes, and the
// layouts the seed generator and the targets agree on.
//
// A pool file is at least 1 MiB and mostly zeros, so the five pool-based
// targets do not take the file itself as input but a sparse image of it
// (little-endian):
//
//   u32 file_size   the file's length (at most kMaxImageBytes; larger is cut)
//   u8  flags       bit 0: recompute the pool's header and root-table
//                   checksums after placing the segments, so that mutations
//                   reach what lies behind them; the other bits are the
//                   target's (README.md)
//   then segments:  u32 offset, u16 length, `length` bytes, until the input
//                   ends (a segment past file_size is cut, a short last one
//                   takes what is there)
//
// The file is created sparse (ftruncate), then the segments are written. A
// valid small pool encodes in a few KiB (its non-zero runs: header copies,
// root tables, the blocks in use), so the generated seeds are small and a
// mutation lands on bytes that mean something.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/octree.hpp"
#include "cairn/persist.hpp"

namespace cairn::fuzz {

inline constexpr std::uint64_t kMaxImageBytes = 16ull << 20;
inline constexpr std::uint8_t kFixPoolChecksums = 1;

// /dev/shm/cairn-fuzz-<pid>/ (created on first use, removed at exit), so that
// parallel fuzzing jobs (-jobs, -fork) never share a file.
const std::string& scratch_dir();

// Writes `bytes` to `path` (replacing it). A failure here is the harness's
// (a full /dev/shm): it aborts with a message rather than report nothing.
void write_file(const std::string& path, std::span<const std::uint8_t> bytes);
std::vector<std::uint8_t> read_file(const std::string& path);
// Removes every entry of the scratch directory (between inputs).
void clear_scratch();

// Builds the file `path` from a sparse image (above); returns its flags.
std::uint8_t write_sparse_image(const std::string& path, std::span<const std::uint8_t> input);
// The sparse image of a file, flags bit 0 set (the seed generator).
std::vector<std::uint8_t> encode_sparse_image(std::span<const std::uint8_t> file, std::uint8_t flags);

// The state every slot-store and file-checkpoint seed holds: a plain region
// "p" whose first 8 bytes are a registered pointer into itself and a dual
// region "u". The targets register the same layout, so that a damaged file
// gets past the layout check to the data.
inline constexpr std::size_t kPlainBytes = 256;
inline constexpr std::size_t kDualBytes = 1000;
inline constexpr std::size_t kPointerTarget = 64;  // p[0] points at p + 64
// The slot-store strategies; flags bits 1..2 of a slot-store input pick one.
inline constexpr const char* kSlotStrategies[4] = {"in-place", "shadow", "dram-cache", "nt-copy"};
// A Context for the state "state" in the scratch directory, one thread, no
// helper thread.
cairn::persist::Options state_options(const std::string& strategy);
// Registers that layout and opens the storage.
struct State {
  cairn::persist::Region* p = nullptr;
  cairn::persist::DualRegion* u = nullptr;
};
cairn::Result<State> open_state(cairn::persist::Context& ctx);

// The PM-octree seeds: a 4 MiB pool, both dimensions, a few payload sizes.
inline constexpr std::uint64_t kOctreePoolBytes = 4ull << 20;
// flags bits 1..3 of an octree input pick dims and data_size: bit 1 set is a
// quadtree, bits 2..3 index kOctreeDataSizes.
inline constexpr std::uint32_t kOctreeDataSizes[4] = {0, 8, 16, 24};

// dist's slot files and flushed versions: the payload size the targets
// expect (two 64 KiB blocks and a part, so block hashes span blocks).
inline constexpr std::size_t kSlotPayloadBytes = 2 * (64 << 10) + 3000;
// A flushed version's payload (the file is the input itself: kept small).
inline constexpr std::size_t kFlushPayloadBytes = 3000;

// The amr snapshot: the in-core tree it is decoded into and the run's finest level.
inline constexpr int kAmrLevelMax = 6;
cairn::octree::Options amr_options();
// The workflow progress record: the signature of the run that resumes.
inline constexpr const char* kWorkflowSignature = "coupling=pmem parts=2 cycles=2 level-max=6";

}  // namespace cairn::fuzz
