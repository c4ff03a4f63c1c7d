// workloads.hpp — the built-in workloads of the crash harness (internal).
#pragma once

#include <string>
#include <vector>

#include "tests/crashsim/crashsim.hpp"

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
// The undo-log strategy: libpmemobj on its own pool file, one of the harness's
// images (a FileStructure), and its broken variants.
std::vector<Workload> undo_log_workloads();

}  // namespace cairn::testing::crashsim::builtin
