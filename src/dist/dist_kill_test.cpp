// dist_kill_test.cpp — real mpirun jobs of dist_worker, real SIGKILLs: after
// every kill, a relaunch with --resume must restore the same global version
// on every rank, bit for bit (the worker compares with a recomputation), and
// finish with the uninterrupted run's state.
// (The ranks' environment, leak checking off under ASan: tests/support/mpirun_env.hpp.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "tests/support/mpirun_env.hpp"
#include "tests/support/run_app.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using cairn::testing::Outcome;
using cairn::testing::TempDir;

struct RankLine {
  std::uint64_t version = 0, lane_a = 0, lane_b = 0;
  int match = -1;
};

// "restored rank=R version=G lanes=A,B match=M" or "done rank=R version=V
// match=M", one per line. (Parsed by hand: GCC 12's -Wmaybe-uninitialized
// fires inside <regex> under the sanitizer build.)
std::map<int, RankLine> parse(const std::string& out, const std::string& what) {
  std::map<int, RankLine> m;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(what + " rank=", 0) != 0) continue;
    auto field = [&](const std::string& key) -> std::string {
      const auto at = line.find(" " + key + "=");
      if (at == std::string::npos) return "";
      const auto from = at + key.size() + 2;
      return line.substr(from, line.find(' ', from) - from);
    };
    RankLine l;
    l.version = std::stoull(field("version"));
    l.match = std::stoi(field("match"));
    if (const std::string lanes = field("lanes"); !lanes.empty()) {
      l.lane_a = std::stoull(lanes.substr(0, lanes.find(',')));
      l.lane_b = std::stoull(lanes.substr(lanes.find(',') + 1));
    }
    m[std::stoi(field("rank"))] = l;
  }
  return m;
}

class DistKill : public ::testing::Test {
 protected:
  void SetUp() override { cairn::testing::set_mpirun_environment(); }
  std::vector<std::string> job(int ranks, const std::vector<std::string>& args) const {
    std::vector<std::string> a{"--oversubscribe", "-n", std::to_string(ranks), CAIRN_DIST_WORKER, "--dir", dir.path()};
    a.insert(a.end(), args.begin(), args.end());
    return a;
  }
  Outcome mpirun(int ranks, const std::vector<std::string>& args) const {
    Outcome o = cairn::testing::run_program(CAIRN_MPIEXEC, job(ranks, args));
    std::ofstream(dir.file("run.log"), std::ios::app) << o.output;
    return o;
  }
  // Resumes, checks that every rank restored the same version bit for bit,
  // runs to the end and checks the final state; returns the restored version.
  std::uint64_t resume_and_check(int ranks, const std::string& strategy, std::uint64_t iterations) const {
    Outcome o = mpirun(ranks, {"--strategy", strategy, "--iterations", std::to_string(iterations), "--resume"});
    EXPECT_EQ(o.exit_code, 0) << o.output;
    const auto restored = parse(o.output, "restored");
    const auto done = parse(o.output, "done");
    EXPECT_EQ(restored.size(), static_cast<std::size_t>(ranks)) << o.output;
    EXPECT_EQ(done.size(), static_cast<std::size_t>(ranks)) << o.output;
    if (restored.empty()) return 0;
    const std::uint64_t g = restored.begin()->second.version;
    for (const auto& [rank, l] : restored) {
      EXPECT_EQ(l.version, g) << "rank " << rank << " restored another version\n" << o.output;
      EXPECT_EQ(l.match, 1) << "rank " << rank << " restored a state that is not version " << g << "\n" << o.output;
    }
    for (const auto& [rank, l] : done) {
      EXPECT_EQ(l.version, std::max(g, iterations)) << o.output;
      EXPECT_EQ(l.match, 1) << "rank " << rank << " ended in a wrong state\n" << o.output;
    }
    return g;
  }
  TempDir dir;
};

TEST_F(DistKill, UninterruptedRunMatches) {
  Outcome o = mpirun(2, {"--iterations", "40"});
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const auto done = parse(o.output, "done");
  ASSERT_EQ(done.size(), 2u) << o.output;
  for (const auto& [rank, l] : done) EXPECT_EQ(l.match, 1) << o.output;
}

// The case the two lanes exist for: a rank durably commits V, another dies
// (here: is killed with the job) before its own V. Every rank must restore
// V-1, the killed one included, though it holds V in one lane.
TEST_F(DistKill, KilledBetweenLocalCommitAndAgreementRollsBackEveryRank) {
  for (const std::string strategy : {"in-place", "shadow", "dram-cache", "nt-copy", "file"}) {
    SCOPED_TRACE(strategy);
    const int ranks = strategy == "in-place" ? 4 : 2;
    Outcome k = mpirun(ranks, {"--strategy", strategy, "--iterations", "60", "--kill-rank", "1", "--kill-at", "31",
                               "--kill-when", "after-local", "--stall-others-ms", "20000"});
    ASSERT_NE(k.exit_code, 0) << "the job should have died\n" << k.output;
    const auto restored_before = parse(k.output, "done");
    EXPECT_TRUE(restored_before.empty()) << k.output;
    Outcome r = mpirun(ranks, {"--strategy", strategy, "--iterations", "60", "--resume"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto restored = parse(r.output, "restored");
    ASSERT_EQ(restored.size(), static_cast<std::size_t>(ranks)) << r.output;
    for (const auto& [rank, l] : restored) {
      EXPECT_EQ(l.version, 30u) << "rank " << rank << "\n" << r.output;
      EXPECT_EQ(l.match, 1) << "rank " << rank << "\n" << r.output;
    }
    // The killed rank held version 31 durably (lane b) and still gave 30.
    EXPECT_EQ(restored.at(1).lane_b, 31u) << r.output;
    EXPECT_EQ(restored.at(1).lane_a, 30u) << r.output;
    for (const auto& [rank, l] : parse(r.output, "done")) EXPECT_EQ(l.match, 1) << "rank " << rank << r.output;
    std::filesystem::remove_all(dir.path());
    std::filesystem::create_directories(dir.path());
  }
}

TEST_F(DistKill, KilledBeforeItsLocalCommit) {
  Outcome k = mpirun(3, {"--iterations", "50", "--kill-rank", "2", "--kill-at", "20", "--kill-when", "before-local"});
  ASSERT_NE(k.exit_code, 0) << k.output;
  // Rank 2 never committed 20, so 19 is the newest version every rank holds.
  EXPECT_EQ(resume_and_check(3, "in-place", 50), 19u);
}

// SIGKILL from outside at a random moment, a random rank, 2 to 4 ranks.
TEST_F(DistKill, RandomKillsRestoreOneGlobalVersion) {
  std::mt19937 rng(std::random_device{}());
  const char* strategies[] = {"in-place", "dram-cache", "shadow"};
  for (int round = 0; round < 3; ++round) {
    const int ranks = 2 + round;
    const std::string strategy = strategies[round];
    SCOPED_TRACE(strategy + " on " + std::to_string(ranks) + " ranks");
    const std::string log = dir.file("job.log");
    std::vector<std::string> words{CAIRN_MPIEXEC};
    for (auto& w : job(ranks, {"--strategy", strategy, "--iterations", "100000", "--sleep-us", "200"}))
      words.push_back(w);
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      FILE* f = std::fopen(log.c_str(), "w");
      if (f) {
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
    ASSERT_GT(pid, 0);
    const int victim = std::uniform_int_distribution<int>(0, ranks - 1)(rng);
    // Every rank writes its pid once its storage is open; the first commit
    // follows within a millisecond, the kill 50 to 700 ms later.
    std::vector<pid_t> pids(static_cast<std::size_t>(ranks), 0);
    for (int tries = 0; tries < 600; ++tries) {
      bool all = true;
      for (int r = 0; r < ranks; ++r) {
        auto& p = pids[static_cast<std::size_t>(r)];
        if (p == 0) std::ifstream(dir.file("pid." + std::to_string(r))) >> p;
        all = all && p > 0;
      }
      if (all) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const auto delay = std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 700)(rng));
    std::this_thread::sleep_for(delay);
    const pid_t rank_pid = pids[static_cast<std::size_t>(victim)];
    ASSERT_GT(rank_pid, 0);
    ASSERT_EQ(kill(rank_pid, SIGKILL), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "mpirun should report the killed rank";
    const std::uint64_t g = resume_and_check(ranks, strategy, 0);
    EXPECT_GT(g, 0u) << "killed after " << delay.count() << " ms: no version was committed";
    // And the job goes on from there.
    EXPECT_EQ(resume_and_check(ranks, strategy, g + 20), g);
    std::filesystem::remove_all(dir.path());
    std::filesystem::create_directories(dir.path());
  }
}

TEST_F(DistKill, LostStorageOfOneRankIsNamed) {
  ASSERT_EQ(mpirun(3, {"--iterations", "10"}).exit_code, 0);
  for (const char* lane : {"a", "b"}) std::filesystem::remove(dir.file(std::string("worker.n3.r1.") + lane + ".pool"));
  Outcome r = mpirun(3, {"--iterations", "20", "--resume"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("rank 1 lacks the versions the other ranks hold"), std::string::npos) << r.output;
}

TEST_F(DistKill, UndoLogIsRefusedWithAReason) {
  Outcome r = mpirun(2, {"--strategy", "undo-log", "--iterations", "5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("libpmemobj transaction open per thread"), std::string::npos) << r.output;
}

}  // namespace
