// restart_test.cpp — restart correctness of the sph app, end to end: the real
// binary is run uninterrupted, killed with SIGKILL at a random (seeded)
// iteration by --crash-at, and resumed; the resumed run must verify and end
// with the same 64-bit state checksum as the uninterrupted and the native run.
// Every layout (list, array, blocked) x every strategy of
// persist::strategy_names(), at --size test. Also: bad options exit with 2
// and say what to do.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "cairn/persist.hpp"
#include "tests/support/run_app.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using cairn::testing::json_value;
using cairn::testing::Outcome;

constexpr std::uint64_t kIterations = 8;

Outcome run_sph(const std::vector<std::string>& args, const std::string& dir) {
  return cairn::testing::run_app(CAIRN_SPH_PATH, args, dir);
}

std::vector<std::string> base_args(const std::string& layout, const std::string& dir) {
  return {"--layout", layout, "--size",    "test", "--iterations", std::to_string(kIterations),
          "--dir",    dir,    "--threads", "2",    "--quiet"};
}

// The native checksum of a layout, computed once per layout.
std::string native_checksum(const std::string& layout) {
  static std::map<std::string, std::string> sums;
  if (auto it = sums.find(layout); it != sums.end()) return it->second;
  cairn::testing::TempDir dir;
  auto a = base_args(layout, dir.path());
  a.insert(a.end(), {"--json", dir.file("native.json")});
  auto o = run_sph(a, dir.path());
  EXPECT_EQ(o.exit_code, 0) << o.output;
  return sums[layout] = json_value(dir.file("native.json"), "checksum");
}

void check_restart(const std::string& layout, const std::string& strategy, std::uint64_t every, std::uint32_t seed) {
  const std::string want = native_checksum(layout);
  ASSERT_EQ(want.size(), 16u) << want;
  cairn::testing::TempDir dir;
  const std::string json = dir.file("report.json");
  auto with = [&](std::vector<std::string> extra) {
    auto a = base_args(layout, dir.path());
    a.insert(a.end(), {"--strategy", strategy, "--persist-every", std::to_string(every)});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };

  auto whole = run_sph(with({"--json", json}), dir.path());
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_EQ(json_value(json, "checksum"), want) << "uninterrupted " << strategy << " run differs from native";
  EXPECT_EQ(json_value(json, "verified"), "true");

  std::mt19937 rng(seed);
  // At or after the first commit (iteration `every`), so there is one to resume.
  const std::uint64_t crash = std::uniform_int_distribution<std::uint64_t>(every, kIterations - 1)(rng);
  SCOPED_TRACE("crash at iteration " + std::to_string(crash));
  auto crashed = run_sph(with({"--crash-at", std::to_string(crash)}), dir.path());
  EXPECT_EQ(crashed.signal, SIGKILL) << crashed.output;
  EXPECT_EQ(crashed.exit_code, -1);

  auto resumed = run_sph(with({"--resume", "--json", json}), dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(json_value(json, "verified"), "true");
  EXPECT_EQ(json_value(json, "checksum"), want) << "resumed " << strategy << " run differs from native";
  EXPECT_EQ(json_value(json, "start_iteration"), std::to_string(crash / every * every));
  EXPECT_EQ(json_value(json, "iterations"), std::to_string(kIterations));
}

using Param = std::tuple<std::string, std::string>;  // layout, strategy
class SphRestart : public ::testing::TestWithParam<Param> {};

TEST_P(SphRestart, CrashAndResumeIsBitIdentical) {
  const auto& [layout, strategy] = GetParam();
  check_restart(layout, strategy, 1, cairn::testing::restart_seed(layout, strategy));
}

INSTANTIATE_TEST_SUITE_P(AllLayoutsAndStrategies, SphRestart,
                         ::testing::Combine(::testing::Values("list", "array", "blocked"),
                                            ::testing::ValuesIn(cairn::persist::strategy_names())),
                         [](const auto& p) {
                           return cairn::testing::restart_test_name(std::get<0>(p.param), std::get<1>(p.param));
                         });

// Periods longer than one iteration: the list is walked only at commits, the
// blocked chunks go through the scratch version of odd and even periods.
TEST(SphRestartEvery, LongerPeriods) {
  check_restart("list", "in-place", 3, 21);
  check_restart("blocked", "in-place", 4, 22);
  check_restart("array", "undo-log", 2, 23);
}

// The layouts run the same arithmetic in the same order: at --size test the
// list's packed field and the blocked layout's single chunk hold the same
// bytes, so their checksums agree (the array's field has its empty slots, so
// it differs; sph_verify_test compares the particles of all three); and the
// thread count changes nothing (1 and 3 threads against the native 2-thread
// runs above).
TEST(SphDeterminism, ThreadsAndLayouts) {
  cairn::testing::TempDir dir;
  for (const char* layout : {"list", "blocked", "array"})
    for (const char* threads : {"1", "3"}) {
      auto a = base_args(layout, dir.path());
      a[9] = threads;  // --threads value
      a.insert(a.end(), {"--json", dir.file("t.json")});
      ASSERT_EQ(run_sph(a, dir.path()).exit_code, 0);
      EXPECT_EQ(json_value(dir.file("t.json"), "checksum"), native_checksum(layout))
          << layout << ", " << threads << " threads";
    }
  EXPECT_EQ(native_checksum("list"), native_checksum("blocked"));
  EXPECT_NE(native_checksum("list"), native_checksum("array"));
}

TEST(SphBadOptions, UnknownLayoutAndSize) {
  cairn::testing::TempDir dir;
  auto a = base_args("tree", dir.path());
  auto o = run_sph(a, dir.path());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("--layout"), std::string::npos) << o.output;

  auto b = base_args("list", dir.path());
  b[3] = "huge";  // --size value
  o = run_sph(b, dir.path());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("--size 'huge'"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("simsmall"), std::string::npos) << o.output;  // lists the valid ones
}

TEST(SphBadOptions, UnknownStrategyAndNothingToResume) {
  cairn::testing::TempDir dir;
  auto a = base_args("blocked", dir.path());
  a.insert(a.end(), {"--strategy", "no-such"});
  auto o = run_sph(a, dir.path());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("'no-such' is not a persistence strategy"), std::string::npos) << o.output;

  auto b = base_args("list", dir.path());
  b.insert(b.end(), {"--strategy", "in-place", "--resume"});
  o = run_sph(b, dir.path());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("nothing has been committed"), std::string::npos) << o.output;
}

// A state committed with one layout is not resumed with another: the regions
// differ, and the message says so instead of starting over silently.
TEST(SphBadOptions, ResumeWithAnotherLayout) {
  cairn::testing::TempDir dir;
  auto a = base_args("blocked", dir.path());
  a.insert(a.end(), {"--strategy", "nt-copy"});
  ASSERT_EQ(run_sph(a, dir.path()).exit_code, 0);
  auto b = base_args("array", dir.path());
  b.insert(b.end(), {"--strategy", "nt-copy", "--resume"});
  auto o = run_sph(b, dir.path());
  EXPECT_EQ(o.exit_code, 2) << o.output;
}

}  // namespace
