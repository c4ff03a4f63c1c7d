// amr_test.cpp — the adaptive interface app: volume conserved, the shape error
// falls as the finest level rises, and a run SIGKILLed mid-way resumes from
// its last pm_persistent to the uninterrupted run's bits.
#include "apps/amr/amr.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

namespace cairn::apps::amr {
namespace {

std::string pool(const std::string& name) {
  const std::string dir = "/dev/shm/cairn-amr-test." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir + "/" + name + ".pool";
}

struct Cleanup {
  ~Cleanup() { std::filesystem::remove_all("/dev/shm/cairn-amr-test." + std::to_string(::getpid())); }
} cleanup;

Config small(const std::string& name, int level) {
  Config c;
  c.pool = pool(name);
  c.level_max = level;
  c.period = 0.5;
  c.pool_size = 256ull << 20;
  return c;
}

TEST(Amr, ConservesVolumeAndConvergesWithTheFinestLevel) {
  double error[2];
  for (int level : {3, 4}) {
    auto r = run(small("conv" + std::to_string(level), level));
    ASSERT_TRUE(r.ok()) << r.error().message;
    const Report& x = r.value();
    EXPECT_LT(std::fabs(x.volume - x.volume0) / x.volume0, 1e-12) << level;
    EXPECT_NEAR(x.volume0, 4.0 / 3.0 * M_PI * 0.15 * 0.15 * 0.15, 0.05 * x.volume0);  // the sampled sphere
    EXPECT_GT(x.leaves, 64u);
    EXPECT_GT(x.blocks_persisted, 0u);
    error[level - 3] = x.shape_error;
  }
  EXPECT_LT(error[1], error[0]);
}

TEST(Amr, ASigkilledRunResumesBitIdentically) {
  for (std::uint64_t every : {1u, 3u}) {
    Config base = small("clean" + std::to_string(every), 4);
    base.persist_every = every;
    auto clean = run(base);
    ASSERT_TRUE(clean.ok()) << clean.error().message;
    ASSERT_GT(clean.value().steps, 20u);

    Config crash = small("killed" + std::to_string(every), 4);
    crash.persist_every = every;
    crash.crash_at = 17;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      (void)run(crash);
      ::_exit(0);  // not reached: the run raises SIGKILL at step 17
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    Config resume = crash;
    resume.crash_at = -1;
    resume.resume = true;
    auto back = run(resume);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back.value().first_step, 17u / every * every);  // the last persisted step
    EXPECT_EQ(back.value().checksum, clean.value().checksum) << "persist every " << every;
    EXPECT_EQ(back.value().volume, clean.value().volume);
  }
}

TEST(Amr, BadOptionsAndAForeignResume) {
  Config c = small("bad", 4);
  c.level_min = 5;
  EXPECT_EQ(run(c).error().code, Errc::invalid_argument);
  c = small("missing", 4);
  c.resume = true;
  EXPECT_EQ(run(c).error().code, Errc::not_found);
  // A pool of a finer run holds more steps than a coarser run has.
  Config fine = small("fine", 5);
  fine.crash_at = -1;
  fine.period = 0.25;
  ASSERT_TRUE(run(fine).ok());
  Config coarse = fine;
  coarse.level_max = 3;
  coarse.resume = true;
  auto r = run(coarse);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::layout_mismatch) << r.error().message;
}

}  // namespace
}  // namespace cairn::apps::amr
