// harness_test.cpp — the harness on the correct workloads: every durability
// model passes, counts are what the options ask for, keys round-trip and
// replay rebuilds exactly one state.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim {
namespace {

const Workload& workload(const std::string& name) {
  const Workload* w = find_workload(name);
  EXPECT_NE(w, nullptr) << name;
  return *w;
}

TEST(CrashKey, FormatsAndParsesBothDepths) {
  CrashKey k;
  k.workload = "refarray";
  k.durability = Durability::eadr;
  k.seed = 7;
  k.steps = 12;
  k.extend_ops = 3;
  k.point = 41;
  k.subset = 5;
  EXPECT_EQ(format_key(k), "cs1:refarray:eadr:7:12:3:41.5");
  k.depth2 = true;
  k.point2 = 9;
  k.subset2 = 2;
  const std::string text = format_key(k);
  EXPECT_EQ(text, "cs1:refarray:eadr:7:12:3:41.5+9.2");
  auto back = parse_key(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(format_key(back.value()), text);
  EXPECT_EQ(back.value().point2, 9u);
  EXPECT_EQ(back.value().durability, Durability::eadr);
}

TEST(CrashKey, RejectsMalformedKeys) {
  for (const char* bad :
       {"", "cs1:", "cs2:refarray:adr:1:24:2:0.1", "cs1:refarray:nvdimm:1:24:2:0.1", "cs1:refarray:adr:x:24:2:0.1",
        "cs1:refarray:adr:1:24:2:0", "cs1:refarray:adr:1:24:2:0.1+3"}) {
    auto k = parse_key(bad);
    ASSERT_FALSE(k.ok()) << "accepted: '" << bad << "'";
    EXPECT_EQ(k.error().code, Errc::invalid_argument) << bad;
  }
}

class ReferencePasses : public ::testing::TestWithParam<Durability> {};

TEST_P(ReferencePasses, EveryStateRecoversAVersion) {
  Options o;
  o.durability = GetParam();
  o.steps = 12;
  const Report r = run(workload("refarray"), o);
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GT(r.crash_points, 12u * 3);  // at least log, data and commit word per step
  EXPECT_GT(r.points_explored, 0u);
  EXPECT_GT(r.states, 1000u);
  EXPECT_GT(r.depth2_runs, 0u);
  EXPECT_GT(r.depth2_states, 0u);
  EXPECT_EQ(r.steps, 12u);
}

INSTANTIATE_TEST_SUITE_P(Durability, ReferencePasses,
                         ::testing::Values(Durability::adr, Durability::eadr, Durability::msync),
                         [](const ::testing::TestParamInfo<Durability>& p) {
                           return std::string(durability_name(p.param));
                         });

TEST(Harness, PoolPublishProtocolPasses) {
  const Report r = run(workload("pool_publish"), Options{});
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GT(r.states, 100u);
}

TEST(Harness, ParallelPersistPointsAreDeferredAndChecked) {
  Options o;
  o.steps = 1;
  o.depth2_per_point = 0;
  o.random_subsets = 1;
  o.max_states = 200;  // each state holds a 1 MiB pending extent: slow under sanitizers
  const Report r = run(workload("pool_publish_mt"), o);
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GT(r.points_deferred, 0u) << "the parallel persist's crash points were not seen";
}

TEST(Harness, CensusCountsTheStatesARunChecks) {
  Options o;
  o.steps = 6;
  o.depth2_per_point = 0;
  Options c = o;
  c.census = true;
  const Report census = run(workload("refarray"), c);
  const Report checked = run(workload("refarray"), o);
  ASSERT_TRUE(checked.passed()) << checked.summary();
  EXPECT_EQ(census.states, checked.states);
  EXPECT_EQ(census.points_explored, checked.points_explored);
}

TEST(Harness, TargetStatesIsApproximatelyMet) {
  Options o;
  o.target_states = 20000;
  o.depth2_per_point = 0;
  const Report r = run(workload("refarray"), o);
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GE(r.states, 15000u);
  EXPECT_LE(r.states, 40000u);
}

TEST(Harness, MaxStatesCapsTheRun) {
  Options o;
  o.max_states = 500;
  const Report r = run(workload("refarray"), o);
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.states, 500u);
}

TEST(Harness, ForkedChecksAgreeWithInProcessChecks) {
  Options o;
  o.steps = 3;
  o.depth2_per_point = 0;
  o.random_subsets = 2;
  o.max_states = 300;
  const Report in_process = run(workload("refarray"), o);
  o.forked = true;
  const Report forked = run(workload("refarray"), o);
  EXPECT_TRUE(forked.passed()) << forked.summary();
  EXPECT_EQ(forked.states, in_process.states);
}

// Forked checks run a crash point's states in one child each time: states
// after a failing one must be checked exactly as in-process checks do.
TEST(Harness, ForkedChecksFindTheSameFailuresAsInProcessChecks) {
  for (const char* name : {"refarray.missing_flush", "refarray.wrong_order", "refarray.torn_commit_word"}) {
    Options o;
    o.steps = 12;
    o.depth2_per_point = 0;
    o.max_failures = 25;
    const Report in_process = run(*find_workload(name), o);
    o.forked = true;
    const Report forked = run(*find_workload(name), o);
    ASSERT_FALSE(in_process.passed()) << name;
    ASSERT_EQ(forked.failures.size(), in_process.failures.size()) << name;
    for (std::size_t i = 0; i < forked.failures.size(); ++i) {
      EXPECT_EQ(forked.failures[i].key, in_process.failures[i].key) << name;
      EXPECT_EQ(forked.failures[i].reason, in_process.failures[i].reason) << name;
    }
    EXPECT_EQ(forked.states, in_process.states) << name;
  }
}

// refarray whose recovery aborts the process (or, in-process, fails) whenever
// it recovers version 3, 8, 13, ...: a recovery that kills the checking
// process is one failing state, and the next child goes on after it.
class DyingRecovery final : public Structure {
 public:
  explicit DyingRecovery(bool really) : inner_(find_workload("refarray")->make()), really_(really) {}
  Result<void> create(pool::Pool& p, Model& m, Rng& r) override { return inner_->create(p, m, r); }
  Result<void> step(pool::Pool& p, Model& m, Rng& r) override { return inner_->step(p, m, r); }
  std::optional<std::uint64_t> blocks_in_use(const Version& v) const override { return inner_->blocks_in_use(v); }
  Result<Version> recover(pool::Pool& p) override {
    auto v = inner_->recover(p);
    if (v.ok() && (v.value().number & 0xffffffffu) % 5 == 3) {
      if (really_) std::abort();
      return make_error(Errc::corrupted, "would die");
    }
    return v;
  }

 private:
  std::unique_ptr<Structure> inner_;
  bool really_;
};

TEST(Harness, ARecoveryThatKillsTheForkedCheckIsOneFailingState) {
  auto workload = [](bool really) {
    Workload w = *find_workload("refarray");
    w.name = "refarray";  // keys name a registered workload
    w.make = [really] { return std::make_unique<DyingRecovery>(really); };
    return w;
  };
  Options o;
  o.steps = 12;
  o.depth2_per_point = 0;
  o.max_failures = 1000;
  const Report in_process = run(workload(false), o);
  o.forked = true;
  const Report forked = run(workload(true), o);
  ASSERT_GT(in_process.failures.size(), 3u);
  ASSERT_EQ(forked.failures.size(), in_process.failures.size());
  for (std::size_t i = 0; i < forked.failures.size(); ++i) {
    EXPECT_EQ(forked.failures[i].key, in_process.failures[i].key);
    EXPECT_NE(forked.failures[i].reason.find("recovery crashed the checking process: Aborted"), std::string::npos)
        << forked.failures[i].reason;
  }
  EXPECT_EQ(forked.states, in_process.states);
}

TEST(Replay, APassingKeyRebuildsExactlyOneState) {
  CrashKey k;
  k.workload = "refarray";
  k.steps = 4;
  k.point = 3;
  k.subset = 1;
  auto r = replay(format_key(k));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r.value().passed()) << r.value().summary();
  EXPECT_EQ(r.value().states, 1u);
}

TEST(Replay, UnknownWorkloadAndUnreachedStateAreErrors) {
  auto unknown = replay("cs1:no_such_workload:adr:1:4:2:0.0");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, Errc::not_found);
  EXPECT_NE(unknown.error().message.find("crashsim list"), std::string::npos);
  auto past = replay("cs1:refarray:adr:1:2:2:999999.0");
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code, Errc::not_found);
}

TEST(Workloads, RegistryListsTheReferenceAndTenBrokenVariants) {
  unsigned broken = 0, correct = 0;
  for (const Workload* w : workloads()) (w->broken ? broken : correct)++;
  EXPECT_GE(broken, 10u);
  EXPECT_GE(correct, 3u);
  EXPECT_NE(find_workload("refarray"), nullptr);
  EXPECT_EQ(find_workload("nope"), nullptr);
}

}  // namespace
}  // namespace cairn::testing::crashsim
