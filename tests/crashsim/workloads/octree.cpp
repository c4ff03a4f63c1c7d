// octree.cpp — the PM-octree (src/octree) under the harness: each step is one
// time step of an adaptive mesh (maybe a collection first, then a random mix
// of refine, recursive refine towards a point, coarsen, 2:1 balance, payload
// updates and collections), committed by persist(). Recovery attaches the
// tree (arena rebuilt from the header and the committed chunks), reads its
// leaves in Morton order, then collects and verifies: after any crash the
// tree is exactly the last or the in-flight version, and the collection after
// recovery frees exactly the blocks no version reaches.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "cairn/extended/pool.hpp"
#include "octree/internal.hpp"
#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {

namespace ot = octree;

namespace {

std::uint64_t load_word(const std::byte* d, std::uint32_t size, std::uint32_t i) {
  std::uint64_t w = 0;
  std::memcpy(&w, d + i * 8, std::min<std::uint32_t>(8, size - i * 8));
  return w;
}
void store_word(std::byte* d, std::uint32_t size, std::uint32_t i, std::uint64_t w) {
  std::memcpy(d + i * 8, &w, std::min<std::uint32_t>(8, size - i * 8));
}
std::uint32_t words(std::uint32_t size) { return (size + 7) / 8; }

// Whether the octant contains the finest-level point p.
bool contains(const ot::Octant& o, const std::uint32_t p[3], int dims) {
  const std::uint32_t c[3] = {o.x, o.y, o.z};
  for (int a = 0; a < dims; ++a)
    if (p[a] < c[a] || p[a] >= c[a] + o.length()) return false;
  return true;
}

}  // namespace

Result<void> octree_mesh_step(ot::Octree& tree, Rng& rng, const OctreeMesh& mesh) {
  const int dims = tree.dims();
  const std::uint32_t size = tree.data_size();
  // A child's payload follows from its parent's and its place; a coarsened
  // parent's from its children: every payload depends on the whole history.
  const ot::Octree::InitFn init = [&](const ot::Octant& o, std::byte* d, const std::byte* parent) {
    for (std::uint32_t i = 0; i < words(size); ++i)
      store_word(d, size, i, mix_seed(parent != nullptr ? load_word(parent, size, i) : 0, ot::morton(o, dims), i));
  };
  const ot::Octree::MergeFn merge = [&](const ot::Octant& o, std::byte* d, std::span<const ot::LeafView> family) {
    for (std::uint32_t i = 0; i < words(size); ++i) {
      std::uint64_t w = ot::morton(o, dims);
      for (const auto& l : family) w = mix_seed(w, load_word(l.data, size, i));
      store_word(d, size, i, w);
    }
  };
  const unsigned ops = 2 + static_cast<unsigned>(rng.below(2));
  for (unsigned k = 0; k < ops; ++k) {
    // A collection between changes: blocks the changes so far replaced are
    // garbage only if no version reaches them, and what it frees is reused by
    // the changes that follow, before the commit.
    if (k > 0 && mesh.gc_odds != 0 && rng.below(mesh.gc_odds) == 0)
      if (auto r = tree.gc(); !r.ok()) return r;
    auto n = tree.leaf_count();
    if (!n.ok()) return std::move(n).error();
    const std::uint64_t leaves = n.value();
    // Past the size bound the step only coarsens and updates: a state's cost
    // grows with the tree.
    const std::uint64_t kind = leaves > mesh.max_leaves ? 2 + rng.below(2) * 2 : rng.below(6);
    Result<void> r;
    switch (kind) {
      case 0: {  // a few leaves, once
        const std::uint64_t want = 1 + rng.below(4);
        r = tree.refine(
            false, [&](const ot::Octant&, const std::byte*) { return rng.below(leaves) < want; }, init, mesh.max_level);
        break;
      }
      case 1: {  // recursively towards a point (a feature), to a random depth
        const std::uint32_t p[3] = {static_cast<std::uint32_t>(rng.below(ot::kRootLength)),
                                    static_cast<std::uint32_t>(rng.below(ot::kRootLength)),
                                    dims == 3 ? static_cast<std::uint32_t>(rng.below(ot::kRootLength)) : 0};
        const int level = 2 + static_cast<int>(rng.below(static_cast<std::uint64_t>(mesh.max_level - 1)));
        r = tree.refine(
            true, [&](const ot::Octant& o, const std::byte*) { return contains(o, p, dims); }, init, level);
        break;
      }
      case 2: {  // families of leaves, recursively or not
        const bool recursive = rng.below(4) == 0;
        const std::uint64_t in = 1 + rng.below(3);
        r = tree.coarsen(
            recursive, [&](const ot::Octant&, std::span<const ot::LeafView>) { return rng.below(8) < in; }, merge);
        break;
      }
      case 3: r = tree.balance(rng.below(2) == 0 ? ot::Connect::face : ot::Connect::full, init); break;
      case 4: {  // new payloads for a few leaves
        const std::uint64_t want = 1 + rng.below(4);
        r = tree.update_leaves([&](const ot::Octant&, std::byte* d) {
          if (rng.below(leaves) >= want) return false;
          for (std::uint32_t i = 0; i < words(size); ++i) store_word(d, size, i, rng());
          return true;
        });
        break;
      }
      default:  // every leaf's payload (a solver step): copies every block
        r = tree.update_leaves([&](const ot::Octant& o, std::byte* d) {
          store_word(d, size, 0, mix_seed(load_word(d, size, 0), ot::morton(o, dims)));
          return true;
        });
        break;
    }
    if (!r.ok()) return r;
  }
  return {};
}

namespace {

struct Params {
  int dims = 3;
  std::uint32_t data_size = 8;
  // Small, so that C0 regions are merged into the pool within a step
  // (evictions), not only by persist; but at least fan-out blocks, or C0
  // holds nothing (the region level is depth - floor(log_fanout(budget
  // blocks))). 8.3 blocks of 144 bytes (3D), 10.7 of 112 (2D).
  std::uint64_t dram_budget = 1200;
  unsigned gc_first_odds = 2;   // a collection before a step with odds 1 in this (0: never)
  double threshold_nvbm = 0.1;  // Options::threshold_nvbm
  OctreeMesh mesh;
  // Options::keep_previous: recovery also checks the kept version before the
  // committed one against what was committed under its number.
  bool keep_previous = false;
  ot::detail::Internal internal;
};

class OctreeSteps final : public Structure {
 public:
  explicit OctreeSteps(const Params& p) : p_(p) {}

  Result<void> create(pool::Pool& pool, Model& model, Rng& rng) override {
    auto t = ot::detail::Factory::format(pool, options(), p_.internal);
    if (!t.ok()) return std::move(t).error();
    tree_ = std::move(t.value());
    pool_ = &pool;
    if (auto r = tree_->uniform(p_.dims == 3 ? 2 : 3,
                                [&](const ot::Octant&, std::byte* d, const std::byte*) {
                                  for (std::uint32_t i = 0; i < words(p_.data_size); ++i)
                                    store_word(d, p_.data_size, i, rng());
                                });
        !r.ok())
      return r;
    return commit(model);
  }

  Result<Version> recover(pool::Pool& pool) override {
    tree_.reset();
    auto t = ot::detail::Factory::attach(pool, options(), p_.internal);
    if (!t.ok()) return std::move(t).error();
    tree_ = std::move(t.value());
    pool_ = &pool;
    auto v = serialize(tree_->version());
    if (!v.ok()) return v;
    // A collection right after recovery frees exactly what no version
    // reaches: never a reachable block (verify() looks for one on the free
    // list), and every other block of the chunks (no leak: nothing has been
    // allocated since, so reachable and free blocks are all of them).
    if (auto r = tree_->gc(); !r.ok()) return make_error(r.error().code, "gc after recovery: " + r.error().message);
    if (auto r = tree_->verify(); !r.ok())
      return make_error(r.error().code, "verify after recovery and gc: " + r.error().message);
    auto s = tree_->stats();
    if (!s.ok()) return std::move(s).error();
    if (p_.keep_previous)
      if (auto r = check_previous(s.value()); !r.ok()) return r.error();
    const std::uint64_t reachable = s.value().nvm_bytes / s.value().block_bytes + s.value().previous_blocks;
    if (reachable + s.value().free_blocks != s.value().chunk_blocks)
      return make_error(Errc::corrupted, "the collection after recovery leaves " + std::to_string(reachable) +
                                             " reachable and " + std::to_string(s.value().free_blocks) +
                                             " free blocks of " + std::to_string(s.value().chunk_blocks));
    blocks_ = arena_blocks(pool, s.value(), p_.keep_previous ? 3 : 2);
    if (blocks_ == 0)
      return make_error(Errc::corrupted, "octree workload: " + std::to_string(s.value().chunk_blocks) +
                                             " blocks are not whole chunks (did the chunk geometry of octree.cpp "
                                             "change?)");
    return v;
  }

  Result<void> step(pool::Pool& pool, Model& model, Rng& rng) override {
    if (tree_ == nullptr || pool_ != &pool) {
      // Another pool than the tree was made on: its persisted tree.
      tree_.reset();
      auto t = ot::detail::Factory::attach(pool, options(), p_.internal);
      if (!t.ok()) return std::move(t).error();
      tree_ = std::move(t.value());
      pool_ = &pool;
    }
    // The seed collects before a new time step.
    if (p_.gc_first_odds != 0 && rng.below(p_.gc_first_odds) == 0)
      if (auto r = tree_->gc(); !r.ok()) return r;
    if (auto r = octree_mesh_step(*tree_, rng, p_.mesh); !r.ok()) return r;
    return commit(model);
  }

  // The tree header's extent and the committed chunks: what attach marks.
  std::optional<std::uint64_t> blocks_in_use(const Version&) const override { return blocks_; }

 private:
  ot::Options options() const {
    ot::Options o;
    o.dims = p_.dims;
    o.data_size = p_.data_size;
    o.dram_budget = p_.dram_budget;
    o.threshold_nvbm = p_.threshold_nvbm;
    // Deterministic runs (keys replay): no decision may depend on the
    // machine's free memory or on a collector thread's timing.
    o.threshold_dram = 0;
    o.background_gc = false;
    o.keep_previous = p_.keep_previous;
    return o;
  }

  // The kept version is the one before the committed one, intact: its
  // checksum is one that version's number was committed with (a run and the
  // steps after its recoveries may commit different trees under one number).
  Result<void> check_previous(const ot::Stats& s) const {
    const std::uint64_t committed = tree_->version();
    if (committed <= 1) return {};
    if (s.previous_version != committed - 1)
      return make_error(Errc::corrupted, "keep_previous: version " + std::to_string(committed) + " keeps version " +
                                             std::to_string(s.previous_version) + ", not the one before it");
    auto sum = tree_->previous_checksum();
    if (!sum.ok()) return make_error(sum.error().code, "keep_previous: " + sum.error().message);
    const auto it = sums_.find(committed - 1);
    if (it != sums_.end() && it->second.count(sum.value()) == 0)
      return make_error(Errc::corrupted, "keep_previous: the kept version " + std::to_string(committed - 1) +
                                             " is not the tree committed under that number");
    return {};
  }

  // persist() commits what is in the tree already: the in-flight version is
  // known before its commit point.
  Result<void> commit(Model& model) {
    auto v = serialize(tree_->version() + 1);
    if (!v.ok()) return std::move(v).error();
    const std::uint64_t number = v.value().number;
    model.begin(std::move(v.value()));
    auto p = tree_->persist();
    if (!p.ok()) {
      model.abort();
      return std::move(p).error();
    }
    if (tree_->version() != number) {
      model.abort();
      return make_error(Errc::corrupted, "persist committed version " + std::to_string(tree_->version()) +
                                             ", expected " + std::to_string(number));
    }
    model.end();
    if (p_.keep_previous) {
      auto sum = tree_->checksum();
      if (!sum.ok()) return std::move(sum).error();
      sums_[number].insert(sum.value());
    }
    return {};
  }

  // The leaves in Morton order: level, coordinates, payload.
  Result<Version> serialize(std::uint64_t number) const {
    Version v;
    v.number = number;
    const std::uint32_t size = tree_->data_size();
    auto r = tree_->visit_leaves([&](const ot::Octant& o, const std::byte* d) {
      const std::uint32_t c[3] = {o.x, o.y, o.z};
      v.bytes.push_back(static_cast<std::byte>(o.level));
      const auto* p = reinterpret_cast<const std::byte*>(c);
      v.bytes.insert(v.bytes.end(), p, p + sizeof c);
      v.bytes.insert(v.bytes.end(), d, d + size);
    });
    if (!r.ok()) return std::move(r).error();
    return v;
  }

  // Arena blocks of the header extent (header, record places: two, three
  // with keep_previous; the chunk table) and of the committed chunks,
  // computed as format() lays them out (src/octree/octree.cpp: chunks of a
  // thirty-second of the pool, between 16 family blocks and 1 MiB). 0 if the
  // chunk blocks are not whole chunks: a layout change there shows here as
  // an error, not as a silently skipped leak check.
  static std::uint64_t arena_blocks(pool::Pool& pool, const ot::Stats& s, std::uint64_t record_places) {
    const std::uint64_t bb = s.block_bytes, bs = pool.arena().block_size();
    const std::uint64_t want =
        std::clamp<std::uint64_t>(pool.size() / 32, bb * 16, std::max<std::uint64_t>(1u << 20, bb * 16));
    const std::uint64_t chunk_bytes = (want + bs - 1) / bs * bs;
    const std::uint64_t per_chunk = chunk_bytes / bb;
    if (s.chunk_blocks % per_chunk != 0) return 0;
    const std::uint64_t capacity = pool.size() / chunk_bytes + 1;
    return pool.arena().blocks_for(128 + record_places * 128 + capacity * 8) +
           s.chunk_blocks / per_chunk * (chunk_bytes / bs);
  }

  Params p_;
  std::unique_ptr<ot::Octree> tree_;
  const pool::Pool* pool_ = nullptr;                       // the pool tree_ was made on
  std::uint64_t blocks_ = 0;                               // of the last recovered version
  std::map<std::uint64_t, std::set<std::uint64_t>> sums_;  // keep_previous: checksums committed per number
};

Workload make(const char* name, const char* what, const Params& p, unsigned steps, bool broken) {
  Workload w;
  w.name = name;
  w.description = what;
  // The smallest pool: chunks of 32 KiB (a thirty-second), 227 family blocks
  // in 3D, 292 in 2D; `octree.2d` fills three of them.
  w.pool_size = 1u << 20;
  w.steps = steps;
  w.broken = broken;
  w.make = [p] { return std::make_unique<OctreeSteps>(p); };
  return w;
}

Params octree3d() {
  Params p;
  p.dims = 3;
  p.data_size = 8;
  p.mesh.max_level = 5;
  p.mesh.max_leaves = 400;
  return p;
}

Params quadtree() {
  Params p;
  p.dims = 2;
  p.data_size = 16;
  // No explicit collection: garbage fills chunks, new ones are added (their
  // chunk-table entries are committed with the record), and once the tree
  // holds three chunks of the 1 MiB pool's arena (over a tenth of it) the
  // allocator collects instead of adding a fourth, inside a change.
  p.gc_first_odds = 0;
  p.mesh.gc_odds = 0;
  p.threshold_nvbm = 0.9;
  p.mesh.max_level = 6;
  p.mesh.max_leaves = 300;
  return p;
}

}  // namespace

std::vector<Workload> octree_workloads() {
  Params publish = octree3d(), cow = octree3d(), gc = octree3d(), twin = octree3d(), keep = octree3d();
  keep.keep_previous = true;
  Params keep_broken = keep;
  keep_broken.internal.gc_ignores_previous = true;
  publish.internal.publish_before_flush = true;
  cow.internal.skip_copy_on_write = true;
  gc.internal.gc_ignores_committed = true;
  twin.internal.stale_twin = true;
  return {
      make("octree",
           "PM-octree (3D, 8-byte payloads): time steps of refine, coarsen, balance, updates and collections, each "
           "committed by persist; recovery collects and verifies",
           octree3d(), 16, false),
      make("octree.2d",
           "PM-octree as a quadtree (2D, 16-byte payloads), as `octree` but collected only by the allocator, at three "
           "chunks",
           quadtree(), 32, false),
      make("octree.publish_before_flush", "broken: the commit record is published before the new blocks are flushed",
           publish, 8, true),
      make("octree.no_copy_on_write", "broken: blocks shared with the persistent version are changed in place", cow, 8,
           true),
      make("octree.gc_ignores_committed",
           "broken: collections mark only from the working version (freed committed blocks are reused before the "
           "commit)",
           gc, 8, true),
      make("octree.stale_twin",
           "broken: a C0 block changed after a persist keeps its pool twin, which the next persist commits unchanged",
           twin, 8, true),
      make("octree.keep_previous",
           "PM-octree keeping the version before the committed one (keep_previous, what amr-mpi's agreement needs): "
           "as `octree`, and recovery checks the kept version against the tree committed under its number",
           keep, 16, false),
      make("octree.gc_ignores_previous",
           "broken: with keep_previous, collections do not mark from the kept version (its blocks are reused)",
           keep_broken, 12, true),
  };
}

}  // namespace cairn::testing::crashsim::builtin
