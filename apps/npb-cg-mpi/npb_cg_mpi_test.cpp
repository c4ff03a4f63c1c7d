// npb_cg_mpi_test.cpp — real mpirun runs of npb-cg-mpi, class S: it verifies
// and ends with the single-process npb-cg's checksum on 1 to 4 ranks, after a
// SIGKILL and --resume, and after a lost node rebuilt from partner copies.
// (The ranks' environment: tests/support/mpirun_env.hpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/mpirun_env.hpp"
#include "tests/support/run_app.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using cairn::testing::Outcome;

using cairn::testing::checksum_in;

bool has(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }

class NpbCgMpi : public ::testing::Test {
 protected:
  void SetUp() override { cairn::testing::set_mpirun_environment(); }
  Outcome run(int ranks, std::vector<std::string> args) const {
    std::vector<std::string> a{"--oversubscribe", "-n", std::to_string(ranks), CAIRN_NPB_CG_MPI, "--dir", dir.path(),
                               "--class",         "S"};
    a.insert(a.end(), args.begin(), args.end());
    return cairn::testing::run_program(CAIRN_MPIEXEC, a);
  }
  // The single-process app's checksum of class S (375 CG iterations).
  static std::string single() {
    Outcome o = cairn::testing::run_program(CAIRN_NPB_CG, {"--size", "S", "--quiet"});
    EXPECT_EQ(o.exit_code, 0) << o.output;
    EXPECT_TRUE(has(o.output, "VERIFIED  zeta 8.5971775078648")) << o.output;
    return checksum_in(o.output);
  }
  cairn::testing::TempDir dir;
};

TEST_F(NpbCgMpi, SameChecksumAsOneProcess) {
  const std::string expected = single();
  ASSERT_EQ(expected.size(), 16u);
  for (int ranks : {1, 2, 3, 4}) {
    Outcome o = run(ranks, {"--quiet"});
    ASSERT_EQ(o.exit_code, 0) << ranks << " ranks\n" << o.output;
    EXPECT_TRUE(has(o.output, "ranks=" + std::to_string(ranks) + ": VERIFIED  zeta 8.5971775078648"))
        << ranks << " ranks\n"
        << o.output;
    EXPECT_TRUE(has(o.output, "iterations 375 (from 0)")) << o.output;
    EXPECT_EQ(checksum_in(o.output), expected) << ranks << " ranks\n" << o.output;
  }
}

// Killed in the middle of an outer iteration (137 = 5 x 25 + 12), resumed there.
TEST_F(NpbCgMpi, ResumesAfterAKillWithTheSameChecksum) {
  const std::string expected = single();
  Outcome k = run(3, {"--crash-at", "137", "--crash-rank", "1", "--quiet"});
  ASSERT_NE(k.exit_code, 0) << k.output;
  EXPECT_EQ(checksum_in(k.output), "") << k.output;
  Outcome r = run(3, {"--resume", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "resumed at version 137: restored from local, 0 ranks rebuilt")) << r.output;
  EXPECT_TRUE(has(r.output, "VERIFIED")) << r.output;
  EXPECT_TRUE(has(r.output, "iterations 375 (from 137)")) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
}

// Node 1 (ranks 2 and 3 of 4, two ranks per simulated node) dies and its
// storage is lost: the resumed job rebuilds both ranks from their partner
// copies on node 0 and ends as an uninterrupted run.
TEST_F(NpbCgMpi, ResumesAfterALostNodeWithTheSameChecksum) {
  const std::string expected = single();
  const std::vector<std::string> level{"--redundancy", "partner", "--ranks-per-node", "2", "--quiet"};
  std::vector<std::string> crash = level;
  crash.insert(crash.end(), {"--crash-at", "210", "--crash-rank", "3"});
  Outcome k = run(4, crash);
  ASSERT_NE(k.exit_code, 0) << k.output;
  ASSERT_TRUE(std::filesystem::exists(dir.file("node1"))) << k.output;
  std::filesystem::remove_all(dir.file("node1"));
  std::vector<std::string> resume = level;
  resume.push_back("--resume");
  Outcome r = run(4, resume);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "resumed at version 210: restored from partner, 2 ranks rebuilt")) << r.output;
  EXPECT_TRUE(has(r.output, "VERIFIED")) << r.output;
  EXPECT_TRUE(has(r.output, "iterations 375 (from 210)")) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
}

}  // namespace
