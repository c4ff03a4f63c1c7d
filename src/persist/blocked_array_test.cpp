// blocked_array_test.cpp — BlockedArray<T> under every built strategy: linked particles across chunks survive a
// restore.
#include "cairn/extended/blocked_array.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cairn/persist.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::persist {
namespace {

using cairn::testing::TempDir;

struct Particle {
  Particle* next;
  double pos[3];
  std::uint64_t id;
};
static_assert(sizeof(Particle) == 40);

// The particle with index i in version v; `next` is set by the caller.
Particle make_particle(std::size_t i, std::uint64_t v) {
  Particle p;
  std::memset(&p, 0, sizeof p);  // padding-free, but keep the bytes defined anyway
  p.next = nullptr;
  p.id = v * 1'000'003 + i;
  for (int d = 0; d < 3; ++d) p.pos[d] = static_cast<double>(i) * 0.5 + d + static_cast<double>(v) / 8;
  return p;
}

// Links particle i to i + stride (wrapping), the last index to null: with a
// stride longer than a chunk, most links cross chunks.
std::size_t link_target(std::size_t i, std::size_t n, std::size_t stride) { return (i + stride) % n; }

class BlockedArrayTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Context> make(const std::string& name) {
    Options o;
    o.strategy = GetParam();
    o.name = name;
    o.dir = dir_.path();
    o.threads = 2;
    auto c = Context::create(o);
    if (!c.ok() && c.error().code == Errc::unsupported) return nullptr;
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(c.value()) : nullptr;
  }
  TempDir dir_;
};

#define MAKE_OR_FAIL(var, name) \
  auto var = make(name);        \
  if (!var) FAIL() << GetParam() << ": the registered factory built no strategy";

// Fills n particles of version v, linked with `stride`.
void fill(BlockedArray<Particle>& a, std::size_t n, std::uint64_t v, std::size_t stride) {
  a.clear();
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(a.push_back(make_particle(i, v)).ok());
  for (std::size_t i = 0; i + 1 < n; ++i) a[i].next = &a[link_target(i, n, stride)];
  a[n - 1].next = nullptr;
}

// Bit-exact comparison with what fill() wrote, pointers aimed at this array's elements.
void expect_contents(const BlockedArray<Particle>& a, std::size_t n, std::uint64_t v, std::size_t stride) {
  ASSERT_EQ(a.size(), n);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    Particle want = make_particle(i, v);
    want.next = i + 1 < n ? const_cast<Particle*>(&a[link_target(i, n, stride)]) : nullptr;
    if (std::memcmp(&a[i], &want, sizeof want) != 0 && bad++ < 5)
      ADD_FAILURE() << "particle " << i << " differs (next " << a[i].next << ", want " << want.next << ")";
  }
  EXPECT_EQ(bad, 0u);
}

// Chunks of 4 KiB (64 particles of 40 bytes) so that 900 particles span 15 of
// them while the per-element pointer records stay within every strategy's
// pointer table; a root pointer in another region points into the array.
TEST_P(BlockedArrayTest, LinkedParticlesWithRegisteredPointersSurviveRestore) {
  constexpr std::size_t kMax = 1000, kN = 900, kStride = 67, kChunk = 4096;
  {
    MAKE_OR_FAIL(ctx, "registered");
    auto a = BlockedArray<Particle>::create(*ctx, "particles", kMax, kChunk);
    ASSERT_TRUE(a.ok()) << a.error().message;
    auto* roots = ctx->region("roots", 2 * sizeof(Particle*)).value();
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_TRUE(a->attach().ok());
    EXPECT_EQ(a->elements_per_chunk(), 64u);
    EXPECT_EQ(a->chunk_count(), 16u);  // ceil(1000 / 64)
    EXPECT_EQ(a->chunk_capacity(15), 1000u - 15 * 64);
    EXPECT_EQ(a->chunk_region(0).bytes(), 64 * sizeof(Particle));
    EXPECT_EQ(a->chunk_region(15).bytes(), (1000 - 15 * 64) * sizeof(Particle));
    ASSERT_TRUE(a->register_pointers(&Particle::next).ok());
    auto** r = roots->as<Particle*>();
    ASSERT_TRUE(ctx->register_pointer(&r[0]).ok());
    ASSERT_TRUE(ctx->register_pointer(&r[1]).ok());

    ASSERT_TRUE(ctx->begin().ok());
    fill(*a, kN, 1, kStride);
    r[0] = &(*a)[kN / 2];
    r[1] = nullptr;
    auto c = ctx->commit();
    ASSERT_TRUE(c.ok()) << c.error().message;
    // Elements never move: addresses taken before the commit still hold.
    EXPECT_EQ(r[0], &(*a)[kN / 2]);
    EXPECT_EQ(a->chunk_size(14), 4u);  // 900 - 14 * 64
    EXPECT_EQ(a->chunk_size(15), 0u);
    for (std::size_t k = 0; k < a->chunk_count(); ++k) EXPECT_EQ(a->chunk_table()[k], a->chunk(k));

    // Uncommitted work: more particles and other links, then the "crash".
    ASSERT_TRUE(ctx->begin().ok());
    fill(*a, kN + 50, 2, 5);
  }
  MAKE_OR_FAIL(ctx, "registered");
  auto a = BlockedArray<Particle>::create(*ctx, "particles", kMax, kChunk);
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto* roots = ctx->region("roots", 2 * sizeof(Particle*)).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_TRUE(a->attach().ok());
  // Fresh memory (DRAM working sets), or the committed array found in place (NVM ones).
  EXPECT_TRUE(a->size() == 0 || a->size() == kN) << a->size();
  ASSERT_TRUE(a->register_pointers(&Particle::next).ok());
  auto** r = roots->as<Particle*>();
  ASSERT_TRUE(ctx->register_pointer(&r[0]).ok());
  ASSERT_TRUE(ctx->register_pointer(&r[1]).ok());
  auto v = ctx->restore();
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v.value(), 1u);
  ASSERT_TRUE(a->check().ok()) << a->check().error().message;
  expect_contents(*a, kN, 1, kStride);
  EXPECT_EQ(r[0], &(*a)[kN / 2]);
  EXPECT_EQ(r[1], nullptr);
  for (std::size_t k = 0; k < a->chunk_count(); ++k) EXPECT_EQ(a->chunk_table()[k], a->chunk(k));
  // The links form one chain, from the particle after the last one's slot to
  // the last: walking it visits every particle once.
  std::set<const Particle*> seen;
  for (const Particle* p = &(*a)[link_target(kN - 1, kN, kStride)]; p != nullptr && seen.size() <= kN; p = p->next)
    seen.insert(p);
  EXPECT_EQ(seen.size(), kN);
  // It keeps growing and committing.
  ASSERT_TRUE(ctx->begin().ok());
  ASSERT_TRUE(a->push_back(make_particle(kN, 1)).ok());
  (*a)[kN - 1].next = &(*a)[kN];
  EXPECT_EQ(ctx->commit().value(), 2u);
}

// Default 2 MiB chunks (32768 particles each) and 70000 particles over three
// of them: pointers are not registered one by one but relocated by the array.
TEST_P(BlockedArrayTest, DefaultChunksRelocateLinksAfterRestore) {
  constexpr std::size_t kMax = 100'000, kN = 70'000, kStride = 40'000;
  std::vector<const Particle*> first_run;  // chunk addresses when committed
  {
    MAKE_OR_FAIL(ctx, "relocated");
    auto a = BlockedArray<Particle>::create(*ctx, "particles", kMax);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_TRUE(a->attach().ok());
    EXPECT_EQ(a->elements_per_chunk(), 32768u);  // bit_floor(2 MiB / 40)
    EXPECT_EQ(a->chunk_count(), 4u);
    EXPECT_EQ(a->chunk_region(0).bytes(), 32768 * sizeof(Particle));
    EXPECT_EQ(a->chunk_region(3).bytes(), (kMax - 3 * 32768) * sizeof(Particle));
    EXPECT_LE(a->chunk_region(0).bytes(), kDefaultChunkBytes);
    ASSERT_TRUE(ctx->begin().ok());
    fill(*a, kN, 7, kStride);
    // The chunk holds consecutive elements: chunk(1)[5] is element 32773.
    EXPECT_EQ(&a->chunk(1)[5], &(*a)[32768 + 5]);
    auto c = ctx->commit();
    ASSERT_TRUE(c.ok()) << c.error().message;
    // In-process restore (shadow may remap regions): relocation is harmless.
    ASSERT_TRUE(ctx->restore().ok());
    auto again = a->relocate(&Particle::next);
    ASSERT_TRUE(again.ok()) << again.error().message;
    expect_contents(*a, kN, 7, kStride);
    for (std::size_t k = 0; k < a->chunk_count(); ++k) first_run.push_back(a->chunk(k));
  }
  MAKE_OR_FAIL(ctx, "relocated");
  auto a = BlockedArray<Particle>::create(*ctx, "particles", kMax);
  ASSERT_TRUE(a.ok());
  // Keep the first run's freed memory busy so that this run's chunks land elsewhere.
  std::vector<std::unique_ptr<std::byte[]>> hog;
  for (int i = 0; i < 4; ++i) hog.emplace_back(new std::byte[32768 * sizeof(Particle)]);
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_TRUE(a->attach().ok());
  auto v = ctx->restore();
  ASSERT_TRUE(v.ok()) << v.error().message;
  auto moved = a->relocate(&Particle::next);
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  // Every link whose target's chunk now lives elsewhere was rewritten.
  std::size_t want = 0;
  for (std::size_t i = 0; i + 1 < kN; ++i) {
    const std::size_t k = link_target(i, kN, kStride) / a->elements_per_chunk();
    want += a->chunk(k) != first_run[k];
  }
  EXPECT_EQ(moved.value(), want);
  expect_contents(*a, kN, 7, kStride);
  // A second relocate finds nothing to do.
  EXPECT_EQ(a->relocate(&Particle::next).value(), 0u);
  // Grow across the next chunk boundary and commit again.
  ASSERT_TRUE(ctx->begin().ok());
  ASSERT_TRUE(a->resize(98'400).ok());  // into chunk 3
  EXPECT_EQ((*a)[98'399].id, 0u);       // new elements are zero
  EXPECT_EQ(a->chunk_size(3), 98'400u - 3 * 32768);
  EXPECT_EQ(ctx->commit().value(), v.value() + 1);
}

INSTANTIATE_TEST_SUITE_P(blocked, BlockedArrayTest, ::testing::ValuesIn(strategy_names()), [](const auto& p) {
  std::string n = p.param;
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  return n;
});

// ---- errors (with dram-cache; the prefix "blocked" lets ctest -R select every test here) ----

class BlockedArrayErrors : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Context> make(const std::string& name) {
    Options o;
    o.strategy = GetParam();
    o.name = name;
    o.dir = dir_.path();
    return std::move(Context::create(o).value());
  }
  TempDir dir_;
};

TEST_P(BlockedArrayErrors, BadGeometryIsRefusedBeforeAnyRegistration) {
  auto ctx = make("geometry");
  auto zero = BlockedArray<Particle>::create(*ctx, "p", 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().code, Errc::invalid_argument);
  auto big = BlockedArray<Particle>::create(*ctx, "p", 10, 16);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("does not fit a chunk"), std::string::npos);
  auto longname = BlockedArray<Particle>::create(*ctx, std::string(44, 'x'), 10);
  ASSERT_FALSE(longname.ok());
  EXPECT_NE(longname.error().message.find("must be 1 to 42 characters"), std::string::npos) << longname.error().message;
  // Nothing was registered by the refused calls: the name is still free.
  auto ok = BlockedArray<Particle>::create(*ctx, "p", 10);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  auto twice = BlockedArray<Particle>::create(*ctx, "p", 10);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("registered twice"), std::string::npos);
}

TEST_P(BlockedArrayErrors, UsageErrors) {
  static Particle stray{};
  {
    auto ctx = make("usage");
    auto a = BlockedArray<Particle>::create(*ctx, "p", 3, 4096).value();
    auto late = BlockedArray<Particle>::create(*ctx, "q", 3, 4096).value();  // attached too late below
    EXPECT_EQ(a.attach().error().code, Errc::not_ready);                     // before open
    EXPECT_EQ(a.push_back(make_particle(0, 1)).error().code, Errc::not_ready);
    EXPECT_EQ(a.register_pointers(&Particle::next).error().code, Errc::not_ready);
    EXPECT_EQ(a.resize(1).error().code, Errc::not_ready);
    EXPECT_EQ(a.check().error().code, Errc::not_ready);
    EXPECT_EQ(a.size(), 0u);
    EXPECT_TRUE(a.chunk_table().empty());
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_TRUE(a.attach().ok());
    EXPECT_EQ(a.attach().error().code, Errc::invalid_argument);  // twice
    for (std::size_t i = 0; i < 3; ++i) ASSERT_TRUE(a.push_back(make_particle(i, 1)).ok());
    auto full = a.push_back(make_particle(3, 1));
    ASSERT_FALSE(full.ok());
    EXPECT_EQ(full.error().code, Errc::out_of_space);
    EXPECT_EQ(a.resize(4).error().code, Errc::out_of_space);
    EXPECT_EQ(a.size(), 3u);
    // A link to memory outside the array is committed as is (it is not
    // registered), and relocate() reports it after a restore.
    a[0].next = &stray;
    a[1].next = &a[2];
    ASSERT_TRUE(ctx->commit().ok());
    // Once a version exists, pointers are fixed: both refuse and change nothing.
    EXPECT_EQ(a.register_pointers(&Particle::next).error().code, Errc::invalid_argument);
    auto r = late.attach();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("before the first commit or restore"), std::string::npos) << r.error().message;
    EXPECT_EQ(a.size(), 3u);
  }
  auto ctx = make("usage");
  auto b = BlockedArray<Particle>::create(*ctx, "p", 3, 4096).value();
  auto late = BlockedArray<Particle>::create(*ctx, "q", 3, 4096).value();
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_TRUE(b.attach().ok());
  ASSERT_TRUE(ctx->restore().ok());
  ASSERT_TRUE(b.check().ok());
  EXPECT_EQ(b.size(), 3u);
  auto moved = b.relocate(&Particle::next);
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.error().code, Errc::invalid_argument);
  EXPECT_NE(moved.error().message.find("element 0"), std::string::npos) << moved.error().message;
  EXPECT_EQ(b[1].next, &b[2]);  // the good link was still rewritten
  EXPECT_EQ(b[0].next, &stray);
}

// An array of another element type whose regions have the same names and
// sizes passes the Context's layout check; check() and relocate() catch it.
struct Pair16 {
  std::uint64_t a, b;
};
struct Node32 {
  Node32* next;
  std::uint64_t pad[3];
};

TEST_P(BlockedArrayErrors, RestoreIntoAnotherElementTypeIsAMismatch) {
  {
    auto ctx = make("types");
    auto a = BlockedArray<Pair16>::create(*ctx, "arr", 512, 4096).value();  // 2 chunks of 256 x 16 bytes
    ASSERT_TRUE(ctx->open().ok());
    ASSERT_TRUE(a.attach().ok());
    ASSERT_TRUE(a.push_back({1, 2}).ok());
    ASSERT_TRUE(ctx->commit().ok());
  }
  auto ctx = make("types");
  auto b = BlockedArray<Node32>::create(*ctx, "arr", 256, 4096).value();  // 2 chunks of 128 x 32 bytes
  ASSERT_EQ(b.chunk_count(), 2u);
  ASSERT_TRUE(ctx->open().ok());
  ASSERT_TRUE(b.attach().ok());
  ASSERT_TRUE(b.check().ok());
  ASSERT_TRUE(ctx->restore().ok());
  auto r = b.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::layout_mismatch);
  EXPECT_NE(r.error().message.find("16"), std::string::npos) << r.error().message;
  EXPECT_EQ(b.relocate(&Node32::next).error().code, Errc::layout_mismatch);
}

INSTANTIATE_TEST_SUITE_P(blocked, BlockedArrayErrors, ::testing::Values("dram-cache"),
                         [](const auto&) { return std::string("dram_cache"); });

}  // namespace
}  // namespace cairn::persist
