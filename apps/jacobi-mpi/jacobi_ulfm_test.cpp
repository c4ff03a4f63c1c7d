// jacobi_ulfm_test.cpp — in-job recovery (ULFM builds, the ulfm preset):
// real mpirun jobs of jacobi-mpi with spare ranks, real SIGKILLs of ranks sent
// when rank 0 reports a given commit (--progress), never after a sleep. The
// job must continue inside the same mpirun (a spare in the dead rank's place)
// and end with the uninterrupted run's checksum.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/support/mpirun_env.hpp"
#include "tests/support/run_app.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using cairn::testing::checksum_in;

constexpr int kJobRanks = 4;
const std::vector<std::string> kProblem{"--size", "128", "--iterations", "2000"};

// One kill: when rank 0 has reported committing version `at` (or later),
// SIGKILL (or `signal`) the process of rank `rank` and, for a lost node,
// delete `remove`.
struct Kill {
  std::uint64_t at;
  int rank;
  std::string remove;
  int signal = SIGKILL;
};

// The decimal number after `key` in `text` from `from` on, or -1.
long long number_after(const std::string& text, const std::string& key, std::size_t from = 0) {
  const std::size_t at = text.find(key, from);
  if (at == std::string::npos) return -1;
  const std::size_t b = at + key.size();
  std::size_t e = b;
  while (e < text.size() && text[e] >= '0' && text[e] <= '9') ++e;
  return e > b ? std::stoll(text.substr(b, e - b)) : -1;
}

struct JobRun {
  int exit_code = -1;
  std::string output;
  std::vector<std::uint64_t> killed_after;  // the version reported when each kill was sent
};

// Runs mpirun with the given arguments, reading its output line by line and
// sending the kills in order as the progress lines arrive.
JobRun run_job(const std::vector<std::string>& args, std::vector<Kill> kills) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    std::string mpirun = CAIRN_MPIEXEC;
    argv.push_back(mpirun.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(mpirun.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  JobRun run;
  std::map<int, pid_t> pid_of;  // the job's rank -> its current process
  std::size_t next = 0;
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  char buf[4096];
  bool open = true;
  while (open) {
    pollfd p{fds[0], POLLIN, 0};
    if (std::chrono::steady_clock::now() > deadline) {
      run.output += "\n[test: the job did not end within 240 s; killed]\n";
      kill(-child, SIGKILL);
      break;
    }
    if (poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        line += buf[i];
        continue;
      }
      run.output += line + "\n";
      if (line.rfind("pid rank=", 0) == 0)
        pid_of[static_cast<int>(number_after(line, "rank="))] = static_cast<pid_t>(number_after(line, "pid="));
      const long long v = line.rfind("committed version=", 0) == 0 ? number_after(line, "version=") : -1;
      if (next < kills.size() && v >= 0 && static_cast<std::uint64_t>(v) >= kills[next].at &&
          pid_of.count(kills[next].rank)) {
        const pid_t victim = pid_of[kills[next].rank];
        pid_of.erase(kills[next].rank);  // rank 0 reports its replacement's after the recovery
        if (kill(victim, kills[next].signal) != 0)
          run.output += "[test: kill failed: " + std::string(strerror(errno)) + "]\n";
        if (!kills[next].remove.empty()) std::filesystem::remove_all(kills[next].remove);
        run.output += "[test: signal " + std::to_string(kills[next].signal) + " to rank " +
                      std::to_string(kills[next].rank) + " after version " + std::to_string(v) + "]\n";
        run.killed_after.push_back(static_cast<std::uint64_t>(v));
        ++next;
      }
      line.clear();
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

// The versions of the "recovered version=G ... from=F" lines, with F.
std::vector<std::pair<std::uint64_t, std::string>> recoveries(const std::string& out) {
  std::vector<std::pair<std::uint64_t, std::string>> r;
  for (std::size_t at = out.find("recovered version="); at != std::string::npos;
       at = out.find("recovered version=", at + 1)) {
    const std::size_t from = out.find(" from=", at), end = out.find_first_of(" \n", from + 6);
    if (from == std::string::npos) break;
    r.emplace_back(static_cast<std::uint64_t>(number_after(out, "recovered version=", at)),
                   out.substr(from + 6, end - from - 6));
  }
  return r;
}

class JacobiUlfm : public ::testing::Test {
 protected:
  void SetUp() override { cairn::testing::set_mpirun_environment(); }
  std::vector<std::string> job(int spares, std::vector<std::string> extra) const {
    std::vector<std::string> a{
        "--with-ft",      "ulfm",  "--oversubscribe", "-n",       std::to_string(kJobRanks + spares),
        CAIRN_JACOBI_MPI, "--dir", dir.path(),        "--spares", std::to_string(spares),
        "--progress"};
    a.insert(a.end(), kProblem.begin(), kProblem.end());
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // The uninterrupted run's checksum, without spares (computed once).
  static std::string uninterrupted() {
    static std::string sum;
    if (sum.empty()) {
      cairn::testing::TempDir d;
      std::vector<std::string> a{"--with-ft",      "ulfm",  "--oversubscribe", "-n", std::to_string(kJobRanks),
                                 CAIRN_JACOBI_MPI, "--dir", d.path()};
      a.insert(a.end(), kProblem.begin(), kProblem.end());
      auto o = cairn::testing::run_program(CAIRN_MPIEXEC, a);
      EXPECT_EQ(o.exit_code, 0) << o.output;
      sum = checksum_in(o.output);
    }
    return sum;
  }
  // A moment between the 100th and the 600th commit, different each run (printed).
  static std::uint64_t random_moment() {
    std::random_device rd;
    const std::uint64_t at = 100 + rd() % 500;
    std::printf("kill after version %llu\n", static_cast<unsigned long long>(at));
    return at;
  }
  cairn::testing::TempDir dir;
};

TEST_F(JacobiUlfm, SparesThatAreNotNeededLeaveTheResultAlone) {
  const std::string expected = uninterrupted();
  ASSERT_EQ(expected.size(), 16u);
  JobRun r = run_job(job(1, {}), {});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(recoveries(r.output).empty()) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
}

// The process died, its node (storage) is intact: the spare restores the dead
// rank's lanes, every rank rolls back to the global version.
TEST_F(JacobiUlfm, KilledRankIsReplacedBySpareInsideTheJob) {
  const std::string expected = uninterrupted();
  JobRun r = run_job(job(1, {}), {{random_moment(), 2, ""}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.killed_after.size(), 1u) << r.output;
  const auto rec = recoveries(r.output);
  ASSERT_EQ(rec.size(), 1u) << r.output;
  // The global version when the kill arrived, or one the ranks committed after it.
  EXPECT_GE(rec[0].first, r.killed_after[0]) << r.output;
  EXPECT_EQ(rec[0].second, "local") << r.output;
  EXPECT_NE(r.output.find("joined rank=2 "), std::string::npos) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
}

// A node lost (one rank per simulated node): its rank killed and its
// directory deleted; the spare rebuilds the rank from its partner copy.
TEST_F(JacobiUlfm, LostNodeIsRebuiltFromThePartnerCopyInsideTheJob) {
  const std::string expected = uninterrupted();
  JobRun r = run_job(job(1, {"--redundancy", "partner", "--ranks-per-node", "1"}),
                     {{random_moment(), 1, dir.path() + "/node1"}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rec = recoveries(r.output);
  ASSERT_EQ(rec.size(), 1u) << r.output;
  EXPECT_EQ(rec[0].second, "partner") << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/node1")) << "the replacement stores the rank again";
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
}

// A hung rank (SIGSTOP): ULFM does not notice it; the watchdog of the lowest
// rank still running declares it dead after --hang-timeout, SIGKILLs it, and
// it is recovered like a killed one.
TEST_F(JacobiUlfm, StoppedRankIsKilledByTheWatchdogAndReplaced) {
  const std::string expected = uninterrupted();
  JobRun r = run_job(job(1, {"--hang-timeout", "2"}), {{random_moment(), 1, "", SIGSTOP}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rec = recoveries(r.output);
  ASSERT_EQ(rec.size(), 1u) << r.output;
  EXPECT_NE(r.output.find("cairn dist: rank 1 (pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("has not run for"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("joined rank=1 "), std::string::npos) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;
}

// Two failures in a row, two spares: both are used; a third failure finds
// none left and the job ends with an error saying so (the launcher's case).
TEST_F(JacobiUlfm, TwoFailuresInARowUseBothSparesAndAThirdEndsTheJob) {
  const std::string expected = uninterrupted();
  JobRun r = run_job(job(2, {}), {{150, 1, ""}, {450, 3, ""}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rec = recoveries(r.output);
  ASSERT_EQ(rec.size(), 2u) << r.output;
  EXPECT_NE(r.output.find("joined rank=1 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("joined rank=3 "), std::string::npos) << r.output;
  EXPECT_EQ(checksum_in(r.output), expected) << r.output;

  std::filesystem::remove_all(dir.path());
  std::filesystem::create_directories(dir.path());
  JobRun out = run_job(job(1, {}), {{150, 1, ""}, {450, 2, ""}});
  EXPECT_NE(out.exit_code, 0) << out.output;
  EXPECT_EQ(recoveries(out.output).size(), 1u) << out.output;
  EXPECT_NE(out.output.find("spare(s) are left: the job cannot keep its size"), std::string::npos) << out.output;
  EXPECT_EQ(checksum_in(out.output), "") << out.output;
}

}  // namespace
