// auto_test.cpp — jacobi-auto end to end: jacobi's kernel made persistent by
// the versioning pass alone must give the checksum of the hand-written
// in-place jacobi (and of the same source without the pass), and after a
// SIGKILL on one of its progress lines, CAIRN_RESUME=1 must continue after the
// last committed iteration and end with the same bits.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/support/run_app.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using cairn::testing::checksum_in;
using cairn::testing::run_program;

// Small grid, many iterations: the kill lands long before the end. Progress
// lines are ~15 bytes; the child blocks once the pipe (64 KiB) and our stdio
// buffer (4 KiB) are full, so it is at most ~4700 iterations ahead of the line
// we kill it on: far from kIterations whatever the load.
constexpr const char* kSize = "32";
constexpr long kIterations = 12000;
constexpr long kKillAt = 150;

class JacobiAuto : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("CAIRN_POOL_DIR", dir_.path().c_str(), 1);
    ::setenv("CAIRN_AUTO_NAME", "jacobi-auto-test", 1);
    ::unsetenv("CAIRN_RESUME");
  }
  std::vector<std::string> args(bool progress = false) const {
    std::vector<std::string> a{"--size", kSize, "--iterations", std::to_string(kIterations)};
    if (progress) a.push_back("--progress");
    return a;
  }
  // The hand-written in-place jacobi's checksum for the same problem.
  std::string hand_written() const {
    auto o = run_program(CAIRN_JACOBI, {"--size", kSize, "--iterations", std::to_string(kIterations), "--strategy",
                                        "in-place", "--dir", dir_.path(), "--threads", "2", "--quiet"});
    EXPECT_EQ(o.exit_code, 0) << o.output;
    return checksum_in(o.output);
  }
  cairn::testing::TempDir dir_;
};

TEST_F(JacobiAuto, SameChecksumAsHandWrittenInPlace) {
  const std::string want = hand_written();
  ASSERT_EQ(want.size(), 16u);
  auto native = run_program(CAIRN_JACOBI_AUTO_NATIVE, args());
  ASSERT_EQ(native.exit_code, 0) << native.output;
  EXPECT_EQ(checksum_in(native.output), want) << native.output;
  auto versioned = run_program(CAIRN_JACOBI_AUTO, args());
  ASSERT_EQ(versioned.exit_code, 0) << versioned.output;
  EXPECT_EQ(checksum_in(versioned.output), want) << versioned.output;
}

// Starts jacobi-auto --progress, SIGKILLs it right after reading the line
// "iteration <at>", and returns whether that happened before it finished.
bool kill_on_progress_line(long at) {
  int fds[2];
  if (::pipe(fds) != 0) return false;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    const std::string iters = std::to_string(kIterations);
    ::execl(CAIRN_JACOBI_AUTO, CAIRN_JACOBI_AUTO, "--size", kSize, "--iterations", iters.c_str(), "--progress",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  FILE* out = ::fdopen(fds[0], "r");
  const std::string line = "iteration " + std::to_string(at) + "\n";
  char buf[256];
  bool killed = false;
  while (std::fgets(buf, sizeof buf, out)) {
    if (line == buf) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
  }
  std::fclose(out);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

TEST_F(JacobiAuto, KilledOnAProgressLineResumesBitForBit) {
  auto whole = run_program(CAIRN_JACOBI_AUTO, args());
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string want = checksum_in(whole.output);
  ASSERT_EQ(want.size(), 16u);

  ASSERT_TRUE(kill_on_progress_line(kKillAt));
  ::setenv("CAIRN_RESUME", "1", 1);
  auto resumed = run_program(CAIRN_JACOBI_AUTO, args(true));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output.substr(0, 2000);
  // It continued after the last commit: iteration kKillAt printed its line
  // before committing, so at least kKillAt - 1 was committed; and it did not
  // start over.
  long first = -1;
  ASSERT_EQ(std::sscanf(resumed.output.c_str(), "iteration %ld", &first), 1) << resumed.output.substr(0, 200);
  EXPECT_GE(first, kKillAt);
  EXPECT_LT(first, kIterations);
  EXPECT_EQ(checksum_in(resumed.output), want);

  // Resuming a finished run computes nothing and restores the final state.
  auto again = run_program(CAIRN_JACOBI_AUTO, args(true));
  ASSERT_EQ(again.exit_code, 0) << again.output.substr(0, 2000);
  EXPECT_EQ(again.output.find("iteration "), std::string::npos);
  EXPECT_EQ(checksum_in(again.output), want);

  // A run with fewer iterations than the pool has committed: a clear error
  // (its exit test, i != n after optimisation, would otherwise never end).
  auto fewer = run_program(CAIRN_JACOBI_AUTO, {"--size", kSize, "--iterations", "100"});
  EXPECT_EQ(fewer.exit_code, 2) << fewer.output.substr(0, 2000);
  EXPECT_NE(fewer.output.find("outside this run's loop"), std::string::npos) << fewer.output.substr(0, 2000);
}

TEST_F(JacobiAuto, ResumeWithNothingCommittedIsAClearError) {
  ::setenv("CAIRN_RESUME", "1", 1);
  auto o = run_program(CAIRN_JACOBI_AUTO, args());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("holds no committed iteration"), std::string::npos) << o.output;
}

}  // namespace
