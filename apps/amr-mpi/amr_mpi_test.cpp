// amr_mpi_test.cpp — real mpirun runs of amr-mpi: the single-process amr's
// checksum on 2 to 4 ranks; after a SIGKILL and --resume; after a rank killed
// inside the collective commit (the others go back one version); after
// resumes on other numbers of ranks; after lost nodes (partner copies, XOR
// parity, flushed versions); under `cairn launch`; and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/mpirun_env.hpp"
#include "tests/support/run_app.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using cairn::testing::checksum_in;
using cairn::testing::Outcome;
namespace fs = std::filesystem;

const std::vector<std::string> kCase = {"--size", "4", "--period", "0.5"};  // 54 steps

// `args` followed by `more` (a redundancy level's switches).
std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

class AmrMpi : public ::testing::Test {
 protected:
  void SetUp() override { cairn::testing::set_mpirun_environment(); }
  Outcome run(int ranks, std::vector<std::string> args) const {
    std::vector<std::string> a{"--oversubscribe", "-n", std::to_string(ranks), CAIRN_AMR_MPI, "--dir", dir.path()};
    a.insert(a.end(), kCase.begin(), kCase.end());
    a.insert(a.end(), args.begin(), args.end());
    return cairn::testing::run_program(CAIRN_MPIEXEC, a);
  }
  std::string single() const {
    std::vector<std::string> a{"--dir", dir.path() + "/single", "--quiet"};
    a.insert(a.end(), kCase.begin(), kCase.end());
    Outcome o = cairn::testing::run_program(CAIRN_AMR, a);
    EXPECT_EQ(o.exit_code, 0) << o.output;
    EXPECT_NE(o.output.find("VERIFIED"), std::string::npos) << o.output;
    return checksum_in(o.output);
  }
  cairn::testing::TempDir dir;
};

TEST_F(AmrMpi, SameChecksumAsOneProcess) {
  const std::string expected = single();
  ASSERT_EQ(expected.size(), 16u);
  for (int ranks = 2; ranks <= 4; ++ranks) {
    Outcome o = run(ranks, {});
    ASSERT_EQ(o.exit_code, 0) << o.output;
    EXPECT_NE(o.output.find("VERIFIED"), std::string::npos) << o.output;
    EXPECT_EQ(checksum_in(o.output), expected) << ranks << " ranks\n" << o.output;
    // Every rank owns leaves and holds a ghost layer.
    EXPECT_NE(o.output.find(std::to_string(ranks) + " ranks, levels 2-4"), std::string::npos) << o.output;
    EXPECT_EQ(o.output.find(" 0 ghosts"), std::string::npos) << o.output;
  }
  // The benchmark's baselines compute the same mesh.
  for (const char* mode : {"none", "local"}) {
    Outcome o = run(2, {"--commit", mode});
    ASSERT_EQ(o.exit_code, 0) << o.output;
    EXPECT_EQ(checksum_in(o.output), expected) << mode << "\n" << o.output;
  }
}

TEST_F(AmrMpi, ResumesAfterAKillWithTheSameChecksum) {
  const std::string expected = single();
  Outcome k = run(4, {"--crash-at", "20", "--crash-rank", "2"});
  ASSERT_NE(k.exit_code, 0) << k.output;
  EXPECT_EQ(checksum_in(k.output), "") << k.output;
  Outcome r = run(4, {"--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("from step 20 "), std::string::npos) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
}

// Rank 1 dies inside the commit of step 30, before its own pm_persistent,
// while the others commit that step: they hold version 31, it holds 30. The
// restart agrees on 30 and the others go back to it (their trees kept it).
TEST_F(AmrMpi, KilledDuringTheCollectiveCommitTheOthersGoBackOneVersion) {
  const std::string expected = single();
  Outcome k = run(4, {"--crash-in-commit", "30", "--crash-rank", "1"});
  ASSERT_NE(k.exit_code, 0) << k.output;
  Outcome r = run(4, {"--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 0: back from version 31 to the global version 30"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("rank 1: back from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("from step 29 "), std::string::npos) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
}

// The same, and then rank 2 dies during the recovery, right after going back
// to version 30 itself: the next recovery still finds 30 everywhere.
TEST_F(AmrMpi, KilledDuringRecoveryTheNextRecoveryAgreesAgain) {
  const std::string expected = single();
  ASSERT_NE(run(4, {"--crash-in-commit", "30", "--crash-rank", "1"}).exit_code, 0);
  Outcome k = run(4, {"--resume", "--crash-in-restore", "--crash-rank", "2"});
  ASSERT_NE(k.exit_code, 0) << k.output;
  EXPECT_EQ(checksum_in(k.output), "") << k.output;
  Outcome r = run(4, {"--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("rank 2: back from"), std::string::npos) << "rank 2 went back durably before it died\n"
                                                                   << r.output;
  EXPECT_NE(r.output.find("from step 29 "), std::string::npos) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
}

TEST_F(AmrMpi, ResumesOnAnotherNumberOfRanks) {
  const std::string expected = single();
  ASSERT_NE(run(4, {"--crash-at", "15", "--crash-rank", "3"}).exit_code, 0);
  // 4 -> 2 ranks, killed again at 35 ...
  Outcome r2 = run(2, {"--resume", "--from-ranks", "4", "--crash-at", "35", "--crash-rank", "0"});
  ASSERT_NE(r2.exit_code, 0) << r2.output;
  EXPECT_NE(r2.output.find("repartitioned step 15 (version 16) from 4 ranks to 2"), std::string::npos) << r2.output;
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find("amr-mpi.n4."), std::string::npos)
        << "the 4-rank job's files should be gone: " << e.path();
  // ... 2 -> 3 ranks, to the end: the single-process checksum.
  Outcome r3 = run(3, {"--resume", "--from-ranks", "2"});
  ASSERT_EQ(r3.exit_code, 0) << r3.output;
  EXPECT_NE(r3.output.find("repartitioned step 35 "), std::string::npos) << r3.output;
  EXPECT_EQ(checksum_in(r3.output), expected) << r3.output;
}

// --redundancy partner: each rank's leaves are copied to the same rank of
// the next node at every commit (the units that changed). Losing a node (its
// rank killed, its directory deleted) or a damaged pool is rebuilt from the
// copy; losing two neighbouring nodes is refused with a message.
TEST_F(AmrMpi, LostNodeIsRebuiltFromThePartnerCopy) {
  const std::string expected = single();
  const std::vector<std::string> partner = {"--redundancy", "partner", "--ranks-per-node", "1"};
  Outcome k = run(4, with({"--crash-at", "30", "--crash-rank", "2"}, partner));
  ASSERT_NE(k.exit_code, 0) << k.output;
  fs::remove_all(dir.path() + "/node2");
  Outcome r = run(4, with({"--resume", "--crash-at", "45", "--crash-rank", "1"}, partner));
  ASSERT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 2: rebuilt version 31 "), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir.path() + "/node2/amr-mpi.n4.r1.replica")) << "the copy node 2 held is written again";
  // Now rank 1's pool is damaged: rebuilt from rank 2's copy, set aside.
  const std::string pool = dir.path() + "/node1/amr-mpi.n4.r1.pool";
  fs::resize_file(pool, 4096);
  Outcome d = run(4, with({"--resume"}, partner));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(d.output.find("rank 1: rebuilt version 46 "), std::string::npos) << d.output;
  EXPECT_NE(d.output.find("from its partner copy on rank 2"), std::string::npos) << d.output;
  EXPECT_TRUE(fs::exists(pool + ".damaged"));
  EXPECT_NE(d.output.find("units that changed since the partner's copy"), std::string::npos) << d.output;
  EXPECT_EQ(checksum_in(d.output), expected) << d.output;
  // Two neighbouring nodes: rank 1's pool and its copy on rank 2 both gone.
  ASSERT_EQ(run(4, with({"--steps", "10"}, partner)).exit_code, 0);
  fs::remove_all(dir.path() + "/node1");
  fs::remove_all(dir.path() + "/node2");
  Outcome lost = run(4, with({"--resume"}, partner));
  EXPECT_NE(lost.exit_code, 0);
  EXPECT_NE(lost.output.find("rank 1's pool is lost and so is its partner copy on rank 2"), std::string::npos)
      << lost.output;
}

// --redundancy xor: each group of nodes keeps the XOR parity of its ranks'
// leaves. One lost node per group is rebuilt from the survivors' leaves and
// parity, with one group of four nodes and with two groups of two; two lost
// nodes of one group are refused with a message.
TEST_F(AmrMpi, LostNodeIsRebuiltFromParity) {
  const std::string expected = single();
  const std::vector<std::string> xor1 = {"--redundancy", "xor", "--ranks-per-node", "1"},
                                 xor2 = {"--redundancy", "xor", "--ranks-per-node", "2"};
  // Four nodes of one rank, one group: node 2 lost, then node 1.
  Outcome k = run(4, with({"--crash-at", "30", "--crash-rank", "2"}, xor1));
  ASSERT_NE(k.exit_code, 0) << k.output;
  fs::remove_all(dir.path() + "/node2");
  Outcome r = run(4, with({"--resume", "--crash-at", "45", "--crash-rank", "1"}, xor1));
  ASSERT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 2: rebuilt version 31 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("from its group's parity"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir.path() + "/node2/amr-mpi.n4.r2.xor.pool")) << "its parity is written again";
  fs::remove_all(dir.path() + "/node1");
  Outcome d = run(4, with({"--resume"}, xor1));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(d.output.find("rank 1: rebuilt version 46 "), std::string::npos) << d.output;
  EXPECT_NE(d.output.find("XOR parity: "), std::string::npos) << d.output;
  EXPECT_EQ(checksum_in(d.output), expected) << d.output;
  // Two lost nodes of the group: refused, naming both.
  ASSERT_EQ(run(4, with({"--steps", "10"}, xor1)).exit_code, 0);
  fs::remove_all(dir.path() + "/node1");
  fs::remove_all(dir.path() + "/node3");
  Outcome lost = run(4, with({"--resume"}, xor1));
  EXPECT_NE(lost.exit_code, 0);
  EXPECT_NE(lost.output.find("rank 1's pool is lost and so is rank 3's pool, in the same parity group"),
            std::string::npos)
      << lost.output;
  // Two nodes of two ranks: each group (the first and the second rank of
  // each node) loses one member with node 1, and each rebuilds its own.
  fs::remove_all(dir.path());
  fs::create_directories(dir.path());
  ASSERT_NE(run(4, with({"--crash-at", "20", "--crash-rank", "3"}, xor2)).exit_code, 0);
  fs::remove_all(dir.path() + "/node1");
  Outcome two = run(4, with({"--resume"}, xor2));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("rank 2: rebuilt version 21 "), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("rank 3: rebuilt version 21 "), std::string::npos) << two.output;
  EXPECT_EQ(checksum_in(two.output), expected) << two.output;
}

// --pfs-dir: every 10th global version is flushed in the background; when a
// lost rank cannot be rebuilt otherwise (local redundancy here), every rank
// goes back to the newest version all of them flushed intact.
TEST_F(AmrMpi, FlushedVersionsRestoreWhatNothingElseCan) {
  const std::string expected = single();
  const std::string pfs = dir.path() + "/pfs";
  const std::vector<std::string> flush = {"--ranks-per-node", "1", "--pfs-dir", pfs};
  ASSERT_NE(run(4, with({"--crash-at", "35", "--crash-rank", "1"}, flush)).exit_code, 0);
  for (int rank = 0; rank < 4; ++rank)
    for (int v : {20, 30})
      EXPECT_TRUE(fs::exists(pfs + "/amr-mpi.n4.r" + std::to_string(rank) + ".v" + std::to_string(v) + ".ckpt"))
          << "rank " << rank << " version " << v;
  fs::remove_all(dir.path() + "/node1");
  // Rank 2's flush of version 30 damaged too: version 20 it is.
  fs::resize_file(pfs + "/amr-mpi.n4.r2.v30.ckpt", 100);
  Outcome r = run(4, with({"--resume"}, flush));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 lost its pool and redundancy is local"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("every rank restored version 20 (step 19) flushed to " + pfs), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("from step 19 "), std::string::npos) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
  // Nothing flushed yet: the message says so.
  ASSERT_NE(run(4, with({"--crash-at", "5", "--crash-rank", "0"}, flush)).exit_code, 0);
  fs::remove_all(dir.path() + "/node0");
  Outcome none = run(4, with({"--resume"}, flush));
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("was flushed completely and intact by every rank"), std::string::npos) << none.output;
}

TEST_F(AmrMpi, LaunchRelaunchesAKilledJob) {
  const std::string expected = single();
  std::vector<std::string> a{"launch",   "-n",         "3",  "--max-restarts", "2", "--", CAIRN_AMR_MPI, "--dir",
                             dir.path(), "--crash-at", "25", "--crash-rank",   "1"};
  a.insert(a.end(), kCase.begin(), kCase.end());
  Outcome o = cairn::testing::run_program(CAIRN_TOOL, a);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("relaunching with --resume (restart 1 of 2)"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("all 3 ranks resumed at version 26"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("from step 25 "), std::string::npos) << o.output;
  EXPECT_EQ(checksum_in(o.output), expected) << o.output;
}

// A hung rank (SIGSTOP) stops beating: cairn launch declares it dead after
// T_timeout, ends the job and relaunches it at the global version.
TEST_F(AmrMpi, LaunchRelaunchesAJobWithAHungRank) {
  const std::string expected = single();
  std::vector<std::string> a{"launch",      "-n",    "4",        "--timeout", "auto", "--max-restarts", "2", "--",
                             CAIRN_AMR_MPI, "--dir", dir.path(), "--stop-at", "20",   "--crash-rank",   "2"};
  a.insert(a.end(), kCase.begin(), kCase.end());
  Outcome o = cairn::testing::run_program(CAIRN_TOOL, a);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("declared dead"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("from step 20 "), std::string::npos) << o.output;
  EXPECT_EQ(checksum_in(o.output), expected) << o.output;
}

TEST_F(AmrMpi, BadInputGetsAMessageNamingTheProblem) {
  // Nothing to resume from.
  Outcome none = run(2, {"--resume"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("no partition of a job of 2 ranks here"), std::string::npos) << none.output;
  ASSERT_EQ(run(2, {"--steps", "5"}).exit_code, 0);
  // Another number of ranks without --from-ranks.
  Outcome other = run(3, {"--resume"});
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("no partition of a job of 3 ranks"), std::string::npos) << other.output;
  // Rank 1's pool truncated: the message names the rank and the file.
  const std::string pool = dir.path() + "/amr-mpi.n2.r1.pool";
  fs::resize_file(pool, 4096);
  Outcome bad = run(2, {"--resume"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("rank 1: "), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find(pool), std::string::npos) << bad.output;
  // A damaged partition file.
  {
    std::ofstream f(dir.path() + "/amr-mpi.n2.partition", std::ios::binary | std::ios::trunc);
    f << "AMRPART1 and then nothing useful";
  }
  Outcome part = run(2, {"--resume"});
  EXPECT_NE(part.exit_code, 0);
  EXPECT_NE(part.output.find("partition"), std::string::npos) << part.output;
}

}  // namespace
