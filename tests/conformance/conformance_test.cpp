// conformance_test.cpp — one suite, run against every registered strategy
// (as Kokkos and libCEED run one suite per backend).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "cairn/extended/device.hpp"
#include "cairn/extended/pool.hpp"
#include "cairn/persist.hpp"
#include "persist/slot_store.hpp"
#include "persist/strategy.hpp"
#include "tests/support/patterns.hpp"
#include "tests/support/syscall_faults.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::persist {
namespace {

using cairn::testing::TempDir;

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  Options options(const std::string& name = "state") const {
    Options o;
    o.strategy = GetParam();
    o.name = name;
    o.dir = dir_.path();
    o.threads = 2;
    return o;
  }
  std::unique_ptr<Context> make(const std::string& name = "state") {
    auto c = Context::create(options(name));
    if (!c.ok() && c.error().code == Errc::unsupported) return nullptr;
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(c.value()) : nullptr;
  }
  TempDir dir_;
};

#define MAKE_OR_FAIL(var, ...)  \
  auto var = make(__VA_ARGS__); \
  if (!var) FAIL() << GetParam() << ": the registered factory built no strategy";

using cairn::testing::fill;
using cairn::testing::matches;

TEST_P(Conformance, RestoreWithNothingCommitted) {
  MAKE_OR_FAIL(ctx);
  ASSERT_TRUE(ctx->region("a", 4096).ok());
  ASSERT_TRUE(ctx->open().ok());
  EXPECT_FALSE(ctx->committed_version().has_value());
  auto r = ctx->restore();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::no_version);
}

TEST_P(Conformance, CommitRestoreRoundTripAcrossContexts) {
  constexpr std::size_t kA = 3 * 4096 + 8, kB = 1 << 20;
  {
    MAKE_OR_FAIL(ctx);
    auto* a = ctx->region("a", kA).value();
    auto* b = ctx->dual_region("b", kB).value();
    ASSERT_TRUE(ctx->open().ok());
    for (std::uint64_t v = 1; v <= 3; ++v) {
      ASSERT_TRUE(ctx->begin().ok());
      fill(a->data(), kA, v);
      fill(b->write(), kB, v + 100);
      auto c = ctx->commit();
      ASSERT_TRUE(c.ok()) << c.error().message;
      EXPECT_EQ(c.value(), v);
      EXPECT_TRUE(matches(b->read(), kB, v + 100));  // roles switched
    }
    // Work after the last commit that must not survive.
    ASSERT_TRUE(ctx->begin().ok());
    fill(a->data(), kA, 99);
    fill(b->write(), kB, 99);
  }
  MAKE_OR_FAIL(ctx);
  auto* a = ctx->region("a", kA).value();
  auto* b = ctx->dual_region("b", kB).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_EQ(ctx->committed_version(), std::optional<std::uint64_t>(3));
  void* const a_at_open = a->data();
  void* const b_at_open[2] = {b->read(), b->write()};
  auto r = ctx->restore();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value(), 3u);
  EXPECT_TRUE(matches(a->data(), kA, 3));
  // Region memory stays where open() put it (Region's promise).
  EXPECT_EQ(a->data(), a_at_open);
  EXPECT_TRUE((b->read() == b_at_open[0] && b->write() == b_at_open[1]) ||
              (b->read() == b_at_open[1] && b->write() == b_at_open[0]));
  const std::span<const std::uint64_t> words = a->span<const std::uint64_t>();
  EXPECT_EQ(words.data(), a->data());
  EXPECT_EQ(words.size(), kA / sizeof(std::uint64_t));
  EXPECT_TRUE(matches(b->read(), kB, 103));
  // Versions continue after a restore.
  fill(b->write(), kB, 4 + 100);
  fill(a->data(), kA, 4);
  EXPECT_EQ(ctx->commit().value(), 4u);
  EXPECT_EQ(ctx->stats().commits, 1u);
  EXPECT_EQ(ctx->stats().restores, 1u);
}

TEST_P(Conformance, ManyVersionsRestoreTheLast) {
  constexpr std::size_t kA = 64 * 1024;
  for (int round = 0; round < 2; ++round) {
    MAKE_OR_FAIL(ctx);
    auto* a = ctx->region("a", kA).value();
    ASSERT_TRUE(ctx->open().ok());
    std::uint64_t start = 0;
    if (round == 1) {
      start = ctx->restore().value();
      EXPECT_EQ(start, 50u);
      EXPECT_TRUE(matches(a->data(), kA, 50));
    }
    for (std::uint64_t v = start + 1; v <= start + 50; ++v) {
      fill(a->data(), kA, v);
      ASSERT_EQ(ctx->commit().value(), v);
    }
  }
}

// remove_storage() finds exactly the files the strategy's registry record
// names: afterwards nothing is committed, and another state's files remain.
TEST_P(Conformance, RemoveStorageRemovesExactlyThisState) {
  constexpr std::size_t kA = 16 * 1024;
  for (const char* name : {"kept", "state"}) {
    MAKE_OR_FAIL(ctx, name);
    auto* a = ctx->region("a", kA).value();
    ASSERT_TRUE(ctx->open().ok());
    fill(a->data(), kA, 1);
    ASSERT_EQ(ctx->commit().value(), 1u);
  }
  auto removed = remove_storage(options());
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  EXPECT_FALSE(removed.value().empty()) << GetParam() << " created no file its record names";
  for (const auto& path : removed.value()) EXPECT_NE(path.find("/state."), std::string::npos) << path;
  {
    MAKE_OR_FAIL(ctx);
    ctx->region("a", kA).value();
    ASSERT_TRUE(ctx->open().ok());
    EXPECT_FALSE(ctx->committed_version().has_value());
  }
  MAKE_OR_FAIL(kept, "kept");
  auto* a = kept->region("a", kA).value();
  ASSERT_TRUE(kept->open().ok());
  ASSERT_EQ(kept->restore().value(), 1u);
  EXPECT_TRUE(matches(a->data(), kA, 1));
}

TEST_P(Conformance, RegistrationErrors) {
  MAKE_OR_FAIL(ctx);
  EXPECT_EQ(ctx->region("zero", 0).error().code, Errc::invalid_argument);
  EXPECT_EQ(ctx->region("", 8).error().code, Errc::invalid_argument);
  ASSERT_TRUE(ctx->region("a", 4096).ok());
  EXPECT_EQ(ctx->region("a", 4096).error().code, Errc::invalid_argument);  // twice
  int outside = 0;
  void* p = &outside;
  EXPECT_EQ(ctx->register_pointer(&p).error().code, Errc::invalid_argument);
  std::vector<char> user(8192);
  auto adopted = ctx->register_region("user", user.data(), 4096);
  auto overlap = ctx->register_region("user2", user.data() + 100, 4096);
  auto strategy = Context::create(options());
  ASSERT_TRUE(strategy.ok());
  (void)strategy;
  if (adopted.ok()) {
    EXPECT_EQ(overlap.error().code, Errc::invalid_argument);  // overlaps "user"
  } else {
    EXPECT_EQ(adopted.error().code, Errc::invalid_argument);  // NVM working set: refused
  }
  Options bad = options();
  bad.strategy = "no-such-strategy";
  auto unknown = Context::create(bad);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("in-place"), std::string::npos);  // lists the names
}

TEST_P(Conformance, RegionLargerThanTheDeviceFailsCleanly) {
  MAKE_OR_FAIL(ctx);
  // Far more than this machine's memory or disk: open must fail with a typed error.
  ASSERT_TRUE(ctx->region("huge", std::size_t{1} << 50).ok());
  auto r = ctx->open();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().code == Errc::device_full || r.error().code == Errc::out_of_space ||
              r.error().code == Errc::io_error)
      << errc_name(r.error().code) << ": " << r.error().message;
}

TEST_P(Conformance, RestoreIntoDifferentLayoutIsAnError) {
  {
    MAKE_OR_FAIL(ctx);
    auto* a = ctx->region("a", 4096).value();
    ASSERT_TRUE(ctx->open().ok());
    fill(a->data(), 4096, 1);
    ASSERT_TRUE(ctx->commit().ok());
  }
  MAKE_OR_FAIL(ctx);
  ASSERT_TRUE(ctx->region("a", 8192).ok());
  auto o = ctx->open();
  if (o.ok()) {
    auto r = ctx->restore();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::layout_mismatch);
    EXPECT_NE(r.error().message.find("8192"), std::string::npos);
    EXPECT_FALSE(ctx->commit().ok());  // never overwrites the other layout's version
  } else {
    EXPECT_EQ(o.error().code, Errc::layout_mismatch);
  }
  // The original still restores.
  MAKE_OR_FAIL(again);
  auto* a = again->region("a", 4096).value();
  ASSERT_TRUE(again->open().ok());
  ASSERT_TRUE(again->restore().ok());
  EXPECT_TRUE(matches(a->data(), 4096, 1));
}

// A linked list whose nodes live in one region and whose head in another:
// after restore every pointer is rewritten for wherever the regions now live.
struct Node {
  Node* next;
  std::uint64_t value;
};

TEST_P(Conformance, PointersAreRelocated) {
  constexpr int kNodes = 100;
  auto build = [&](Context& ctx, Region*& nodes, Region*& heads) {
    nodes = ctx.region("nodes", kNodes * sizeof(Node)).value();
    heads = ctx.region("heads", 2 * sizeof(Node*)).value();
    ASSERT_TRUE(ctx.open().ok());
    auto* n = nodes->as<Node>();
    auto* h = heads->as<Node*>();
    for (int i = 0; i < kNodes; ++i) ASSERT_TRUE(ctx.register_pointer(&n[i].next).ok());
    ASSERT_TRUE(ctx.register_pointer(&h[0]).ok());
    ASSERT_TRUE(ctx.register_pointer(&h[1]).ok());
  };
  {
    MAKE_OR_FAIL(ctx);
    Region *nodes, *heads;
    build(*ctx, nodes, heads);
    auto* n = nodes->as<Node>();
    // Odd-even interleaved list: 0 -> 2 -> 4 ... -> 98 -> 1 -> 3 ... -> 99 -> null
    std::vector<int> order;
    for (int i = 0; i < kNodes; i += 2) order.push_back(i);
    for (int i = 1; i < kNodes; i += 2) order.push_back(i);
    for (std::size_t k = 0; k < order.size(); ++k) {
      n[order[k]].value = static_cast<std::uint64_t>(order[k]) * 3;
      n[order[k]].next = k + 1 < order.size() ? &n[order[k + 1]] : nullptr;
    }
    heads->as<Node*>()[0] = &n[0];
    heads->as<Node*>()[1] = nullptr;
    ASSERT_TRUE(ctx->commit().ok());
    // A pointer to memory outside every region cannot be committed.
    static Node stray{};
    heads->as<Node*>()[1] = &stray;
    auto bad = ctx->commit();
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().code, Errc::invalid_argument);
  }
  MAKE_OR_FAIL(ctx);
  Region *nodes, *heads;
  build(*ctx, nodes, heads);
  ASSERT_TRUE(ctx->restore().ok());
  auto* n = nodes->as<Node>();
  Node* p = heads->as<Node*>()[0];
  EXPECT_EQ(heads->as<Node*>()[1], nullptr);
  int count = 0, expect = 0;
  while (p != nullptr) {
    ASSERT_GE(p, n);
    ASSERT_LT(p, n + kNodes);
    EXPECT_EQ(p->value, static_cast<std::uint64_t>(expect) * 3);
    expect = expect + 2 < kNodes ? expect + 2 : 1;
    p = p->next;
    ++count;
  }
  EXPECT_EQ(count, kNodes);
}

// A child commits versions in a loop and is SIGKILLed, usually mid-commit;
// the parent restores and finds exactly a committed version, whole.
TEST_P(Conformance, SigkillDuringCommitThenRestore) {
  constexpr std::size_t kBytes = 4u << 20;
  { MAKE_OR_FAIL(probe); }
  for (int trial = 0; trial < 3; ++trial) {
    const std::string name = "kill" + std::to_string(trial);
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(pipefd[0]);
      auto ctx = std::move(Context::create(options(name)).value());
      auto* a = ctx->region("a", kBytes).value();
      auto* d = ctx->dual_region("d", 64 * 1024).value();
      if (!ctx->open().ok()) _exit(3);
      for (std::uint64_t v = 1;; ++v) {
        if (!ctx->begin().ok()) _exit(4);
        fill(a->data(), kBytes, v);
        fill(d->write(), 64 * 1024, v);
        if (!ctx->commit().ok()) _exit(5);
        if (v == 3) (void)!write(pipefd[1], "x", 1);
      }
    }
    close(pipefd[1]);
    char c;
    ASSERT_EQ(read(pipefd[0], &c, 1), 1);
    close(pipefd[0]);
    usleep(static_cast<useconds_t>(1000 + trial * 7919 % 20000));
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFSIGNALED(st)) << "child exited with " << WEXITSTATUS(st);
    auto ctx = std::move(Context::create(options(name)).value());
    auto* a = ctx->region("a", kBytes).value();
    auto* d = ctx->dual_region("d", 64 * 1024).value();
    ASSERT_TRUE(ctx->open().ok());
    auto v = ctx->restore();
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_GE(v.value(), 3u);
    EXPECT_TRUE(matches(a->data(), kBytes, v.value())) << "region a is not version " << v.value();
    EXPECT_TRUE(matches(d->read(), 64 * 1024, v.value())) << "dual d is not version " << v.value();
  }
}

// ---- a failed write-back behind a commit ----

// Why the fault device cannot reach a strategy (null: it can). Strategies on
// SlotStore write their pool through cairn's device; these two do not.
// The fault device sits behind a cairn pool: it reaches the strategies that
// persist through one (the registry's CrashHarness::pool), not the others.
const char* fault_device_skip_reason(const std::string& strategy) {
  switch (detail::find_registration(strategy)->crash) {
    case detail::CrashHarness::pool: return nullptr;
    case detail::CrashHarness::libpmemobj:
      return "it persists through libpmemobj's own libpmem calls, not through cairn's device, so the fault device "
             "cannot reach it; when pmem_msync fails libpmemobj aborts the process (obj_msync_nofail), so no commit "
             "returns after a failed write-back";
    case detail::CrashHarness::files:
      return "it writes checkpoint files with pwrite, fsync and rename, not through a device; "
             "FailedCheckpointWriteFailsTheCommit injects its failure";
  }
  return nullptr;
}

enum class FaultKind { flush, drain, copy };

// Commits versions 1 and 2 cleanly, then arms the fault device so that the
// Nth call of `kind` from the start of commit 3 fails (and every later one,
// unless `once`), for N = 1, 2, ... until commit 3 no longer reaches the
// Nth call. Whenever a call failed, commit 3 must fail, a further commit must
// fail too (poisoned), and a fresh context on the real device must restore
// version 2 bit for bit: no version may be reported, or found, committed
// when a write-back behind it failed.
void sweep_faults(const Options& base, FaultKind kind, bool once) {
  constexpr std::size_t kA = 3 * 4096 + 8, kB = (1u << 20) + 4096;  // b: large enough for the _mt paths
  const char* kind_name = kind == FaultKind::flush ? "flush" : kind == FaultKind::drain ? "drain" : "copy";
  int failed_commits = 0;
  for (std::uint64_t n = 1; n < 10000; ++n) {
    const std::string sub = std::string(kind_name) + (once ? "-once-" : "-") + std::to_string(n);
    Options o = base;
    o.dir = base.dir + "/" + sub;
    detail::InternalOptions internal;
    internal.fault_injector = std::make_shared<devices::FaultInjector>();
    auto& injector = *internal.fault_injector;
    bool tripped = false;
    {
      auto c = detail::create_context(o, internal);
      ASSERT_TRUE(c.ok()) << c.error().message;
      auto& ctx = *c.value();
      auto* a = ctx.region("a", kA).value();
      auto* b = ctx.dual_region("b", kB).value();
      auto opened = ctx.open();
      ASSERT_TRUE(opened.ok()) << opened.error().message;
      for (std::uint64_t v = 1; v <= 2; ++v) {
        ASSERT_TRUE(ctx.begin().ok());
        fill(a->data(), kA, v);
        fill(b->write(), kB, v + 100);
        auto r = ctx.commit();
        ASSERT_TRUE(r.ok()) << r.error().message;
      }
      ASSERT_TRUE(ctx.begin().ok());
      fill(a->data(), kA, 3);
      fill(b->write(), kB, 103);
      devices::FaultPlan plan;
      (kind == FaultKind::flush ? plan.flush : kind == FaultKind::drain ? plan.drain : plan.copy) = n;
      plan.once = once;
      injector.arm(plan);
      auto r = ctx.commit();
      tripped = injector.counts().failed > 0;
      if (!tripped) {
        ASSERT_TRUE(r.ok()) << r.error().message;
      } else {
        ASSERT_FALSE(r.ok()) << kind_name << " call " << n << " of commit 3 failed, yet the commit reported success";
        EXPECT_TRUE(r.error().code == Errc::poisoned || r.error().code == Errc::io_error)
            << errc_name(r.error().code) << ": " << r.error().message;
        EXPECT_NE(r.error().message.find("version 2"), std::string::npos) << r.error().message;
        ++failed_commits;
        // A poisoned store refuses everything after, whatever the device does now.
        injector.arm(devices::FaultPlan{});
        fill(b->write(), kB, 103);
        auto again = ctx.commit();
        ASSERT_FALSE(again.ok()) << "a commit after a failed write-back succeeded";
        EXPECT_EQ(again.error().code, Errc::poisoned) << again.error().message;
        EXPECT_NE(again.error().message.find("reopen"), std::string::npos) << again.error().message;
      }
    }
    Options fresh = o;
    fresh.device = "real";
    auto c = Context::create(fresh);
    ASSERT_TRUE(c.ok());
    auto& ctx = *c.value();
    auto* a = ctx.region("a", kA).value();
    auto* b = ctx.dual_region("b", kB).value();
    ASSERT_TRUE(ctx.open().ok());
    auto v = ctx.restore();
    ASSERT_TRUE(v.ok()) << v.error().message;
    const std::uint64_t want = tripped ? 2 : 3;
    ASSERT_EQ(v.value(), want) << kind_name << " call " << n << " of commit 3 failed: found version " << v.value();
    EXPECT_TRUE(matches(a->data(), kA, want))
        << "region a is not version " << want << " (" << kind_name << " " << n << ")";
    EXPECT_TRUE(matches(b->read(), kB, want + 100))
        << "dual b is not version " << want << " (" << kind_name << " " << n << ")";
    std::error_code ec;
    std::filesystem::remove_all(o.dir, ec);
    if (!tripped) break;
  }
  EXPECT_GT(failed_commits, 0) << "no " << kind_name << " call behind commit 3 was ever made to fail";
}

#define SKIP_IF_NO_FAULT_DEVICE()                               \
  { MAKE_OR_FAIL(probe); }                                      \
  if (const char* why = fault_device_skip_reason(GetParam())) { \
    GTEST_SKIP() << why;                                        \
  }

TEST_P(Conformance, FailedFlushFailsTheCommit) {
  SKIP_IF_NO_FAULT_DEVICE();
  sweep_faults(options(), FaultKind::flush, false);
}

TEST_P(Conformance, FailedDrainFailsTheCommit) {
  SKIP_IF_NO_FAULT_DEVICE();
  sweep_faults(options(), FaultKind::drain, false);
}

TEST_P(Conformance, FailedCopyFailsTheCommit) {
  SKIP_IF_NO_FAULT_DEVICE();
  sweep_faults(options(), FaultKind::copy, false);
}

// One flush fails and the device recovers: the commit must fail all the same
// (what was not written back is lost), and so must the ones after it.
TEST_P(Conformance, TransientFlushFailureFailsTheCommit) {
  SKIP_IF_NO_FAULT_DEVICE();
  sweep_faults(options(), FaultKind::flush, true);
}

// The file strategy's equivalent: a write that fails (here EFBIG from
// RLIMIT_FSIZE, as a full disk gives ENOSPC) fails the commit with a typed
// error and leaves the previous checkpoint restorable. Nothing committed is
// in doubt, so the strategy is not poisoned: once space is back, the next
// commit succeeds. A failing fsync or rename: the test after this one.
TEST_P(Conformance, FailedCheckpointWriteFailsTheCommit) {
  if (detail::find_registration(GetParam())->crash != detail::CrashHarness::files)
    GTEST_SKIP() << "checkpoint-file strategies only; " << GetParam() << ": "
                 << (fault_device_skip_reason(GetParam()) ? fault_device_skip_reason(GetParam())
                                                          : "the fault-device tests (Failed*FailsTheCommit) cover it");
  constexpr std::size_t kA = 256 * 1024;
  {
    MAKE_OR_FAIL(ctx);
    auto* a = ctx->region("a", kA).value();
    ASSERT_TRUE(ctx->open().ok());
    for (std::uint64_t v = 1; v <= 2; ++v) {
      fill(a->data(), kA, v);
      ASSERT_TRUE(ctx->commit().ok());
    }
    fill(a->data(), kA, 3);
    struct rlimit old {};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    struct rlimit small = old;
    small.rlim_cur = 64 * 1024;
    auto* previous = signal(SIGXFSZ, SIG_IGN);
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    auto r = ctx->commit();
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, previous);
    ASSERT_FALSE(r.ok()) << "a checkpoint that could not be written was reported committed";
    EXPECT_EQ(r.error().code, Errc::device_full) << r.error().message;
    EXPECT_EQ(ctx->committed_version(), std::optional<std::uint64_t>(2));
    for (const auto& f : std::filesystem::directory_iterator(dir_.path()))
      EXPECT_EQ(f.path().string().find(".tmp"), std::string::npos) << f.path() << " left behind";
  }
  {
    MAKE_OR_FAIL(ctx);
    auto* a = ctx->region("a", kA).value();
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_EQ(ctx->restore().value(), 2u);
    EXPECT_TRUE(matches(a->data(), kA, 2));
    fill(a->data(), kA, 3);
    auto r = ctx->commit();
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
}

// The other steps of a checkpoint file's commit (util::write_file_atomically),
// their system calls failing on demand (tests/support/syscall_faults): a
// failed fsync of the temporary or rename fails the commit and leaves the
// previous checkpoint, nothing in doubt, so the next commit succeeds; a failed
// fsync of the directory (after the rename) fails it and refuses every later
// commit (Errc::poisoned): whether the rename is durable is unknown.
TEST_P(Conformance, FailedFsyncOrRenameOfACheckpointFailsTheCommit) {
  using cairn::testing::Syscall;
  using cairn::testing::SyscallFault;
  if (detail::find_registration(GetParam())->crash != detail::CrashHarness::files)
    GTEST_SKIP() << "checkpoint-file strategies only; the fault-device tests (Failed*FailsTheCommit) cover "
                 << GetParam();
  constexpr std::size_t kA = 64 * 1024;
  MAKE_OR_FAIL(ctx);
  auto* a = ctx->region("a", kA).value();
  ASSERT_TRUE(ctx->open().ok());
  fill(a->data(), kA, 1);
  ASSERT_TRUE(ctx->commit().ok());
  struct Case {
    Syscall call;
    int nth;
  };
  for (const Case c : {Case{Syscall::fsync, 1}, Case{Syscall::rename, 1}}) {
    fill(a->data(), kA, 2);
    SyscallFault fault(c.call, c.nth, EIO);
    auto r = ctx->commit();
    ASSERT_TRUE(fault.delivered());
    ASSERT_FALSE(r.ok()) << "a checkpoint that was not made durable was reported committed";
    EXPECT_EQ(r.error().code, Errc::io_error) << r.error().message;
    EXPECT_EQ(ctx->committed_version(), std::optional<std::uint64_t>(1));
    for (const auto& f : std::filesystem::directory_iterator(dir_.path()))
      EXPECT_EQ(f.path().string().find(".tmp"), std::string::npos) << f.path() << " left behind";
  }
  fill(a->data(), kA, 2);
  ASSERT_TRUE(ctx->commit().ok()) << "nothing was in doubt: the next commit must succeed";
  {
    fill(a->data(), kA, 3);
    SyscallFault fault(Syscall::fsync, 2, EIO);  // the temporary's, then the directory's
    auto r = ctx->commit();
    ASSERT_TRUE(fault.delivered());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("fsync of the directory"), std::string::npos) << r.error().message;
  }
  auto again = ctx->commit();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, Errc::poisoned) << again.error().message;
  // A fresh open restores a version that verifies: 2, or 3 if its rename was durable.
  MAKE_OR_FAIL(reopened);
  auto* b = reopened->region("a", kA).value();
  ASSERT_TRUE(reopened->open().ok());
  auto v = reopened->restore();
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(matches(b->data(), kA, v.value())) << "version " << v.value();
}

// ---- more pointers than a pointer table holds ----

// SlotStore's pointer tables have a capacity fixed when the pool is created
// (4096 plus one per 4 KiB of state); pointers registered after open() can
// exceed it. The commit must fail with a typed error before it writes
// anything, so the previous version stays restorable. Strategies without such
// a table (file, undo-log) store any number and must restore them.
// Flips one bit of `file` at byte `at`.
void flip_bit(const std::filesystem::path& file, std::size_t at, int bit) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ (1 << bit));
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&c, 1);
}

// Where the first 4 KiB of version `version`'s pattern sit in the storage of
// state `name` (file and offset), if anywhere.
std::optional<std::pair<std::filesystem::path, std::size_t>> find_pattern(const std::string& dir,
                                                                          const std::string& name,
                                                                          std::uint64_t version) {
  std::vector<char> needle(4096);
  fill(needle.data(), needle.size(), version);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind(name + ".", 0) != 0) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
    if (it != bytes.end()) return std::pair{entry.path(), static_cast<std::size_t>(it - bytes.begin())};
  }
  return std::nullopt;
}

// A bit flipped in a committed payload (a region's bytes on the media) is
// found where the version is first read: restore fails with Errc::corrupted
// or, where the restored version is checked in the background (in-place and
// shadow above RestoreCheck::kInlineBytes), the next commit does. A strategy
// that keeps older versions (file) may instead restore an older one, whole.
// Never a silently different state.
TEST_P(Conformance, DamagedPayloadIsATypedErrorNeverADifferentState) {
  const auto* reg = detail::find_registration(GetParam());
  ASSERT_NE(reg, nullptr);
  if (reg->crash == detail::CrashHarness::libpmemobj)
    GTEST_SKIP() << GetParam()
                 << ": its undo log holds copies of the committed bytes, which this test's search for them may "
                    "find first; PersistUndoLog.DamagedCommittedBytesAreATypedErrorAtRestore flips the objects "
                    "themselves";
  constexpr std::size_t kPlain = 64 * 1024 + 8;
  int trial = 0;
  for (const std::size_t dual_bytes : {std::size_t{256} << 10, std::size_t{6} << 20}) {
    for (const bool damage_plain : {false, true}) {
      SCOPED_TRACE("dual region of " + std::to_string(dual_bytes) + " bytes, damage in the " +
                   (damage_plain ? "plain" : "dual") + " region");
      const std::string name = "flip" + std::to_string(trial++);
      {
        MAKE_OR_FAIL(ctx, name);
        auto* a = ctx->region("a", kPlain).value();
        auto* b = ctx->dual_region("b", dual_bytes).value();
        ASSERT_TRUE(ctx->open().ok());
        for (std::uint64_t v = 1; v <= 2; ++v) {
          ASSERT_TRUE(ctx->begin().ok());
          fill(a->data(), kPlain, v);
          fill(b->write(), dual_bytes, 100 + v);
          auto c = ctx->commit();
          ASSERT_TRUE(c.ok()) << c.error().message;
        }
      }
      const auto at = find_pattern(dir_.path(), name, damage_plain ? 2 : 102);
      ASSERT_TRUE(at.has_value()) << "version 2's bytes are not in the storage as written";
      flip_bit(at->first, at->second + 3000, 5);

      MAKE_OR_FAIL(ctx, name);
      auto* a = ctx->region("a", kPlain).value();
      auto* b = ctx->dual_region("b", dual_bytes).value();
      ASSERT_TRUE(ctx->open().ok());
      auto r = ctx->restore();
      if (!r.ok()) {
        EXPECT_EQ(r.error().code, Errc::corrupted) << r.error().message;
        EXPECT_NE(r.error().message.find(damage_plain ? "'a'" : "'b'"), std::string::npos) << r.error().message;
        continue;
      }
      if (r.value() == 1) {  // an older version, whole
        EXPECT_TRUE(matches(a->data(), kPlain, 1));
        EXPECT_TRUE(matches(b->read(), dual_bytes, 101));
        continue;
      }
      EXPECT_FALSE(
          matches(damage_plain ? a->data() : b->read(), damage_plain ? kPlain : dual_bytes, damage_plain ? 2 : 102))
          << "the flipped bit is not in what was restored";
      auto c = ctx->commit();
      ASSERT_FALSE(c.ok()) << "a damaged version was restored and committed on top of";
      EXPECT_EQ(c.error().code, Errc::corrupted) << c.error().message;
      auto again = ctx->commit();
      ASSERT_FALSE(again.ok()) << "the refusal must hold until the next restore";
    }
  }
}

// A process forked right after a restore (a supervisor, a helper process)
// while the restored version is checked in the background (in-place and
// shadow above RestoreCheck::kInlineBytes) has no copy of the checking
// thread. Its commit and its Context's destruction must not wait for that
// thread: the commit succeeds if the check had finished before the fork, and
// is otherwise refused with a typed error until the child restores again
// (which then commits). The parent is unaffected.
TEST_P(Conformance, ForkDuringTheRestoreCheckNeverHangsTheChild) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer cannot start threads in a child forked from a multi-threaded process "
                  "(its die_after_fork); the address-sanitizer and release builds run this test";
#endif
  const auto* reg = detail::find_registration(GetParam());
  ASSERT_NE(reg, nullptr);
  // Two processes committing one libpmemobj pool or one checkpoint directory
  // is not a use any strategy supports; the pool strategies' child owns the
  // storage from the fork on (the parent only reads).
  if (reg->crash != detail::CrashHarness::pool) GTEST_SKIP() << GetParam() << " checks no version in the background";
  constexpr std::size_t kB = 64u << 20;
  // One thread: the child then starts none (its copies and checks run on the
  // calling thread). A thread started in a child of a multi-threaded process
  // can stop on a lock another thread held at the fork (AddressSanitizer's
  // allocator does), which is no defect of the strategy under test.
  Options o = options();
  o.threads = 1;
  {
    auto ctx = Context::create(o).value();
    auto* b = ctx->dual_region("b", kB).value();
    ASSERT_TRUE(ctx->open().ok());
    for (std::uint64_t v = 1; v <= 2; ++v) {
      fill(b->write(), kB, v);
      ASSERT_TRUE(ctx->commit().ok());
    }
  }
  auto ctx = Context::create(o).value();
  auto* b = ctx->dual_region("b", kB).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_EQ(ctx->restore().value(), 2u);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // 0: committed at once; 1: refused as not_ready, committed after a restore.
    int status = 0;
    fill(b->write(), kB, 3);
    auto c = ctx->commit();
    if (!c.ok()) {
      if (c.error().code != Errc::not_ready) _exit(10);
      if (c.error().message.find("forked") == std::string::npos) _exit(11);
      auto r = ctx->restore();
      if (!r.ok() || r.value() != 2) _exit(12);
      fill(b->write(), kB, 3);
      if (auto again = ctx->commit(); !again.ok()) {
        std::fprintf(stderr, "child: commit after its restore: %s\n", again.error().message.c_str());
        _exit(13);
      }
      status = 1;
      std::fprintf(stderr, "child: forked while the check ran; committed after restoring again\n");
    }
    if (!matches(b->read(), kB, 3)) _exit(14);
    ctx.reset();  // the destructor waits for no thread of the parent
    _exit(status);
  }
  int st = 0;
  pid_t done = 0;
  for (int i = 0; i < 1200 && done == 0; ++i) {  // 120 s: only a hang takes this long
    done = waitpid(pid, &st, WNOHANG);
    if (done == 0) usleep(100'000);
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    FAIL() << GetParam() << ": the child forked during the restore check hung";
  }
  ASSERT_TRUE(WIFEXITED(st)) << "the child died of signal " << WTERMSIG(st);
  EXPECT_TRUE(WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 1) << "child exit " << WEXITSTATUS(st);
  // The parent's own check was not disturbed. (The child committed version 3
  // into the same storage; the parent's restored version is still readable.)
  EXPECT_TRUE(matches(b->read(), kB, 2));
}

// Every flipped bit of the version word (the commit point of the pool
// strategies) is a typed error at open or restore, never the other slot's
// bytes or another version number: each slot records the version it holds.
TEST_P(Conformance, EveryVersionWordBitFlipIsATypedError) {
  const auto* reg = detail::find_registration(GetParam());
  ASSERT_NE(reg, nullptr);
  if (reg->crash != detail::CrashHarness::pool) GTEST_SKIP() << GetParam() << " keeps no SlotStore version word";
  constexpr std::size_t kBytes = 8192;
  {
    MAKE_OR_FAIL(ctx);
    auto* a = ctx->dual_region("a", kBytes).value();
    ASSERT_TRUE(ctx->open().ok());
    for (std::uint64_t v = 1; v <= 3; ++v) {
      fill(a->write(), kBytes, v);
      ASSERT_TRUE(ctx->commit().ok());
    }
  }
  const std::string path = dir_.path() + "/state.pool";
  std::uint64_t word_at = 0;
  {
    auto pool = pool::Pool::open(path);
    ASSERT_TRUE(pool.ok()) << pool.error().message;
    word_at = pool.value()->root(0).offset + offsetof(detail::StateHeader, version_word);
  }
  std::uint64_t word = 0;
  {
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(word_at));
    in.read(reinterpret_cast<char*>(&word), sizeof word);
  }
  ASSERT_EQ(word >> 1, 3u);
  for (int bit = 0; bit < 64; ++bit) {
    flip_bit(path, word_at + static_cast<std::size_t>(bit / 8), bit % 8);
    {
      MAKE_OR_FAIL(ctx);
      auto* a = ctx->dual_region("a", kBytes).value();
      auto opened = ctx->open();
      if (opened.ok()) {
        auto r = ctx->restore();
        if (r.ok()) {
          EXPECT_EQ(r.value(), 3u) << "bit " << bit;
          EXPECT_TRUE(matches(a->read(), kBytes, 3)) << "bit " << bit;
        } else {
          EXPECT_EQ(r.error().code, Errc::corrupted) << "bit " << bit << ": " << r.error().message;
        }
      } else {
        EXPECT_EQ(opened.error().code, Errc::corrupted) << "bit " << bit << ": " << opened.error().message;
      }
    }
    flip_bit(path, word_at + static_cast<std::size_t>(bit / 8), bit % 8);  // undone for the next bit
  }
}

// A dual region holding registered pointers: restore relocates them inside
// the restored version (in-place: in the slot itself, which its checksums
// describe), so restoring it again (a rollback) and committing on top must not
// be mistaken for damage, at a size checked at once and at one checked in the
// background.
TEST_P(Conformance, PointersInADualRegionSurviveRollbacks) {
  int trial = 0;
  for (const std::size_t count : {std::size_t{1000}, std::size_t{400000}}) {
    SCOPED_TRACE(std::to_string(count) + " nodes");
    const std::string name = "dualptr" + std::to_string(trial++);
    auto build = [&](Context& ctx) {
      auto* d = ctx.dual_region("nodes", count * sizeof(Node)).value();
      EXPECT_TRUE(ctx.open().ok());
      // Every 997th node's link in both buffers; registered in the latest one.
      for (std::size_t i = 0; i < count; i += 997) EXPECT_TRUE(ctx.register_pointer(&d->read<Node>()[i].next).ok());
      return d;
    };
    auto write_version = [&](DualRegion* d, std::uint64_t v) {
      Node* n = d->write<Node>();
      for (std::size_t i = 0; i < count; ++i) n[i] = {nullptr, v * 1000003 + i};
      for (std::size_t i = 0; i < count; i += 997) n[i].next = &n[(i + 1) % count];
    };
    auto check_version = [&](DualRegion* d, std::uint64_t v) {
      const Node* n = d->read<Node>();
      for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(n[i].value, v * 1000003 + i) << i;
      for (std::size_t i = 0; i < count; i += 997) ASSERT_EQ(n[i].next, &n[(i + 1) % count]) << i;
    };
    {
      MAKE_OR_FAIL(ctx, name);
      DualRegion* d = build(*ctx);
      write_version(d, 1);
      ASSERT_TRUE(ctx->commit().ok());
    }
    MAKE_OR_FAIL(ctx, name);
    DualRegion* d = build(*ctx);
    for (int rollback = 0; rollback < 2; ++rollback) {
      auto r = ctx->restore();
      ASSERT_TRUE(r.ok()) << r.error().message;
      check_version(d, 1);
      write_version(d, 7);  // abandoned
    }
    ASSERT_TRUE(ctx->restore().ok());
    write_version(d, 2);
    auto c = ctx->commit();
    ASSERT_TRUE(c.ok()) << c.error().message;
    ASSERT_TRUE(ctx->restore().ok());
    check_version(d, 2);
    write_version(d, 3);
    c = ctx->commit();
    ASSERT_TRUE(c.ok()) << c.error().message;
  }
}

TEST_P(Conformance, TooManyPointersIsATypedErrorBeforeAnythingIsWritten) {
  constexpr std::size_t kPtrBytes = 64 * 1024, kData = 8192;
  constexpr std::size_t kPointers = kPtrBytes / sizeof(void*);  // 8192, beyond 4096 + 18
  const bool has_table = GetParam() != "file" && GetParam() != "undo-log";
  auto link = [](Region* p) {
    auto** w = p->as<void*>();
    for (std::size_t i = 0; i < kPointers; ++i) w[i] = &w[(i + 7) % kPointers];
  };
  {
    MAKE_OR_FAIL(ctx);
    auto* p = ctx->region("ptrs", kPtrBytes).value();
    auto* d = ctx->dual_region("data", kData).value();
    ASSERT_TRUE(ctx->open().ok());
    fill(p->data(), kPtrBytes, 1);
    if (!has_table) {
      // file refuses to overwrite a version of another layout (pointers
      // included), so version 1 has the pointers too.
      link(p);
      for (std::size_t i = 0; i < kPointers; ++i) ASSERT_TRUE(ctx->register_pointer(&p->as<void*>()[i]).ok());
    }
    fill(d->write(), kData, 1);
    auto r = ctx->commit();
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  bool accepted = false;
  {
    MAKE_OR_FAIL(ctx);
    auto* p = ctx->region("ptrs", kPtrBytes).value();
    auto* d = ctx->dual_region("data", kData).value();
    ASSERT_TRUE(ctx->open().ok());
    link(p);
    for (std::size_t i = 0; i < kPointers; ++i) ASSERT_TRUE(ctx->register_pointer(&p->as<void*>()[i]).ok());
    fill(d->write(), kData, 2);
    auto r = ctx->commit();
    accepted = r.ok();
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, Errc::out_of_space) << r.error().message;
      EXPECT_NE(r.error().message.find(std::to_string(kPointers)), std::string::npos) << r.error().message;
      EXPECT_NE(r.error().message.find("fewer pointers"), std::string::npos) << r.error().message;
      auto again = ctx->commit();  // the same answer, not a poisoned store
      ASSERT_FALSE(again.ok());
      EXPECT_EQ(again.error().code, Errc::out_of_space);
    }
  }
  EXPECT_EQ(accepted, !has_table) << GetParam() << (accepted ? " accepted " : " refused ") << kPointers << " pointers";
  MAKE_OR_FAIL(ctx);
  auto* p = ctx->region("ptrs", kPtrBytes).value();
  auto* d = ctx->dual_region("data", kData).value();
  ASSERT_TRUE(ctx->open().ok());
  if (accepted) {
    for (std::size_t i = 0; i < kPointers; ++i) ASSERT_TRUE(ctx->register_pointer(&p->as<void*>()[i]).ok());
    ASSERT_EQ(ctx->restore().value(), 2u);
    EXPECT_TRUE(matches(d->read(), kData, 2));
    auto** w = p->as<void*>();
    for (std::size_t i = 0; i < kPointers; ++i) ASSERT_EQ(w[i], &w[(i + 7) % kPointers]) << "pointer " << i;
  } else {
    auto v = ctx->restore();
    ASSERT_TRUE(v.ok()) << v.error().message;
    ASSERT_EQ(v.value(), 1u);
    EXPECT_TRUE(matches(p->data(), kPtrBytes, 1));
    EXPECT_TRUE(matches(d->read(), kData, 1));
  }
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, Conformance, ::testing::ValuesIn(strategy_names()), [](const auto& p) {
  std::string n = p.param;
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  return n;
});

TEST(PersistOptions, ConfigFile) {
  TempDir dir;
  const auto path = dir.file("cairn.conf");
  {
    std::ofstream out(path);
    out << "# comment\nstrategy = nt-copy\nthreads = 3\nasync_flush = false\n";
  }
  auto o = load_options(path);
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->strategy, "nt-copy");
  EXPECT_EQ(o->threads, 3u);
  EXPECT_FALSE(o->async_flush);
  {
    std::ofstream out(path);
    out << "strategy = shadow\ncolour = blue\n";
  }
  auto bad = load_options(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(":2: unknown key 'colour'"), std::string::npos);
  EXPECT_EQ(load_options(dir.file("missing")).error().code, Errc::not_found);
}

TEST(PersistOptions, StrategyFromEnvironment) {
  TempDir dir;
  setenv("CAIRN_STRATEGY", "dram-cache", 1);
  Options o;
  o.dir = dir.path();
  auto ctx = Context::create(o);
  unsetenv("CAIRN_STRATEGY");
  ASSERT_TRUE(ctx.ok());
  EXPECT_EQ(ctx.value()->strategy(), "dram-cache");
}

}  // namespace
}  // namespace cairn::persist
