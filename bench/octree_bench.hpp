// octree_bench.hpp — `cairn bench octree`: the PM-octree (include/cairn/octree.hpp)
// against p4est's p8est on the same 3D refinement, in one run (internal).
//
// Per size (refinement level R and shift S, as p4est's own timings example
// builds its forest): a uniform tree of level R-S, then recursive refinement
// where children 0, 3, 5 and 6 refine further down to level R (p8est's
// "fractal" pattern), then 2:1 face balance. On both structures, with a
// 16-byte payload per leaf, each repeat times: uniform, refine, face
// balance, a read traversal of every payload (p4est: its quadrant arrays vs
// the flat Octree::leaves(); p8est_iterate vs visit_leaves), a write
// traversal (Octree::write_leaves), saving (p8est_save to a file in --dir vs
// the first Octree::persist), loading (p8est_load vs Octree::restore, alone
// and with the first traversal), and full (face, edge, corner) balance of a
// fresh tree. PM-octree alone: persist after 1 % of the leaves changed, and
// the memory of two versions after a fraction f of the leaves changed (the
// seed's Fig. 3). Every step checks that both structures hold the same
// leaves (count and an order-dependent hash of octants and payloads). Each
// side of each repeat runs in its own forked process (a cold heap for both;
// p4est's aborts stay in the child), p4est and PM-octree first by turns.
//
// p4est is optional (CAIRN_HAVE_P4EST, set by bench/CMakeLists.txt when
// libp4est-dev and MPI are installed); without it PM-octree is measured alone.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::bench {

// One refinement depth: uniform to level - shift, fractal refinement to level.
struct OctreeSize {
  int level = 7;
  int shift = 4;
  std::string name() const { return std::to_string(level) + ":" + std::to_string(shift); }
};

// "7:4,9" → {{7, 4}, {9, 4}} (the shift defaults to 4, p4est's timings).
Result<std::vector<OctreeSize>> parse_octree_sizes(const std::string& text);

struct OctreeBenchOptions {
  std::vector<OctreeSize> sizes = {{7, 4}};
  int repeats = 3;
  std::string dir = "/dev/shm/cairn-bench-octree";
  std::uint32_t data_size = 16;
  std::uint64_t dram_budget = 256ull << 20;  // Octree::Options::dram_budget
  std::uint64_t pool_size = 0;               // 0: from the expected tree size
  bool full_balance = true;                  // also time balance(Connect::full) on a fresh tree
  bool use_p4est = true;                     // false: PM-octree alone even when p4est is built in
};

// One timed operation: medians over the repeats, and every sample.
struct OctreeOpRow {
  std::string op;
  std::string what;  // what each side does
  std::vector<double> p4est_runs, pm_runs;
  std::optional<double> p4est_s, pm_s;  // medians; empty: not measured on that side
  std::optional<double> ratio() const {
    if (!p4est_s || !pm_s || *pm_s <= 0) return std::nullopt;
    return *p4est_s / *pm_s;
  }
};

// Two versions after changing a fraction of the leaves (after a persist).
struct OctreeVersionRow {
  std::string name;        // "1%", "61%", "100%", "1% scattered"
  double fraction = 0;     // of the leaves
  bool scattered = false;  // every 100th leaf instead of a contiguous Morton range
  std::uint64_t changed_leaves = 0;
  std::vector<double> factor_runs, overlap_runs, update_runs, persist_runs;
  double factor = 0;   // (nvm_bytes + dram_bytes) / version_bytes, median
  double overlap = 0;  // shared_bytes / version_bytes, median
  double update_s = 0, persist_s = 0;
  std::uint64_t persist_bytes = 0;  // bytes the following persist wrote (last run)
};

struct OctreeMemory {
  // p4est after face balance.
  std::uint64_t p4est_quadrants = 0, p4est_memory_used = 0, p4est_quadrant_size = 0;
  double p4est_bytes_per_leaf = 0;  // (memory_used - payload) / quadrants
  // PM-octree after face balance, before the first persist.
  std::uint64_t leaves = 0, octants = 0, blocks = 0, block_bytes = 0, dram_bytes = 0, pool_bytes = 0;
  std::uint64_t c0_regions = 0, merges = 0;
  double pm_bytes_per_leaf = 0;       // (blocks * block_bytes - leaves * data_size) / leaves
  double pm_dram_bytes_per_leaf = 0;  // C0 only (dram_bytes / leaves)
  double pm_pool_bytes_per_leaf = 0;  // C1 blocks / leaves
  std::uint64_t pool_size = 0;        // of the pool file
};

struct OctreeGoal {
  std::string name;
  std::string target;
  std::string measured;
  std::optional<bool> met;  // empty: not measurable in this run (no p4est)
};

struct OctreeSizeReport {
  OctreeSize size;
  bool skipped = false;
  std::string skip_reason;
  std::uint64_t leaves_refined = 0, leaves_balanced = 0, leaves_full = 0;
  bool leaves_equal = true;       // p4est and PM-octree hold the same leaves at every step
  bool restore_equal = true;      // the restored tree's checksum is the persisted one
  std::string mismatch;           // the first difference found
  std::string note;               // a part p4est could not do at this size, and why
  double restore_max_s = 0;       // slowest restore over the repeats
  double persist_1pct_share = 0;  // persist after a 1 % change / full persist (medians)
  // What the saves wrote (last run): the p8est file, and the first persist
  // (every block; those in C0 copied into the pool first).
  std::uint64_t p4est_file_bytes = 0;
  std::uint64_t persist_bytes = 0, persist_blocks = 0, persist_merged_blocks = 0;
  std::vector<OctreeOpRow> ops;
  std::vector<OctreeVersionRow> versions;
  OctreeMemory memory;
  std::vector<OctreeGoal> goals;
};

struct OctreeReport {
  std::string machine;
  OctreeBenchOptions options;
  bool have_p4est = false;
  std::string p4est_note;  // why p4est was not measured, if it was not
  std::vector<OctreeSizeReport> sizes;
  bool failed = false;  // some check failed (leaves differ, restore differs)
};

// Whether this build has p4est (CAIRN_HAVE_P4EST).
bool octree_bench_has_p4est();

Result<OctreeReport> run_octree_bench(const OctreeBenchOptions& options, std::ostream* progress);
void print_octree_report(const OctreeReport& report, std::ostream& out);
Result<void> write_octree_json(const OctreeReport& report, const std::string& path);

}  // namespace cairn::bench
