// snapshot.hpp — the in-core baseline's snapshot file (internal to apps/amr):
// what `--strategy in-core` writes every --snapshot-every steps and resumes
// from, the file checkpoint the PM-octree is measured against.
//
// Format "AMRSNAP1" (little-endian): magic, step (u64), leaf count n (u64),
// n leaves {level, x, y, z: u32; c: f64} in visiting order, then FNV-1a 64
// of everything before it. Reading checks, before anything is built from
// the file: the magic (else foreign_file), the length against n without
// wrapping, the checksum (corrupted); then every leaf: its level within
// --level-max (deeper is another run's: layout_mismatch), its corner on its
// level's grid and inside the domain, its fraction finite, and the leaves
// tiling the domain exactly in visiting order (corrupted).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/octree.hpp"

namespace cairn::apps::amr {

// The snapshot of `tree` (8-byte payloads: the fraction c) at `step`.
Result<std::vector<unsigned char>> encode_snapshot(std::uint64_t step, const octree::Octree& tree);
// Rebuilds the snapshot's leaves in `fresh` (a tree of one leaf, 8-byte
// payloads or more) and returns its step. `path` names the file in errors;
// `level_max` is the run's finest level.
Result<std::uint64_t> decode_snapshot(std::span<const unsigned char> bytes, const std::string& path, int level_max,
                                      octree::Octree& fresh);

}  // namespace cairn::apps::amr
