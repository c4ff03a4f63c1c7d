// restart_test.cpp — restart correctness of npb-cg and npb-mg, end to end:
// the real binaries run class S uninterrupted, are killed with SIGKILL at a
// seeded random iteration (--crash-at), and resume (--resume); the resumed
// run must verify against the official NPB value and end with the same
// 64-bit state checksum as an uninterrupted and a native run. Every strategy
// of persist::strategy_names(); also commit periods longer than one iteration
// and different thread counts.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cairn/persist.hpp"
#include "tests/support/run_app.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using cairn::testing::json_value;
using cairn::testing::Outcome;

struct App {
  std::string name;
  const char* path;
  std::uint64_t iterations;  // class S: CG 15 x 25 CG iterations, MG 4 V-cycles
};
const App kCg{"npb-cg", CAIRN_NPB_CG_PATH, 375};
const App kMg{"npb-mg", CAIRN_NPB_MG_PATH, 4};

Outcome run(const App& app, const std::vector<std::string>& args, const std::string& dir) {
  return cairn::testing::run_app(app.path, args, dir);
}

std::vector<std::string> args_for(const std::string& dir, std::vector<std::string> extra) {
  std::vector<std::string> a{"--size", "S", "--dir", dir, "--threads", "2", "--quiet"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

void check_restart(const App& app, const std::string& strategy, std::uint64_t every, std::uint32_t seed) {
  cairn::testing::TempDir dir;
  const std::string json = dir.file("report.json");
  const std::string k = std::to_string(every);

  auto native = run(app, args_for(dir.path(), {"--json", json}), dir.path());
  ASSERT_EQ(native.exit_code, 0) << native.output;
  const std::string want = json_value(json, "checksum");
  ASSERT_EQ(want.size(), 16u);

  auto whole =
      run(app, args_for(dir.path(), {"--strategy", strategy, "--persist-every", k, "--json", json}), dir.path());
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_EQ(json_value(json, "checksum"), want) << "uninterrupted " << strategy << " run differs from native";

  std::mt19937 rng(seed);
  // After the first commit (iteration `every`), before the end.
  ASSERT_LT(every, app.iterations);
  const std::uint64_t crash = std::uniform_int_distribution<std::uint64_t>(every, app.iterations - 1)(rng);
  SCOPED_TRACE(app.name + " " + strategy + ", commit every " + k + ", crash at iteration " + std::to_string(crash));
  auto crashed = run(
      app, args_for(dir.path(), {"--strategy", strategy, "--persist-every", k, "--crash-at", std::to_string(crash)}),
      dir.path());
  EXPECT_EQ(crashed.signal, SIGKILL) << crashed.output;

  auto resumed =
      run(app, args_for(dir.path(), {"--strategy", strategy, "--persist-every", k, "--resume", "--json", json}),
          dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;  // 0: verified against the official value
  EXPECT_EQ(json_value(json, "verified"), "true");
  EXPECT_EQ(json_value(json, "checksum"), want) << "resumed run differs from the uninterrupted one";
  EXPECT_EQ(json_value(json, "start_iteration"), std::to_string(crash / every * every));
  EXPECT_EQ(json_value(json, "iterations"), std::to_string(app.iterations));
}

using Param = std::tuple<std::string, std::string>;  // app, strategy
class NpbRestart : public ::testing::TestWithParam<Param> {};

TEST_P(NpbRestart, CrashAndResumeIsBitIdentical) {
  const auto& [app, strategy] = GetParam();
  check_restart(app == "cg" ? kCg : kMg, strategy, 1, cairn::testing::restart_seed(app, strategy));
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, NpbRestart,
                         ::testing::Combine(::testing::Values("cg", "mg"),
                                            ::testing::ValuesIn(cairn::persist::strategy_names())),
                         [](const auto& p) {
                           return cairn::testing::restart_test_name(std::get<0>(p.param), std::get<1>(p.param));
                         });

// Commit periods of several iterations: CG across its outer-iteration
// boundary (25), MG with a short last period.
TEST(NpbRestartEvery, LongerPeriods) {
  check_restart(kCg, "in-place", 3, 21);
  check_restart(kCg, "file", 25, 22);
  check_restart(kMg, "in-place", 3, 23);
  check_restart(kMg, "undo-log", 2, 24);
}

TEST(NpbDeterminism, ThreadCountDoesNotChangeTheResult) {
  for (const App* app : {&kCg, &kMg}) {
    cairn::testing::TempDir dir;
    std::string sums[2];
    for (int i = 0; i < 2; ++i) {
      auto a = args_for(dir.path(), {"--json", dir.file("t.json")});
      a[5] = i == 0 ? "1" : "3";  // --threads
      ASSERT_EQ(run(*app, a, dir.path()).exit_code, 0) << app->name;
      sums[i] = json_value(dir.file("t.json"), "checksum");
    }
    EXPECT_EQ(sums[0], sums[1]) << app->name;
  }
}

TEST(NpbBadOptions, UnknownClassSaysWhichAreValid) {
  cairn::testing::TempDir dir;
  for (const App* app : {&kCg, &kMg}) {
    auto a = args_for(dir.path(), {});
    a[1] = "Q";  // --size
    const auto o = run(*app, a, dir.path());
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_NE(o.output.find("takes an NPB class: S"), std::string::npos) << o.output;
  }
}

}  // namespace
