// cairn/octree.hpp — PM-octree (seed 000): an adaptive octree (or quadtree)
// whose working version lives in DRAM and NVM at once and whose last
// persistent version is kept, entire, in a pool for restart.
//
// The tree is pointer based, as the octrees of flow solvers are: an octant
// that has children points to one *family block* holding its 2^d children
// (fan-out 8 in 3D, 4 in 2D), each with a fixed-size user payload
// (Options::data_size, p4est's data_size). Coordinates are not stored; they
// follow from the path. Every octant, internal or leaf, carries a payload.
//
// Two versions. V(i-1), the last version made persistent, is entirely in the
// pool and is never written again; V(i), the working version, shares every
// family block it has not changed since. A block records the generation that
// wrote it: one older than the working generation is shared, and changing it
// copies it first (copy-on-write), which changes the parent's child pointer,
// so the copy propagates towards the root (the seed's Fig. 4). A block of the
// working generation is private to V(i) and is changed in place.
//
// C0 and C1. Blocks that V(i) creates or copies go to DRAM (C0) when they lie
// in a hot subtree (a C0 region, chosen by locational code), else to the pool
// (C1); the few blocks above the regions are in DRAM whenever C0 is. C0 is
// bounded by Options::dram_budget and by threshold_DRAM (free system memory):
// past either, the least frequently accessed C0 region is merged into C1
// before the operating system would swap.
//
// persist() (pm_persistent) gives every DRAM block that changed since the
// last persist a pool copy (its twin) and keeps the DRAM block for the next
// working version, makes every block written in this generation durable,
// then publishes the new root with one 8-byte commit word (the pool's root
// selector: the seed's swap of ADDR(V_i) and ADDR(V_{i-1})), then runs the
// dynamic layout transformation (feature-directed sampling, seed §3.3). Its
// cost is proportional to the blocks written since the last persist, not to
// the tree.
//
// restore() (pm_restore) maps the pool and returns the committed version: no
// work proportional to the tree happens before the application can read it.
// Blocks only the lost V(i) reached are reclaimed by a garbage collection
// that runs in the background; until it ends, new blocks come from fresh
// pool space.
//
// Damaged pools. restore() checks the tree header, the commit record and
// the chunk table; every other block is checked (its CRC-32C, its place in
// the tree, every reference in it) when an operation first reaches it. A
// damaged pool gives Errc::corrupted naming the file, from restore() or from
// the operation that meets the damage, never a crash or a silently
// different tree (ARCHITECTURE.md lists what is detected).
//
// Garbage collection marks from the committed root, the kept previous root
// (keep_previous) and the working root, and sweeps everything else: there is
// no allocation log, reachability is the allocation state (as for every
// cairn structure). gc() runs it now; it also runs, when a new chunk is
// needed and at the start of a persist, if free pool space has fallen below
// threshold_NVBM or the tree's chunks have doubled since the last collection.
//
// Not thread-safe: one thread uses a tree at a time (the background
// collector after restore is internal and reads only immutable blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::octree {

namespace detail {
struct Factory;      // the crash harness's way in (src/octree/internal.hpp)
struct CursorState;  // a flat iteration's place in the tree (src/octree/impl.hpp)
}  // namespace detail

// The finest level an octant can have (coordinates are integers in
// [0, 2^kMaxLevel) along each axis, in units of the finest octant).
inline constexpr int kMaxLevel = 19;
inline constexpr std::uint32_t kRootLength = 1u << kMaxLevel;

// An octant: its level and the integer coordinates of its lower corner.
struct Octant {
  int level = 0;
  std::uint32_t x = 0, y = 0, z = 0;
  std::uint32_t length() const { return kRootLength >> level; }  // edge, in finest units
  friend bool operator==(const Octant&, const Octant&) = default;
};
// The Morton position of an octant's lower corner (then its level): sorting
// by it gives the order in which leaves are visited.
std::uint64_t morton(const Octant& o, int dims);
// The octant's child `c` (bit 0: x, bit 1: y, bit 2: z), and its parent.
Octant child_of(const Octant& o, int c);
Octant parent_of(const Octant& o);

struct Options {
  int dims = 3;                          // 3: octree (fan-out 8); 2: quadtree (fan-out 4)
  std::uint32_t data_size = 0;           // payload bytes per octant
  std::uint64_t pool_size = 1ull << 30;  // create: bytes of the pool file
  // create: reserve the pool's space as the tree uses it (the file is sparse
  // beyond; a full device fails the growing operation with device_full)
  // instead of all at creation (tmpfs then allocates pool_size at once).
  bool reserve_as_used = true;
  // C0: at most this many bytes of blocks in DRAM (0: none, every block in
  // the pool). Past it, the least frequently accessed C0 region is merged.
  std::uint64_t dram_budget = 256ull << 20;
  // threshold_DRAM: also merge C0 regions while the system's available memory
  // (MemAvailable) is below this many bytes.
  std::uint64_t threshold_dram = 512ull << 20;
  // threshold_NVBM: collect garbage when the free part of the pool falls below
  // this fraction (the tree also collects once its chunks have doubled since
  // the last collection, so a tree much smaller than its pool reuses blocks).
  double threshold_nvbm = 0.10;
  // T_transform: move a hot C1 subtree into C0 when its sampled access
  // frequency exceeds the coldest C0 region's by this ratio (seed §3.3).
  double t_transform = 2.0;
  bool background_gc = true;  // restore: collect in a background thread
  // create: keep the version committed before the last one intact as well
  // (stored in the tree; restore follows the tree, not this option), so a
  // caller can go back one version: what a job of many processes needs when
  // some of them committed a version the others never reached
  // (cairn/dist.hpp's agreement). Costs the blocks that version alone holds.
  bool keep_previous = false;
  // create: the number the first persist() gives its version (the next ones
  // follow it): a tree rebuilt to stand in for a lost one continues its
  // numbering.
  std::uint64_t first_version = 1;
  // restore: the version to restore; 0 the last committed one. In a tree that
  // keeps the previous version, that one may be asked for: it becomes the
  // committed version again, durably, and the newer one is discarded.
  std::uint64_t version = 0;
  // The pool's device ("" : $CAIRN_DEVICE, else the real one); an emulated
  // NVM profile ("emulated:pcm-2017") also charges each pool block a
  // traversal reads (DRAM blocks cost nothing extra).
  std::string device;
};

// Memory accounting (stats()).
struct Stats {
  std::uint64_t leaves = 0, octants = 0;  // of V(i)
  std::uint64_t blocks = 0;               // family blocks of V(i)
  std::uint64_t dram_bytes = 0;           // V(i)'s blocks in DRAM (C0)
  std::uint64_t nvm_bytes = 0;            // blocks in the pool reachable from V(i) or V(i-1)
  std::uint64_t shared_bytes = 0;         // V(i)'s blocks that hold committed contents: reachable from both
                                          // versions, or a C0 block whose pool twin the committed one holds
  std::uint64_t version_bytes = 0;        // V(i) alone: what one version costs
  std::uint64_t block_bytes = 0;          // size of one family block
  std::uint64_t pool_free_bytes = 0;      // free pool space (after the last GC)
  std::uint64_t free_blocks = 0;          // blocks of chunks known free (the collector's list)
  std::uint64_t chunk_blocks = 0;         // blocks the chunks hold in all
  std::uint64_t committed_version = 0;
  std::uint64_t previous_version = 0;  // the version kept before it (keep_previous), 0: none
  std::uint64_t previous_blocks = 0;   // pool blocks only that version reaches (kept from reuse)
  int depth = 0;                       // finest leaf level
  std::uint64_t c0_regions = 0;
  std::uint64_t merges = 0;  // C0 regions merged into C1 for lack of DRAM
  // NVM writes since create/restore: cache lines stored into pool blocks by
  // the working version (new and copied blocks, C0 merges, payload and
  // pointer updates), the seed's count of writes to NVBM.
  std::uint64_t nvm_store_lines = 0;
  std::uint64_t gc_runs = 0;
};

// What one persist() did.
struct PersistStats {
  std::uint64_t version = 0;
  std::uint64_t blocks_written = 0;  // blocks made durable (new or changed since the last persist)
  std::uint64_t bytes_written = 0;
  std::uint64_t merged_from_dram = 0;  // of which copied from C0
  // Blocks the commit walked to find them: those written since the last
  // persist and the paths to them, not the tree (C0 blocks that kept their
  // pool twin are not entered).
  std::uint64_t blocks_visited = 0;
  double seconds = 0;
};

// A leaf as the callbacks see it.
struct LeafView {
  Octant octant;
  const std::byte* data;  // data_size bytes, valid until the tree changes
};

// A leaf as the bulk writer (Octree::write_leaves) hands it out: its
// payload may be written in place.
struct WritableLeaf {
  Octant octant;
  std::byte* data;  // data_size bytes, writable until the next call of next()
};

// The order in which Octree::leaves and Octree::write_leaves hand leaves out.
//  - morton: Morton order, the order of visit_leaves (the default): a walk
//    of the blocks depth first, one dependent load per family block.
//  - memory: every leaf exactly once in no particular order, for work whose
//    result does not depend on the order (a sum, a norm, a payload update
//    per leaf): the DRAM (C0) blocks in the order they lie in memory, a
//    sequential scan, then the pool (C1) subtrees below them depth first.
//    The order changes as the tree changes; it is not Morton order even
//    within a batch. While the tree has DRAM blocks, the memory-order
//    writer copies shared pool blocks it writes below the C0 regions into
//    the pool rather than into DRAM, and runs C0 merges only after its last
//    batch.
enum class LeafOrder { morton, memory };

// Flat, callback-free iteration over the working version's leaves, in
// Morton order (the order of visit_leaves) or, asked for, in memory order
// (LeafOrder above), a batch of leaves at a time:
//
//   auto leaves = tree.leaves();
//   for (;;) {
//     auto batch = leaves.next();
//     if (!batch.ok()) return batch.error();  // Errc::corrupted: a damaged pool
//     if (batch.value().empty()) break;       // empty only at the end
//     for (const LeafView& l : batch.value()) sum += l.data[0];
//   }
//
// The walk keeps its path (a frame per level) between batches and reads
// every reference through the same checks as every other walk; it fetches
// a family block's children while the leaves before them are handed out.
// A batch's views are valid until the next call of next(); a cursor is
// invalid once the tree changes (as a container's iterator is). A check that
// fails ends the cursor with the error.
class LeafCursor {
 public:
  static constexpr std::size_t kBatch = 128;  // leaves per batch (the last one may hold fewer)
  LeafCursor(LeafCursor&&) noexcept;
  LeafCursor& operator=(LeafCursor&&) noexcept;
  ~LeafCursor();
  Result<std::span<const LeafView>> next();

 private:
  friend class Octree;
  explicit LeafCursor(std::unique_ptr<detail::CursorState> s);
  std::unique_ptr<detail::CursorState> s_;
};

// The bulk payload update (Octree::write_leaves): the same walk, handing
// out writable payloads. Every family block it hands out leaves of is made
// writable as the walk enters it: copied once if the committed version
// shares it (with the path above it, which the walk remembers as writable
// until it leaves it: no per-leaf re-check of the path), and counted as
// changed once, so the next persist writes it. Meant for writing every
// payload, or most: for a few changes, update_leaves copies only the blocks
// whose payloads changed. Batches end where a C0 merge may move blocks, so a
// batch's pointers stay valid until the next call of next(); a cursor is
// invalid once the tree changes otherwise.
class LeafWriter {
 public:
  LeafWriter(LeafWriter&&) noexcept;
  LeafWriter& operator=(LeafWriter&&) noexcept;
  ~LeafWriter();
  Result<std::span<const WritableLeaf>> next();

 private:
  friend class Octree;
  explicit LeafWriter(std::unique_ptr<detail::CursorState> s);
  std::unique_ptr<detail::CursorState> s_;
};

// The versions a persisted tree holds (Octree::versions).
struct Versions {
  std::uint64_t committed = 0;
  std::uint64_t previous = 0;  // kept intact (Options::keep_previous), 0: none
};

enum class Connect { face, full };  // balance: across faces, or faces, edges and corners

class Octree {
 public:
  // Callbacks. `data` points at data_size bytes.
  using RefineFn = std::function<bool(const Octant&, const std::byte* data)>;
  // Initialises a new octant's payload; `parent` is the payload of the octant
  // it comes from (refine: its parent; coarsen: nullptr, see MergeFn).
  using InitFn = std::function<void(const Octant&, std::byte* data, const std::byte* parent)>;
  // Coarsen: `family` is the 2^d children in Morton order.
  using CoarsenFn = std::function<bool(const Octant& parent, std::span<const LeafView> family)>;
  // The payload of a coarsened parent from its children.
  using MergeFn = std::function<void(const Octant& parent, std::byte* data, std::span<const LeafView> family)>;
  using VisitFn = std::function<void(const Octant&, const std::byte* data)>;
  // Update: `data` is a scratch copy; return true if it changed (only then is
  // the octant's block copied and written).
  using UpdateFn = std::function<bool(const Octant&, std::byte* data)>;
  // Feature function for the layout transformation: true if the octant is of
  // interest (for example, it satisfies the refinement condition).
  using FeatureFn = std::function<bool(const Octant&, const std::byte* data)>;

  // pm_create: a new pool at `path` (refused if it exists) holding one root
  // octant (level 0, payload zero). Nothing is persistent until persist().
  static Result<std::unique_ptr<Octree>> create(const std::string& path, const Options& options);
  // pm_restore: the last persisted version of the tree in `path`. dims and
  // data_size must match the stored ones (Errc::layout_mismatch).
  static Result<std::unique_ptr<Octree>> restore(const std::string& path, const Options& options);
  // The versions the tree in `path` can restore, without restoring it.
  static Result<Versions> versions(const std::string& path, const Options& options);
  // pm_delete: removes the pool file (every octant of both versions).
  static Result<void> remove(const std::string& path);
  ~Octree();
  Octree(const Octree&) = delete;
  Octree& operator=(const Octree&) = delete;

  // pm_persistent (see above). Returns what it wrote.
  Result<PersistStats> persist();

  // ---- meshing (p4est-shaped) ----
  // Refines every leaf to `level` (construct a uniform tree).
  Result<void> uniform(int level, const InitFn& init);
  // Refines leaves for which `refine` says so, up to `max_level`; recursive:
  // the new children are offered to `refine` too.
  Result<void> refine(bool recursive, const RefineFn& refine, const InitFn& init, int max_level = kMaxLevel);
  // Replaces families of leaves for which `coarsen` says so by their parent;
  // recursive: the new parent's family is offered too.
  Result<void> coarsen(bool recursive, const CoarsenFn& coarsen, const MergeFn& merge);
  // 2:1 balance: refines until leaves that share a face (Connect::full: a
  // face, edge or corner) differ by at most one level.
  Result<void> balance(Connect connect, const InitFn& init);

  // Follows a tree the application keeps itself (a solver's own mesh,
  // persisted every step: seed 000's Gerris), in one traversal: the shape
  // becomes the application's and every leaf's payload goes through
  // `update`. What refine, coarsen and update_leaves do together, without
  // their three traversals and without looking the application's cells up
  // from the root for each octant. The application names its octants by
  // handles: `root` is its root's; Follow::children is asked for the handles
  // of an octant's 2^d children (in this tree's child order, bit 0 x, bit 1
  // y, bit 2 z) and returns false if the octant is a leaf there. A leaf here
  // that has children there is split (`init`, then its children are
  // followed); an octant with children here that is a leaf there loses its
  // subtree. `update` sees a scratch copy of the leaf's payload and returns
  // true if it changed it (only then is the block copied and written).
  struct Follow {
    std::function<bool(const Octant&, const void* handle, const void** children)> children;
    InitFn init;
    std::function<bool(const Octant&, const void* handle, std::byte* data)> update;
  };
  Result<void> follow(const void* root, const Follow& fns);

  // ---- access ----
  // Every leaf in Morton order. Errc::corrupted if a block read on the way
  // fails its check (a damaged pool); the tree is not changed.
  Result<void> visit_leaves(const VisitFn& fn) const;
  // Every leaf in Morton order, with a chance to change its payload.
  Result<void> update_leaves(const UpdateFn& fn);
  // The same leaves as visit_leaves, in the same order, without a callback
  // (LeafCursor above); and every payload writable in place (LeafWriter).
  // LeafOrder::memory: the same leaves in memory order (faster: no
  // dependent load per block for the DRAM part), each exactly once.
  LeafCursor leaves(LeafOrder order = LeafOrder::morton) const;
  LeafWriter write_leaves(LeafOrder order = LeafOrder::morton);
  // The root octant's payload: internal once the tree is refined, so free for
  // what the application must persist with the tree (a step counter, the
  // simulation time): it is committed by persist() with everything else.
  const std::byte* root_data() const;
  Result<void> update_root(const UpdateFn& fn);
  // The leaf containing the finest-level point (x, y, z); its payload.
  Result<LeafView> find_leaf(std::uint32_t x, std::uint32_t y, std::uint32_t z = 0) const;
  // The leaves across one side of a leaf: `direction` is an offset in
  // {-1, 0, 1}^d, not all zero (a face, edge or corner). Empty at the
  // domain boundary; one leaf of the same or a coarser level; or the finer
  // leaves that touch that side.
  Result<std::vector<LeafView>> neighbours(const Octant& leaf, const int direction[3]) const;
  // Every face between leaves once, in Morton order of the leaf that reports
  // it: `other` is empty at the boundary; a hanging face (fine next to coarse)
  // is reported from the fine side. `axis` 0..d-1, `upper` the side of `leaf`.
  using FaceFn = std::function<void(const LeafView& leaf, int axis, bool upper, const LeafView* other)>;
  Result<void> visit_faces(const FaceFn& fn) const;

  // Morton ranges of leaves with about equal total weight: parts + 1 leaf
  // indices (first leaf of each part, then the leaf count).
  Result<std::vector<std::uint64_t>> partition(
      int parts, const std::function<double(const Octant&, const std::byte*)>& weight) const;
  // Checksum of V(i): every leaf's octant and payload, in Morton order.
  Result<std::uint64_t> checksum() const;
  // The same of the version kept before the committed one (keep_previous);
  // Errc::no_version if none is kept. Reads it without making it current.
  Result<std::uint64_t> previous_checksum() const;
  Result<std::uint64_t> leaf_count() const;

  // The leaf mesh as a VTK unstructured grid (.vtu, ASCII), with the level
  // and one cell array per field.
  struct Field {
    std::string name;
    std::function<double(const Octant&, const std::byte*)> value;
  };
  Result<void> write_vtk(const std::string& path, const std::vector<Field>& fields = {}) const;

  // ---- memory, versions, collection ----
  Result<Stats> stats() const;
  // Collects garbage now (waits for a background collection first).
  Result<void> gc();
  // The feature function the layout transformation samples after each
  // persist (none: no transformation).
  void set_feature(FeatureFn fn);
  // Runs the layout transformation now (persist() runs it after committing).
  void transform_layout();

  int dims() const;
  std::uint32_t data_size() const;
  std::uint64_t version() const;  // the committed version (0: never persisted)
  const std::string& path() const;

  // Checks the stored structure: every block reachable from any version
  // passes its checks (its CRC the first time), lies in a chunk, and is not
  // on the free list; no DRAM block is reachable from a committed version;
  // after a collection, free blocks and reachable blocks account for every
  // block of every chunk. Errc::corrupted names the first problem.
  Result<void> verify() const;

  class Impl;

 private:
  friend struct detail::Factory;
  explicit Octree(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn::octree
