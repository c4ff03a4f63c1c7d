// undo_log_crash_test.cpp — the undo-log strategy (libpmemobj transactions)
// under the crash simulator: libpmemobj maps and persists the pool file
// itself, and interpose.cpp (linked into this executable) routes its mappings,
// msync calls and libpmem flushes and fences to the simulator
// (workloads/undo_log.cpp, mapped_file.hpp). Every check recovers a crash
// image with libpmemobj's real pmemobj_open rollback and cairn's restore.
//
// CAIRN_CRASH_STATES scales it as it scales suite_test.cpp, at a fiftieth
// (see kDivisor; all at depth 1, see harness.cpp); each share asserts it
// passed, reached its part, and that libpmemobj's persist calls reached the
// simulator. The broken variants must be caught, and their keys must replay
// to the same failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>

#include "testing/crashsim/budget.hpp"
#include "testing/crashsim/crashsim.hpp"
#include "testing/crashsim/mapped_file.hpp"

namespace cairn::testing::crashsim {
namespace {

// A state costs two pmemobj_open and two pmemobj_close here (~100 states per
// CPU second, against thousands for the pool strategies), so the undo-log
// share is CAIRN_CRASH_STATES / 50: 2 * 10^4 states at the CI default of
// 10^6, in four shares that ctest -j2 runs two at a time. The 10^5
// per strategy takes CAIRN_CRASH_STATES=5000000 (about 17 CPU minutes).
constexpr double kDivisor = 50;

struct Share {
  Durability durability;
  std::uint64_t seed;
  double fraction;  // of CAIRN_CRASH_STATES / kDivisor
};

void PrintTo(const Share& s, std::ostream* os) { *os << durability_name(s.durability) << "/" << s.seed; }

class UndoLog : public ::testing::TestWithParam<Share> {};

TEST_P(UndoLog, EveryExploredStateRecoversACommittedVersion) {
  const Share s = GetParam();
  const Workload* w = find_workload("strategy.undo-log");
  ASSERT_NE(w, nullptr);
  const auto want = static_cast<std::uint64_t>(static_cast<double>(ci_crash_states()) / kDivisor * s.fraction);
  Options o;
  o.durability = s.durability;
  o.seed = s.seed;
  o.max_failures = 5;
  // Every state is at depth 1 (no depth 2 for file workloads: harness.cpp).
  o.target_states = want + want / 8;
  const InterposeCalls before = interpose_calls();
  const Report r = run(*w, o);
  const InterposeCalls after = interpose_calls();
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GE(r.states, want) << r.summary();
  EXPECT_GT(r.max_pending, 0u) << r.summary();
  // The library's persistence really went through the interposed calls.
  if (s.durability == Durability::msync) {
    EXPECT_GT(after.msyncs, before.msyncs);
  } else {
    EXPECT_GT(after.flushes, before.flushes);
    EXPECT_GT(after.drains, before.drains);
  }
  EXPECT_GT(after.maps, before.maps);
  RecordProperty("states", std::to_string(r.states));
  std::printf("%s\n", r.summary().c_str());
}

// msync is the path libpmemobj takes on a non-DAX file; adr the one of real
// persistent memory (or PMEM_IS_PMEM_FORCE=1).
INSTANTIATE_TEST_SUITE_P(Crash, UndoLog,
                         ::testing::Values(Share{Durability::msync, 20261123, 0.25}, Share{Durability::msync, 7, 0.25},
                                           Share{Durability::msync, 31337, 0.25},
                                           Share{Durability::adr, 20261123, 0.25}),
                         [](const ::testing::TestParamInfo<Share>& p) {
                           return std::string(durability_name(p.param.durability)) + "_" + std::to_string(p.param.seed);
                         });

struct BrokenCase {
  const char* workload;
  Durability durability;
};

void PrintTo(const BrokenCase& b, std::ostream* os) { *os << b.workload << "/" << durability_name(b.durability); }

class UndoLogBroken : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(UndoLogBroken, IsCaughtAndItsKeyReplays) {
  const BrokenCase b = GetParam();
  const Workload* w = find_workload(b.workload);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->broken);
  Options o;
  o.durability = b.durability;
  o.steps = 4;
  o.depth2_per_point = 0;
  // A seeded tenth of the states: adr crash points have hundreds of pending
  // words, and every state costs two pmemobj_open; the variants fail widely.
  o.state_sample = 0.1;
  const Report r = run(*w, o);
  ASSERT_FALSE(r.passed()) << "the harness did not catch " << b.workload << ": " << r.summary();
  std::printf("%s\n", r.summary().c_str());
  auto again = replay(r.failures.front().key);
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_FALSE(again.value().passed()) << "replaying " << r.failures.front().key << " passed";
  EXPECT_EQ(again.value().failures.front().reason, r.failures.front().reason);
}

INSTANTIATE_TEST_SUITE_P(Crash, UndoLogBroken,
                         ::testing::Values(BrokenCase{"strategy.undo-log.unflushed_data", Durability::msync},
                                           BrokenCase{"strategy.undo-log.unflushed_data", Durability::adr},
                                           BrokenCase{"strategy.undo-log.unlogged_write", Durability::msync}),
                         [](const ::testing::TestParamInfo<BrokenCase>& p) {
                           std::string name = std::string(p.param.workload) + "_" + durability_name(p.param.durability);
                           for (char& c : name)
                             if (c == '.' || c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace cairn::testing::crashsim
