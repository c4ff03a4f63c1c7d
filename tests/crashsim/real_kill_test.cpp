// real_kill_test.cpp — real-kill mode: child processes SIGKILLed at crash
// points (and at random times) on a tmpfs pool; the reference structure
// survives every kill and the logic errors among the broken variants are
// caught.
#include <gtest/gtest.h>

#include "tests/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim {
namespace {

TEST(RealKill, ReferenceSurvivesKillsAtEveryUniquePoint) {
  KillOptions o;
  o.each_point = true;
  const Report r = run_real_kill(*find_workload("refarray"), o);
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GE(r.points_explored, 5u);
  EXPECT_GT(r.depth2_states, 0u) << "no kill during recovery was made";
}

TEST(RealKill, ReferenceSurvivesKillsAtRandomTimes) {
  KillOptions o;
  o.random_time = true;
  o.kills = 8;
  o.seed = 3;
  const Report r = run_real_kill(*find_workload("refarray"), o);
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GE(r.states, 8u);
}

TEST(RealKill, PoolPublishSurvivesRandomKills) {
  KillOptions o;
  o.kills = 12;
  const Report r = run_real_kill(*find_workload("pool_publish"), o);
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GE(r.states, 12u);
}

// Kills leave the page cache intact, so ordering bugs go unseen, but a
// recovery that is not restartable or a wrong commit order are logic errors.
TEST(RealKill, CatchesLogicErrorsAndReplaysTheirKeys) {
  for (const char* name : {"refarray.recovery_not_idempotent", "refarray.wrong_order"}) {
    KillOptions o;
    o.each_point = true;
    const Report r = run_real_kill(*find_workload(name), o);
    ASSERT_FALSE(r.passed()) << name << ": " << r.summary();
    const std::string key = r.failures.front().key;
    EXPECT_EQ(key.rfind(std::string("kill1:") + name + ":", 0), 0u) << key;
    auto again = replay_real_kill(key);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_FALSE(again.value().passed()) << "replaying " << key << " passed";
  }
}

TEST(RealKill, BadKeysAreErrors) {
  EXPECT_FALSE(replay_real_kill("kill1:refarray").ok());
  auto unknown = replay_real_kill("kill1:nope:1:24:2:0");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, Errc::not_found);
}

}  // namespace
}  // namespace cairn::testing::crashsim
