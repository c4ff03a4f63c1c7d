// shadow_test.cpp — what is particular to `shadow`: the working view is a
// private copy-on-write mapping of the committed slot, so writes never reach
// the pool file, commit keeps addresses, and restore copies nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "cairn/extended/pool.hpp"
#include "cairn/persist.hpp"
#include "persist/layout.hpp"
#include "persist/slot_store.hpp"
#include "tests/support/patterns.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::persist {
namespace {

using cairn::testing::TempDir;

using cairn::testing::fill;
using cairn::testing::matches;

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

class Shadow : public ::testing::Test {
 protected:
  Options options() const {
    Options o;
    o.strategy = "shadow";
    o.dir = dir_.path();
    o.threads = 2;
    return o;
  }
  // dram_view: as if the pool file could not be mapped (shadow's DRAM fallback).
  std::unique_ptr<Context> make(bool dram_view = false) {
    detail::InternalOptions internal;
    internal.shadow_dram_view = dram_view;
    auto c = detail::create_context(options(), internal);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return std::move(c.value());
  }
  std::string pool_path() const { return dir_.file("state.pool"); }
  TempDir dir_;
};

constexpr std::size_t kA = 4u << 20, kD = 1u << 20;

TEST_F(Shadow, WritesToTheViewNeverReachThePoolFile) {
  auto ctx = make();
  auto* a = ctx->region("a", kA).value();
  auto* d = ctx->dual_region("d", kD).value();
  ASSERT_TRUE(ctx->open().ok());
  fill(a->data(), kA, 1);
  fill(d->write(), kD, 1);
  ASSERT_TRUE(ctx->commit().ok());
  const auto before = read_file(pool_path());
  ASSERT_GT(before.size(), 2 * (kA + kD));
  // Work on every buffer, including the one holding the committed dual version.
  fill(a->data(), kA, 2);
  fill(d->write(), kD, 2);
  std::memset(d->read(), 0x5a, kD);
  EXPECT_TRUE(read_file(pool_path()) == before) << "a write to the working view changed the pool file";
  // The committed version is intact: restore brings it back.
  ASSERT_EQ(ctx->restore().value(), 1u);
  EXPECT_TRUE(matches(a->data(), kA, 1));
  EXPECT_TRUE(matches(d->read(), kD, 1));
  // A commit does write the file (into the other slot).
  fill(a->data(), kA, 3);
  ASSERT_TRUE(ctx->commit().ok());
  EXPECT_FALSE(read_file(pool_path()) == before);
}

TEST_F(Shadow, RestoreCopiesNothing) {
  auto ctx = make();
  auto* a = ctx->region("a", kA).value();
  auto* d = ctx->dual_region("d", kD).value();
  ASSERT_TRUE(ctx->open().ok());
  for (std::uint64_t v = 1; v <= 3; ++v) {
    fill(a->data(), kA, v);
    fill(d->write(), kD, v + 50);
    ASSERT_EQ(ctx->commit().value(), v);
  }
  const std::uint64_t after_commits = ctx->stats().bytes_copied;
  EXPECT_EQ(after_commits, 3 * (kA + kD));  // commits copy the latest buffers once each
  fill(a->data(), kA, 99);
  fill(d->write(), kD, 99);
  fill(d->read(), kD, 98);
  for (int i = 0; i < 3; ++i) {  // restore is repeatable
    ASSERT_EQ(ctx->restore().value(), 3u);
    EXPECT_TRUE(matches(a->data(), kA, 3));
    EXPECT_TRUE(matches(d->read(), kD, 53));
    fill(a->data(), kA, 100 + static_cast<std::uint64_t>(i));
  }
  // Byte counts are published at commit: the next commit adds exactly its own
  // copy, so the three restores copied nothing.
  fill(a->data(), kA, 4);
  fill(d->write(), kD, 54);
  ASSERT_EQ(ctx->commit().value(), 4u);
  EXPECT_EQ(ctx->stats().bytes_copied, after_commits + kA + kD);
}

TEST_F(Shadow, CommitKeepsAddressesAndPointersValid) {
  auto ctx = make();
  auto* a = ctx->region("a", kA).value();
  auto* heads = ctx->region("heads", 64).value();
  ASSERT_TRUE(ctx->open().ok());
  auto** head = heads->as<std::uint64_t*>();
  auto reg = ctx->register_pointer(head);
  ASSERT_TRUE(reg.ok()) << reg.error().message;
  void* const base = a->data();
  for (std::uint64_t v = 1; v <= 6; ++v) {
    fill(a->data(), kA, v);
    *head = a->as<std::uint64_t>() + 1000 * v;
    ASSERT_EQ(ctx->commit().value(), v);
    // Same address, same contents (the view is not re-mapped: see shadow.cpp).
    EXPECT_EQ(a->data(), base);
    EXPECT_TRUE(matches(a->data(), kA, v));
    EXPECT_EQ(**head, v * 0x9E3779B97F4A7C15ULL + 1000 * v);
  }
  // Restored in a new process, at whatever address the view lands.
  ctx.reset();
  auto again = make();
  auto* a2 = again->region("a", kA).value();
  auto* heads2 = again->region("heads", 64).value();
  ASSERT_TRUE(again->open().ok());
  ASSERT_TRUE(again->register_pointer(heads2->as<std::uint64_t*>()).ok());
  ASSERT_EQ(again->restore().value(), 6u);
  EXPECT_EQ(*heads2->as<std::uint64_t*>(), a2->as<std::uint64_t>() + 6000);
}

// Commits keep the view's private pages and leave its other pages mapped to
// a slot that is no longer the committed one (shadow.cpp). Sparse writes over
// many commits, a rollback in between, then a restart after each number of
// commits: every page must come back as last committed, wherever its bytes
// were last written from (a private page or the slot copied onto itself).
TEST_F(Shadow, SparseWritesOverManyCommitsRestoreExactly) {
  constexpr std::size_t kPage = 4096, kPages = 16, kBytes = kPages * kPage;
  for (std::uint64_t commits = 1; commits <= 7; ++commits) {
    std::vector<std::uint64_t> model(kBytes / 8, 0);
    {
      auto ctx = make();
      auto* a = ctx->region("a", kBytes).value();
      ASSERT_TRUE(ctx->open().ok());
      auto* w = a->as<std::uint64_t>();
      for (std::uint64_t v = 1; v <= commits; ++v) {
        // Version v writes pages v, 2v, 3v, ... (mod kPages): some pages are
        // written in consecutive versions, some once, some never.
        for (std::size_t p = v % kPages; p < kPages; p += v) {
          for (std::size_t i = 0; i < kPage / 8; ++i) w[p * kPage / 8 + i] = v * 1000003 + p * 131 + i;
          if (v == 1 && p == 0) break;  // page 0 only once
        }
        ASSERT_EQ(ctx->commit().value(), v);
        model.assign(w, w + kBytes / 8);
        // An uncommitted write rolled back in the same process.
        if (v % 3 == 0) {
          std::memset(a->data(), 0xAB, kBytes / 2);
          ASSERT_EQ(ctx->restore().value(), v);
          ASSERT_EQ(std::memcmp(a->data(), model.data(), kBytes), 0) << "rollback after version " << v;
          w = a->as<std::uint64_t>();
        }
      }
      std::memset(a->data(), 0xCD, kBytes);  // lost with the process
    }
    auto again = make();
    auto* a2 = again->region("a", kBytes).value();
    ASSERT_TRUE(again->open().ok());
    ASSERT_EQ(again->restore().value(), commits);
    EXPECT_EQ(std::memcmp(a2->data(), model.data(), kBytes), 0) << "after " << commits << " commits";
    again.reset();
    std::filesystem::remove(pool_path());
  }
}

// write() keeps the previous version after a commit, as with every strategy:
// a three-level scheme (u_next = f(u, u_prev), written over u_prev) works.
TEST_F(Shadow, DualWriteBufferKeepsThePreviousVersion) {
  auto ctx = make();
  auto* d = ctx->dual_region("d", kD).value();
  ASSERT_TRUE(ctx->open().ok());
  for (std::uint64_t v = 1; v <= 7; ++v) {
    ASSERT_TRUE(ctx->begin().ok());
    if (v >= 3) {
      EXPECT_TRUE(matches(d->write(), kD, v - 2)) << "write() lost version " << v - 2;
    }
    fill(d->write(), kD, v);
    ASSERT_EQ(ctx->commit().value(), v);
    EXPECT_TRUE(matches(d->read(), kD, v));
  }
}

TEST_F(Shadow, FreshStateIsZero) {
  auto ctx = make();
  auto* a = ctx->region("a", 3 * 4096 + 16).value();
  auto* d = ctx->dual_region("d", 8192).value();
  ASSERT_TRUE(ctx->open().ok());
  std::vector<char> zero(3 * 4096 + 16, 0);
  EXPECT_EQ(std::memcmp(a->data(), zero.data(), zero.size()), 0);
  EXPECT_EQ(std::memcmp(d->read(), zero.data(), 8192), 0);
  EXPECT_EQ(std::memcmp(d->write(), zero.data(), 8192), 0);
}

TEST_F(Shadow, ApplicationMemoryIsRefused) {
  auto ctx = make();
  std::vector<char> mine(4096);
  auto r = ctx->register_region("mine", mine.data(), mine.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
}

// A root naming the state off a block boundary, or so far out that the bound
// check wrapped (found by fuzz/slot_store_fuzz; the slot store is every pool
// strategy's): a typed error, nothing read.
TEST_F(Shadow, AStateRootOffABlockOrPastThePoolIsRefused) {
  {
    auto ctx = make();
    ASSERT_TRUE(ctx->region("a", 4096).ok());
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_TRUE(ctx->commit().ok());
  }
  std::uint64_t good = 0;
  {
    auto p = pool::Pool::open(pool_path());
    ASSERT_TRUE(p.ok());
    good = p.value()->root(0).offset;
  }
  for (std::uint64_t bad : {good + 2, ~std::uint64_t{0} - 7, std::uint64_t{1} << 63}) {
    {
      // Written into the live root table as damage would (publish_root
      // refuses offsets past the pool), its checksum made to match.
      auto p = pool::Pool::open(pool_path());
      ASSERT_TRUE(p.ok());
      std::byte* base = p.value()->base();
      const auto selector = *reinterpret_cast<const std::uint64_t*>(base + pool::kSelectorOffset);
      auto* t = reinterpret_cast<pool::RootTable*>(base + (selector == 0 ? pool::kRootTable0 : pool::kRootTable1));
      t->slots[0].offset = bad;
      t->checksum = pool::checksum64(t, offsetof(pool::RootTable, checksum));
      p.value()->persist(t, sizeof *t);
    }
    auto ctx = make();
    ASSERT_TRUE(ctx->region("a", 4096).ok());
    auto r = ctx->open();
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::corrupted) << r.error().message;
  }
}

// A state header (checksum valid) whose region count or descriptor offset
// runs past the pool (found by fuzz/slot_store_fuzz: a vector of 2^44
// descriptors was allocated): a typed error.
TEST_F(Shadow, AStateHeaderWhoseDescriptorsRunPastThePoolIsRefused) {
  {
    auto ctx = make();
    ASSERT_TRUE(ctx->region("a", 4096).ok());
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_TRUE(ctx->commit().ok());
  }
  using Damage = void (*)(detail::StateHeader&);
  for (Damage damage : {+[](detail::StateHeader& h) { h.region_count = std::uint64_t{1} << 44; },
                        +[](detail::StateHeader& h) { h.region_count = (1u << 20) - 1; },
                        +[](detail::StateHeader& h) { h.desc_offset = ~std::uint64_t{0} - 64; }}) {
    auto p = pool::Pool::open(pool_path());
    ASSERT_TRUE(p.ok());
    auto* h = reinterpret_cast<detail::StateHeader*>(p.value()->at(p.value()->root(0).offset));
    const detail::StateHeader saved = *h;
    damage(*h);
    h->checksum = pool::checksum64(h, offsetof(detail::StateHeader, checksum));
    p.value()->persist(h, sizeof *h);
    auto ctx = make();
    ASSERT_TRUE(ctx->region("a", 4096).ok());
    auto r = ctx->open();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::corrupted) << r.error().message;
    *h = saved;
    p.value()->persist(h, sizeof *h);
  }
}

// Without a mappable pool file the strategy keeps working on DRAM copies.
TEST_F(Shadow, DramFallbackRoundTrip) {
  {
    auto ctx = make(true);
    auto* a = ctx->region("a", kA).value();
    auto* d = ctx->dual_region("d", kD).value();
    ASSERT_TRUE(ctx->open().ok());
    for (std::uint64_t v = 1; v <= 3; ++v) {
      fill(a->data(), kA, v);
      fill(d->write(), kD, v + 10);
      ASSERT_EQ(ctx->commit().value(), v);
    }
    fill(a->data(), kA, 50);
    ASSERT_EQ(ctx->restore().value(), 3u);
    EXPECT_TRUE(matches(a->data(), kA, 3));
    EXPECT_TRUE(matches(d->read(), kD, 13));
  }
  auto ctx = make(true);
  auto* a = ctx->region("a", kA).value();
  auto* d = ctx->dual_region("d", kD).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_EQ(ctx->restore().value(), 3u);
  EXPECT_TRUE(matches(a->data(), kA, 3));
  EXPECT_TRUE(matches(d->read(), kD, 13));

  // And the view-based shadow reads what the fallback wrote.
  auto view = make();
  auto* a3 = view->region("a", kA).value();
  auto* d3 = view->dual_region("d", kD).value();
  ASSERT_TRUE(view->open().ok());
  ASSERT_EQ(view->restore().value(), 3u);
  EXPECT_TRUE(matches(a3->data(), kA, 3));
  EXPECT_TRUE(matches(d3->read(), kD, 13));
}

}  // namespace
}  // namespace cairn::persist
