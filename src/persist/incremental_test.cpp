// incremental_test.cpp — incremental commit (Options::incremental) of the copy
// strategies: restore stays bit-exact whatever mix of pages changed, and
// unchanged pages are not copied.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cairn/persist.hpp"
#include "persist/strategy.hpp"
#include "tests/support/temp_dir.hpp"
#include "util/kernel_write_tracking.hpp"

namespace cairn::persist {
namespace {

using cairn::testing::TempDir;
constexpr std::size_t kPage = 4096;

using Bytes = std::vector<unsigned char>;

Bytes snapshot(const void* p, std::size_t n) {
  auto* b = static_cast<const unsigned char*>(p);
  return Bytes(b, b + n);
}

// Index of the first differing byte, or -1.
long first_difference(const void* p, const Bytes& want) {
  auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < want.size(); ++i)
    if (b[i] != want[i]) return static_cast<long>(i);
  return -1;
}

// Writes random bytes into up to max_runs random places of [p, p+bytes): a
// single byte, part of a page, or a run across page boundaries.
void scribble(void* p, std::size_t bytes, std::mt19937_64& rng, int max_runs) {
  auto* b = static_cast<unsigned char*>(p);
  const int runs = static_cast<int>(rng() % static_cast<std::uint64_t>(max_runs + 1));
  for (int r = 0; r < runs; ++r) {
    const std::size_t off = rng() % bytes;
    std::size_t len = 1;
    switch (rng() % 3) {
      case 0: break;
      case 1: len = 1 + rng() % kPage; break;
      default: len = 1 + rng() % (3 * kPage); break;
    }
    len = std::min(len, bytes - off);
    for (std::size_t i = 0; i < len; ++i) b[off + i] = static_cast<unsigned char>(rng());
  }
}

// Page-aligned application memory, freed with free().
struct UserMemory {
  explicit UserMemory(std::size_t n)
      : p(static_cast<unsigned char*>(std::aligned_alloc(kPage, (n + kPage) / kPage * kPage))) {
    std::memset(p, 0, (n + kPage) / kPage * kPage);
  }
  ~UserMemory() { std::free(p); }
  UserMemory(const UserMemory&) = delete;
  UserMemory& operator=(const UserMemory&) = delete;
  unsigned char* p;
};

// (strategy, write tracking: "kernel" or "faults").
class Incremental : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override { ::setenv("CAIRN_WRITE_TRACKING", tracking().c_str(), 1); }
  void TearDown() override { ::unsetenv("CAIRN_WRITE_TRACKING"); }
  const std::string& tracking() const { return std::get<1>(GetParam()); }
  Options options(bool incremental = true) const {
    Options o;
    o.strategy = std::get<0>(GetParam());
    o.name = "inc";
    o.dir = dir_.path();
    o.threads = 2;
    o.incremental = incremental;
    return o;
  }
  // A fresh Context on this storage restores `version` of region "a"
  // (`bytes` long) with exactly the bytes `want`.
  void expect_restores(std::size_t bytes, std::uint64_t version, const Bytes& want) const {
    auto ctx = std::move(Context::create(options()).value());
    auto* a = ctx->region("a", bytes).value();
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_EQ(ctx->restore().value(), version);
    EXPECT_EQ(first_difference(a->data(), want), -1);
  }
  TempDir dir_;
};

// The state of one test application: a cairn region whose size is not a page
// multiple, a dual region, page-aligned application memory with a partial last
// page, and application memory that is not page aligned (copied whole).
struct App {
  static constexpr std::size_t kPlain = 37 * kPage + 100, kDual = 9 * kPage, kUser = 11 * kPage + 123, kOdd = 5 * kPage;
  UserMemory user{kUser}, odd{kOdd + 8};
  std::unique_ptr<Context> ctx;
  Region *plain = nullptr, *aligned = nullptr, *unaligned = nullptr;
  DualRegion* dual = nullptr;

  void open(const Options& o) {
    auto c = Context::create(o);
    ASSERT_TRUE(c.ok()) << c.error().message;
    ctx = std::move(c.value());
    plain = ctx->region("plain", kPlain).value();
    dual = ctx->dual_region("dual", kDual).value();
    aligned = ctx->register_region("user", user.p, kUser).value();
    unaligned = ctx->register_region("odd", odd.p + 8, kOdd).value();
    auto r = ctx->open();
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  // What a restore of the version committed next must reproduce.
  std::vector<Bytes> latest_after_commit() const {
    return {snapshot(plain->data(), kPlain), snapshot(dual->write(), kDual), snapshot(aligned->data(), kUser),
            snapshot(unaligned->data(), kOdd)};
  }
  void scribble_all(std::mt19937_64& rng, int runs) {
    scribble(plain->data(), kPlain, rng, runs);
    scribble(dual->write(), kDual, rng, runs);
    scribble(aligned->data(), kUser, rng, runs);
    scribble(unaligned->data(), kOdd, rng, runs);
  }
  void expect_equals(const std::vector<Bytes>& want, std::uint64_t version) const {
    EXPECT_EQ(first_difference(plain->data(), want[0]), -1) << "plain differs from version " << version;
    EXPECT_EQ(first_difference(dual->read(), want[1]), -1) << "dual differs from version " << version;
    EXPECT_EQ(first_difference(aligned->data(), want[2]), -1) << "user differs from version " << version;
    EXPECT_EQ(first_difference(unaligned->data(), want[3]), -1) << "odd differs from version " << version;
  }
};

TEST_P(Incremental, RestoreIsBitExactAfterRandomPartialUpdates) {
  std::mt19937_64 rng(12345);
  App app;
  app.open(options());
  std::vector<Bytes> committed;
  std::uint64_t version = 0;
  for (int step = 1; step <= 80; ++step) {
    ASSERT_TRUE(app.ctx->begin().ok());
    // Mostly a few changes, sometimes none, sometimes many.
    const int runs = step % 9 == 0 ? 0 : (step % 13 == 0 ? 40 : 3);
    app.scribble_all(rng, runs);
    committed = app.latest_after_commit();
    auto v = app.ctx->commit();
    ASSERT_TRUE(v.ok()) << v.error().message;
    version = v.value();
    if (step % 7 == 0) {
      // Uncommitted work, then a restart: a new context restores the last
      // version and goes on committing incrementally from there.
      app.scribble_all(rng, 20);
      app.ctx.reset();
      app.open(options());
      auto r = app.ctx->restore();
      ASSERT_TRUE(r.ok()) << r.error().message;
      ASSERT_EQ(r.value(), version);
      app.expect_equals(committed, version);
    } else if (step % 11 == 0) {
      // Uncommitted work thrown away by a restore in the same process.
      app.scribble_all(rng, 20);
      auto r = app.ctx->restore();
      ASSERT_TRUE(r.ok()) << r.error().message;
      app.expect_equals(committed, version);
    }
    if (HasFailure()) return;
  }
  app.ctx.reset();
  app.open(options());
  ASSERT_EQ(app.ctx->restore().value(), version);
  app.expect_equals(committed, version);
}

// The slot a commit writes holds the version before last: a page changed
// only in the previous interval must still be copied.
TEST_P(Incremental, PagesChangedTwoCommitsAgoAreCopied) {
  constexpr std::size_t kBytes = 16 * kPage;
  {
    auto ctx = std::move(Context::create(options()).value());
    auto* a = ctx->region("a", kBytes).value();
    ASSERT_TRUE(ctx->open().ok());
    auto* b = a->as<unsigned char>();
    ASSERT_EQ(ctx->commit().value(), 1u);  // slot 0, whole
    ASSERT_EQ(ctx->commit().value(), 2u);  // slot 1, whole
    b[5 * kPage + 7] = 0xAB;               // changed for version 3 only
    ASSERT_EQ(ctx->commit().value(), 3u);  // slot 0 (held 1): page 5 copied
    ASSERT_EQ(ctx->commit().value(), 4u);  // slot 1 (held 2): page 5 again
    EXPECT_GT(ctx->stats().incremental_bytes_saved, 0u);
  }
  auto ctx = std::move(Context::create(options()).value());
  auto* a = ctx->region("a", kBytes).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_EQ(ctx->restore().value(), 4u);
  EXPECT_EQ(a->as<unsigned char>()[5 * kPage + 7], 0xAB);
}

TEST_P(Incremental, FewChangedPagesSaveBytes) {
  constexpr std::size_t kPages = 256, kBytes = kPages * kPage;
  for (bool incremental : {false, true}) {
    TempDir dir;
    Options o = options(incremental);
    o.dir = dir.path();
    auto ctx = std::move(Context::create(o).value());
    auto* a = ctx->region("a", kBytes).value();
    ASSERT_TRUE(ctx->open().ok());
    auto* b = a->as<unsigned char>();
    constexpr int kCommits = 10;
    for (int v = 1; v <= kCommits; ++v) {
      b[(v % kPages) * kPage] = static_cast<unsigned char>(v);  // two pages change per commit
      b[((v * 7) % kPages) * kPage + 100] = static_cast<unsigned char>(v);
      ASSERT_TRUE(ctx->commit().ok());
    }
    const Stats& s = ctx->stats();
    if (!incremental) {
      EXPECT_EQ(s.incremental_bytes_saved, 0u);
      EXPECT_EQ(s.bytes_copied, kCommits * kBytes);
      continue;
    }
    // The first two commits copy everything; later ones at most four pages
    // (two changed in each of the last two intervals).
    EXPECT_GE(s.incremental_bytes_saved, (kCommits - 2) * (kBytes - 4 * kPage));
    EXPECT_EQ(s.bytes_copied + s.incremental_bytes_saved, kCommits * kBytes);
  }
}

TEST_P(Incremental, ConcurrentWritersAreAllSeen) {
  constexpr std::size_t kPages = 512, kBytes = kPages * kPage;
  Bytes want;
  {
    auto ctx = std::move(Context::create(options()).value());
    auto* a = ctx->region("a", kBytes).value();
    ASSERT_TRUE(ctx->open().ok());
    auto* b = a->as<unsigned char>();
    for (int v = 1; v <= 12; ++v) {
      std::vector<std::thread> writers;
      for (int t = 0; t < 4; ++t)
        writers.emplace_back([&, t] {
          std::mt19937_64 rng(static_cast<std::uint64_t>(v * 100 + t));
          // Each thread owns the pages p with p % 4 == t.
          for (int k = 0; k < 16; ++k) {
            const std::size_t page = (rng() % (kPages / 4)) * 4 + static_cast<std::size_t>(t);
            b[page * kPage + rng() % kPage] = static_cast<unsigned char>(rng() | 1);
          }
        });
      for (auto& w : writers) w.join();
      want = snapshot(b, kBytes);
      ASSERT_TRUE(ctx->commit().ok());
    }
  }
  expect_restores(kBytes, 12u, want);
}

// The write-fault handler passes faults it does not own on: a real
// segmentation fault still ends the process.
TEST_P(Incremental, ForeignFaultsStillKill) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);  // a handler that swallowed the fault would spin on it
    auto ctx = std::move(Context::create(options()).value());
    (void)ctx->region("a", 4 * kPage).value();
    if (!ctx->open().ok()) _exit(3);
    void* ro = mmap(nullptr, kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *static_cast<volatile char*>(ro) = 1;
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  const bool died_of_it = WIFSIGNALED(st) ? WTERMSIG(st) != SIGALRM : WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3;
  EXPECT_TRUE(died_of_it) << "status " << st;
}

// A region written almost everywhere is copied whole (one sequential copy),
// and the restore is still exact.
TEST_P(Incremental, MostlyWrittenRegionIsCopiedWhole) {
  constexpr std::size_t kPages = 16, kBytes = kPages * kPage;
  Bytes want;
  {
    auto ctx = std::move(Context::create(options()).value());
    auto* a = ctx->region("a", kBytes).value();
    ASSERT_TRUE(ctx->open().ok());
    auto* b = a->as<unsigned char>();
    ASSERT_TRUE(ctx->commit().ok());
    ASSERT_TRUE(ctx->commit().ok());
    std::uint64_t saved = ctx->stats().incremental_bytes_saved;
    b[3 * kPage] = 1;  // two pages in two intervals: copied alone
    ASSERT_TRUE(ctx->commit().ok());
    EXPECT_EQ(ctx->stats().incremental_bytes_saved - saved, kBytes - kPage);
    saved = ctx->stats().incremental_bytes_saved;
    for (std::size_t p = 0; p < 13; ++p) b[p * kPage + 9] = static_cast<unsigned char>(p + 2);  // 13 of 16
    ASSERT_TRUE(ctx->commit().ok());
    EXPECT_EQ(ctx->stats().incremental_bytes_saved, saved) << "13 of 16 pages written: copied whole";
    want = snapshot(b, kBytes);
  }
  expect_restores(kBytes, 4u, want);
}

// A child forked after open goes on committing incrementally with its own
// copy of the memory (the kernel mode's userfaultfd belongs to the parent's
// address space: the child must neither use it nor miss its own writes).
TEST_P(Incremental, ForkedChildCommitsExactly) {
  constexpr std::size_t kPages = 64, kBytes = kPages * kPage;
  auto ctx = std::move(Context::create(options()).value());
  auto* a = ctx->region("a", kBytes).value();
  ASSERT_TRUE(ctx->open().ok());
  auto* b = a->as<unsigned char>();
  for (int v = 1; v <= 3; ++v) {
    b[static_cast<std::size_t>(v) * kPage] = static_cast<unsigned char>(v);
    ASSERT_TRUE(ctx->commit().ok());
  }
  const pid_t pid = fork();
  if (pid == 0) {
    for (int v = 4; v <= 8; ++v) {
      b[static_cast<std::size_t>(v * 5 % kPages) * kPage + 17] = static_cast<unsigned char>(v);
      if (!ctx->commit().ok()) _exit(2);
    }
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  // What the child's memory held at its last commit: the parent's bytes
  // plus the child's writes.
  Bytes want = snapshot(b, kBytes);
  for (int v = 4; v <= 8; ++v)
    want[static_cast<std::size_t>(v * 5 % kPages) * kPage + 17] = static_cast<unsigned char>(v);
  ctx.reset();
  expect_restores(kBytes, 8u, want);
}

// In the kernel mode the kernel's own writes into a region (read(2)) are
// recorded like the application's (the faults mode cannot allow them).
TEST_P(Incremental, KernelWritesAreSeenInKernelMode) {
  if (tracking() != "kernel") GTEST_SKIP() << "read(2) into a region fails with EFAULT in the faults mode";
  constexpr std::size_t kPages = 32, kBytes = kPages * kPage;
  Bytes want;
  {
    auto ctx = std::move(Context::create(options()).value());
    auto* a = ctx->region("a", kBytes).value();
    ASSERT_TRUE(ctx->open().ok());
    for (int v = 1; v <= 3; ++v) ASSERT_TRUE(ctx->commit().ok());
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const char msg[] = "written by the kernel";
    ASSERT_EQ(write(fds[1], msg, sizeof msg), static_cast<ssize_t>(sizeof msg));
    ASSERT_EQ(read(fds[0], a->as<char>() + 21 * kPage + 5, sizeof msg), static_cast<ssize_t>(sizeof msg));
    close(fds[0]);
    close(fds[1]);
    ASSERT_TRUE(ctx->commit().ok());
    ASSERT_TRUE(ctx->commit().ok());  // into the other slot: the page must be copied there too
    want = snapshot(a->data(), kBytes);
  }
  expect_restores(kBytes, 5u, want);
}

// The kernel mode itself: exactly the written pages, once, then protected
// again. Skipped where the kernel cannot (before Linux 6.7).
TEST(KernelWriteTracking, ReportsExactlyTheWrittenPagesOnce) {
  constexpr std::size_t kPages = 40;
  void* m = mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* base = static_cast<std::byte*>(m);
  std::memset(base, 0, kPages * kPage);
  {
    auto t = util::KernelWriteTracker::start(base, kPages);
    if (!t) {
      munmap(m, kPages * kPage);
      GTEST_SKIP() << "no userfaultfd asynchronous write protection here (Linux 6.7+)";
    }
    auto runs = [&] {
      std::vector<std::pair<std::size_t, std::size_t>> out;
      EXPECT_TRUE(t->collect([&](std::size_t a, std::size_t b) { out.emplace_back(a, b); }));
      return out;
    };
    EXPECT_TRUE(runs().empty());
    base[3 * kPage + 1] = std::byte{1};
    for (std::size_t p = 10; p < 13; ++p) base[p * kPage + 4095] = std::byte{2};
    base[39 * kPage] = std::byte{3};
    using R = std::vector<std::pair<std::size_t, std::size_t>>;
    EXPECT_EQ(runs(), (R{{3, 4}, {10, 13}, {39, 40}}));
    EXPECT_TRUE(runs().empty()) << "a collect protects the pages again";
    base[11 * kPage] = std::byte{4};
    EXPECT_EQ(runs(), (R{{11, 12}}));
  }
  munmap(m, kPages * kPage);
}

// Every strategy whose registry record says it honours Options::incremental.
std::vector<std::string> incremental_strategies() {
  std::vector<std::string> out;
  for (const auto& r : detail::registry())
    if (r.incremental) out.push_back(r.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(CopyStrategies, Incremental,
                         ::testing::Combine(::testing::ValuesIn(incremental_strategies()),
                                            ::testing::Values("kernel", "faults")),
                         [](const auto& p) {
                           std::string n = std::get<0>(p.param) + "_" + std::get<1>(p.param);
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace cairn::persist
