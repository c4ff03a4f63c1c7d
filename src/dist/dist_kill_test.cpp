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
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "tests/support/mpirun_env.hpp"
#include "tests/support/run_app.hpp"
#include "tests/support/sanitizers.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using cairn::testing::Outcome;
using cairn::testing::TempDir;

struct RankLine {
  std::uint64_t version = 0, lane_a = 0, lane_b = 0;
  int match = -1;
  std::string from;
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
    l.from = field("from");
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
    a.insert(a.end(), level.begin(), level.end());
    return a;
  }
  // Starts a job and SIGKILLs the ranks `victims` together once each has
  // committed a random version (its progress file, --progress-at), then waits
  // for mpirun to end the job. The kill lands inside the run by construction:
  // a victim's first compute process waits to be killed before its last
  // version (--await-kill), so the job cannot end first, however loaded the
  // machine. Without extra arguments the job is endless (mpirun reports the
  // killed ranks); with them (a finite job that survives: --supervised),
  // returns the job's output.
  std::string run_and_kill(int ranks, const std::string& strategy, const std::vector<int>& victims, std::mt19937& rng,
                           const std::vector<std::string>& extra = {}) const {
    const std::string log = dir.file("job.log");
    std::vector<std::string> words{CAIRN_MPIEXEC};
    const int at = std::uniform_int_distribution<int>(1, extra.empty() ? 300 : 3000)(rng);
    std::vector<std::string> args{"--strategy", strategy, "--sleep-us", "200", "--progress-at", std::to_string(at)};
    for (int v : victims) args.insert(args.end(), {"--await-kill", std::to_string(v)});
    if (extra.empty()) args.insert(args.end(), {"--iterations", "100000"});
    args.insert(args.end(), extra.begin(), extra.end());
    for (auto& w : job(ranks, args)) words.push_back(w);
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
    if (pid <= 0) return "fork failed";
    // Each victim's progress file says it committed version `at` (its pid
    // file was written before). The bound only turns a job that never gets
    // there into a failure instead of a hang.
    bool ended = false;
    auto arrived = [&] {
      return std::all_of(victims.begin(), victims.end(),
                         [&](int v) { return std::filesystem::exists(dir.file("progress." + std::to_string(v))); });
    };
    int status = 0;
    for (int polls = 0; !arrived() && !ended && polls < 60000; ++polls) {
      ended = waitpid(pid, &status, WNOHANG) == pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(arrived()) << "the job never committed version " << at << (ended ? " (it ended)" : "");
    for (int v : victims) {
      pid_t rank_pid = 0;
      std::ifstream(dir.file("pid." + std::to_string(v))) >> rank_pid;
      EXPECT_GT(rank_pid, 0);
      EXPECT_EQ(rank_pid > 0 ? kill(rank_pid, SIGKILL) : -1, 0);
    }
    if (!ended) waitpid(pid, &status, 0);
    const bool survived = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::ifstream in(log);
    const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (extra.empty())
      EXPECT_FALSE(survived) << "mpirun should report the killed ranks";
    else
      EXPECT_TRUE(survived) << output;
    for (int r = 0; r < ranks; ++r)
      for (const char* f : {"pid.", "progress."}) std::filesystem::remove(dir.file(f + std::to_string(r)));
    return output;
  }
  void fresh_dir() const {
    std::filesystem::remove_all(dir.path());
    std::filesystem::create_directories(dir.path());
  }
  std::vector<std::string> level;  // redundancy options of every job
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
    last_from = restored.begin()->second.from;
    return g;
  }
  mutable std::string last_from;  // how the last resume_and_check restored (local, partner, xor, pfs)
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

// SIGKILL from outside after a random version, a random rank, 2 to 4 ranks.
TEST_F(DistKill, RandomKillsRestoreOneGlobalVersion) {
  std::mt19937 rng(std::random_device{}());
  const char* strategies[] = {"in-place", "dram-cache", "shadow"};
  for (int round = 0; round < 3; ++round) {
    const int ranks = 2 + round;
    const std::string strategy = strategies[round];
    SCOPED_TRACE(strategy + " on " + std::to_string(ranks) + " ranks");
    run_and_kill(ranks, strategy, {std::uniform_int_distribution<int>(0, ranks - 1)(rng)}, rng);
    const std::uint64_t g = resume_and_check(ranks, strategy, 0);
    EXPECT_GT(g, 0u) << "no version was committed before the kill";
    // And the job goes on from there.
    EXPECT_EQ(resume_and_check(ranks, strategy, g + 20), g);
    fresh_dir();
  }
}

// A node lost: all its ranks SIGKILLed after a random version and its directory
// deleted. The replacement ranks rebuild the global version from the partner
// copies (or the group's parity) and the job ends as the uninterrupted one.
TEST_F(DistKill, LostNodeIsRebuiltFromPartnerCopies) {
  std::mt19937 rng(std::random_device{}());
  level = {"--redundancy", "partner", "--ranks-per-node", "2", "--changing-words", "1000"};
  run_and_kill(4, "in-place", {2, 3}, rng);
  std::filesystem::remove_all(dir.file("node1"));
  const std::uint64_t g = resume_and_check(4, "in-place", 0);
  EXPECT_GT(g, 0u);
  EXPECT_EQ(last_from, "partner");
  // The copies were written again: losing the other node now also recovers.
  ASSERT_FALSE(HasFailure());
  std::filesystem::remove_all(dir.file("node0"));
  EXPECT_EQ(resume_and_check(4, "in-place", g + 30), g);
  EXPECT_EQ(last_from, "partner");
}

TEST_F(DistKill, LostNodeIsRebuiltFromParity) {
  std::mt19937 rng(std::random_device{}());
  level = {"--redundancy", "xor", "--ranks-per-node", "1", "--xor-group", "4", "--words", "20011"};
  const int victim = std::uniform_int_distribution<int>(0, 3)(rng);
  run_and_kill(4, "shadow", {victim}, rng);
  std::filesystem::remove_all(dir.file("node" + std::to_string(victim)));
  const std::uint64_t g = resume_and_check(4, "shadow", 0);
  EXPECT_GT(g, 0u);
  EXPECT_EQ(last_from, "xor");
  ASSERT_FALSE(HasFailure());
  std::filesystem::remove_all(dir.file("node" + std::to_string((victim + 1) % 4)));
  EXPECT_EQ(resume_and_check(4, "shadow", g + 30), g);
  EXPECT_EQ(last_from, "xor");
}

// A rank whose pool is damaged (not missing) falls back to its partner copy;
// the damaged files are kept aside, not deleted.
TEST_F(DistKill, DamagedPoolFallsBackToThePartnerCopy) {
  level = {"--redundancy", "partner", "--ranks-per-node", "1"};
  ASSERT_EQ(mpirun(4, {"--iterations", "25"}).exit_code, 0);
  const std::string pool = dir.file("node2/worker.n4.r2.a.pool");
  {
    std::fstream f(pool, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    const std::string junk(8192, 'x');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  EXPECT_EQ(resume_and_check(4, "in-place", 40), 25u);
  EXPECT_EQ(last_from, "partner");
  EXPECT_TRUE(std::filesystem::exists(dir.file("node2/damaged/worker.n4.r2.a.pool")));
}

// Two neighbouring nodes lost: rank 0's partner copy went with rank 1. The
// job falls back to the newest version flushed to the shared directory.
TEST_F(DistKill, TwoLostNodesFallBackToTheFlushedVersion) {
  level = {"--redundancy", "partner", "--ranks-per-node", "1", "--pfs-dir", dir.file("pfs"), "--pfs-every", "4"};
  ASSERT_EQ(mpirun(3, {"--iterations", "30"}).exit_code, 0);
  std::filesystem::remove_all(dir.file("node0"));
  std::filesystem::remove_all(dir.file("node1"));
  EXPECT_EQ(resume_and_check(3, "in-place", 40), 28u);
  EXPECT_EQ(last_from, "pfs");
}

// One rank's flushes lag (rank 2 flushes nothing after version 8, as if its
// flush of 12 had not ended yet): the others keep every flushed version from
// the one before the newest complete on every rank, so when every node is
// lost the job still restores version 8. (Each rank once kept its own two
// newest: ranks 0 and 1 held 24 and 28, rank 2 held 4 and 8, and no version
// was left to restore.)
TEST_F(DistKill, ALaggingFlusherLeavesAVersionCompleteOnEveryRank) {
  level = {"--redundancy", "partner", "--ranks-per-node", "1", "--pfs-dir", dir.file("pfs"), "--pfs-every", "4"};
  Outcome o = mpirun(3, {"--iterations", "30", "--lag-rank", "2", "--lag-after", "8"});
  ASSERT_EQ(o.exit_code, 0) << o.output;
  for (int n = 0; n < 3; ++n) std::filesystem::remove_all(dir.file("node" + std::to_string(n)));
  EXPECT_TRUE(std::filesystem::exists(dir.file("pfs/worker.n3.r0.v8.ckpt")));
  EXPECT_EQ(resume_and_check(3, "in-place", 40), 8u);
  EXPECT_EQ(last_from, "pfs");
}

// Rank 1's newest flushed version is damaged (one byte of its payload): every
// rank falls back to the version before, complete and intact everywhere;
// when no version reads back intact, restore fails naming the versions it
// tried. (Restore once tried the newest common version only.)
TEST_F(DistKill, ADamagedFlushFallsBackToTheOlderCompleteVersion) {
  level = {"--redundancy", "partner", "--ranks-per-node", "1", "--pfs-dir", dir.file("pfs"), "--pfs-every", "4"};
  ASSERT_EQ(mpirun(3, {"--iterations", "30"}).exit_code, 0);
  for (int n = 0; n < 3; ++n) std::filesystem::remove_all(dir.file("node" + std::to_string(n)));
  auto damage = [&](const std::string& file) {
    std::fstream f(dir.file("pfs/" + file), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << file;
    f.seekp(64 + 1000);
    f.put('x');
  };
  damage("worker.n3.r1.v28.ckpt");
  EXPECT_EQ(resume_and_check(3, "in-place", 40), 24u);
  EXPECT_EQ(last_from, "pfs");
  ASSERT_FALSE(HasFailure());

  // Again, with every version the ranks have in common damaged somewhere.
  fresh_dir();
  ASSERT_EQ(mpirun(3, {"--iterations", "30"}).exit_code, 0);
  for (int n = 0; n < 3; ++n) std::filesystem::remove_all(dir.file("node" + std::to_string(n)));
  damage("worker.n3.r1.v28.ckpt");
  // Every file rank 2 kept (24, and 20 when the ranks' last flushes ended
  // together and none of them saw 28 complete everywhere yet).
  for (const auto& e : std::filesystem::directory_iterator(dir.file("pfs")))
    if (const std::string f = e.path().filename().string();
        f.rfind("worker.n3.r2.v", 0) == 0 && f != "worker.n3.r2.v28.ckpt")
      damage(f);
  Outcome o = mpirun(3, {"--iterations", "40", "--resume"});
  EXPECT_NE(o.exit_code, 0) << o.output;
  EXPECT_TRUE(parse(o.output, "restored").empty()) << o.output;
  EXPECT_NE(o.output.find("reads back intact on every rank (tried "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("reading flushed version 28"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("reading flushed version 24"), std::string::npos) << o.output;
}

// A partner copy whose bytes were damaged fails its checksum at the rebuild:
// the job falls back to the flushed version instead of restoring wrong data.
TEST_F(DistKill, DamagedPartnerCopyFallsBackToTheFlushedVersion) {
  level = {"--redundancy", "partner", "--ranks-per-node", "1",     "--pfs-dir", dir.file("pfs"),
           "--pfs-every",  "5",       "--words",          "100000"};
  ASSERT_EQ(mpirun(2, {"--iterations", "22"}).exit_code, 0);
  std::filesystem::remove_all(dir.file("node1"));
  {
    // Version 22 is in slot 0, which starts at 68 KiB and spans 800 KB.
    std::fstream f(dir.file("node0/worker.n2.r0.copy-of.r1.pool"), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(200 << 10);
    const std::string junk(4096, 'x');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  Outcome o = mpirun(2, {"--iterations", "30", "--resume"});
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("fails its checksum"), std::string::npos) << o.output;
  const auto restored = parse(o.output, "restored");
  ASSERT_EQ(restored.size(), 2u) << o.output;
  for (const auto& [rank, l] : restored) {
    EXPECT_EQ(l.version, 20u) << o.output;
    EXPECT_EQ(l.from, "pfs") << o.output;
    EXPECT_EQ(l.match, 1) << o.output;
  }
  for (const auto& [rank, l] : parse(o.output, "done")) EXPECT_EQ(l.match, 1) << o.output;
}

// SIGKILL during the recovery itself (after the lost node's ranks were
// rebuilt, before their holders' copies were written again): the next
// relaunch still restores the same global version.
TEST_F(DistKill, KilledDuringRecovery) {
  level = {"--redundancy", "partner", "--ranks-per-node", "2"};
  ASSERT_EQ(mpirun(4, {"--iterations", "20"}).exit_code, 0);
  std::filesystem::remove_all(dir.file("node0"));
  for (const char* stage : {"rebuilt", "protected"}) {
    SCOPED_TRACE(stage);
    Outcome k = mpirun(4, {"--iterations", "40", "--resume", "--kill-rank", "1", "--kill-when", stage});
    ASSERT_NE(k.exit_code, 0) << k.output;
  }
  EXPECT_EQ(resume_and_check(4, "in-place", 40), 20u);
}

// In-process restart: one rank's compute process is SIGKILLed from outside
// once it committed a random version; its rank process forks a new one, which restores the
// version the job agreed on last and joins the commit the others wait in.
// The job ends normally, without a relaunch, in the uninterrupted state.
TEST_F(DistKill, SupervisedComputeProcessIsRestartedInPlace) {
  CAIRN_SKIP_SUPERVISED_UNDER_TSAN();
  std::mt19937 rng(std::random_device{}());
  const int victim = std::uniform_int_distribution<int>(0, 3)(rng);
  const std::string out = run_and_kill(4, "in-place", {victim}, rng, {"--iterations", "4000", "--supervised"});
  const auto done = parse(out, "done");
  ASSERT_EQ(done.size(), 4u) << out;
  for (const auto& [rank, l] : done) {
    EXPECT_EQ(l.version, 4000u) << out;
    EXPECT_EQ(l.match, 1) << "rank " << rank << "\n" << out;
  }
  EXPECT_NE(out.find("restarted rank=" + std::to_string(victim) + " "), std::string::npos) << out;
  const auto restored = parse(out, "restored");
  ASSERT_EQ(restored.size(), 1u) << out;
  EXPECT_EQ(restored.begin()->first, victim);
  EXPECT_EQ(restored.begin()->second.match, 1) << out;
}

// SIGSEGV and SIGBUS in the compute process are restarted the same way.
TEST_F(DistKill, SupervisedCrashSignalsAreRestartedInPlace) {
  CAIRN_SKIP_SUPERVISED_UNDER_TSAN();
  // Under AddressSanitizer the ranks must die of the signal, not report it.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string saved = asan ? asan : "";
  setenv("ASAN_OPTIONS", (saved + ":handle_segv=0:handle_sigbus=0:disable_coredump=1").c_str(), 1);
  for (const char* sig : {"SEGV", "BUS"}) {
    SCOPED_TRACE(sig);
    Outcome o =
        mpirun(3, {"--iterations", "80", "--supervised", "--kill-rank", "1", "--kill-at", "33", "--kill-signal", sig});
    EXPECT_EQ(o.exit_code, 0) << o.output;
    for (const auto& [rank, l] : parse(o.output, "done")) EXPECT_EQ(l.match, 1) << "rank " << rank << o.output;
    EXPECT_EQ(parse(o.output, "done").size(), 3u) << o.output;
    EXPECT_NE(o.output.find("restarted rank=1 version=32"), std::string::npos) << o.output;
  }
  setenv("ASAN_OPTIONS", saved.c_str(), 1);
}

TEST_F(DistKill, SupervisedRefusesPartnerCopies) {
  Outcome o = mpirun(2, {"--iterations", "5", "--supervised", "--redundancy", "partner", "--ranks-per-node", "1"});
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.output.find("supervised compute processes keep the local level only"), std::string::npos) << o.output;
}

// cairn launch around a job that loses a node (its directory deleted, its
// ranks killed) relaunches it; the relaunch rebuilds the node's ranks from
// their partner copies and the job ends as the uninterrupted one.
TEST_F(DistKill, LaunchRelaunchesAfterANodeLoss) {
  std::vector<std::string> args{"launch",
                                "-n",
                                "4",
                                "--max-restarts",
                                "2",
                                "--",
                                CAIRN_DIST_WORKER,
                                "--dir",
                                dir.path(),
                                "--iterations",
                                "120",
                                "--redundancy",
                                "partner",
                                "--ranks-per-node",
                                "2",
                                "--kill-rank",
                                "2",
                                "--kill-at",
                                "40",
                                "--kill-when",
                                "node-loss"};
  Outcome o = cairn::testing::run_program(CAIRN_TOOL, args);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("relaunching with --resume (restart 1 of 2)"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("job finished after 1 restart"), std::string::npos) << o.output;
  const auto restored = parse(o.output, "restored");
  ASSERT_EQ(restored.size(), 4u) << o.output;
  for (const auto& [rank, l] : restored) {
    EXPECT_EQ(l.version, 39u) << o.output;
    EXPECT_EQ(l.match, 1) << o.output;
    EXPECT_EQ(l.from, "partner") << o.output;
  }
  const auto done = parse(o.output, "done");
  ASSERT_EQ(done.size(), 4u) << o.output;
  for (const auto& [rank, l] : done) EXPECT_EQ(l.match, 1) << "rank " << rank << "\n" << o.output;
}

// A rank that hangs (SIGSTOP) before its first commit holds the other rank
// in the commit's agreement: neither ever beats. cairn launch judges ranks
// that have not beaten against --start-timeout from the launch, ends the job
// and relaunches it; the relaunch, with nothing committed, starts from the
// beginning and ends in the uninterrupted state.
TEST_F(DistKill, LaunchJudgesARankThatHangsBeforeItsFirstCommit) {
  Outcome o = cairn::testing::run_program(CAIRN_TOOL, {"launch",
                                                       "-n",
                                                       "2",
                                                       "--timeout",
                                                       "1",
                                                       "--start-timeout",
                                                       "5",
                                                       "--max-restarts",
                                                       "2",
                                                       "--",
                                                       CAIRN_DIST_WORKER,
                                                       "--dir",
                                                       dir.path(),
                                                       "--iterations",
                                                       "20",
                                                       "--kill-rank",
                                                       "1",
                                                       "--kill-at",
                                                       "1",
                                                       "--kill-signal",
                                                       "STOP"});
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("from rank(s) 0 (never beat), 1 (never beat): declared dead"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("job finished after 1 restart"), std::string::npos) << o.output;
  const auto restored = parse(o.output, "restored");
  ASSERT_EQ(restored.size(), 2u) << o.output;
  for (const auto& [rank, l] : restored) EXPECT_EQ(l.version, 0u) << o.output;
  const auto done = parse(o.output, "done");
  ASSERT_EQ(done.size(), 2u) << o.output;
  for (const auto& [rank, l] : done) {
    EXPECT_EQ(l.version, 20u) << o.output;
    EXPECT_EQ(l.match, 1) << "rank " << rank << "\n" << o.output;
  }
}

// Every tenth iteration takes a second, far beyond Eq. 3's T_timeout from the
// fast ones (2.2 x 20 ms, floored at 0.3 s). A launcher that took T_i from
// the last interval alone declared a false death at each slow iteration,
// after every relaunch (5 here, more than --max-restarts allows). T_i is the
// longest interval of the job and each heartbeat death doubles T_timeout, so
// the job ends after a few relaunches in the uninterrupted state.
TEST_F(DistKill, LaunchOutlastsAnIterationSlowerThanItsTimeout) {
  Outcome o = cairn::testing::run_program(CAIRN_TOOL, {"launch",
                                                       "-n",
                                                       "2",
                                                       "--timeout",
                                                       "auto",
                                                       "--timeout-floor",
                                                       "0.3",
                                                       "--max-restarts",
                                                       "4",
                                                       "--",
                                                       CAIRN_DIST_WORKER,
                                                       "--dir",
                                                       dir.path(),
                                                       "--iterations",
                                                       "50",
                                                       "--sleep-us",
                                                       "20000",
                                                       "--slow-every",
                                                       "10",
                                                       "--slow-ms",
                                                       "1000"});
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("timeouts x2 from now on"), std::string::npos) << o.output;
  const auto done = parse(o.output, "done");
  ASSERT_EQ(done.size(), 2u) << o.output;
  for (const auto& [rank, l] : done) {
    EXPECT_EQ(l.version, 50u) << o.output;
    EXPECT_EQ(l.match, 1) << "rank " << rank << "\n" << o.output;
  }
}

// A beat names a process that is not the job's (its pid reused after the
// rank's process ended, or a process on another node): the launcher ends the
// job without killing that process.
TEST_F(DistKill, LaunchKillsNoProcessOutsideTheJob) {
  const pid_t outsider = fork();
  ASSERT_GE(outsider, 0);
  if (outsider == 0) {
    ::alarm(120);
    for (;;) ::pause();
  }
  const std::string who = std::to_string(outsider);
  Outcome o = cairn::testing::run_program(
      CAIRN_TOOL, {"launch", "-n", "1", "--timeout", "1", "--max-restarts", "0", "--", CAIRN_STALE_BEAT, who});
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_NE(o.output.find("declared dead"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("pid " + who + ", named by a beat, is not a process of this job: not killed"),
            std::string::npos)
      << o.output;
  int status = 0;
  EXPECT_EQ(waitpid(outsider, &status, WNOHANG), 0) << "the launcher killed a process outside the job";
  ::kill(outsider, SIGKILL);
  waitpid(outsider, &status, 0);
}

// A compute process that keeps dying is restarted --max-restarts times, then
// the job ends (for a launcher to relaunch), naming the reason.
TEST_F(DistKill, SupervisedGivesUpAfterMaxRestarts) {
  CAIRN_SKIP_SUPERVISED_UNDER_TSAN();
  // --kill-when before-local kills at version 5 in every compute process,
  // replacements included.
  Outcome o = mpirun(2, {"--iterations", "20", "--supervised", "--max-restarts", "2", "--kill-rank", "1", "--kill-at",
                         "5", "--kill-when", "before-local"});
  EXPECT_NE(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("restarting it in place (2 of 2)"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("once more than --max-restarts allows"), std::string::npos) << o.output;
  EXPECT_TRUE(parse(o.output, "done").empty()) << o.output;
}

TEST_F(DistKill, BadNodeLayoutsAreRefusedWithAReason) {
  Outcome one = mpirun(2, {"--iterations", "3", "--redundancy", "partner", "--ranks-per-node", "2"});
  EXPECT_NE(one.exit_code, 0);
  EXPECT_NE(one.output.find("this job has one node"), std::string::npos) << one.output;
  Outcome uneven = mpirun(3, {"--iterations", "3", "--redundancy", "xor", "--ranks-per-node", "2"});
  EXPECT_NE(uneven.exit_code, 0);
  EXPECT_NE(uneven.output.find("3 ranks do not fill nodes of 2 ranks"), std::string::npos) << uneven.output;
}

TEST_F(DistKill, LostStorageOfOneRankIsNamed) {
  ASSERT_EQ(mpirun(3, {"--iterations", "10"}).exit_code, 0);
  for (const char* lane : {"a", "b"}) std::filesystem::remove(dir.file(std::string("worker.n3.r1.") + lane + ".pool"));
  Outcome r = mpirun(3, {"--iterations", "20", "--resume"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("rank 1 lacks the versions the other ranks hold"), std::string::npos) << r.output;
}

// "{numa}" in --dir: each rank's lanes go to the directory of the NUMA node
// it runs on, and a resume finds them there.
TEST_F(DistKill, NumaTokenPlacesEachRanksStorageInItsNodesDirectory) {
  std::vector<std::string> node_dirs;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string f = e.path().filename().string();
    if (f.size() > 4 && f.rfind("node", 0) == 0 && std::isdigit(static_cast<unsigned char>(f[4])))
      node_dirs.push_back(dir.file("pm" + f.substr(4)));
  }
  if (node_dirs.empty()) node_dirs.push_back(dir.file("pm0"));
  for (const auto& d : node_dirs) std::filesystem::create_directories(d);
  const std::string numa = dir.file("pm{numa}");
  auto run = [&](const std::vector<std::string>& args) {
    std::vector<std::string> a{"--oversubscribe", "-n", "2", CAIRN_DIST_WORKER, "--dir", numa};
    a.insert(a.end(), args.begin(), args.end());
    return cairn::testing::run_program(CAIRN_MPIEXEC, a);
  };
  Outcome k = run({"--iterations", "40", "--kill-rank", "1", "--kill-at", "20", "--kill-when", "after-local",
                   "--stall-others-ms", "20000"});
  ASSERT_NE(k.exit_code, 0) << k.output;
  Outcome r = run({"--iterations", "40", "--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto restored = parse(r.output, "restored");
  ASSERT_EQ(restored.size(), 2u) << r.output;
  for (const auto& [rank, l] : restored) {
    EXPECT_EQ(l.version, 19u) << r.output;
    EXPECT_EQ(l.match, 1) << r.output;
  }
  for (const auto& [rank, l] : parse(r.output, "done")) EXPECT_EQ(l.match, 1) << r.output;
  for (const char* rank : {"r0", "r1"}) {
    int found = 0;
    for (const auto& d : node_dirs) found += std::filesystem::exists(d + "/worker.n2." + rank + ".a.pool") ? 1 : 0;
    EXPECT_EQ(found, 1) << rank << "'s lane a should be in exactly one node's directory\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir.file(std::string("worker.n2.") + rank + ".a.pool")));
  }
}

TEST_F(DistKill, UndoLogIsRefusedWithAReason) {
  Outcome r = mpirun(2, {"--strategy", "undo-log", "--iterations", "5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("libpmemobj transaction open per thread"), std::string::npos) << r.output;
}

}  // namespace
