// octree_kill_test.cpp — the PM-octree under real SIGKILLs: a child runs a
// deterministic mesh loop (Octree::create, then per step refine, coarsen,
// balance, updates and collections, and persist) on a pool file in /dev/shm
// and is killed round after round, each kill at a point the child announces
// (a seeded step, at its start or as its persist begins: the kill lands there
// or a little later, whatever the machine's load, and never after the run's
// end, which a child that was asked to be killed waits at); each restart
// restores and continues. Every restore must give the last version whose persist
// returned (or the one in flight), equal to the uninterrupted run's at that
// version, and the run finished after the kills must end on its checksum.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "cairn/octree.hpp"
#include "tests/crashsim/crashsim.hpp"
#include "tests/crashsim/workloads/workloads.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::testing::crashsim {
namespace {

namespace ot = octree;
using Clock = std::chrono::steady_clock;

constexpr unsigned kSteps = 40;  // versions 1..kSteps
constexpr std::uint64_t kSeed = 20261124;

ot::Options options() {
  ot::Options o;
  o.dims = 3;
  o.data_size = 8;
  o.pool_size = 32ull << 20;
  o.dram_budget = 8u << 10;  // C0 regions merged within steps, not only at persist
  return o;
}

// What a child tells its parent, and where the parent wants it killed.
struct Shared {
  std::atomic<std::uint64_t> committed;  // the last version whose persist returned
  std::atomic<std::uint64_t> kill_step;  // announce reaching this step ...
  std::atomic<int> kill_phase;           // ... at its start (0) or as its persist begins (1)
  std::atomic<int> reached;              // the child has passed the kill point
};

void announce(Shared* shared, unsigned s, int phase) {
  if (shared != nullptr && shared->kill_step.load() == s && shared->kill_phase.load() == phase)
    shared->reached.store(1);
}

// Step s makes version s + 1. Its choices depend on the seed and s alone, so a
// run restored at any version continues exactly as the uninterrupted one.
Result<void> time_step(ot::Octree& t, unsigned s, Shared* shared = nullptr) {
  announce(shared, s, 0);
  Rng rng(mix_seed(kSeed, s, 0x0c7));
  if (s == 0) {
    if (auto r = t.uniform(4,
                           [&](const ot::Octant&, std::byte* d, const std::byte*) {
                             const std::uint64_t w = rng();
                             std::memcpy(d, &w, 8);
                           });
        !r.ok())
      return r;
  } else {
    builtin::OctreeMesh mesh;
    mesh.max_level = 7;
    mesh.max_leaves = 60000;
    if (rng.below(2) == 0)
      if (auto r = t.gc(); !r.ok()) return r;
    if (auto r = builtin::octree_mesh_step(t, rng, mesh); !r.ok()) return r;
    // The mesh steps coarsen faster than they refine a tree this large: keep
    // it at some thousands of leaves, so that every step has work to be killed in.
    auto n = t.leaf_count();
    if (!n.ok()) return std::move(n).error();
    if (n.value() < 4000)
      if (auto r = t.refine(
              false, [&](const ot::Octant&, const std::byte*) { return rng.below(4) == 0; },
              [&](const ot::Octant& o, std::byte* d, const std::byte* parent) {
                std::uint64_t w;
                std::memcpy(&w, parent, 8);
                w = mix_seed(w, ot::morton(o, 3));
                std::memcpy(d, &w, 8);
              },
              mesh.max_level);
          !r.ok())
        return r;
  }
  // A solver step: every payload changes with the step, so every block is
  // copied and written (persist has work to be killed in), and no two
  // versions are equal: restoring a neighbouring one cannot go unnoticed.
  if (auto r = t.update_leaves([&](const ot::Octant&, std::byte* d) {
        std::uint64_t w;
        std::memcpy(&w, d, 8);
        w = mix_seed(w, s);
        std::memcpy(d, &w, 8);
        return true;
      });
      !r.ok())
    return r;
  announce(shared, s, 1);
  auto p = t.persist();
  if (!p.ok()) return std::move(p).error();
  if (t.version() != s + 1) return make_error(Errc::corrupted, "persist made version " + std::to_string(t.version()));
  return {};
}

// The child: restore (or create, if nothing was ever committed) and run to the end.
[[noreturn]] void child(const std::string& path, Shared* shared) {
  std::unique_ptr<ot::Octree> t;
  if (std::filesystem::exists(path)) {
    auto r = ot::Octree::restore(path, options());
    if (!r.ok()) _exit(3);
    t = std::move(r.value());
  } else {
    auto r = ot::Octree::create(path, options());
    if (!r.ok()) _exit(4);
    t = std::move(r.value());
  }
  for (unsigned s = static_cast<unsigned>(t->version()); s < kSteps; ++s) {
    if (!time_step(*t, s, shared).ok()) _exit(5);
    shared->committed.store(t->version());
  }
  // Asked to be killed: the kill lands before the run is over.
  while (shared->reached.load() != 0) pause();
  _exit(0);
}

// Kills the child as soon as it announces its kill point; "killed", or
// "exited" if it ended first (it had nothing left to do), else what went wrong.
std::string kill_at_point(pid_t pid, Shared* shared) {
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return std::string("waitpid: ") + std::strerror(errno);
    if (shared->reached.load() != 0) {
      ::kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));  // polling the announcement, not a delay
  }
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGKILL ? "killed" : strsignal(WTERMSIG(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "exited";
  return "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

class RealKillOctreeLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    shared_ = new (p) Shared{};
    // The uninterrupted run: the checksum of every version, and its duration.
    const std::string ref = dir_.file("reference.pool");
    auto t = ot::Octree::create(ref, options());
    ASSERT_TRUE(t.ok()) << t.error().message;
    const auto t0 = Clock::now();
    checksums_.assign(kSteps + 1, 0);
    for (unsigned s = 0; s < kSteps; ++s) {
      auto r = time_step(*t.value(), s);
      ASSERT_TRUE(r.ok()) << "step " << s << ": " << r.error().message;
      auto c = t.value()->checksum();
      ASSERT_TRUE(c.ok()) << c.error().message;
      checksums_[s + 1] = c.value();
    }
    full_ = Clock::now() - t0;
    auto st = t.value()->stats();
    ASSERT_TRUE(st.ok());
    std::printf("uninterrupted run: %u versions in %.3f s, %llu leaves, %llu merges of C0 regions, %llu collections\n",
                kSteps, std::chrono::duration<double>(full_).count(),
                static_cast<unsigned long long>(st.value().leaves), static_cast<unsigned long long>(st.value().merges),
                static_cast<unsigned long long>(st.value().gc_runs));
  }
  void TearDown() override {
    if (shared_ != nullptr) munmap(shared_, sizeof(Shared));
  }

  // After a kill: the file holds the version the child last committed or the
  // one it was committing, exactly as the uninterrupted run made it, and a
  // collection leaves a consistent store. Returns the restored version (0:
  // nothing was committed, the file was removed to start again).
  std::uint64_t check_restore(const std::string& path) {
    const std::uint64_t c = shared_->committed.load();
    auto t = ot::Octree::restore(path, options());
    if (!t.ok()) {
      // Killed before the first commit: no file yet (create renames it into
      // place), no tree header yet, or no version yet.
      const Errc e = t.error().code;
      EXPECT_EQ(c, 0u) << "version " << c << " was committed but restore failed: " << t.error().message;
      EXPECT_TRUE(e == Errc::not_found || e == Errc::foreign_file || e == Errc::no_version) << t.error().message;
      std::filesystem::remove(path);
      return 0;
    }
    const std::uint64_t v = t.value()->version();
    EXPECT_TRUE(v == c || v == c + 1) << "restored version " << v << " after version " << c << " was committed";
    EXPECT_LE(v, kSteps);
    if (v >= 1 && v <= kSteps) {
      auto sum = t.value()->checksum();
      if (!sum.ok())
        ADD_FAILURE() << sum.error().message;
      else
        EXPECT_EQ(sum.value(), checksums_[v]) << "version " << v << " differs from the uninterrupted run";
    }
    // The collection after restore frees exactly the blocks no version
    // reaches (the lost working version's, and older garbage).
    EXPECT_TRUE(t.value()->gc().ok());
    auto ok = t.value()->verify();
    EXPECT_TRUE(ok.ok()) << ok.error().message;
    auto st = t.value()->stats();
    if (!st.ok())
      ADD_FAILURE() << st.error().message;
    else
      EXPECT_EQ(st.value().nvm_bytes / st.value().block_bytes + st.value().free_blocks, st.value().chunk_blocks)
          << "blocks neither reachable nor free after the collection";
    in_flight_ += v == c + 1;
    shared_->committed.store(v);
    return v;
  }

  TempDir dir_;
  Shared* shared_ = nullptr;
  std::vector<std::uint64_t> checksums_;
  Clock::duration full_{};
  unsigned in_flight_ = 0;  // restores that found the version being committed at the kill
};

TEST_F(RealKillOctreeLoop, EveryRestoreAfterASigkillContinuesToTheUninterruptedResult) {
  ASSERT_FALSE(HasFailure());
  // The check can fail: neighbouring versions have different checksums.
  EXPECT_EQ(std::set<std::uint64_t>(checksums_.begin() + 1, checksums_.end()).size(), kSteps);
  Rng rng(mix_seed(kSeed, 0x6b11));
  unsigned kills = 0, restores = 0;
  constexpr unsigned kRounds = 4, kKillsPerRound = 6;
  for (unsigned round = 0; round < kRounds && !HasFailure(); ++round) {
    const std::string path = dir_.file("run" + std::to_string(round) + ".pool");
    shared_->committed.store(0);
    for (unsigned k = 0; k < kKillsPerRound && !HasFailure(); ++k) {
      // A step the child has still to run (from the one it restores at),
      // at its start or in its persist; the last round's last child runs to
      // the end unasked.
      const std::uint64_t from = shared_->committed.load();
      const bool last = k + 1 == kKillsPerRound;
      shared_->kill_step.store(last ? kSteps : from + rng.below(std::max<std::uint64_t>(1, (kSteps - from) / 2)));
      shared_->kill_phase.store(static_cast<int>(rng.below(2)));
      shared_->reached.store(0);
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) child(path, shared_);
      const std::string how = kill_at_point(pid, shared_);
      ASSERT_TRUE(how == "killed" || how == "exited") << "round " << round << ": the child died: " << how;
      kills += how == "killed";
      const std::uint64_t v = check_restore(path);
      ++restores;
      if (how == "exited") {
        EXPECT_EQ(v, kSteps);
        break;
      }
    }
    // The parent finishes the run.
    std::unique_ptr<ot::Octree> t;
    if (std::filesystem::exists(path)) {
      auto r = ot::Octree::restore(path, options());
      ASSERT_TRUE(r.ok()) << r.error().message;
      t = std::move(r.value());
    } else {
      auto r = ot::Octree::create(path, options());
      ASSERT_TRUE(r.ok()) << r.error().message;
      t = std::move(r.value());
    }
    for (unsigned s = static_cast<unsigned>(t->version()); s < kSteps; ++s) {
      auto r = time_step(*t, s);
      ASSERT_TRUE(r.ok()) << "round " << round << ", step " << s << ": " << r.error().message;
    }
    auto sum = t->checksum();
    ASSERT_TRUE(sum.ok()) << sum.error().message;
    EXPECT_EQ(sum.value(), checksums_[kSteps]) << "round " << round;
  }
  std::printf("%u kills, %u restores checked (%u found the version in flight at the kill)\n", kills, restores,
              in_flight_);
  EXPECT_GE(kills, kRounds);
}

// The harness's real-kill mode on the `octree` workload (the pool borrowed
// through detail::Factory): kills at random crash points. Recovery has none
// of its own (attach writes nothing), so there is no kill during it.
TEST(RealKillOctree, WorkloadSurvivesKillsAtRandomCrashPoints) {
  KillOptions o;
  o.kills = 12;
  o.seed = 5;
  const Report r = run_real_kill(*find_workload("octree"), o);
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GE(r.states, 12u);
}

// Changing the committed version in place is a logic error a kill exposes
// (the page cache keeps the stray stores); its key replays.
TEST(RealKillOctree, CatchesTheMissingCopyOnWrite) {
  KillOptions o;
  o.kills = 12;
  const Report r = run_real_kill(*find_workload("octree.no_copy_on_write"), o);
  ASSERT_FALSE(r.passed()) << r.summary();
  const std::string key = r.failures.front().key;
  auto again = replay_real_kill(key);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(again.value().passed()) << "replaying " << key << " passed";
}

}  // namespace
}  // namespace cairn::testing::crashsim
