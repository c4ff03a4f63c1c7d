// restart_test.cpp — restart correctness of the jacobi app, end to end: the
// real binary is run uninterrupted, killed with SIGKILL at a random (seeded)
// iteration by --crash-at, and resumed; the resumed run must verify and end
// with the same 64-bit state checksum as the uninterrupted and the native run.
// Every strategy of persist::strategy_names(), both kernels. Also: bad options
// and an impossible --resume exit with 2 and say what to do.
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

// Runs the jacobi binary with `args`, output captured in a file of `dir`.
Outcome run_jacobi(const std::vector<std::string>& args, const std::string& dir) {
  return cairn::testing::run_app(CAIRN_JACOBI_PATH, args, dir);
}

struct Case {
  std::string kernel, size;
  std::uint64_t iterations;
};
const Case kStream{"stream", "24", 30};
const Case kSharpen{"sharpen", "32", 16};

std::vector<std::string> base_args(const Case& c, const std::string& dir) {
  return {"--kernel", c.kernel, "--size",    c.size, "--iterations", std::to_string(c.iterations),
          "--dir",    dir,      "--threads", "2",    "--quiet"};
}

// Runs uninterrupted, crashed at a seeded random iteration, and resumed; all
// must agree with the native checksum. The state goes to a new directory
// under `root` (empty: the usual test directory, tmpfs where there is one).
void check_restart(const Case& c, const std::string& strategy, std::uint64_t every, std::uint32_t seed,
                   const std::string& root = "") {
  cairn::testing::TempDir dir = root.empty() ? cairn::testing::TempDir() : cairn::testing::TempDir(root);
  auto args = base_args(c, dir.path());
  auto with = [&](std::vector<std::string> extra) {
    auto a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::string json = dir.file("report.json");

  auto native = run_jacobi(with({"--json", json}), dir.path());
  ASSERT_EQ(native.exit_code, 0) << native.output;
  const std::string want = json_value(json, "checksum");
  ASSERT_EQ(want.size(), 16u);

  auto whole =
      run_jacobi(with({"--strategy", strategy, "--persist-every", std::to_string(every), "--json", json}), dir.path());
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_EQ(json_value(json, "checksum"), want) << "uninterrupted " << strategy << " run differs from native";
  EXPECT_EQ(json_value(json, "verified"), "true");

  std::mt19937 rng(seed);
  const std::uint64_t crash = std::uniform_int_distribution<std::uint64_t>(1, c.iterations - 1)(rng);
  SCOPED_TRACE("crash at iteration " + std::to_string(crash));
  auto crashed = run_jacobi(
      with({"--strategy", strategy, "--persist-every", std::to_string(every), "--crash-at", std::to_string(crash)}),
      dir.path());
  EXPECT_EQ(crashed.signal, SIGKILL) << crashed.output;
  EXPECT_EQ(crashed.exit_code, -1);

  auto resumed = run_jacobi(
      with({"--strategy", strategy, "--persist-every", std::to_string(every), "--resume", "--json", json}), dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(json_value(json, "verified"), "true");
  EXPECT_EQ(json_value(json, "checksum"), want) << "resumed " << strategy << " run differs from native";
  // The last commit before iteration `crash` covered the periods of K.
  EXPECT_EQ(json_value(json, "start_iteration"), std::to_string(crash / every * every));
  EXPECT_EQ(json_value(json, "iterations"), std::to_string(c.iterations));
}

using Param = std::tuple<std::string, std::string>;  // kernel, strategy
class JacobiRestart : public ::testing::TestWithParam<Param> {};

TEST_P(JacobiRestart, CrashAndResumeIsBitIdentical) {
  const auto& [kernel, strategy] = GetParam();
  const Case& c = kernel == "stream" ? kStream : kSharpen;
  check_restart(c, strategy, 1, cairn::testing::restart_seed(kernel, strategy));
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, JacobiRestart,
                         ::testing::Combine(::testing::Values("stream", "sharpen"),
                                            ::testing::ValuesIn(cairn::persist::strategy_names())),
                         [](const auto& p) {
                           return cairn::testing::restart_test_name(std::get<0>(p.param), std::get<1>(p.param));
                         });

// The same on a disk file system (the system temp directory when it is not
// tmpfs): the pools write back through the page cache (the pagecache
// device: pages recorded at flush, written back at the commit's drain), the
// file strategy through its files. The kill is the run's own SIGKILL.
TEST(JacobiRestartOnDisk, EveryPoolStrategyAndFileResumeBitIdentically) {
  const std::string tmp = cairn::testing::disk_temp_root();
  if (tmp.empty()) GTEST_SKIP() << "the system temp directory is tmpfs here: no disk file system to run on";
  for (const char* strategy : {"in-place", "nt-copy", "shadow", "dram-cache", "file"}) {
    SCOPED_TRACE(strategy);
    check_restart(kStream, strategy, 1, cairn::testing::restart_seed("disk", strategy), tmp);
  }
}

// Periods longer than one iteration: odd and even K exercise both parities of
// the scratch buffer that keeps the committed version untouched.
TEST(JacobiRestartEvery, InPlaceEvery3And4) {
  check_restart(kStream, "in-place", 3, 11);
  check_restart(kStream, "in-place", 4, 12);
}
TEST(JacobiRestartEvery, UndoLogAndFileEvery4) {
  check_restart(kStream, "undo-log", 4, 13);
  check_restart(kSharpen, "file", 4, 14);
}

TEST(JacobiDeterminism, ThreadCountDoesNotChangeTheResult) {
  cairn::testing::TempDir dir;
  std::string sums[3];
  int i = 0;
  for (const char* threads : {"1", "2", "3"}) {
    auto a = base_args(kStream, dir.path());
    a[9] = threads;  // --threads value
    a.insert(a.end(), {"--json", dir.file("t.json")});
    ASSERT_EQ(run_jacobi(a, dir.path()).exit_code, 0);
    sums[i++] = json_value(dir.file("t.json"), "checksum");
  }
  EXPECT_EQ(sums[0], sums[1]);
  EXPECT_EQ(sums[0], sums[2]);
}

TEST(JacobiBadOptions, UnknownStrategy) {
  cairn::testing::TempDir dir;
  auto a = base_args(kStream, dir.path());
  a.insert(a.end(), {"--strategy", "no-such"});
  auto o = run_jacobi(a, dir.path());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("'no-such' is not a persistence strategy"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("in-place"), std::string::npos) << o.output;  // lists the valid ones
}

TEST(JacobiBadOptions, PersistEveryZero) {
  cairn::testing::TempDir dir;
  auto a = base_args(kStream, dir.path());
  a.insert(a.end(), {"--strategy", "in-place", "--persist-every", "0"});
  auto o = run_jacobi(a, dir.path());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("--persist-every must be at least 1"), std::string::npos) << o.output;
}

TEST(JacobiBadOptions, ResumeWithNothingCommitted) {
  cairn::testing::TempDir dir;
  for (const std::string strategy : {"in-place", "file"}) {
    auto a = base_args(kStream, dir.path());
    a.insert(a.end(), {"--strategy", strategy, "--resume"});
    auto o = run_jacobi(a, dir.path());
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_NE(o.output.find("nothing has been committed"), std::string::npos) << o.output;
    EXPECT_NE(o.output.find("run without --resume"), std::string::npos) << o.output;
  }
}

TEST(JacobiBadOptions, ResumeWithoutStrategyAndBadSize) {
  cairn::testing::TempDir dir;
  auto a = base_args(kStream, dir.path());
  a.push_back("--resume");
  auto o = run_jacobi(a, dir.path());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("--resume needs the --strategy"), std::string::npos) << o.output;

  auto b = base_args(kStream, dir.path());
  b[3] = "big";  // --size value
  o = run_jacobi(b, dir.path());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("--size 'big'"), std::string::npos) << o.output;

  auto c = base_args(kStream, dir.path());
  c[1] = "blur";  // --kernel value
  EXPECT_EQ(run_jacobi(c, dir.path()).exit_code, 2);
}

// Resuming with another strategy than the one that committed is refused
// with a message, not silently started over.
TEST(JacobiBadOptions, ResumeWithAnotherStrategy) {
  cairn::testing::TempDir dir;
  auto a = base_args(kStream, dir.path());
  a.insert(a.end(), {"--strategy", "in-place"});
  ASSERT_EQ(run_jacobi(a, dir.path()).exit_code, 0);
  auto b = base_args(kStream, dir.path());
  b.insert(b.end(), {"--strategy", "shadow", "--resume"});
  auto o = run_jacobi(b, dir.path());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("in-place"), std::string::npos) << o.output;
}

}  // namespace
