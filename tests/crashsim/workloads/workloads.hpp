// workloads.hpp — the built-in workloads of the crash harness (internal).
#pragma once

#include <string>
#include <vector>

#include "tests/crashsim/crashsim.hpp"

namespace cairn::octree {
class Octree;
}

namespace cairn::testing::crashsim::builtin {

// The reference structure and its deliberately broken variants.
std::vector<Workload> ref_array_workloads();
// The pool's own publish_root protocol over arena extents.
std::vector<Workload> pool_publish_workloads();
// The pool-based persistence strategies (persist::Context on the harness's
// pool): one per crash variant of each registered CrashHarness::pool strategy.
std::vector<Workload> strategy_workloads();
// strategy.NAME or strategy.NAME.SUFFIX.
std::string strategy_workload_name(const std::string& strategy, const std::string& suffix);
// pmem: streams (src/stream): the directory's writer path and commit word.
std::vector<Workload> stream_workloads();
// dist's partner-copy slot file (src/dist/files.*): begin, changed blocks, publish.
std::vector<Workload> dist_slot_workloads();
// The PM-octree (src/octree): time steps of an adaptive mesh, each committed
// by persist(), and its broken variants (octree/internal.hpp).
std::vector<Workload> octree_workloads();
// One time step of those workloads' mesh, every choice drawn from `rng`: a
// random mix of refine, recursive refine towards a point, coarsen, 2:1
// balance, payload updates and collections. The caller persists;
// octree_kill_test.cpp runs the same steps through the public API.
struct OctreeMesh {
  int max_level = 5;               // finest level refinement makes (at least 3)
  std::uint64_t max_leaves = 400;  // past it a step only coarsens and updates
  unsigned gc_odds = 2;            // a collection between two changes with odds 1 in this (0: never)
};
Result<void> octree_mesh_step(octree::Octree& tree, Rng& rng, const OctreeMesh& mesh);
// The undo-log strategy: libpmemobj on its own pool file, one of the harness's
// images (a FileStructure), and its broken variants.
std::vector<Workload> undo_log_workloads();

}  // namespace cairn::testing::crashsim::builtin
