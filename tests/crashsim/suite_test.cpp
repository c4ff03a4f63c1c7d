// suite_test.cpp — the CI crash suite: the correct workloads explored to a
// total of CAIRN_CRASH_STATES crash states (default 10^6 over the reference
// structure and the pool protocol, plus at least 10^5 per persistence
// strategy), split by weight and scaled together. Each share is its own test
// so ctest spreads them over the cores. `make test` runs it at 10^5 under the
// sanitizers and at the full 10^6 in the release build (for throughput).
// Set CAIRN_CRASH_STATES=20000 for a quick local run, or higher for a soak.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "persist/strategy.hpp"
#include "tests/crashsim/budget.hpp"
#include "tests/crashsim/crashsim.hpp"
#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim {
namespace {

struct Share {
  std::string workload;
  Durability durability;
  double weight;         // depth-1 states: this fraction of the total (0: use `steps`)
  double min_total = 0;  // states including depth 2: at least this fraction of the total
  unsigned steps = 0;    // at a total of 10^6, scaled with it: the workload runs this many steps
};

void PrintTo(const Share& s, std::ostream* os) { *os << s.workload << "/" << durability_name(s.durability); }

class Suite : public ::testing::TestWithParam<Share> {};

TEST_P(Suite, EveryExploredStateRecoversACommittedVersion) {
  const Share s = GetParam();
  const Workload* w = find_workload(s.workload);
  ASSERT_NE(w, nullptr);
  Options o;
  o.durability = s.durability;
  o.seed = 20261123;
  o.max_failures = 5;
  const double scale = static_cast<double>(ci_crash_states()) / 1e6;
  if (s.steps > 0)
    o.steps = std::max(2u, static_cast<unsigned>(std::ceil(s.steps * scale)));
  else
    o.target_states = static_cast<std::uint64_t>(static_cast<double>(ci_crash_states()) * s.weight);
  const Report r = run(*w, o);
  EXPECT_TRUE(r.passed()) << r.summary();
  // Depth-1 states come to about the target; depth 2 adds to it.
  EXPECT_GE(r.states, o.target_states * 8 / 10) << r.summary();
  EXPECT_GE(static_cast<double>(r.states), static_cast<double>(ci_crash_states()) * s.min_total) << r.summary();
  RecordProperty("states", std::to_string(r.states));
  std::printf("%s\n", r.summary().c_str());
}

// The reference structure and the pool protocol, then every crash variant of
// every strategy the registry runs on a cairn pool: every state of every step
// (no sampling), at least 10^5 states each at full scale, most of them at
// depth 2; variants marked eadr_share also get a small share under eADR.
std::vector<Share> shares() {
  std::vector<Share> out = {
      {"refarray", Durability::adr, 0.45},
      {"refarray", Durability::eadr, 0.2},
      {"refarray", Durability::msync, 0.1},
      {"refarray", Durability::pagecache, 0.05},
      {"pool_publish", Durability::adr, 0.15},
      {"pool_publish", Durability::msync, 0.03},
      {"pool_publish", Durability::pagecache, 0.02},
      {"pool_publish_mt", Durability::adr, 0.0005},  // 1 MiB extents: about 30 states/s under sanitizers
      // pmem: streams: 10^5 states in the release share of `make test` (issue 14).
      {"stream_commit", Durability::adr, 0.2},
      {"stream_commit", Durability::msync, 0.01},
      {"stream_commit", Durability::pagecache, 0.01},
      // Writers that die or abandon, the next opener reclaiming their extent,
      // and dist's partner-copy slot file (issue 41). Most of their states
      // are at depth 2 (each recovery runs two more steps, three writers
      // each for the streams): about 4-10x the depth-1 target.
      {"stream_reclaim", Durability::adr, 0.008},
      {"stream_reclaim", Durability::msync, 0.002},
      {"stream_reclaim", Durability::pagecache, 0.002},
      {"dist_partner_slots", Durability::adr, 0.008},
      {"dist_partner_slots", Durability::msync, 0.004},
      {"dist_partner_slots", Durability::pagecache, 0.004},
      // PM-octree: about 10^5 states in the release share of `make test`, most
      // of them at depth 2 (each recovery runs two more time steps under the
      // simulator: 6 to 14 depth-2 states per depth-1 state under adr). Under
      // eADR the tree's crash states are adr's (a block is written whole before
      // its flush and not touched again before the fence, so its flush-time
      // value is its current one): one small share.
      {"octree", Durability::adr, 0.008},
      {"octree", Durability::msync, 0.005},
      {"octree", Durability::pagecache, 0.005},
      {"octree.2d", Durability::adr, 0.008},
      {"octree.2d", Durability::eadr, 0.002},
      {"octree.keep_previous", Durability::adr, 0.006},
  };
  for (const auto& r : persist::detail::registry()) {
    if (r.crash != persist::detail::CrashHarness::pool) continue;
    for (const auto& v : r.crash_variants) {
      const std::string name = builtin::strategy_workload_name(r.name, v.suffix);
      out.push_back({name, Durability::adr, 0, 0.1, 20});
      if (v.eadr_share) out.push_back({name, Durability::eadr, 0, 0.02, 8});
      // The pagecache device's drain covers every thread, so strategies
      // leave their helpers' and workers' fences to the commit there: a
      // different order of write-backs, proven on its own.
      out.push_back({name, Durability::pagecache, 0, 0.02, 8});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Crash, Suite, ::testing::ValuesIn(shares()), [](const ::testing::TestParamInfo<Share>& p) {
  std::string name = p.param.workload + "_" + durability_name(p.param.durability);
  for (char& c : name)
    if (c == '.' || c == '-') c = '_';
  return name;
});

// Every registered strategy is explored by some crash harness: a new strategy
// cannot land without one (a pool-based one gets its workloads from its
// registry record; the others name the harness written for their format).
TEST(CrashCoverage, EveryRegisteredStrategyHasACrashWorkload) {
  for (const auto& r : persist::detail::registry()) {
    switch (r.crash) {
      case persist::detail::CrashHarness::pool:
        EXPECT_FALSE(r.crash_variants.empty()) << r.name << ": a pool-based strategy needs a crash variant";
        for (const auto& v : r.crash_variants)
          EXPECT_NE(find_workload(builtin::strategy_workload_name(r.name, v.suffix)), nullptr) << r.name;
        break;
      case persist::detail::CrashHarness::libpmemobj:
        EXPECT_NE(find_workload(builtin::strategy_workload_name(r.name, "")), nullptr)
            << r.name << ": no libpmemobj workload (tests/crashsim/workloads/undo_log.cpp)";
        break;
      case persist::detail::CrashHarness::files:
        break;  // fs_crash_test's FsCoverage checks these (the explorer links the libc interposer)
    }
  }
}

}  // namespace
}  // namespace cairn::testing::crashsim
