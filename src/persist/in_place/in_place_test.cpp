// in_place_test.cpp — tests of the `in-place` strategy beyond the conformance
// suite: zero-copy restore, bit-identical results with and without the helper
// thread, the committed slot left alone, flush_async / flush_barrier ordering.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "cairn/persist.hpp"
#include "tests/support/patterns.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::persist {
namespace {

using cairn::testing::TempDir;

Options in_place_options(const TempDir& dir, bool async, const std::string& name = "state") {
  Options o;
  o.strategy = "in-place";
  o.name = name;
  o.dir = dir.path();
  o.threads = 2;
  o.async_flush = async;
  return o;
}

std::unique_ptr<Context> make(const Options& o) {
  auto c = Context::create(o);
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? std::move(c.value()) : nullptr;
}

using cairn::testing::fill;
using cairn::testing::matches;

class InPlace : public ::testing::TestWithParam<bool> {
 protected:
  Options options(const std::string& name = "state") const { return in_place_options(dir_, GetParam(), name); }
  TempDir dir_;
};

TEST_P(InPlace, RestoreOfDualRegionsCopiesNoBytes) {
  constexpr std::size_t kU = 3u << 20, kV = 4096 + 24;
  {
    auto ctx = make(options());
    auto* u = ctx->dual_region("u", kU).value();
    auto* v = ctx->dual_region("v", kV).value();
    ASSERT_TRUE(ctx->open().ok());
    EXPECT_NE(u->read(), u->write());
    for (std::uint64_t ver = 1; ver <= 4; ++ver) {
      ASSERT_TRUE(ctx->begin().ok());
      fill(u->write(), kU, ver);
      fill(v->write(), kV, ver + 50);
      ASSERT_EQ(ctx->commit().value(), ver);
    }
    // The dual regions never cost a copy, at commit either.
    EXPECT_EQ(ctx->stats().bytes_copied, 0u);
    // Each commit flushed (at least) every line of the versions it published.
    EXPECT_GE(ctx->stats().nvm_bytes_written, 4 * (kU + kV));
  }
  auto ctx = make(options());
  auto* u = ctx->dual_region("u", kU).value();
  auto* v = ctx->dual_region("v", kV).value();
  ASSERT_TRUE(ctx->open().ok());
  auto r = ctx->restore();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value(), 4u);
  EXPECT_EQ(ctx->stats().bytes_copied, 0u);
  EXPECT_TRUE(matches(u->read(), kU, 4));
  EXPECT_TRUE(matches(v->read(), kV, 54));
  EXPECT_TRUE(matches(u->write(), kU, 3));  // the other slot still holds version 3
}

// Options::flush = false (seed 004 Fig. 12's "in-place without flushing",
// for measurement): the dual regions' versions are not written back, the
// plain region still is, and versions still survive the process (tmpfs page
// cache), which is all this mode promises.
TEST_P(InPlace, WithoutFlushingDualRegionsWriteNothingBack) {
  constexpr std::size_t kU = 2u << 20, kP = 64 * 1024;
  for (bool flush : {true, false}) {
    Options o = options(flush ? "flushed" : "unflushed");
    o.flush = flush;
    std::uint64_t written = 0;
    {
      auto ctx = make(o);
      auto* u = ctx->dual_region("u", kU).value();
      auto* p = ctx->region("p", kP).value();
      ASSERT_TRUE(ctx->open().ok());
      for (std::uint64_t ver = 1; ver <= 3; ++ver) {
        ASSERT_TRUE(ctx->begin().ok());
        fill(u->write(), kU, ver);
        fill(p->data(), kP, ver + 10);
        ASSERT_EQ(ctx->commit().value(), ver);
      }
      written = ctx->stats().nvm_bytes_written;
    }
    if (flush) {
      EXPECT_GE(written, 3 * (kU + kP));
    } else {
      EXPECT_GE(written, 3 * kP) << "plain regions are still copied";
      EXPECT_LT(written, 3 * kP + kU / 2) << "dual regions must not be written back";
    }
    auto ctx = make(o);
    auto* u = ctx->dual_region("u", kU).value();
    auto* p = ctx->region("p", kP).value();
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_EQ(ctx->restore().value(), 3u);
    EXPECT_TRUE(matches(u->read(), kU, 3));
    EXPECT_TRUE(matches(p->data(), kP, 13));
  }
}

// Seed 004's Figure 8 loop, with a boundary the update does not touch (carried
// over: the non-uniform case) and a plain region updated one element per
// iteration (persisted by nt-copy), against the same computation in DRAM.
struct Jacobi {
  static constexpr std::size_t kN = 200'000;  // 1.6 MB per version
  static constexpr int kIters = 12;
  static void step(const double* in, double* out) {
    for (std::size_t i = 1; i + 1 < kN; ++i) out[i] = 0.5 * (in[i - 1] + in[i + 1]) + 1e-3 * std::sin(in[i]);
  }
  static void init(double* u) {
    for (std::size_t i = 0; i < kN; ++i) u[i] = std::cos(0.001 * static_cast<double>(i));
    u[0] = 1.0;
    u[kN - 1] = -1.0;
  }
  static double norm(const double* u) {
    double s = 0;
    for (std::size_t i = 0; i < kN; ++i) s += u[i] * u[i];
    return s;
  }
};

TEST_P(InPlace, JacobiLoopIsBitIdenticalToDram) {
  // Reference in DRAM, and the history of norms (the non-uniform plain region).
  std::vector<double> a(Jacobi::kN), b(Jacobi::kN), mid, hist_ref(Jacobi::kIters + 8, 0.0);
  Jacobi::init(a.data());
  b = a;
  for (int it = 0; it < Jacobi::kIters + 4; ++it) {
    Jacobi::step(a.data(), b.data());
    std::swap(a, b);
    hist_ref[it] = Jacobi::norm(a.data());
    if (it + 1 == Jacobi::kIters) mid = a;
  }

  auto run = [&](Context& ctx, DualRegion* u, Region* hist, int from, int to) {
    for (int it = from; it < to; ++it) {
      ASSERT_TRUE(ctx.begin().ok());
      const double* in = u->read<double>();
      double* out = u->write<double>();
      Jacobi::step(in, out);
      u->carry_over(0, sizeof(double));                                  // element 0
      u->carry_over((Jacobi::kN - 1) * sizeof(double), sizeof(double));  // element n-1
      if (it % 3 == 0) ctx.flush_async(*u);                              // done with u early
      hist->as<double>()[it] = Jacobi::norm(out);                        // post-update read of the written version
      if (it % 3 == 1) ctx.flush_async();                                // everything at once; the seed's flush point
      if (it % 3 == 0) ctx.flush_async(*hist);
      // it % 3 == 2: commit hands everything over itself.
      auto c = ctx.commit();
      ASSERT_TRUE(c.ok()) << c.error().message;
      ASSERT_EQ(c.value(), static_cast<std::uint64_t>(it + 1));
    }
  };
  const std::size_t hist_bytes = hist_ref.size() * sizeof(double);
  {
    auto ctx = make(options());
    auto* u = ctx->dual_region("u", Jacobi::kN * sizeof(double)).value();
    auto* hist = ctx->region("hist", hist_bytes).value();
    ASSERT_TRUE(ctx->open().ok());
    Jacobi::init(u->read<double>());  // nothing committed: the initial state
    run(*ctx, u, hist, 0, Jacobi::kIters);
    ASSERT_EQ(std::memcmp(u->read(), mid.data(), Jacobi::kN * sizeof(double)), 0);
  }
  // Restart from the committed version and finish: the same bits as DRAM.
  auto ctx = make(options());
  auto* u = ctx->dual_region("u", Jacobi::kN * sizeof(double)).value();
  auto* hist = ctx->region("hist", hist_bytes).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_EQ(ctx->restore().value(), static_cast<std::uint64_t>(Jacobi::kIters));
  EXPECT_EQ(ctx->stats().bytes_copied, hist_bytes);  // only the plain region came back by copy
  for (int it = 0; it < Jacobi::kIters; ++it) ASSERT_EQ(hist->as<double>()[it], hist_ref[it]) << "iteration " << it;
  run(*ctx, u, hist, Jacobi::kIters, Jacobi::kIters + 4);
  EXPECT_EQ(std::memcmp(u->read(), a.data(), Jacobi::kN * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(hist->data(), hist_ref.data(), hist_bytes), 0);
}

TEST_P(InPlace, CommittedSlotIsUnchangedByTheNextIteration) {
  constexpr std::size_t kD = 2u << 20, kP = 64 * 1024;
  auto ctx = make(options());
  auto* d = ctx->dual_region("d", kD).value();
  auto* p = ctx->region("p", kP).value();
  ASSERT_TRUE(ctx->open().ok());
  fill(d->write(), kD, 1);
  fill(p->data(), kP, 1);
  ASSERT_EQ(ctx->commit().value(), 1u);
  std::vector<std::byte> before(kD);
  std::memcpy(before.data(), d->read(), kD);
  const void* committed = d->read();

  ASSERT_TRUE(ctx->begin().ok());
  fill(d->write(), kD / 2, 2);  // half the region, then hand it over
  ctx->flush_async(*d);
  fill(p->data(), kP, 2);
  ctx->flush_async(*p);
  ctx->flush_barrier();
  EXPECT_EQ(d->read(), committed);
  EXPECT_EQ(std::memcmp(d->read(), before.data(), kD), 0);
  ASSERT_EQ(ctx->commit().value(), 2u);
  EXPECT_NE(d->read(), committed);  // roles switched
  EXPECT_EQ(d->write(), committed);
  EXPECT_TRUE(matches(d->read(), kD / 2, 2));
}

// On media, not just in this process: a child dies in the middle of the
// iteration after version 2 (half of write() rewritten, part of it flushed)
// and the parent finds version 2 whole. Sizes stay under Pool::kParallelMin so
// the child never needs the parent's worker threads.
TEST_P(InPlace, KilledMidIterationLeavesTheCommittedVersion) {
  constexpr std::size_t kD = 512 * 1024, kP = 256 * 1024;
  for (int restart = 0; restart < 2; ++restart) {
    const std::string name = "kill" + std::to_string(restart);
    pid_t pid = fork();
    if (pid == 0) {
      auto ctx = std::move(Context::create(options(name)).value());
      auto* d = ctx->dual_region("d", kD).value();
      auto* p = ctx->region("p", kP).value();
      if (!ctx->open().ok()) _exit(3);
      for (std::uint64_t v = 1; v <= 2; ++v) {
        fill(d->write(), kD, v);
        fill(p->data(), kP, v);
        if (!ctx->commit().ok()) _exit(4);
      }
      if (restart == 1) {  // the same after a restore in a new context
        ctx.reset();
        ctx = std::move(Context::create(options(name)).value());
        d = ctx->dual_region("d", kD).value();
        p = ctx->region("p", kP).value();
        if (!ctx->open().ok() || !ctx->restore().ok()) _exit(5);
      }
      if (!ctx->begin().ok()) _exit(6);
      fill(d->write(), kD / 2, 3);
      ctx->flush_async(*d);
      ctx->flush_barrier();
      fill(p->data(), kP, 3);
      ctx->flush_async(*p);
      raise(SIGKILL);
      _exit(7);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFSIGNALED(st)) << "child exited with " << WEXITSTATUS(st);
    auto ctx = make(options(name));
    auto* d = ctx->dual_region("d", kD).value();
    auto* p = ctx->region("p", kP).value();
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_EQ(ctx->restore().value(), 2u);
    EXPECT_TRUE(matches(d->read(), kD, 2));
    EXPECT_TRUE(matches(p->data(), kP, 2));
  }
}

TEST_P(InPlace, OpenWithoutRestoreWritesTheOtherSlot) {
  constexpr std::size_t kD = 8192;
  {
    auto ctx = make(options());
    auto* d = ctx->dual_region("d", kD).value();
    ASSERT_TRUE(ctx->open().ok());
    for (std::uint64_t v = 1; v <= 3; ++v) {  // odd count: version 3 is in slot 1
      fill(d->write(), kD, v);
      ASSERT_TRUE(ctx->commit().ok());
    }
  }
  auto ctx = make(options());
  auto* d = ctx->dual_region("d", kD).value();
  ASSERT_TRUE(ctx->open().ok());
  // No restore: still, read() is the committed version and write() the other.
  EXPECT_TRUE(matches(d->read(), kD, 3));
  fill(d->write(), kD, 4);
  EXPECT_TRUE(matches(d->read(), kD, 3));
  ASSERT_EQ(ctx->commit().value(), 4u);
}

// Pointers inside a dual region, to a plain region and into the dual itself.
TEST_P(InPlace, PointersInDualRegionsAreRelocated) {
  constexpr std::size_t kD = 4096;
  auto build = [&](Context& ctx, DualRegion*& d, Region*& p) {
    d = ctx.dual_region("d", kD).value();
    p = ctx.region("p", kD).value();
    ASSERT_TRUE(ctx.open().ok());
    ASSERT_TRUE(ctx.register_pointer(&d->read<void*>()[0]).ok());
    ASSERT_TRUE(ctx.register_pointer(&d->read<void*>()[1]).ok());
  };
  {
    auto ctx = make(options());
    DualRegion* d;
    Region* p;
    build(*ctx, d, p);
    auto** w = d->write<void*>();
    w[0] = p->as<std::byte>() + 16;
    w[1] = &w[4];
    w[4] = reinterpret_cast<void*>(0x1234);
    ASSERT_TRUE(ctx->commit().ok());
  }
  auto ctx = make(options());
  DualRegion* d;
  Region* p;
  build(*ctx, d, p);
  ASSERT_TRUE(ctx->restore().ok());
  auto** r = d->read<void*>();
  EXPECT_EQ(r[0], p->as<std::byte>() + 16);
  EXPECT_EQ(r[1], &r[4]);
  EXPECT_EQ(r[4], reinterpret_cast<void*>(0x1234));
}

// Many hand-overs in every order, explicit barriers, repeated and empty
// requests; run under the thread sanitizer build as well.
TEST_P(InPlace, FlushAsyncAndBarrierInAnyOrder) {
  constexpr std::size_t kA = 1536 * 1024, kB = 700 * 1024, kC = 3 * 4096, kP = 1100 * 1024;
  constexpr int kIters = 30;
  {
    auto ctx = make(options());
    auto* a = ctx->dual_region("a", kA).value();
    auto* b = ctx->dual_region("b", kB).value();
    auto* c = ctx->dual_region("c", kC).value();
    auto* p = ctx->region("p", kP).value();
    ASSERT_TRUE(ctx->open().ok());
    ctx->flush_barrier();  // nothing queued: returns at once
    for (int it = 1; it <= kIters; ++it) {
      ASSERT_TRUE(ctx->begin().ok());
      fill(a->write(), kA, it);
      ctx->flush_async(*a);
      ctx->flush_async(*a);  // twice: done once
      if (it % 2) ctx->flush_barrier();
      fill(p->data(), kP, it + 1000);
      ctx->flush_async(*p);
      fill(b->write(), kB, it + 2000);
      if (it % 4 == 0) ctx->flush_barrier();
      fill(c->write(), kC, it + 3000);
      if (it % 3 == 0) ctx->flush_async();  // the rest (b and c)
      auto v = ctx->commit();
      ASSERT_TRUE(v.ok()) << v.error().message;
      ASSERT_EQ(v.value(), static_cast<std::uint64_t>(it));
      ASSERT_TRUE(matches(a->read(), kA, it));
      ASSERT_TRUE(matches(b->read(), kB, it + 2000));
      ASSERT_TRUE(matches(c->read(), kC, it + 3000));
      ctx->flush_barrier();  // after commit: nothing pending
    }
    EXPECT_EQ(ctx->stats().bytes_copied, kIters * kP);  // the plain region, once per commit
    EXPECT_GE(ctx->stats().nvm_bytes_written, kIters * (kA + kB + kC + kP));
    // An iteration abandoned after hand-overs: the context goes away with
    // work queued.
    ASSERT_TRUE(ctx->begin().ok());
    fill(a->write(), kA, 999);
    ctx->flush_async(*a);
    fill(p->data(), kP, 999);
    ctx->flush_async();
  }
  auto ctx = make(options());
  auto* a = ctx->dual_region("a", kA).value();
  auto* b = ctx->dual_region("b", kB).value();
  auto* c = ctx->dual_region("c", kC).value();
  auto* p = ctx->region("p", kP).value();
  ASSERT_TRUE(ctx->open().ok());
  // A hand-over abandoned by restore() in the same context.
  fill(p->data(), kP, 5);
  ctx->flush_async(*p);
  ASSERT_EQ(ctx->restore().value(), static_cast<std::uint64_t>(kIters));
  EXPECT_TRUE(matches(a->read(), kA, kIters));
  EXPECT_TRUE(matches(b->read(), kB, kIters + 2000));
  EXPECT_TRUE(matches(c->read(), kC, kIters + 3000));
  EXPECT_TRUE(matches(p->data(), kP, kIters + 1000));
}

// The helper thread flushes a region handed over with flush_async while the
// compute thread writes the next one, a thousand times: the overlap seed
// 004's proactive flushing is for (a and b are larger than what in-place
// flushes on the calling thread, so the helper gets them). Under ThreadSanitizer (`make tsan`) this
// is the test that would report a race between the helper's write-backs and
// the compute thread; everywhere, every committed version must read back
// exactly, and a fresh context must restore the last one bit for bit.
TEST_P(InPlace, HelperFlushesOneRegionWhileTheComputeThreadWritesAnother) {
  constexpr std::size_t kA = 320 * 1024 + 8, kB = 288 * 1024, kP = 24 * 1024;
  constexpr int kIters = 1000;
  {
    auto ctx = make(options());
    auto* a = ctx->dual_region("a", kA).value();
    auto* b = ctx->dual_region("b", kB).value();
    auto* p = ctx->region("p", kP).value();
    ASSERT_TRUE(ctx->open().ok());
    for (int it = 1; it <= kIters; ++it) {
      ASSERT_TRUE(ctx->begin().ok());
      fill(a->write(), kA, it);
      ctx->flush_async(*a);              // the helper writes a back ...
      fill(b->write(), kB, it + 10000);  // ... while this thread computes b
      ctx->flush_async(*b);
      fill(p->data(), kP, it + 20000);  // and p, copied at hand-over
      if (it % 3 == 0) ctx->flush_async(*p);
      auto v = ctx->commit();
      ASSERT_TRUE(v.ok()) << v.error().message;
      ASSERT_EQ(v.value(), static_cast<std::uint64_t>(it));
      ASSERT_TRUE(matches(a->read(), kA, it)) << "iteration " << it;
      ASSERT_TRUE(matches(b->read(), kB, it + 10000)) << "iteration " << it;
    }
  }
  auto ctx = make(options());
  auto* a = ctx->dual_region("a", kA).value();
  auto* b = ctx->dual_region("b", kB).value();
  auto* p = ctx->region("p", kP).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_EQ(ctx->restore().value(), static_cast<std::uint64_t>(kIters));
  EXPECT_TRUE(matches(a->read(), kA, kIters));
  EXPECT_TRUE(matches(b->read(), kB, kIters + 10000));
  EXPECT_TRUE(matches(p->data(), kP, kIters + 20000));
}

// A kernel that streams its output (Context::stream from two threads, each
// fencing, then streamed): the commit writes nothing back for the region, so
// the NVM bytes of a commit are the streamed bytes once (not twice: stream,
// then a flush), and a fresh context restores every byte, the partial cache
// lines at both ends of each thread's piece included.
TEST_P(InPlace, StreamedRegionIsWrittenOnceAndRestoresBitForBit) {
  constexpr std::size_t kU = (1u << 20) + 24, kHalf = kU / 2 + 40;
  std::vector<std::byte> next(kU);
  {
    auto ctx = make(options());
    auto* u = ctx->dual_region("u", kU).value();
    ASSERT_TRUE(ctx->open().ok());
    std::uint64_t before = 0;
    for (std::uint64_t ver = 1; ver <= 3; ++ver) {
      ASSERT_TRUE(ctx->begin().ok());
      fill(next.data(), kU, ver);
      auto* out = static_cast<std::byte*>(u->write());
      std::thread other([&] {
        ctx->stream(out + kHalf, next.data() + kHalf, kU - kHalf);
        ctx->stream_fence();
      });
      ctx->stream(out, next.data(), kHalf);
      ctx->stream_fence();
      other.join();
      ctx->streamed(*u);
      ASSERT_EQ(ctx->commit().value(), ver);
      const std::uint64_t written = ctx->stats().nvm_bytes_written - before;
      before = ctx->stats().nvm_bytes_written;
      EXPECT_GE(written, kU) << "version " << ver;
      EXPECT_LT(written, kU + 64 * 1024) << "version " << ver << ": the streamed region was written back again";
      EXPECT_TRUE(matches(u->read(), kU, ver));
    }
  }
  auto ctx = make(options());
  auto* u = ctx->dual_region("u", kU).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_EQ(ctx->restore().value(), 3u);
  EXPECT_TRUE(matches(u->read(), kU, 3));
  EXPECT_TRUE(matches(u->write(), kU, 2));
}

// The checksums of a streamed region are gathered as it is streamed (a
// thread's consecutive pieces chained per 64 KiB chunk, pieces of a chunk from
// several runs joined, anything else sealed from the slot at commit). Every
// way of streaming a version must give checksums that a fresh restore finds
// right: rows in order and in reverse, bytes streamed twice, a thread that
// never fences, pieces that straddle chunks; the restore checks every chunk
// (Errc::corrupted on a wrong checksum).
TEST_P(InPlace, StreamedChecksumsHoldForEveryWayOfStreaming) {
  constexpr std::size_t kU = 5 * 65536 + 1000, kRow = 1000;
  std::vector<std::byte> next(kU);
  std::unique_ptr<Context> ctx;
  DualRegion* u = nullptr;
  const auto reopen = [&](std::uint64_t expect) {
    ctx.reset();
    ctx = make(options());
    u = ctx->dual_region("u", kU).value();
    ASSERT_TRUE(ctx->open().ok());
    if (expect == 0) return;
    auto v = ctx->restore();
    ASSERT_TRUE(v.ok()) << "version " << expect << ": " << v.error().message;
    ASSERT_EQ(v.value(), expect);
    ASSERT_TRUE(matches(u->read(), kU, expect)) << "version " << expect;
  };
  reopen(0);
  for (std::uint64_t ver = 1; ver <= 6; ++ver) {
    ASSERT_TRUE(ctx->begin().ok());
    fill(next.data(), kU, ver);
    auto* out = static_cast<std::byte*>(u->write());
    const auto row = [&](std::size_t at, std::size_t n) { ctx->stream(out + at, next.data() + at, n); };
    switch (ver) {
      case 1:  // rows in order, none aligned to a chunk
        for (std::size_t at = 0; at < kU; at += kRow) row(at, std::min(kRow, kU - at));
        break;
      case 2:  // rows in reverse: every row its own run
        for (std::size_t at = (kU - 1) / kRow * kRow;; at -= kRow) {
          row(at, std::min(kRow, kU - at));
          if (at == 0) break;
        }
        break;
      case 3: {  // all of it with wrong bytes in two places, then those places again, right
        std::vector<std::byte> wrong = next;
        for (std::size_t at : {std::size_t{70536}, std::size_t{3 * 65536 + 10}}) wrong[at] ^= std::byte{0xFF};
        ctx->stream(out, wrong.data(), kU);
        row(65536 + 5000, 3000);
        row(3 * 65536, 65536);
        break;
      }
      case 4: {  // two threads, their boundary inside a chunk; one of them ends mid-chunk and never fences
        std::thread other([&] { row(150000, 150000); });
        row(0, 150000);
        other.join();
        row(300000, kU - 300000);
        break;
      }
      case 5:  // one piece straddling every chunk boundary, then the rest in two pieces
        row(65000, kU - 65000);
        row(0, 65000);
        break;
      default:  // part streamed, the rest stored through the cache and handed over as a whole
        row(0, 70000);
        std::memcpy(out + 70000, next.data() + 70000, kU - 70000);
        break;
    }
    ctx->stream_fence();
    if (ver == 6)
      ctx->flush_async(*u);
    else
      ctx->streamed(*u);
    ASSERT_EQ(ctx->commit().value(), ver);
    reopen(ver);
  }
}

INSTANTIATE_TEST_SUITE_P(Persist, InPlace, ::testing::Values(true, false),
                         [](const auto& p) { return p.param ? "async_flush" : "sync_flush"; });

// A process that restores a version with registered pointers in a dual
// region rewrites them in the committed slot itself, for its own addresses.
// If it dies before committing again, the next process must still restore
// that version: the rewritten pointers are not damage. The second process
// maps the pool elsewhere (a reservation taken first), so its pointers differ
// from the first's; before the fix its restore said the version was damaged.
TEST(PersistInPlace, ARestoreThatDiedBeforeCommittingLeavesTheVersionRestorable) {
  struct Node {
    Node* next;
    std::uint64_t value;
  };
  constexpr std::size_t kCount = 8192;
  TempDir dir;
  const auto session = [&](int phase) {
    auto ctx = make(in_place_options(dir, true));
    auto* d = ctx->dual_region("nodes", kCount * sizeof(Node)).value();
    if (!ctx->open().ok()) return 10;
    for (std::size_t i = 0; i < kCount; i += 1000)
      if (!ctx->register_pointer(&d->read<Node>()[i].next).ok()) return 11;
    if (phase == 0) {
      Node* n = d->write<Node>();
      for (std::size_t i = 0; i < kCount; ++i) n[i] = {i % 1000 == 0 ? &n[i + 1] : nullptr, i};
      return ctx->commit().ok() ? 0 : 12;
    }
    auto r = ctx->restore();
    if (!r.ok()) {
      std::fprintf(stderr, "phase %d: %s\n", phase, r.error().message.c_str());
      return 13;
    }
    const Node* n = d->read<Node>();
    for (std::size_t i = 0; i < kCount; ++i)
      if (n[i].value != i || n[i].next != (i % 1000 == 0 ? &n[i + 1] : nullptr)) return 14;
    return 0;  // and dies without committing
  };
  ASSERT_EQ(session(0), 0);
  for (int phase = 1; phase <= 2; ++phase) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (phase == 1)  // the first restorer maps the pool at another address than the second
        (void)mmap(nullptr, std::size_t{3} << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      _exit(session(phase));
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "restore in process " << phase;
  }
}

TEST(PersistInPlace, CommitAfterAFailedCommitRedoesTheHandOver) {
  TempDir dir;
  auto ctx = make(in_place_options(dir, true));
  auto* p = ctx->region("p", 4096).value();
  auto* d = ctx->dual_region("d", 4096).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_TRUE(ctx->register_pointer(&p->as<void*>()[0]).ok());
  static int stray = 0;
  fill(d->write(), 4096, 1);
  fill(p->data(), 4096, 1);
  p->as<void*>()[0] = &stray;
  ctx->flush_async();  // p copied with the stray pointer
  auto bad = ctx->commit();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::invalid_argument);
  EXPECT_FALSE(ctx->committed_version().has_value());
  p->as<void*>()[0] = nullptr;  // fixed after the failure
  p->as<std::uint64_t>()[1] = 77;
  ASSERT_EQ(ctx->commit().value(), 1u);
  ctx.reset();

  ctx = make(in_place_options(dir, true));
  p = ctx->region("p", 4096).value();
  d = ctx->dual_region("d", 4096).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_TRUE(ctx->register_pointer(&p->as<void*>()[0]).ok());
  ASSERT_TRUE(ctx->restore().ok());
  EXPECT_EQ(p->as<void*>()[0], nullptr);
  EXPECT_EQ(p->as<std::uint64_t>()[1], 77u);  // the copy was redone after the failure
  EXPECT_TRUE(matches(d->read(), 4096, 1));
}

}  // namespace
}  // namespace cairn::persist
