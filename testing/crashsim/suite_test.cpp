// suite_test.cpp — the CI crash suite: the correct workloads explored to a
// total of CAIRN_CRASH_STATES crash states (default 10^6), split by weight.
// Each share is run as its own test so ctest spreads them over the cores.
// Set CAIRN_CRASH_STATES=20000 for a quick local run, or higher for a soak.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "testing/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim {
namespace {

std::uint64_t total_states() {
  const char* env = std::getenv("CAIRN_CRASH_STATES");
  if (env == nullptr || *env == '\0') return 1000000;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(env, &end, 10);
  return (end != nullptr && *end == '\0' && v > 0) ? v : 1000000;
}

struct Share {
  const char* workload;
  Durability durability;
  double weight;  // fraction of the total
};

class Suite : public ::testing::TestWithParam<Share> {};

TEST_P(Suite, EveryExploredStateRecoversACommittedVersion) {
  const Share s = GetParam();
  const Workload* w = find_workload(s.workload);
  ASSERT_NE(w, nullptr);
  Options o;
  o.durability = s.durability;
  o.seed = 20261123;
  o.max_failures = 5;
  o.target_states = static_cast<std::uint64_t>(static_cast<double>(total_states()) * s.weight);
  const Report r = run(*w, o);
  EXPECT_TRUE(r.passed()) << r.summary();
  // Depth-1 states come to about the target; depth 2 adds to it.
  EXPECT_GE(r.states, o.target_states * 8 / 10) << r.summary();
  RecordProperty("states", std::to_string(r.states));
  std::printf("%s\n", r.summary().c_str());
}

INSTANTIATE_TEST_SUITE_P(Crash, Suite,
                         ::testing::Values(Share{"refarray", Durability::adr, 0.45},
                                           Share{"refarray", Durability::eadr, 0.2},
                                           Share{"refarray", Durability::msync, 0.15},
                                           Share{"pool_publish", Durability::adr, 0.15},
                                           Share{"pool_publish", Durability::msync, 0.05},
                                           // 1 MiB extents: about 30 states/s under sanitizers
                                           Share{"pool_publish_mt", Durability::adr, 0.0005}),
                         [](const ::testing::TestParamInfo<Share>& p) {
                           return std::string(p.param.workload) + "_" + durability_name(p.param.durability);
                         });

}  // namespace
}  // namespace cairn::testing::crashsim
