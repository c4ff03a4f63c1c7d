// octree_test.cpp — PM-octree: meshing against a linear-octree reference,
// versions and copy-on-write, persist/restore, garbage collection, C0/C1,
// neighbours, faces, partition, VTK and bad input.
#include "cairn/octree.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "cairn/extended/device.hpp"
#include "cairn/extended/pool.hpp"
#include "octree/format.hpp"
#include "octree/internal.hpp"

namespace cairn::octree {
namespace {

namespace fs = std::filesystem;

std::string pool_path(const std::string& name) {
  const std::string dir = "/dev/shm/cairn-octree-test." + std::to_string(::getpid());
  fs::create_directories(dir);
  const std::string p = dir + "/" + name + ".pool";
  fs::remove(p);
  return p;
}

struct Cleanup {
  ~Cleanup() { fs::remove_all("/dev/shm/cairn-octree-test." + std::to_string(::getpid())); }
} cleanup;

Options opts(int dims, std::uint32_t data = 8) {
  Options o;
  o.dims = dims;
  o.data_size = data;
  o.pool_size = 64ull << 20;
  o.dram_budget = 16ull << 20;
  return o;
}

// Payload: the octant's own code, so a wrong payload shows.
void init_code(const Octant& o, std::byte* d, const std::byte*) {
  const std::uint64_t v = morton(o, 3);
  std::memcpy(d, &v, 8);
}

std::vector<Octant> leaves_of(const Octree& t) {
  std::vector<Octant> out;
  EXPECT_TRUE(t.visit_leaves([&](const Octant& o, const std::byte*) { out.push_back(o); }).ok());
  return out;
}

// ---- a linear octree: the sorted set of leaves, as the reference
struct Linear {
  int dims;
  std::map<std::uint64_t, Octant> leaves;  // by Morton order
  void add(const Octant& o) { leaves[morton(o, dims)] = o; }
  void refine(const Octant& o) {
    leaves.erase(morton(o, dims));
    for (int c = 0; c < (1 << dims); ++c) add(child_of(o, c));
  }
  const Octant* containing(std::uint32_t x, std::uint32_t y, std::uint32_t z) const {
    for (const auto& [m, o] : leaves) {
      const std::uint32_t l = o.length();
      if (x >= o.x && x < o.x + l && y >= o.y && y < o.y + l && (dims == 2 || (z >= o.z && z < o.z + l))) return &o;
    }
    return nullptr;
  }
  // Naive 2:1 balance across faces (full: faces, edges and corners): split
  // any leaf two levels coarser than a neighbour.
  void balance(bool full = false) {
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& [m, o] : leaves) {
        for (int dz = (dims == 3 ? -1 : 0); dz <= (dims == 3 ? 1 : 0) && !changed; ++dz)
          for (int dy = -1; dy <= 1 && !changed; ++dy)
            for (int dx = -1; dx <= 1 && !changed; ++dx) {
              const int d[3] = {dx, dy, dz};
              const int moves = (dx != 0) + (dy != 0) + (dz != 0);
              if (moves == 0 || (!full && moves != 1)) continue;
              std::int64_t p[3] = {o.x, o.y, o.z};
              bool inside = true;
              for (int a = 0; a < 3; ++a) {
                if (d[a] != 0) p[a] += d[a] < 0 ? -1 : static_cast<std::int64_t>(o.length());
                inside = inside && p[a] >= 0 && p[a] < static_cast<std::int64_t>(kRootLength);
              }
              if (!inside) continue;
              const Octant* n = containing(static_cast<std::uint32_t>(p[0]), static_cast<std::uint32_t>(p[1]),
                                           static_cast<std::uint32_t>(p[2]));
              if (n != nullptr && n->level < o.level - 1) {
                const Octant split = *n;
                refine(split);
                changed = true;
              }
            }
        if (changed) break;
      }
    }
  }
  std::vector<Octant> list() const {
    std::vector<Octant> v;
    for (const auto& [m, o] : leaves) v.push_back(o);
    return v;
  }
};

TEST(Octree, UniformTreesVisitLeavesInMortonOrder) {
  for (int dims : {2, 3}) {
    auto t = Octree::create(pool_path("uniform" + std::to_string(dims)), opts(dims));
    ASSERT_TRUE(t.ok()) << t.error().message;
    ASSERT_TRUE(t.value()->uniform(3, init_code).ok());
    const auto leaves = leaves_of(*t.value());
    ASSERT_EQ(leaves.size(), std::size_t{1} << (3 * dims));
    for (std::size_t i = 1; i < leaves.size(); ++i)
      EXPECT_LT(morton(leaves[i - 1], dims), morton(leaves[i], dims)) << i;
    EXPECT_EQ(leaves[1], (Octant{3, kRootLength / 8, 0, 0}));
    auto stats = t.value()->stats();
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats.value().leaves, leaves.size());
    EXPECT_EQ(stats.value().depth, 3);
  }
}

// Random refine / coarsen / balance sequences against the linear reference.
TEST(Octree, RandomMeshingMatchesALinearOctreeAndStaysBalanced) {
  for (int dims : {2, 3}) {
    auto tr = Octree::create(pool_path("random" + std::to_string(dims)), opts(dims));
    ASSERT_TRUE(tr.ok());
    Octree& t = *tr.value();
    Linear ref{dims, {}};
    ref.add(Octant{});
    std::mt19937_64 rng(42 + dims);
    for (int round = 0; round < 12; ++round) {
      const int op = static_cast<int>(rng() % 3);
      const std::uint64_t salt = rng();
      auto pick = [&](const Octant& o) { return (morton(o, dims) * 0x9E3779B97F4A7C15ull ^ salt) % 5 == 0; };
      if (op == 0 || round < 3) {
        std::vector<Octant> split;
        for (const Octant& o : ref.list())
          if (o.level < 7 && (o.level < 2 || pick(o))) split.push_back(o);
        ASSERT_TRUE(t.refine(
                         false,
                         [&](const Octant& o, const std::byte*) { return o.level < 7 && (o.level < 2 || pick(o)); },
                         init_code)
                        .ok());
        for (const Octant& o : split) ref.refine(o);
      } else if (op == 1) {
        std::set<std::uint64_t> merged;
        ASSERT_TRUE(t.coarsen(
                         false,
                         [&](const Octant& p, std::span<const LeafView> fam) {
                           EXPECT_EQ(fam.size(), std::size_t{1} << dims);
                           if (!pick(p)) return false;
                           merged.insert(morton(p, dims));
                           return true;
                         },
                         nullptr)
                        .ok());
        for (const std::uint64_t m : merged) {
          // The parent of a merged family: drop its children, add it.
          Octant p{};
          for (const auto& [k, o] : ref.leaves)
            if (o.level > 0 && morton(parent_of(o), dims) == m) {
              p = parent_of(o);
              break;
            }
          for (int c = 0; c < (1 << dims); ++c) ref.leaves.erase(morton(child_of(p, c), dims));
          ref.add(p);
        }
      } else {
        ASSERT_TRUE(t.balance(Connect::face, init_code).ok());
        ref.balance();
      }
      const auto got = leaves_of(t);
      const auto want = ref.list();
      ASSERT_EQ(got.size(), want.size()) << "dims " << dims << " round " << round << " op " << op;
      for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
    }
    ASSERT_TRUE(t.balance(Connect::face, init_code).ok());
    ref.balance();
    EXPECT_EQ(leaves_of(t).size(), ref.list().size());
    // 2:1 across faces: every face neighbour is at most one level coarser.
    for (const Octant& o : leaves_of(t))
      for (int axis = 0; axis < dims; ++axis)
        for (int side : {-1, 1}) {
          int dir[3] = {0, 0, 0};
          dir[axis] = side;
          auto nb = t.neighbours(o, dir);
          ASSERT_TRUE(nb.ok());
          for (const LeafView& n : nb.value()) EXPECT_LE(std::abs(n.octant.level - o.level), 1);
        }
  }
}

TEST(Octree, FullBalanceAlsoBalancesCorners) {
  auto tr = Octree::create(pool_path("full"), opts(2));
  ASSERT_TRUE(tr.ok());
  Octree& t = *tr.value();
  ASSERT_TRUE(t.uniform(2, nullptr).ok());
  // Refine deep into the corner at the centre, (0.5 - eps, 0.5 - eps).
  const std::uint32_t c = kRootLength / 2 - 1;
  ASSERT_TRUE(t.refine(
                   true,
                   [&](const Octant& o, const std::byte*) {
                     return o.x <= c && c < o.x + o.length() && o.y <= c && c < o.y + o.length();
                   },
                   nullptr, 6)
                  .ok());
  ASSERT_TRUE(t.balance(Connect::face, nullptr).ok());
  const auto face = leaves_of(t).size();
  ASSERT_TRUE(t.balance(Connect::full, nullptr).ok());
  const auto leaves = leaves_of(t);
  EXPECT_GT(leaves.size(), face);  // the diagonal neighbour needed splitting too
  for (const Octant& o : leaves)
    for (int dx = -1; dx <= 1; ++dx)
      for (int dy = -1; dy <= 1; ++dy) {
        if (dx == 0 && dy == 0) continue;
        const int dir[3] = {dx, dy, 0};
        auto nb = t.neighbours(o, dir);
        ASSERT_TRUE(nb.ok());
        for (const LeafView& n : nb.value()) EXPECT_LE(std::abs(n.octant.level - o.level), 1);
      }
}

// Full balance checks 2^d - 1 of the 3^d - 1 directions per octant (those
// that leave its parent along every axis they move on): it must still give
// the naive reference's leaves, which tries every direction of every leaf.
TEST(Octree, FullBalanceMatchesTheNaiveReferenceThatTriesEveryDirection) {
  for (int dims : {2, 3}) {
    for (std::uint64_t seed = 1; seed <= 2; ++seed) {
      auto tr = Octree::create(pool_path("fullref" + std::to_string(dims) + "-" + std::to_string(seed)), opts(dims));
      ASSERT_TRUE(tr.ok());
      Octree& t = *tr.value();
      Linear ref{dims, {}};
      ref.add(Octant{});
      std::mt19937_64 rng(seed * 7 + static_cast<std::uint64_t>(dims));
      // A few deep spikes into random points: corners and edges meet coarse leaves.
      for (int spike = 0; spike < 3; ++spike) {
        const std::uint32_t px = static_cast<std::uint32_t>(rng() % kRootLength);
        const std::uint32_t py = static_cast<std::uint32_t>(rng() % kRootLength);
        const std::uint32_t pz = dims == 3 ? static_cast<std::uint32_t>(rng() % kRootLength) : 0;
        const auto hit = [&](const Octant& o) {
          const std::uint32_t l = o.length();
          return o.level < 6 && px >= o.x && px - o.x < l && py >= o.y && py - o.y < l &&
                 (dims == 2 || (pz >= o.z && pz - o.z < l));
        };
        for (bool more = true; more;) {
          more = false;
          for (const Octant& o : ref.list())
            if (hit(o)) {
              ref.refine(o);
              more = true;
            }
        }
        ASSERT_TRUE(t.refine(
                         true, [&](const Octant& o, const std::byte*) { return hit(o); }, init_code)
                        .ok());
      }
      ASSERT_EQ(leaves_of(t), ref.list());
      ASSERT_TRUE(t.balance(Connect::full, init_code).ok());
      ref.balance(true);
      const auto got = leaves_of(t);
      const auto want = ref.list();
      ASSERT_EQ(got.size(), want.size()) << "dims " << dims << " seed " << seed;
      for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
    }
  }
}

// Every leaf of the flat iteration, as (octant, payload pointer).
std::vector<std::pair<Octant, const std::byte*>> flat_leaves(const Octree& t, std::size_t* batches = nullptr) {
  std::vector<std::pair<Octant, const std::byte*>> out;
  auto c = t.leaves();
  for (std::size_t n = 0;; ++n) {
    auto b = c.next();
    EXPECT_TRUE(b.ok()) << b.error().message;
    if (!b.ok() || b.value().empty()) {
      if (batches != nullptr) *batches = n;
      return out;
    }
    for (const LeafView& l : b.value()) out.emplace_back(l.octant, l.data);
  }
}

std::vector<std::pair<Octant, const std::byte*>> visited_leaves(const Octree& t) {
  std::vector<std::pair<Octant, const std::byte*>> out;
  EXPECT_TRUE(t.visit_leaves([&](const Octant& o, const std::byte* d) { out.emplace_back(o, d); }).ok());
  return out;
}

// Writes f(octant) into every payload through the bulk writer.
template <class F>
Result<void> write_all(Octree& t, const F& f) {
  auto w = t.write_leaves();
  for (;;) {
    auto b = w.next();
    if (!b.ok()) return b.error();
    if (b.value().empty()) return {};
    for (const WritableLeaf& l : b.value()) f(l.octant, l.data);
  }
}

void stamp(const Octant& o, std::byte* d) {
  const std::uint64_t v = morton(o, 3) * 31 + static_cast<std::uint64_t>(o.level) + 7;
  std::memcpy(d, &v, 8);
}

// Stamps every payload, per leaf (update_leaves) or through the bulk writer.
Result<void> stamp_all(Octree& t, bool bulk) {
  if (bulk) return write_all(t, stamp);
  return t.update_leaves([](const Octant& q, std::byte* d) {
    stamp(q, d);
    return true;
  });
}

// A tree whose working version mixes every kind of block: shared pool
// blocks of the committed version, private pool blocks, C0 blocks with and
// without twins (budget 0: pool blocks only).
void mixed_tree(Octree& t) {
  ASSERT_TRUE(t.uniform(2, init_code).ok());
  ASSERT_TRUE(
      t.refine(
           true, [](const Octant& o, const std::byte*) { return o.level < 5 && o.x < kRootLength / 4; }, init_code)
          .ok());
  ASSERT_TRUE(t.balance(Connect::face, init_code).ok());
  ASSERT_TRUE(t.persist().ok());
  ASSERT_TRUE(t.refine(
                   true,
                   [&](const Octant& o, const std::byte*) {
                     return o.level < 6 && o.y >= kRootLength / 2 && o.y < kRootLength / 2 + kRootLength / 8;
                   },
                   init_code)
                  .ok());
  ASSERT_TRUE(t.update_leaves([](const Octant& o, std::byte* d) {
                 d[1] = static_cast<std::byte>(o.level);
                 return o.x % (kRootLength / 8) == 0;
               }).ok());
}

TEST(Octree, FlatIterationHandsOutTheLeavesOfVisitLeavesInTheSameOrder) {
  for (int dims : {2, 3})
    for (const std::uint64_t budget : {std::uint64_t{0}, std::uint64_t{16} << 20}) {
      const std::string name = "flat" + std::to_string(dims) + "-" + std::to_string(budget);
      Options o = opts(dims);
      o.dram_budget = budget;
      const std::string path = pool_path(name);
      std::uint64_t sum = 0;
      {
        auto tr = Octree::create(path, o);
        ASSERT_TRUE(tr.ok());
        Octree& t = *tr.value();
        mixed_tree(t);
        std::size_t batches = 0;
        const auto flat = flat_leaves(t, &batches);
        const auto visited = visited_leaves(t);
        ASSERT_GT(flat.size(), 3 * LeafCursor::kBatch);
        EXPECT_EQ(flat.size(), t.leaf_count().value());
        EXPECT_EQ(batches, (flat.size() + LeafCursor::kBatch - 1) / LeafCursor::kBatch);  // full batches but the last
        EXPECT_TRUE(flat == visited) << name;  // the same octants and payloads, in the same order
        ASSERT_TRUE(t.persist().ok());
        sum = t.checksum().value();
        // A tree of one leaf: one batch of one.
        auto single = Octree::create(pool_path(name + "-single"), o);
        ASSERT_TRUE(single.ok());
        const auto one = flat_leaves(*single.value());
        ASSERT_EQ(one.size(), 1u);
        EXPECT_EQ(one[0].first, Octant{});
        EXPECT_EQ(one[0].second, single.value()->root_data());
      }
      // Restored: every block in the pool, each checked the first time a walk reaches it.
      auto back = Octree::restore(path, o);
      ASSERT_TRUE(back.ok()) << back.error().message;
      const auto flat = flat_leaves(*back.value());
      EXPECT_TRUE(flat == visited_leaves(*back.value()));
      EXPECT_EQ(back.value()->checksum().value(), sum);
    }
}

// Every leaf of LeafOrder::memory, sorted by (Morton position, level) with
// its payload pointer; checks that no batch is empty before the end or
// longer than kBatch.
std::vector<std::pair<Octant, const std::byte*>> memory_leaves(const Octree& t) {
  std::vector<std::pair<Octant, const std::byte*>> out;
  auto c = t.leaves(LeafOrder::memory);
  for (;;) {
    auto b = c.next();
    EXPECT_TRUE(b.ok()) << b.error().message;
    if (!b.ok() || b.value().empty()) break;
    EXPECT_LE(b.value().size(), LeafCursor::kBatch);
    for (const LeafView& l : b.value()) out.emplace_back(l.octant, l.data);
  }
  const int dims = t.dims();
  std::sort(out.begin(), out.end(), [dims](const auto& a, const auto& b) {
    return std::pair(morton(a.first, dims), a.first.level) < std::pair(morton(b.first, dims), b.first.level);
  });
  return out;
}

// LeafOrder::memory hands out the leaves of the Morton order, each once,
// with the same payload pointers, wherever their blocks live: DRAM blocks
// with and without twins, pool blocks of this generation (among them freed
// and handed out again), shared pool blocks of the committed version, C0
// merged into the pool under a small budget, and a restored tree before and
// after its first change.
TEST(Octree, MemoryOrderHandsOutEveryLeafOfTheMortonOrderOnce) {
  for (int dims : {2, 3})
    for (const std::uint64_t budget : {std::uint64_t{0}, std::uint64_t{100} << 10, std::uint64_t{16} << 20}) {
      const std::string name = "memory" + std::to_string(dims) + "-" + std::to_string(budget);
      Options o = opts(dims);
      o.dram_budget = budget;
      const std::string path = pool_path(name);
      {
        auto tr = Octree::create(path, o);
        ASSERT_TRUE(tr.ok());
        Octree& t = *tr.value();
        // Before any persist (every block of this generation).
        ASSERT_TRUE(t.uniform(3, init_code).ok());
        EXPECT_TRUE(memory_leaves(t) == flat_leaves(t)) << name;
        mixed_tree(t);
        const auto flat = flat_leaves(t);
        ASSERT_GT(flat.size(), 3 * LeafCursor::kBatch);
        EXPECT_TRUE(memory_leaves(t) == flat) << name;
        // Coarsen some families and refine again in the same generation:
        // freed blocks, and blocks handed out twice in one dirty list.
        ASSERT_TRUE(
            t.coarsen(
                 false, [](const Octant& q, std::span<const LeafView>) { return q.level >= 4 && q.z == 0; }, nullptr)
                .ok());
        EXPECT_TRUE(memory_leaves(t) == flat_leaves(t)) << name << " coarsened";
        ASSERT_TRUE(t.refine(
                         false, [](const Octant& q, const std::byte*) { return q.level == 3 && q.z == 0; }, init_code)
                        .ok());
        EXPECT_TRUE(memory_leaves(t) == flat_leaves(t)) << name << " refined again";
        EXPECT_TRUE(t.verify().ok());
        ASSERT_TRUE(t.persist().ok());
        EXPECT_TRUE(memory_leaves(t) == flat_leaves(t)) << name << " persisted";
      }
      auto back = Octree::restore(path, o);
      ASSERT_TRUE(back.ok()) << back.error().message;
      Octree& t = *back.value();
      EXPECT_TRUE(memory_leaves(t) == flat_leaves(t)) << name << " restored";
      // The first change after restore: a path of this generation above
      // shared subtrees of the committed version.
      ASSERT_TRUE(
          t.refine(
               false, [](const Octant& q, const std::byte*) { return q.level < 6 && q.x == 0 && q.y == 0; }, init_code)
              .ok());
      EXPECT_TRUE(memory_leaves(t) == flat_leaves(t)) << name << " restored and refined";
    }
}

// The memory-order writer against the Morton-order writer on identical
// trees (every block shared with the committed version first): every
// payload written once, the same checksum before and after persist and
// restore, the same blocks written by the persist, C0 within its budget.
TEST(Octree, MemoryOrderWriterWritesEveryPayloadOnceAsTheMortonWriter) {
  for (int dims : {2, 3})
    for (const std::uint64_t budget : {std::uint64_t{0}, std::uint64_t{100} << 10, std::uint64_t{16} << 20}) {
      const std::string name = "memwrite" + std::to_string(dims) + "-" + std::to_string(budget);
      Options o = opts(dims);
      o.dram_budget = budget;
      std::uint64_t sums[2] = {0, 0}, written[2] = {0, 0};
      const std::string paths[2] = {pool_path(name + "-0"), pool_path(name + "-1")};
      for (int i = 0; i < 2; ++i) {
        auto tr = Octree::create(paths[i], o);
        ASSERT_TRUE(tr.ok());
        Octree& t = *tr.value();
        mixed_tree(t);
        ASSERT_TRUE(t.persist().ok());
        // One version with C0 blocks, pool blocks of this generation and
        // shared ones: a few payloads changed per leaf first.
        ASSERT_TRUE(t.update_leaves([](const Octant& q, std::byte* d) {
                       d[2] = static_cast<std::byte>(5);
                       return q.y == 0;
                     }).ok());
        const std::uint64_t leaves = t.leaf_count().value();
        // Adds 1 to the first word and counts the leaves written.
        std::uint64_t count = 0;
        auto w = t.write_leaves(i == 0 ? LeafOrder::morton : LeafOrder::memory);
        for (;;) {
          auto b = w.next();
          ASSERT_TRUE(b.ok()) << b.error().message;
          if (b.value().empty()) break;
          for (const WritableLeaf& l : b.value()) {
            std::uint64_t v;
            std::memcpy(&v, l.data, 8);
            ++v;
            std::memcpy(l.data, &v, 8);
            ++count;
          }
        }
        EXPECT_EQ(count, leaves) << name;
        const Stats st = t.stats().value();
        if (budget > 0) {
          EXPECT_LE(st.dram_bytes, budget + 64 * st.block_bytes) << name;
        }
        EXPECT_TRUE(t.verify().ok());
        const std::uint64_t before = t.checksum().value();
        auto ps = t.persist();
        ASSERT_TRUE(ps.ok());
        written[i] = ps.value().blocks_written;
        sums[i] = t.checksum().value();
        EXPECT_EQ(sums[i], before);
      }
      EXPECT_EQ(sums[0], sums[1]) << name;         // every payload written once, by both
      if (budget != (std::uint64_t{100} << 10)) {  // (C0 merges differ: the memory writer copies into C1)
        EXPECT_EQ(written[0], written[1]) << name;
      }
      for (int i = 0; i < 2; ++i) {
        auto back = Octree::restore(paths[i], o);
        ASSERT_TRUE(back.ok());
        EXPECT_EQ(back.value()->checksum().value(), sums[0]);
        EXPECT_TRUE(back.value()->verify().ok());
      }
    }
}

// The bulk writer against per-leaf updates on an identical tree: the same
// leaves, the same checksum before and after persist + restore, the same
// blocks copied (the persist then writes each block once).
TEST(Octree, BulkWriterGivesWhatPerLeafUpdatesGiveThroughPersistAndRestore) {
  for (int dims : {2, 3})
    for (const std::uint64_t budget : {std::uint64_t{0}, std::uint64_t{16} << 20}) {
      const std::string name = "bulk" + std::to_string(dims) + "-" + std::to_string(budget);
      Options o = opts(dims);
      o.dram_budget = budget;
      std::uint64_t sums[2] = {0, 0}, shared[2] = {0, 0}, written_blocks[2] = {0, 0};
      const std::string paths[2] = {pool_path(name + "-0"), pool_path(name + "-1")};
      for (int i = 0; i < 2; ++i) {
        auto tr = Octree::create(paths[i], o);
        ASSERT_TRUE(tr.ok());
        Octree& t = *tr.value();
        mixed_tree(t);
        ASSERT_TRUE(t.persist().ok());  // every block shared with the committed version
        const Stats before = t.stats().value();
        ASSERT_GT(before.shared_bytes, 0u);
        ASSERT_TRUE(stamp_all(t, i == 1).ok());
        const Stats after = t.stats().value();
        EXPECT_EQ(after.blocks, before.blocks);
        EXPECT_EQ(after.leaves, before.leaves);
        EXPECT_LT(after.shared_bytes, before.shared_bytes / 4);  // the blocks holding leaves, and their paths, copied
        shared[i] = after.shared_bytes;
        EXPECT_TRUE(t.verify().ok());
        const std::uint64_t written = t.checksum().value();
        auto ps = t.persist();
        ASSERT_TRUE(ps.ok());
        EXPECT_EQ(ps.value().blocks_written, after.blocks);  // each block once
        written_blocks[i] = ps.value().blocks_written;
        sums[i] = t.checksum().value();
        EXPECT_EQ(sums[i], written);
      }
      EXPECT_EQ(sums[0], sums[1]) << name;
      EXPECT_EQ(shared[0], shared[1]) << name;  // the same blocks copied
      EXPECT_EQ(written_blocks[0], written_blocks[1]) << name;
      for (int i = 0; i < 2; ++i) {
        auto back = Octree::restore(paths[i], o);
        ASSERT_TRUE(back.ok());
        EXPECT_EQ(back.value()->checksum().value(), sums[0]);
        EXPECT_TRUE(back.value()->verify().ok());
      }
    }
}

// The writer copies blocks into C0 past a small DRAM budget: merges run
// between batches, and the tree is the one per-leaf updates give.
TEST(Octree, BulkWriterMergesC0BetweenBatchesAndComputesTheSameTree) {
  std::uint64_t sums[2] = {0, 0};
  std::uint64_t merges[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    Options o = opts(3);
    o.dram_budget = 100 * 1024;
    auto tr = Octree::create(pool_path("bulk-merge" + std::to_string(i)), o);
    ASSERT_TRUE(tr.ok());
    Octree& t = *tr.value();
    ASSERT_TRUE(t.uniform(3, init_code).ok());
    ASSERT_TRUE(
        t.refine(
             true, [](const Octant& oc, const std::byte*) { return oc.level < 5 && oc.x < kRootLength / 2; }, init_code)
            .ok());
    ASSERT_TRUE(t.persist().ok());
    const std::uint64_t m0 = t.stats().value().merges;
    ASSERT_TRUE(stamp_all(t, i == 1).ok());
    const Stats st = t.stats().value();
    merges[i] = st.merges - m0;
    EXPECT_LE(st.dram_bytes, o.dram_budget + 64 * st.block_bytes);
    EXPECT_TRUE(t.verify().ok());
    ASSERT_TRUE(t.persist().ok());
    sums[i] = t.checksum().value();
  }
  EXPECT_GT(merges[1], 0u);
  EXPECT_EQ(sums[0], sums[1]);
}

TEST(Octree, PersistRestoreGivesThePersistedTreeBitForBit) {
  const std::string path = pool_path("restore");
  std::uint64_t persisted = 0;
  {
    auto tr = Octree::create(path, opts(3));
    ASSERT_TRUE(tr.ok());
    Octree& t = *tr.value();
    ASSERT_TRUE(t.uniform(3, init_code).ok());
    ASSERT_TRUE(t.refine(
                     true, [](const Octant& o, const std::byte*) { return o.x == 0 && o.level < 6; }, init_code)
                    .ok());
    auto ps = t.persist();
    ASSERT_TRUE(ps.ok()) << ps.error().message;
    EXPECT_EQ(ps.value().version, 1u);
    persisted = t.checksum().value();
    // Changes after the persist are lost by the "crash" (the object dies without persisting).
    ASSERT_TRUE(t.refine(
                     false, [](const Octant& o, const std::byte*) { return o.y == 0; }, init_code)
                    .ok());
    ASSERT_NE(t.checksum().value(), persisted);
  }
  auto tr = Octree::restore(path, opts(3));
  ASSERT_TRUE(tr.ok()) << tr.error().message;
  EXPECT_EQ(tr.value()->version(), 1u);
  EXPECT_EQ(tr.value()->checksum().value(), persisted);
  // It continues: change, persist, restore again.
  ASSERT_TRUE(tr.value()
                  ->update_leaves([](const Octant& o, std::byte* d) {
                    if (o.z != 0) return false;
                    d[0] = std::byte{7};
                    return true;
                  })
                  .ok());
  ASSERT_TRUE(tr.value()->persist().ok());
  const std::uint64_t second = tr.value()->checksum().value();
  tr.value().reset();
  auto again = Octree::restore(path, opts(3));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value()->version(), 2u);
  EXPECT_EQ(again.value()->checksum().value(), second);
}

TEST(Octree, ChangingOneLeafCopiesOnlyItsPathAndSharesTheRest) {
  Options o = opts(3);
  o.dram_budget = 0;  // every block in the pool: blocks_written counts copies exactly
  auto tr = Octree::create(pool_path("cow"), o);
  ASSERT_TRUE(tr.ok());
  Octree& t = *tr.value();
  ASSERT_TRUE(t.uniform(4, init_code).ok());  // 4096 leaves, 586 blocks
  auto first = t.persist();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.value().blocks_written, 1u + 1 + 8 + 64 + 512);
  const std::uint64_t before = t.checksum().value();
  // Change one leaf: the blocks from the root to it are copied (5), nothing else.
  ASSERT_TRUE(t.update_leaves([](const Octant& oc, std::byte* d) {
                 if (oc.x != 0 || oc.y != 0 || oc.z != 0) return false;
                 d[1] = std::byte{0x5A};
                 return true;
               }).ok());
  auto st = t.stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value().blocks, 586u);
  EXPECT_EQ(st.value().shared_bytes, (586u - 5) * st.value().block_bytes);
  EXPECT_EQ(st.value().nvm_bytes, (586u + 5) * st.value().block_bytes);
  auto second = t.persist();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.value().blocks_written, 5u);
  EXPECT_NE(t.checksum().value(), before);
  // Reading changes nothing and copies nothing.
  ASSERT_TRUE(t.update_leaves([](const Octant&, std::byte*) { return false; }).ok());
  EXPECT_EQ(t.persist().value().blocks_written, 0u);
}

// Persisting costs what changed, not the tree (seed 000's claim), wherever
// the blocks live: C0 blocks keep their pool twins over commits, and the
// commit must not walk every one of them to find the few that changed. The
// same leaves change in two trees 8x apart; the blocks the commit visits
// may differ by the one level the larger tree adds to each changed path,
// never by the tree's size. Counts, not times.
TEST(Octree, PersistWorkFollowsWhatChangedNotTheTreeSize) {
  // The leaves that change: the same anchors at both sizes.
  const std::uint32_t h = kRootLength / 2, q = kRootLength / 4;
  const std::set<std::array<std::uint32_t, 3>> anchors{{0, 0, 0}, {h, 0, q}, {q, h, h}};
  constexpr std::uint64_t kChanged = 3;
  struct Run {
    std::uint64_t blocks = 0, visited = 0, written = 0, idle_visited = 0;
  };
  const auto run = [&](int level, std::uint64_t budget, std::uint8_t round) {
    Run out;
    Options o = opts(3);
    o.dram_budget = budget;
    const std::string path = pool_path("work" + std::to_string(level) + "-" + std::to_string(budget));
    auto tr = Octree::create(path, o);
    EXPECT_TRUE(tr.ok());
    if (!tr.ok()) return out;
    Octree& t = *tr.value();
    EXPECT_TRUE(t.uniform(level, init_code).ok());
    auto first = t.persist();
    EXPECT_TRUE(first.ok());
    out.blocks = t.stats().value().blocks;
    EXPECT_GE(first.value().blocks_visited, out.blocks);  // the first persist sees every block
    // Twice: the second change finds every block with its twin.
    for (std::uint8_t k = 0; k < 2; ++k) {
      std::uint64_t changed = 0;
      EXPECT_TRUE(t.update_leaves([&](const Octant& oc, std::byte* d) {
                     if (!anchors.count({oc.x, oc.y, oc.z})) return false;
                     d[3] = std::byte{static_cast<std::uint8_t>(round + k)};
                     ++changed;
                     return true;
                   }).ok());
      EXPECT_EQ(changed, kChanged);
      auto ps = t.persist();
      EXPECT_TRUE(ps.ok());
      out.visited = ps.value().blocks_visited;
      out.written = ps.value().blocks_written;
    }
    // Nothing changed: the root block only.
    out.idle_visited = t.persist().value().blocks_visited;
    // What was committed is the working tree.
    const std::uint64_t sum = t.checksum().value();
    EXPECT_TRUE(t.verify().ok());
    tr.value().reset();
    auto back = Octree::restore(path, o);
    EXPECT_TRUE(back.ok());
    if (back.ok()) {
      EXPECT_EQ(back.value()->checksum().value(), sum);
    }
    return out;
  };
  // All in C0 (the budget holds both trees), and all in the pool (C1).
  for (const std::uint64_t budget : {std::uint64_t{16} << 20, std::uint64_t{0}}) {
    SCOPED_TRACE("dram_budget " + std::to_string(budget));
    const Run small = run(4, budget, 1), large = run(5, budget, 1);
    ASSERT_GT(large.blocks, 7 * small.blocks);
    // Each changed leaf's path from the root: one block per level.
    EXPECT_LE(small.visited, 1 + kChanged * 5);
    EXPECT_LE(large.visited, small.visited + kChanged);
    EXPECT_LE(large.written, small.written + kChanged);
    EXPECT_EQ(small.idle_visited, 1u);
    EXPECT_EQ(large.idle_visited, 1u);
  }
}

// ---- an application's own tree, for follow(): a node per octant.
struct AppNode {
  std::uint64_t value = 0;
  std::unique_ptr<AppNode[]> kids;  // 2^d children, or none (a leaf)
};

AppNode* app_find(AppNode* root, const Octant& o) {
  AppNode* n = root;
  for (int l = 1; l <= o.level && n != nullptr; ++l) {
    if (!n->kids) return nullptr;
    const int shift = kMaxLevel - l;
    const int k = static_cast<int>(((o.x >> shift) & 1u) | (((o.y >> shift) & 1u) << 1) | (((o.z >> shift) & 1u) << 2));
    n = &n->kids[static_cast<std::size_t>(k)];
  }
  return n;
}

// One step of a random adaptive mesh: leaves refine, families of leaves
// coarsen, whole subtrees vanish, values change.
void app_step(AppNode& n, int level, int fan, int max_level, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  if (!n.kids) {
    if (level < max_level && u(rng) < 0.25) {
      n.kids = std::make_unique<AppNode[]>(static_cast<std::size_t>(fan));
      for (int k = 0; k < fan; ++k) n.kids[static_cast<std::size_t>(k)].value = rng();
    } else if (u(rng) < 0.3) {
      n.value = rng();
    }
    return;
  }
  if (level >= 1 && u(rng) < 0.04) {  // a subtree of any depth goes at once
    n.kids.reset();
    n.value = rng();
    return;
  }
  for (int k = 0; k < fan; ++k) app_step(n.kids[static_cast<std::size_t>(k)], level + 1, fan, max_level, rng);
  bool leaves = true;
  for (int k = 0; k < fan; ++k) leaves = leaves && !n.kids[static_cast<std::size_t>(k)].kids;
  if (leaves && u(rng) < 0.15) n.kids.reset();
}

Octree::Follow app_follow(int fan) {
  Octree::Follow f;
  f.children = [fan](const Octant&, const void* h, const void** out) {
    const auto* n = static_cast<const AppNode*>(h);
    if (!n->kids) return false;
    for (int k = 0; k < fan; ++k) out[k] = &n->kids[static_cast<std::size_t>(k)];
    return true;
  };
  f.init = [](const Octant&, std::byte* d, const std::byte*) { std::memset(d, 0xEE, 8); };
  f.update = [](const Octant&, const void* h, std::byte* d) {
    const std::uint64_t v = static_cast<const AppNode*>(h)->value;
    if (std::memcmp(d, &v, 8) == 0) return false;
    std::memcpy(d, &v, 8);
    return true;
  };
  return f;
}

TEST(Octree, FollowGivesWhatRefineCoarsenAndUpdateGiveInOneTraversal) {
  for (int dims : {2, 3}) {
    for (std::uint64_t budget : {std::uint64_t{0}, std::uint64_t{16} << 20, std::uint64_t{64} << 10}) {
      SCOPED_TRACE("dims " + std::to_string(dims) + ", dram budget " + std::to_string(budget));
      const int fan = 1 << dims;
      const int max_level = dims == 2 ? 8 : 5;
      Options o = opts(dims);
      o.dram_budget = budget;
      const std::string path = pool_path("follow" + std::to_string(dims) + "_" + std::to_string(budget));
      auto fa = Octree::create(path, o);
      auto fb = Octree::create(pool_path("follow_ref"), o);
      ASSERT_TRUE(fa.ok() && fb.ok());
      Octree& a = *fa.value();
      Octree& b = *fb.value();
      AppNode app;
      std::mt19937_64 rng(42 + static_cast<unsigned>(dims));
      const auto fns = app_follow(fan);
      std::uint64_t leaves_seen = 0;
      for (int step = 0; step < 25; ++step) {
        app_step(app, 0, fan, max_level, rng);
        ASSERT_TRUE(a.follow(&app, fns).ok());
        // The same through the three separate operations.
        ASSERT_TRUE(b.refine(
                         true,
                         [&](const Octant& q, const std::byte*) {
                           const AppNode* n = app_find(&app, q);
                           return n != nullptr && n->kids != nullptr;
                         },
                         fns.init)
                        .ok());
        ASSERT_TRUE(b.coarsen(
                         true,
                         [&](const Octant& q, std::span<const LeafView>) {
                           const AppNode* n = app_find(&app, q);
                           return n == nullptr || !n->kids;
                         },
                         nullptr)
                        .ok());
        ASSERT_TRUE(
            b.update_leaves([&](const Octant& q, std::byte* d) { return fns.update(q, app_find(&app, q), d); }).ok());
        const std::uint64_t sum = a.checksum().value();
        ASSERT_EQ(sum, b.checksum().value()) << "step " << step;
        leaves_seen += a.leaf_count().value();
        if (step % 3 == 2) continue;  // some steps follow twice before a persist
        ASSERT_TRUE(a.persist().ok());
        ASSERT_TRUE(b.persist().ok());
        // Following an unchanged tree writes what reading it writes: nothing
        // with every block in the pool.
        ASSERT_TRUE(a.follow(&app, fns).ok());
        ASSERT_TRUE(
            b.update_leaves([&](const Octant& q, std::byte* d) { return fns.update(q, app_find(&app, q), d); }).ok());
        const std::uint64_t written = a.persist().value().blocks_written;
        EXPECT_EQ(written, b.persist().value().blocks_written) << "step " << step;
        if (budget == 0) {
          EXPECT_EQ(written, 0u) << "step " << step;
        }
      }
      EXPECT_GT(leaves_seen, 25u * 100);  // the mesh really adapted
      ASSERT_TRUE(a.verify().ok());
      const std::uint64_t last = a.checksum().value();
      fa.value().reset();
      Options r = o;
      r.background_gc = false;
      auto back = Octree::restore(path, r);
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(back.value()->checksum().value(), last);
      ASSERT_TRUE(back.value()->verify().ok());
    }
  }
}

TEST(Octree, FollowFreesTheBlocksOfASubtreeItDropsInTheSameVersion) {
  Options o = opts(3);
  o.dram_budget = 0;  // every block in the pool: freed blocks go to the free list
  auto tr = Octree::create(pool_path("follow_free"), o);
  ASSERT_TRUE(tr.ok());
  Octree& t = *tr.value();
  const auto fns = app_follow(8);
  AppNode app;
  ASSERT_TRUE(t.follow(&app, fns).ok());
  ASSERT_TRUE(t.persist().ok());
  // Three levels below the root's first child: 1 + 8 + 64 family blocks.
  app.kids = std::make_unique<AppNode[]>(8);
  std::function<void(AppNode&, int)> grow = [&](AppNode& n, int levels) {
    if (levels == 0) return;
    n.kids = std::make_unique<AppNode[]>(8);
    for (int k = 0; k < 8; ++k) grow(n.kids[static_cast<std::size_t>(k)], levels - 1);
  };
  grow(app.kids[0], 3);
  ASSERT_TRUE(t.follow(&app, fns).ok());
  EXPECT_EQ(t.leaf_count().value(), 7u + 512u);
  const std::uint64_t free_before = t.stats().value().free_blocks;
  app.kids.reset();  // the whole subtree goes before any persist
  ASSERT_TRUE(t.follow(&app, fns).ok());
  EXPECT_EQ(t.leaf_count().value(), 1u);
  // The root's family block and the 73 below it were private: all freed.
  EXPECT_EQ(t.stats().value().free_blocks, free_before + 1 + 1 + 8 + 64);
  ASSERT_TRUE(t.persist().ok());
  ASSERT_TRUE(t.verify().ok());
}

TEST(Octree, GarbageCollectionFreesWhatNoVersionReachesAndKeepsTheRest) {
  Options o = opts(3);
  o.dram_budget = 0;
  const std::string path = pool_path("gc");
  auto tr = Octree::create(path, o);
  ASSERT_TRUE(tr.ok());
  Octree& t = *tr.value();
  ASSERT_TRUE(t.uniform(4, init_code).ok());
  ASSERT_TRUE(t.persist().ok());
  // Coarsen everything back to level 2 and persist twice: the level-3 and -4
  // blocks are then reachable from neither version.
  ASSERT_TRUE(t.coarsen(
                   true, [](const Octant& p, std::span<const LeafView>) { return p.level >= 2; }, nullptr)
                  .ok());
  ASSERT_TRUE(t.persist().ok());
  ASSERT_TRUE(t.update_leaves([](const Octant&, std::byte* d) {
                 d[2] = std::byte{1};
                 return true;
               }).ok());
  ASSERT_TRUE(t.persist().ok());
  const std::uint64_t sum = t.checksum().value();
  const std::uint64_t free_before = t.stats().value().pool_free_bytes;
  ASSERT_TRUE(t.gc().ok());
  const auto after = t.stats().value();
  EXPECT_GE(after.pool_free_bytes - free_before, (512u + 64) * after.block_bytes);
  EXPECT_EQ(t.checksum().value(), sum);
  EXPECT_TRUE(t.verify().ok()) << t.verify().error().message;
  // New blocks reuse the freed space and the committed tree survives.
  ASSERT_TRUE(t.uniform(4, init_code).ok());
  ASSERT_TRUE(t.persist().ok());
  const std::uint64_t grown = t.checksum().value();
  tr.value().reset();
  auto back = Octree::restore(path, o);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value()->checksum().value(), grown);
}

// A tree whose every version rewrites every leaf reuses its blocks once it
// has doubled since the last collection, long before the pool runs low: its
// chunks stay a small multiple of one version (12 versions of ~10 MiB in a
// 512 MiB pool would otherwise take 120 MiB of fresh chunks).
void collects_when_doubled(std::uint64_t budget);

// In C0 too, where each version writes new twins and the old ones become
// garbage. A tree built in C0 and persisted once holds no garbage yet: the
// persist after it skips the collection its growth would call for.
TEST(Octree, CollectsWhenItHasDoubledNotOnlyWhenThePoolRunsLow) {
  for (const std::uint64_t budget : {std::uint64_t{0}, std::uint64_t{64} << 20}) {
    SCOPED_TRACE("dram_budget " + std::to_string(budget));
    collects_when_doubled(budget);
  }
}

void collects_when_doubled(std::uint64_t budget) {
  Options o = opts(3, 248);
  o.pool_size = 512ull << 20;
  o.dram_budget = budget;
  const std::string path = pool_path("growth");
  auto tr = Octree::create(path, o);
  ASSERT_TRUE(tr.ok());
  Octree& t = *tr.value();
  ASSERT_TRUE(t.uniform(5, init_code).ok());
  ASSERT_TRUE(t.persist().ok());
  if (budget != 0) {
    ASSERT_TRUE(t.update_leaves([](const Octant& oc, std::byte* d) {
                   if (oc.x != 0 || oc.y != 0 || oc.z != 0) return false;
                   d[100] = std::byte{0xAB};
                   return true;
                 }).ok());
    ASSERT_TRUE(t.persist().ok());
    EXPECT_EQ(t.stats().value().gc_runs, 0u);
  }
  for (std::uint8_t round = 1; round <= 12; ++round) {
    ASSERT_TRUE(t.update_leaves([&](const Octant&, std::byte* d) {
                   d[100] = std::byte{round};
                   return true;
                 }).ok());
    ASSERT_TRUE(t.persist().ok());
  }
  const auto st = t.stats().value();
  EXPECT_GE(st.gc_runs, 2u);
  EXPECT_LT(st.chunk_blocks * st.block_bytes, 64ull << 20) << st.chunk_blocks << " blocks in chunks";
  EXPECT_GT(st.chunk_blocks, 2 * st.blocks);  // two versions at least
  const std::uint64_t sum = t.checksum().value();
  EXPECT_TRUE(t.verify().ok()) << t.verify().error().message;
  tr.value().reset();
  auto back = Octree::restore(path, o);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value()->checksum().value(), sum);
}

TEST(Octree, RestoreCollectsTheLostVersionInTheBackground) {
  Options o = opts(3);
  o.dram_budget = 0;
  const std::string path = pool_path("bggc");
  std::uint64_t committed = 0;
  {
    auto tr = Octree::create(path, o);
    ASSERT_TRUE(tr.ok());
    ASSERT_TRUE(tr.value()->uniform(3, init_code).ok());
    ASSERT_TRUE(tr.value()->persist().ok());
    committed = tr.value()->checksum().value();
    ASSERT_TRUE(tr.value()->uniform(5, init_code).ok());  // lost: never persisted
  }
  auto tr = Octree::restore(path, o);
  ASSERT_TRUE(tr.ok());
  Octree& t = *tr.value();
  // Work goes on while the collector runs; its blocks come from new chunks.
  ASSERT_TRUE(t.refine(
                   false, [](const Octant& oc, const std::byte*) { return oc.x == 0; }, init_code)
                  .ok());
  const std::uint64_t work = t.checksum().value();
  ASSERT_TRUE(t.gc().ok());
  EXPECT_EQ(t.checksum().value(), work);
  const auto st = t.stats().value();
  EXPECT_GE(st.gc_runs, 1u);
  EXPECT_GE(st.pool_free_bytes, (4096u) * st.block_bytes);  // the lost level-5 blocks
  ASSERT_TRUE(t.persist().ok());
  tr.value().reset();
  auto again = Octree::restore(path, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value()->checksum().value(), work);
  EXPECT_NE(work, committed);
}

// keep_previous: the version before the committed one survives collections
// (in the foreground and after restore, in the background), and restoring it
// makes it the committed version again, durably.
TEST(Octree, KeptPreviousVersionSurvivesCollectionAndCanBeRestored) {
  for (const std::uint64_t budget : {std::uint64_t{0}, std::uint64_t{16} << 20}) {
    SCOPED_TRACE("dram_budget " + std::to_string(budget));
    Options o = opts(3);
    o.dram_budget = budget;
    o.keep_previous = true;
    const std::string path = pool_path("keep");
    std::map<std::uint64_t, std::uint64_t> sums;  // version -> checksum
    std::mt19937_64 rng(7);
    // One generation of churn: refine some leaves, coarsen some families,
    // change some payloads.
    const auto churn = [&](Octree& t) {
      const std::uint64_t salt = rng();
      ASSERT_TRUE(t.refine(
                       false,
                       [&](const Octant& q, const std::byte*) { return q.level < 5 && (morton(q, 3) ^ salt) % 5 == 0; },
                       init_code)
                      .ok());
      ASSERT_TRUE(t.coarsen(
                       false,
                       [&](const Octant& q, std::span<const LeafView>) { return (morton(q, 3) ^ salt) % 3 == 0; },
                       nullptr)
                      .ok());
      ASSERT_TRUE(t.update_leaves([&](const Octant& q, std::byte* d) {
                     if ((morton(q, 3) ^ salt) % 4 != 0) return false;
                     d[3] = static_cast<std::byte>(salt);
                     return true;
                   }).ok());
    };
    {
      auto tr = Octree::create(path, o);
      ASSERT_TRUE(tr.ok());
      Octree& t = *tr.value();
      ASSERT_TRUE(t.uniform(3, init_code).ok());
      for (int g = 1; g <= 6; ++g) {
        churn(t);
        ASSERT_TRUE(t.persist().ok());
        sums[t.version()] = t.checksum().value();
        ASSERT_TRUE(t.gc().ok());
        EXPECT_EQ(t.stats().value().previous_version, t.version() - 1);
        EXPECT_TRUE(t.verify().ok()) << t.verify().error().message;
      }
      churn(t);  // lost
    }
    auto v = Octree::versions(path, o);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_EQ(v.value().committed, 6u);
    EXPECT_EQ(v.value().previous, 5u);
    {
      // The committed version; the collector runs in the background while
      // the tree changes, then in the foreground: version 5 stays intact.
      auto tr = Octree::restore(path, o);
      ASSERT_TRUE(tr.ok());
      EXPECT_EQ(tr.value()->checksum().value(), sums[6]);
      churn(*tr.value());
      ASSERT_TRUE(tr.value()->gc().ok());
      churn(*tr.value());
    }
    {
      Options back = o;
      back.version = 5;
      auto tr = Octree::restore(path, back);
      ASSERT_TRUE(tr.ok()) << tr.error().message;
      EXPECT_EQ(tr.value()->version(), 5u);
      EXPECT_EQ(tr.value()->checksum().value(), sums[5]);
      EXPECT_TRUE(tr.value()->verify().ok());
    }
    // Durable: version 6 is gone, 5 is the committed one, with nothing before it.
    v = Octree::versions(path, o);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v.value().committed, 5u);
    EXPECT_EQ(v.value().previous, 0u);
    Options six = o;
    six.version = 6;
    EXPECT_EQ(Octree::restore(path, six).error().code, Errc::no_version);
    {
      // It goes on from 5: the next persist is a new version 6.
      auto tr = Octree::restore(path, o);
      ASSERT_TRUE(tr.ok());
      EXPECT_EQ(tr.value()->checksum().value(), sums[5]);
      churn(*tr.value());
      ASSERT_TRUE(tr.value()->persist().ok());
      EXPECT_EQ(tr.value()->version(), 6u);
      sums[6] = tr.value()->checksum().value();
      churn(*tr.value());
      ASSERT_TRUE(tr.value()->persist().ok());
      sums[7] = tr.value()->checksum().value();
    }
    for (const std::uint64_t want : {std::uint64_t{7}, std::uint64_t{6}}) {
      Options at = o;
      at.version = want;
      auto tr = Octree::restore(path, at);
      ASSERT_TRUE(tr.ok()) << tr.error().message;
      EXPECT_EQ(tr.value()->checksum().value(), sums[want]);
    }
    ASSERT_TRUE(Octree::remove(path).ok());
  }
  // A tree created to continue another's numbering.
  {
    Options o = opts(3);
    o.first_version = 41;
    const std::string path = pool_path("first");
    {
      auto tr = Octree::create(path, o);
      ASSERT_TRUE(tr.ok());
      ASSERT_TRUE(tr.value()->uniform(2, init_code).ok());
      EXPECT_EQ(tr.value()->persist().value().version, 41u);
      EXPECT_EQ(tr.value()->persist().value().version, 42u);
    }
    auto back = Octree::restore(path, o);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back.value()->version(), 42u);
    o.first_version = 0;
    EXPECT_EQ(Octree::create(pool_path("first0"), o).error().code, Errc::invalid_argument);
  }
  // A tree that does not keep it offers only its committed version.
  const std::string path = pool_path("nokeep");
  {
    auto tr = Octree::create(path, opts(3));
    ASSERT_TRUE(tr.ok());
    ASSERT_TRUE(tr.value()->uniform(2, init_code).ok());
    ASSERT_TRUE(tr.value()->persist().ok());
    ASSERT_TRUE(tr.value()->uniform(3, init_code).ok());
    ASSERT_TRUE(tr.value()->persist().ok());
  }
  auto v = Octree::versions(path, opts(3));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value().committed, 2u);
  EXPECT_EQ(v.value().previous, 0u);
  Options one = opts(3);
  one.version = 1;
  auto r = Octree::restore(path, one);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::no_version);
  EXPECT_NE(r.error().message.find("not version 1"), std::string::npos) << r.error().message;
}

TEST(Octree, SmallDramBudgetMergesRegionsAndComputesTheSameTree) {
  std::uint64_t sums[2];
  for (int i = 0; i < 2; ++i) {
    Options o = opts(3);
    // Regions are the level-1 subtrees; each refined one takes ~330 blocks
    // (~47 KB) of DRAM: the budget holds two of the four.
    o.dram_budget = i == 0 ? 0 : 100 * 1024;
    auto tr = Octree::create(pool_path("budget" + std::to_string(i)), o);
    ASSERT_TRUE(tr.ok());
    Octree& t = *tr.value();
    ASSERT_TRUE(t.uniform(3, init_code).ok());
    ASSERT_TRUE(t.persist().ok());
    ASSERT_TRUE(
        t.refine(
             true, [](const Octant& oc, const std::byte*) { return oc.level < 5 && oc.x < kRootLength / 2; }, init_code)
            .ok());
    const auto st = t.stats().value();
    if (i == 1) {
      EXPECT_GT(st.merges, 0u);
      EXPECT_LE(st.dram_bytes, o.dram_budget + 64 * st.block_bytes);
      EXPECT_GT(st.dram_bytes, 0u);
    } else {
      EXPECT_EQ(st.dram_bytes, 0u);
    }
    auto ps = t.persist();
    ASSERT_TRUE(ps.ok());
    if (i == 1) {
      EXPECT_GT(ps.value().merged_from_dram, 0u);
    }
    EXPECT_EQ(t.stats().value().dram_bytes, 0u);  // persist merged C0 into C1
    sums[i] = t.checksum().value();
  }
  EXPECT_EQ(sums[0], sums[1]);
}

TEST(Octree, NeighboursFacesPartitionAndFindLeaf) {
  auto tr = Octree::create(pool_path("faces"), opts(2));
  ASSERT_TRUE(tr.ok());
  Octree& t = *tr.value();
  ASSERT_TRUE(t.uniform(3, init_code).ok());
  int boundary = 0, inner = 0;
  ASSERT_TRUE(
      t.visit_faces([&](const LeafView&, int, bool, const LeafView* other) { (other ? inner : boundary)++; }).ok());
  EXPECT_EQ(boundary, 4 * 8);
  EXPECT_EQ(inner, 2 * 8 * 7);
  // Split one leaf: its left neighbour now sees two finer leaves.
  const std::uint32_t h = kRootLength / 8;
  ASSERT_TRUE(t.refine(
                   false, [&](const Octant& o, const std::byte*) { return o.x == h && o.y == h; }, init_code)
                  .ok());
  const int right[3] = {1, 0, 0};
  auto nb = t.neighbours(Octant{3, 0, h, 0}, right);
  ASSERT_TRUE(nb.ok());
  ASSERT_EQ(nb.value().size(), 2u);
  EXPECT_EQ(nb.value()[0].octant.level, 4);
  const int left[3] = {-1, 0, 0};
  auto back = t.neighbours(Octant{4, h, h + h / 2, 0}, left);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back.value().size(), 1u);
  EXPECT_EQ(back.value()[0].octant, (Octant{3, 0, h, 0}));
  auto leaf = t.find_leaf(h + 1, h + h / 2 + 1);
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(leaf.value().octant, (Octant{4, h, h + h / 2, 0}));
  std::uint64_t payload;
  std::memcpy(&payload, leaf.value().data, 8);
  EXPECT_EQ(payload, morton(leaf.value().octant, 3));
  // Partition: 67 leaves, weights 1, 3 parts.
  auto parts = t.partition(3, nullptr);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts.value().size(), 4u);
  EXPECT_EQ(parts.value().back(), 67u);
  for (int p = 0; p < 3; ++p) EXPECT_NEAR(static_cast<double>(parts.value()[p + 1] - parts.value()[p]), 67.0 / 3, 1.0);
}

TEST(Octree, WritesAVtkUnstructuredGrid) {
  auto tr = Octree::create(pool_path("vtk"), opts(3));
  ASSERT_TRUE(tr.ok());
  ASSERT_TRUE(tr.value()->uniform(2, init_code).ok());
  const std::string file = pool_path("mesh") + ".vtu";
  ASSERT_TRUE(tr.value()->write_vtk(file, {{"x", [](const Octant& o, const std::byte*) { return o.x * 1.0; }}}).ok());
  std::ifstream f(file);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("NumberOfPoints=\"512\" NumberOfCells=\"64\""), std::string::npos);
  EXPECT_NE(text.find("Name=\"level\""), std::string::npos);
  EXPECT_NE(text.find("Name=\"x\""), std::string::npos);
  // 64 hexahedra (type 12).
  std::size_t types = text.find("Name=\"types\"");
  ASSERT_NE(types, std::string::npos);
  std::size_t twelves = 0;
  for (std::size_t at = text.find("\n12\n", types); at != std::string::npos && at < text.find("</DataArray>", types);
       at = text.find("\n12\n", at + 1))
    ++twelves;
  EXPECT_EQ(twelves, 64u);
}

TEST(Octree, AFullPoolFailsTheOperationAndKeepsThePersistedVersion) {
  Options o = opts(3);
  o.pool_size = 4ull << 20;
  o.dram_budget = 0;
  const std::string path = pool_path("full");
  auto tr = Octree::create(path, o);
  ASSERT_TRUE(tr.ok());
  ASSERT_TRUE(tr.value()->uniform(3, init_code).ok());
  ASSERT_TRUE(tr.value()->persist().ok());
  const std::uint64_t sum = tr.value()->checksum().value();
  auto r = tr.value()->uniform(6, init_code);  // 37449 blocks of 144 bytes: more than 4 MiB
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::out_of_space) << r.error().message;
  EXPECT_NE(r.error().message.find("pool_size"), std::string::npos) << r.error().message;
  tr.value().reset();
  auto back = Octree::restore(path, o);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value()->checksum().value(), sum);
  EXPECT_TRUE(back.value()->gc().ok());
  EXPECT_TRUE(back.value()->verify().ok());
}

TEST(Octree, BadInputGetsTypedErrorsAndChangesNothing) {
  const std::string path = pool_path("bad");
  const auto missing = Octree::restore(path, opts(3));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::not_found);
  // How to make an octree, not the pool's `cairn pool create` (a plain pool).
  EXPECT_NE(missing.error().message.find("Octree::create"), std::string::npos) << missing.error().message;
  EXPECT_EQ(missing.error().message.find("pool create"), std::string::npos) << missing.error().message;
  Options bad = opts(4);
  EXPECT_EQ(Octree::create(path, bad).error().code, Errc::invalid_argument);
  {
    auto tr = Octree::create(path, opts(3));
    ASSERT_TRUE(tr.ok());
    EXPECT_EQ(Octree::create(path, opts(3)).error().code, Errc::already_exists);
  }
  EXPECT_EQ(Octree::restore(path, opts(3)).error().code, Errc::no_version);  // never persisted
  std::uint64_t sum = 0;
  {
    fs::remove(path);
    auto tr = Octree::create(path, opts(3));
    ASSERT_TRUE(tr.ok());
    ASSERT_TRUE(tr.value()->uniform(2, init_code).ok());
    ASSERT_TRUE(tr.value()->persist().ok());
    sum = tr.value()->checksum().value();
  }
  EXPECT_EQ(Octree::restore(path, opts(3, 16)).error().code, Errc::layout_mismatch);
  EXPECT_EQ(Octree::restore(path, opts(2)).error().code, Errc::layout_mismatch);
  EXPECT_EQ(Octree::restore(path, opts(3)).value()->checksum().value(), sum);  // nothing was overwritten
  // A plain file and a pool of another structure.
  const std::string junk = pool_path("junk");
  std::ofstream(junk) << "not a pool";
  EXPECT_FALSE(Octree::restore(junk, opts(3)).ok());
  const std::string other = pool_path("other");
  {
    pool::CreateOptions co;
    co.size = 4ull << 20;
    ASSERT_TRUE(pool::Pool::create(other, std::move(co)).ok());
  }
  EXPECT_EQ(Octree::restore(other, opts(3)).error().code, Errc::foreign_file);
  // A damaged block: the first chunk follows the one-block tree header in the
  // arena; its block 5 (a level-1 family) gets a wrong parent code.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(pool::kArenaOffset + pool::kDefaultBlockSize + 5 * (16 + 8 * 16)));
    const std::uint64_t garbage = 0x1234567812345678ull;
    f.write(reinterpret_cast<const char*>(&garbage), 8);
  }
  Options sync = opts(3);
  sync.background_gc = false;
  auto broken = Octree::restore(path, sync);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().code, Errc::corrupted) << broken.error().message;
  auto lazy = Octree::restore(path, opts(3));  // O(1): the damage shows when it is read
  ASSERT_TRUE(lazy.ok());
  EXPECT_EQ(lazy.value()->checksum().error().code, Errc::corrupted);
  EXPECT_EQ(lazy.value()->gc().error().code, Errc::corrupted);
}

// ---- failed write-backs

// A write-back that fails during persist (a flush, a drain or a copy: the
// fault device records EIO as a failed msync would) fails the persist, and a
// fresh restore sees the version before, bit for bit.
TEST(OctreeFaults, AFailedWriteBackFailsThePersistAndKeepsThePreviousVersion) {
  struct Case {
    const char* name;
    devices::FaultPlan plan;
  };
  for (const Case& c :
       {Case{"flush1", {1, 0, 0, false}}, Case{"flush5", {5, 0, 0, false}}, Case{"flush5-once", {5, 0, 0, true}},
        Case{"drain1", {0, 1, 0, false}}, Case{"drain1-once", {0, 1, 0, true}}, Case{"copy1", {0, 0, 1, false}},
        Case{"copy1-once", {0, 0, 1, true}}}) {
    const std::string path = pool_path(std::string("fault-") + c.name);
    auto injector = std::make_shared<devices::FaultInjector>();
    std::uint64_t committed = 0;
    {
      pool::CreateOptions co;
      co.size = 64ull << 20;
      co.device = devices::make_fault_device(injector);
      auto p = pool::Pool::create(path, std::move(co));
      ASSERT_TRUE(p.ok()) << p.error().message;
      auto t = detail::Factory::format(*p.value(), opts(3));
      ASSERT_TRUE(t.ok()) << t.error().message;
      Octree& tr = *t.value();
      ASSERT_TRUE(tr.uniform(2, init_code).ok());
      ASSERT_TRUE(tr.persist().ok());
      committed = tr.checksum().value();
      ASSERT_TRUE(tr.refine(
                        false, [](const Octant& q, const std::byte*) { return q.x == 0; }, init_code)
                      .ok());
      ASSERT_TRUE(tr.update_leaves([](const Octant&, std::byte* d) {
                      d[2] = std::byte{9};
                      return true;
                    }).ok());
      injector->arm(c.plan);
      auto ps = tr.persist();
      EXPECT_FALSE(ps.ok()) << c.name << ": persist reported success after a failed write-back";
      EXPECT_GT(injector->counts().failed, 0u) << c.name;
    }
    auto back = Octree::restore(path, opts(3));
    ASSERT_TRUE(back.ok()) << c.name << ": " << back.error().message;
    EXPECT_EQ(back.value()->version(), 1u) << c.name;
    EXPECT_EQ(back.value()->checksum().value(), committed) << c.name;
    EXPECT_TRUE(back.value()->verify().ok()) << c.name;
  }
}

// ---- damaged pools: a typed error or the tree that was committed, never a signal

// Runs fn in a forked child (a crash must not take the test binary with it):
// its exit code, or 128 + the signal that ended it.
int in_child(const std::function<int()>& fn) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) std::_Exit(fn());
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
// Exit codes of a child that restored a damaged pool (anything else, such as
// a sanitizer's report or a signal, is a failure).
constexpr int kSameTree = 10, kTypedError = 11, kDifferentTree = 12;

std::uint64_t read_word(const std::string& path, std::uint64_t at) {
  std::uint64_t w = 0;
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  f.read(reinterpret_cast<char*>(&w), 8);
  return w;
}
void flip_bit(const std::string& path, std::uint64_t byte, int bit) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(byte));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ (1 << bit));
  f.seekp(static_cast<std::streamoff>(byte));
  f.write(&c, 1);
}
// The committed root block: root slot 1 names the record, whose third word
// is the root block; the block's one slot starts after its 16-byte header.
std::uint64_t committed_root_block(const std::string& path) {
  auto p = pool::Pool::open(path);
  EXPECT_TRUE(p.ok());
  std::uint64_t root = 0;
  std::memcpy(&root, p.value()->base() + p.value()->root(1).offset + 16, 8);
  return root;
}
constexpr std::uint64_t kBlockHeader = 16;

// A child restores `path` and runs every read of the tree; kSameTree if all
// of them succeed and the leaves are `sum`'s, kTypedError if one of them
// reports an error (a restore error included).
int restore_and_read(const std::string& path, const Options& o, std::uint64_t sum) {
  auto t = Octree::restore(path, o);
  if (!t.ok()) return kTypedError;
  Octree& tr = *t.value();
  auto c = tr.checksum();
  auto s = tr.stats();
  auto v = tr.verify();
  auto n = tr.leaf_count();
  if (!c.ok() || !s.ok() || !v.ok() || !n.ok()) return kTypedError;
  // The flat iteration hands out as many leaves; the bulk writer writes each
  // payload back unchanged (copying the committed blocks it reaches).
  std::uint64_t flat = 0;
  for (auto cursor = tr.leaves();;) {
    auto b = cursor.next();
    if (!b.ok()) return kTypedError;
    if (b.value().empty()) break;
    flat += b.value().size();
  }
  if (flat != n.value()) return kDifferentTree;
  for (auto writer = tr.write_leaves();;) {
    auto b = writer.next();
    if (!b.ok()) return kTypedError;
    if (b.value().empty()) break;
    for (const WritableLeaf& l : b.value()) l.data[0] = static_cast<std::byte>(static_cast<unsigned>(l.data[0]));
  }
  // Memory order (the writer above gave the tree blocks of this
  // generation): as many leaves, each payload written back unchanged.
  std::uint64_t any = 0;
  for (auto cursor = tr.leaves(LeafOrder::memory);;) {
    auto b = cursor.next();
    if (!b.ok()) return kTypedError;
    if (b.value().empty()) break;
    any += b.value().size();
  }
  if (any != n.value()) return kDifferentTree;
  for (auto writer = tr.write_leaves(LeafOrder::memory);;) {
    auto b = writer.next();
    if (!b.ok()) return kTypedError;
    if (b.value().empty()) break;
    for (const WritableLeaf& l : b.value()) l.data[0] = static_cast<std::byte>(static_cast<unsigned>(l.data[0]));
  }
  if (auto g = tr.gc(); !g.ok()) return kTypedError;
  if (auto b = tr.balance(Connect::face, init_code); !b.ok()) return kTypedError;
  if (auto p = tr.persist(); !p.ok()) return kTypedError;
  return c.value() == sum && tr.checksum().value() == sum ? kSameTree : kDifferentTree;
}

// A committed tree of 64 leaves (uniform to level 2) in a new pool at
// `path`; the leaves' checksum, 0 (with a failure recorded) if it could not
// be made.
std::uint64_t persisted_uniform_tree(const std::string& path) {
  auto tr = Octree::create(path, opts(3));
  EXPECT_TRUE(tr.ok());
  if (!tr.ok() || !tr.value()->uniform(2, init_code).ok() || !tr.value()->persist().ok()) {
    ADD_FAILURE() << "could not make the tree in " << path;
    return 0;
  }
  return tr.value()->checksum().value();
}

TEST(OctreeDamage, ADramBitInTheRootsChildReferenceIsATypedErrorNotACrash) {
  const std::string path = pool_path("dram-bit");
  const std::uint64_t sum = persisted_uniform_tree(path);
  ASSERT_NE(sum, 0u);
  flip_bit(path, committed_root_block(path) + kBlockHeader, 0);  // the reference now "names DRAM"
  for (const bool background : {false, true}) {
    Options o = opts(3);
    o.background_gc = background;
    EXPECT_EQ(in_child([&] {
                auto t = Octree::restore(path, o);
                if (!t.ok()) return t.error().code == Errc::corrupted ? kTypedError : 1;
                return t.value()->checksum().ok() ? kDifferentTree : kTypedError;
              }),
              kTypedError)
        << "background collection: " << background;
    EXPECT_EQ(in_child([&] { return restore_and_read(path, o, sum); }), kTypedError);
  }
}

// Memory order follows no DRAM reference (it scans the slab), so it counts
// them: a copy of a damaged committed block (here the root, copied by
// update_root without reading its child) holding a reference with the DRAM
// bit must give a typed error, not a tree without that subtree.
TEST(OctreeDamage, MemoryOrderCountsTheReferencesItDoesNotFollow) {
  const std::string path = pool_path("dram-bit-memory");
  const std::uint64_t sum = persisted_uniform_tree(path);
  ASSERT_NE(sum, 0u);
  // The reference now "names DRAM", and the block's CRC is made to match
  // (damage the CRC cannot see), so restore and the copy accept the block.
  const std::uint64_t root = committed_root_block(path);
  flip_bit(path, root + kBlockHeader, 0);
  {
    std::size_t stride = 0;
    const std::size_t bytes = detail::block_bytes_for(3, opts(3).data_size, stride);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    std::vector<char> block(bytes);
    f.seekg(static_cast<std::streamoff>(root));
    f.read(block.data(), static_cast<std::streamsize>(bytes));
    const std::uint32_t crc = detail::block_crc(reinterpret_cast<const std::byte*>(block.data()), bytes);
    f.seekp(static_cast<std::streamoff>(root + 12));
    f.write(reinterpret_cast<const char*>(&crc), 4);
  }
  for (const bool write : {false, true}) {
    const int rc = in_child([&] {
      auto t = Octree::restore(path, opts(3));  // background collection: restore itself reads no child
      if (!t.ok()) return t.error().code == Errc::corrupted ? kTypedError : 1;
      if (!t.value()->update_root([](const Octant&, std::byte* d) { return (d[0] = std::byte{7}), true; }).ok())
        return kTypedError;
      std::uint64_t n = 0;
      Error failed;
      const auto drain = [&](auto cursor) {
        for (;;) {
          auto b = cursor.next();
          if (!b.ok()) return failed = b.error(), false;
          if (b.value().empty()) return true;
          n += b.value().size();
        }
      };
      const bool ok =
          write ? drain(t.value()->write_leaves(LeafOrder::memory)) : drain(t.value()->leaves(LeafOrder::memory));
      if (!ok) return failed.code == Errc::corrupted ? kTypedError : 2;
      return n == 64 ? kSameTree : kDifferentTree;
    });
    EXPECT_EQ(rc, kTypedError) << (write ? "writer" : "cursor");
  }
}

TEST(OctreeDamage, StatsOfADamagedTreeIsATypedErrorNotACrash) {
  const std::string path = pool_path("stats");
  ASSERT_NE(persisted_uniform_tree(path), 0u);
  // The first grandchild reference of the root now points far outside the pool.
  const std::uint64_t level1 = read_word(path, committed_root_block(path) + kBlockHeader);
  flip_bit(path, level1 + kBlockHeader + 5, 6);  // bit 46 of the reference
  Options o = opts(3);
  o.background_gc = true;  // restore reads nothing below the root
  EXPECT_EQ(in_child([&] {
              auto t = Octree::restore(path, o);
              if (!t.ok()) return 1;
              if (t.value()->checksum().ok()) return kDifferentTree;
              auto s = t.value()->stats();
              return !s.ok() && s.error().code == Errc::corrupted ? kTypedError : kDifferentTree;
            }),
            kTypedError);
}

// The block of the root's child is redirected to the older copy of the same
// family that the version before committed (same octant, a valid block of
// its own): the block holding the reference fails its CRC.
TEST(OctreeDamage, AReferenceToAnOlderCopyOfTheSameFamilyIsRejected) {
  const std::string path = pool_path("older-copy");
  Options o = opts(3);
  o.dram_budget = 0;  // every block in the pool
  std::uint64_t older = 0;
  {
    auto tr = Octree::create(path, o);
    ASSERT_TRUE(tr.ok());
    ASSERT_TRUE(tr.value()->uniform(2, init_code).ok());
    ASSERT_TRUE(tr.value()->persist().ok());
  }
  older = read_word(path, committed_root_block(path) + kBlockHeader);
  {
    auto tr = Octree::restore(path, o);
    ASSERT_TRUE(tr.ok());
    ASSERT_TRUE(tr.value()
                    ->update_leaves([](const Octant& q, std::byte* d) {
                      d[0] = std::byte{7};
                      return q.x == 0 && q.y == 0 && q.z == 0;
                    })
                    .ok());
    ASSERT_TRUE(tr.value()->persist().ok());
  }
  const std::uint64_t at = committed_root_block(path) + kBlockHeader;
  const std::uint64_t newer = read_word(path, at);
  ASSERT_NE(newer, older);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(reinterpret_cast<const char*>(&older), 8);
  }
  for (const bool background : {false, true}) {
    Options r = o;
    r.background_gc = background;
    EXPECT_EQ(in_child([&] {
                auto t = Octree::restore(r.background_gc ? path : path, r);
                if (!t.ok()) return t.error().code == Errc::corrupted ? kTypedError : 1;
                auto c = t.value()->checksum();
                return !c.ok() && c.error().code == Errc::corrupted ? kTypedError : kDifferentTree;
              }),
              kTypedError);
  }
}

// A payload byte of a committed leaf changed: found when its block is first
// read after restore, by a walk or by the collector.
TEST(OctreeDamage, ADamagedPayloadIsFoundWhenItsBlockIsFirstRead) {
  const std::string path = pool_path("payload");
  ASSERT_NE(persisted_uniform_tree(path), 0u);
  // The first level-2 family: its block's second slot's payload.
  const std::uint64_t level1 = read_word(path, committed_root_block(path) + kBlockHeader);
  const std::uint64_t level2 = read_word(path, level1 + kBlockHeader);
  flip_bit(path, level2 + kBlockHeader + 16 + 8 + 3, 5);
  Options sync = opts(3);
  sync.background_gc = false;
  auto eager = Octree::restore(path, sync);  // the collection reads every block
  ASSERT_FALSE(eager.ok());
  EXPECT_EQ(eager.error().code, Errc::corrupted) << eager.error().message;
  EXPECT_NE(eager.error().message.find(path), std::string::npos) << eager.error().message;
  auto lazy = Octree::restore(path, opts(3));
  ASSERT_TRUE(lazy.ok());
  EXPECT_EQ(lazy.value()->checksum().error().code, Errc::corrupted);
  EXPECT_EQ(lazy.value()->leaf_count().error().code, Errc::corrupted);  // every read of it, not only the first
  EXPECT_EQ(lazy.value()->find_leaf(0, 0, 0).error().code, Errc::corrupted);
  EXPECT_EQ(lazy.value()->stats().error().code, Errc::corrupted);
  EXPECT_EQ(lazy.value()->verify().error().code, Errc::corrupted);
  EXPECT_EQ(lazy.value()->gc().error().code, Errc::corrupted);
  // The flat iteration and the bulk writer meet it too: a typed error, then
  // the cursor has ended.
  auto cursor = lazy.value()->leaves();
  Result<std::span<const LeafView>> batch = std::span<const LeafView>{};
  do batch = cursor.next();
  while (batch.ok() && !batch.value().empty());
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.error().code, Errc::corrupted) << batch.error().message;
  EXPECT_NE(batch.error().message.find(path), std::string::npos) << batch.error().message;
  auto ended = cursor.next();
  ASSERT_TRUE(ended.ok());
  EXPECT_TRUE(ended.value().empty());
  auto writer = lazy.value()->write_leaves();
  Result<std::span<const WritableLeaf>> wbatch = std::span<const WritableLeaf>{};
  do wbatch = writer.next();
  while (wbatch.ok() && !wbatch.value().empty());
  ASSERT_FALSE(wbatch.ok());
  EXPECT_EQ(wbatch.error().code, Errc::corrupted) << wbatch.error().message;
  // In memory order, once the tree has blocks of its own generation (the
  // root's payload changed: a new root above the committed subtrees), the
  // damaged block is met by the walk of a committed subtree, through the
  // same checks.
  ASSERT_TRUE(lazy.value()->update_root([](const Octant&, std::byte* d) { return (d[0] = std::byte{9}), true; }).ok());
  for (const LeafOrder order : {LeafOrder::memory}) {
    auto mc = lazy.value()->leaves(order);
    do batch = mc.next();
    while (batch.ok() && !batch.value().empty());
    ASSERT_FALSE(batch.ok());
    EXPECT_EQ(batch.error().code, Errc::corrupted) << batch.error().message;
    auto mw = lazy.value()->write_leaves(order);
    do wbatch = mw.next();
    while (wbatch.ok() && !wbatch.value().empty());
    ASSERT_FALSE(wbatch.ok());
    EXPECT_EQ(wbatch.error().code, Errc::corrupted) << wbatch.error().message;
  }
}

// Headers that name extents past the pool, or sizes whose products wrap, and
// a pool of the layout before block checksums: typed errors, never a read
// outside the mapping.
TEST(OctreeDamage, HeadersNamingExtentsOutsideThePoolAndOldLayoutsAreRefused) {
  const std::string path = pool_path("header");
  {
    auto tr = Octree::create(path, opts(3));
    ASSERT_TRUE(tr.ok());
    ASSERT_TRUE(tr.value()->uniform(1, init_code).ok());
    ASSERT_TRUE(tr.value()->persist().ok());
  }
  std::vector<char> image(fs::file_size(path));
  std::ifstream(path, std::ios::binary).read(image.data(), static_cast<std::streamsize>(image.size()));
  const auto restore_of = [&](const std::function<void(pool::Pool&)>& damage) {
    {
      std::ofstream(path, std::ios::binary | std::ios::trunc)
          .write(image.data(), static_cast<std::streamsize>(image.size()));
      auto p = pool::Pool::open(path);
      EXPECT_TRUE(p.ok());
      damage(*p.value());
    }
    return in_child([&] {
      auto t = Octree::restore(path, opts(3));
      if (t.ok()) return kSameTree;
      if (t.error().code == Errc::corrupted) return kTypedError;
      return t.error().code == Errc::wrong_version ? 20 : 1;
    });
  };
  // The tree header's words: [3] chunk_bytes, [4] chunk_table, [5] chunk_capacity, [15] checksum.
  const auto set_header = [](pool::Pool& p, int word, std::uint64_t value) {
    auto* h = reinterpret_cast<std::uint64_t*>(p.base() + p.root(0).offset);
    h[word] = value;
    h[15] = pool::checksum64(h, 120);
    p.persist(h, 128);
  };
  // chunk_capacity * 8 wraps to a small number.
  EXPECT_EQ(restore_of([&](pool::Pool& p) { set_header(p, 5, (1ull << 61) + 4); }), kTypedError);
  // The chunk table and the chunks past the end of the pool.
  EXPECT_EQ(restore_of([&](pool::Pool& p) { set_header(p, 4, p.size() - 8); }), kTypedError);
  EXPECT_EQ(restore_of([&](pool::Pool& p) { set_header(p, 3, ~std::uint64_t{0} - 4095); }), kTypedError);
  // A tree that keeps its previous version, its header moved to 256 bytes
  // before the end of the pool and its committed record (version 3) to the
  // record place after it: the place of version 2 lies past the end.
  {
    Options kept = opts(3);
    kept.keep_previous = true;
    fs::remove(path);
    auto tr = Octree::create(path, kept);
    ASSERT_TRUE(tr.ok());
    for (int v = 0; v < 3; ++v) {
      ASSERT_TRUE(tr.value()->uniform(v + 1, init_code).ok());
      ASSERT_TRUE(tr.value()->persist().ok());
    }
    tr.value().reset();
    auto p = pool::Pool::open(path);
    ASSERT_TRUE(p.ok());
    pool::Pool& pl = *p.value();
    const std::uint64_t meta = pl.size() - 256;
    ASSERT_EQ(pl.root(1).version, 3u);
    std::memcpy(pl.base() + meta, pl.base() + pl.root(0).offset, 128);
    std::memcpy(pl.base() + meta + 128, pl.base() + pl.root(1).offset, 128);
    ASSERT_TRUE(pl.publish_roots({{0, {meta, 0}}, {1, {meta + 128, 3}}}).ok());
  }
  EXPECT_EQ(in_child([&] {
              Options kept = opts(3);
              auto t = Octree::restore(path, kept);
              return !t.ok() && t.error().code == Errc::corrupted ? kTypedError : 1;
            }),
            kTypedError);
  fs::remove(path);
  // Layout 1 (before block checksums): refused as another version, saying so.
  EXPECT_EQ(restore_of([&](pool::Pool& p) {
              auto* h = reinterpret_cast<std::uint32_t*>(p.base() + p.root(0).offset);
              h[2] = 1;
              set_header(p, 14, 0);
            }),
            20);
  auto old = Octree::restore(path, opts(3));
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message.find("layout 1"), std::string::npos) << old.error().message;
}

// The tree header or the chunk table off an 8-byte boundary (found by
// fuzz/octree_fuzz: the header was read misaligned): a typed error.
TEST(OctreeDamage, AHeaderOrChunkTableOffAnEightByteBoundaryIsATypedError) {
  const std::string path = pool_path("misaligned");
  {
    auto tr = Octree::create(path, opts(3));
    ASSERT_TRUE(tr.ok());
    ASSERT_TRUE(tr.value()->uniform(1, init_code).ok());
    ASSERT_TRUE(tr.value()->persist().ok());
  }
  std::vector<char> image(fs::file_size(path));
  std::ifstream(path, std::ios::binary).read(image.data(), static_cast<std::streamsize>(image.size()));
  for (int which = 0; which < 2; ++which) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(image.data(), static_cast<std::streamsize>(image.size()));
    {
      auto p = pool::Pool::open(path);
      ASSERT_TRUE(p.ok());
      const pool::RootSlot header = p.value()->root(0);
      if (which == 0) {
        ASSERT_TRUE(p.value()->publish_roots({{0, {header.offset + 2, header.version}}}).ok());
      } else {
        auto* h = reinterpret_cast<std::uint64_t*>(p.value()->base() + header.offset);
        h[4] += 4;  // the chunk table's offset; the header's checksum made to match
        h[15] = pool::checksum64(h, 120);
        p.value()->persist(h, 128);
      }
    }
    EXPECT_EQ(in_child([&] {
                auto t = Octree::restore(path, opts(3));
                return !t.ok() && t.error().code == Errc::corrupted ? kTypedError : 1;
              }),
              kTypedError)
        << which;
  }
  fs::remove(path);
}

// Small committed pools, ~150 single-bit flips of their non-zero bytes and a
// few truncations, each restored and read in a child: a typed error or the
// committed tree, never a signal. Two pools: 3D, the version before kept,
// blocks in DRAM before the persists; 2D, every block in the pool.
TEST(OctreeDamage, EverySingleBitFlipAndTruncationGivesATypedErrorOrTheSameTree) {
  std::map<int, int> outcomes;
  const auto sweep = [&](const std::string& name, const Options& o, int flips) {
    const std::string path = pool_path(name), damaged = pool_path(name + "-damaged");
    std::uint64_t sum = 0;
    {
      auto tr = Octree::create(path, o);
      ASSERT_TRUE(tr.ok());
      ASSERT_TRUE(tr.value()->uniform(2, init_code).ok());
      ASSERT_TRUE(tr.value()->persist().ok());
      ASSERT_TRUE(tr.value()
                      ->refine(
                          false, [](const Octant& q, const std::byte*) { return q.x == 0 && q.y == 0; }, init_code)
                      .ok());
      ASSERT_TRUE(tr.value()
                      ->update_leaves([](const Octant& q, std::byte* d) {
                        d[1] = static_cast<std::byte>(q.level * 3 + 1);
                        return q.z == 0;
                      })
                      .ok());
      ASSERT_TRUE(tr.value()->persist().ok());
      sum = tr.value()->checksum().value();
    }
    std::vector<char> image(fs::file_size(path));
    std::ifstream(path, std::ios::binary).read(image.data(), static_cast<std::streamsize>(image.size()));
    std::vector<std::size_t> nonzero;
    for (std::size_t i = 0; i < image.size(); ++i)
      if (image[i] != 0) nonzero.push_back(i);
    ASSERT_GT(nonzero.size(), 300u);
    const auto write_image = [&](std::size_t length) {
      std::ofstream f(damaged, std::ios::binary | std::ios::trunc);
      f.write(image.data(), static_cast<std::streamsize>(length));
    };
    std::mt19937_64 rng(41);
    for (int i = 0; i < flips; ++i) {
      const std::size_t at = nonzero[rng() % nonzero.size()];
      const int bit = static_cast<int>(rng() % 8);
      image[at] = static_cast<char>(image[at] ^ (1 << bit));
      write_image(image.size());
      image[at] = static_cast<char>(image[at] ^ (1 << bit));
      Options r = o;
      r.background_gc = i % 2 == 0;
      const int rc = in_child([&] { return restore_and_read(damaged, r, sum); });
      ++outcomes[rc];
      EXPECT_TRUE(rc == kSameTree || rc == kTypedError)
          << name << ": bit " << bit << " of byte " << at << ": outcome " << rc;
    }
    for (const std::size_t length :
         {std::size_t{0}, std::size_t{4096}, image.size() / 2, image.size() - 4096, image.size() - 1}) {
      write_image(length);
      const int rc = in_child([&] { return restore_and_read(damaged, o, sum); });
      ++outcomes[rc];
      EXPECT_TRUE(rc == kSameTree || rc == kTypedError) << name << ": truncated to " << length << ": outcome " << rc;
    }
  };
  Options kept = opts(3);
  kept.pool_size = 4ull << 20;
  kept.keep_previous = true;
  sweep("sweep3d", kept, 100);
  Options pool_only = opts(2);
  pool_only.pool_size = 4ull << 20;
  pool_only.dram_budget = 0;
  sweep("sweep2d", pool_only, 50);
  std::string summary;
  for (const auto& [rc, n] : outcomes) {
    summary += ' ';  // appended piece by piece: " " + ... trips GCC 12's -Wrestrict at -O3
    summary += std::to_string(rc);
    summary += ':';
    summary += std::to_string(n);
  }
  std::printf("outcomes (10 same tree, 11 typed error, 12 different tree, other: a crash):%s\n", summary.c_str());
}

}  // namespace
}  // namespace cairn::octree
