// impl.hpp — the PM-octree's state and the operations its source files
// share (internal, not installed): Octree::Impl, the C0 slab, and the
// failure path of the recursive operations.
//
// Where each part lives:
//   format.hpp   on-media structs, child references, locational codes
//   records.cpp  create/restore: the tree header, the commit records, attach
//   chunks.cpp   the checked read of a reference, the chunk store, garbage
//                collection, verify()
//   c0.cpp       the DRAM slab, C0 regions, merge/evict, layout transformation
//   commit.cpp   persist(): the committed version's blocks, flush, record
//   meshing.cpp  refine, coarsen, follow, balance, update (the writing walks)
//   queries.cpp  the reading walks, stats, partition, VTK
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cairn/extended/pool.hpp"
#include "octree/format.hpp"
#include "octree/internal.hpp"

namespace cairn::octree {

namespace detail {

// Internal failure: thrown inside the recursive operations, returned at the API.
struct Fail {
  Error error;
};
[[noreturn]] inline void fail(Errc c, std::string msg) { throw Fail{{c, std::move(msg)}}; }

template <class F>
auto guard(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Fail& e) {
    return e.error;
  } catch (const std::bad_alloc&) {
    return Error{Errc::out_of_space, "out of DRAM"};
  }
}

// A DRAM block not in use holds this where a block's header holds the code
// of its parent octant (no octant packs to it: its level field is 127), so
// a scan of the slab in memory order (Octree::leaves(LeafOrder::memory))
// tells blocks in use from free ones without a bitmap.
inline constexpr std::uint64_t kFreeDramBlock = ~std::uint64_t{1};

// DRAM blocks (C0): a slab of equal blocks, each preceded by 8 bytes that
// hold its twin (see Octree::Impl::twin). Every block in use is a block of
// the working version (a block it stops reaching is released at once).
class DramSlab {
 public:
  explicit DramSlab(std::size_t block_bytes) : bytes_(block_bytes + 8) {}
  ~DramSlab();
  DramSlab(const DramSlab&) = delete;
  DramSlab& operator=(const DramSlab&) = delete;
  std::byte* alloc();
  void release(std::byte* b) {
    std::memcpy(b, &kFreeDramBlock, sizeof kFreeDramBlock);
    free_.push_back(b);
    --in_use_;
  }
  std::uint64_t in_use() const { return in_use_; }
  // The slab in memory order: chunk c's block i (i < per_chunk()), in use
  // or holding kFreeDramBlock.
  std::size_t chunk_count() const { return chunks_.size(); }
  std::size_t per_chunk() const { return per_chunk_; }
  std::byte* block_at(std::size_t c, std::size_t i) const {
    return static_cast<std::byte*>(chunks_[c]) + i * bytes_ + 8;
  }
  // Whether `b` is where a block of this slab starts (a DRAM reference read
  // from a pool block is believed only then).
  bool owns(const std::byte* b) const;

 private:
  std::size_t bytes_;
  std::size_t chunk_bytes_ = 0;
  std::size_t per_chunk_ = 0;
  std::vector<void*> chunks_;
  std::vector<std::uintptr_t> starts_;  // of chunks_, sorted
  std::vector<std::byte*> free_;
  std::uint64_t in_use_ = 0;
};

// The same-level octant next to `o` in direction `dir`; false outside the domain.
inline bool shifted(const Octant& o, const int dir[3], int dims, Octant& out) {
  const std::int64_t len = o.length();
  const std::int64_t c[3] = {static_cast<std::int64_t>(o.x) + dir[0] * len,
                             static_cast<std::int64_t>(o.y) + dir[1] * len,
                             static_cast<std::int64_t>(o.z) + (dims == 3 ? dir[2] : 0) * len};
  for (int a = 0; a < dims; ++a)
    if (c[a] < 0 || c[a] >= static_cast<std::int64_t>(kRootLength)) return false;
  out = {o.level, static_cast<std::uint32_t>(c[0]), static_cast<std::uint32_t>(c[1]), static_cast<std::uint32_t>(c[2])};
  return true;
}

}  // namespace detail

class Octree::Impl {
 public:
  using Ref = detail::Ref;

  ~Impl();

  // ---- records.cpp: a new tree in `pool`, or the persisted one.
  static Result<std::unique_ptr<Impl>> format(pool::Pool& pool, const Options& o, const detail::Internal& in);
  static Result<std::unique_ptr<Impl>> attach(pool::Pool& pool, const Options& o, const detail::Internal& in);
  void own_pool(std::unique_ptr<pool::Pool> p) { pool_owner_ = std::move(p); }

  // ---- commit.cpp
  Result<PersistStats> persist();

  // ---- meshing.cpp
  Result<void> refine(bool recursive, const RefineFn& fn, const InitFn& init, int max_level);
  Result<void> coarsen(bool recursive, const CoarsenFn& fn, const MergeFn& merge);
  Result<void> follow(const void* root, const Follow& fns);
  Result<void> balance(Connect connect, const InitFn& init);
  Result<void> update_leaves(const UpdateFn& fn);
  Result<void> update_root(const UpdateFn& fn);

  // ---- leaves.cpp: the flat iteration (LeafCursor, LeafWriter)
  std::size_t fill_views(detail::CursorState& s);
  std::size_t fill_writable(detail::CursorState& s);

  // ---- queries.cpp
  Result<void> visit_leaves(const VisitFn& fn) const;
  Result<std::uint64_t> checksum() const { return checksum_from(work_root_); }
  Result<std::uint64_t> previous_checksum() const;
  Result<std::uint64_t> leaf_count() const;
  Result<LeafView> find_leaf(std::uint32_t x, std::uint32_t y, std::uint32_t z) const;
  Result<std::vector<LeafView>> neighbours(const Octant& leaf, const int direction[3]) const;
  Result<Stats> stats();
  const std::byte* root_data() const { return data(work_root_, 0); }

  // ---- chunks.cpp
  Result<void> gc();
  Result<void> verify();

  // ---- c0.cpp
  void set_feature(FeatureFn fn) { feature_ = std::move(fn); }
  void transform_layout();

  int dims() const { return dims_; }
  std::uint32_t data_size() const { return data_size_; }
  std::uint64_t version() const { return committed_gen_; }
  const std::string& file() const { return file_; }

 private:
  class Path;  // meshing.cpp: a writing walk's frames and where merges may run
  struct Ops;  // meshing.cpp: the writing walks

  // ---- geometry of blocks
  int dims_ = 3, fan_ = 8;
  std::uint32_t data_size_ = 0;
  std::size_t stride_ = 8, block_bytes_ = 0;

  // ---- storage
  std::unique_ptr<pool::Pool> pool_owner_;  // null when the pool is borrowed (crash harness)
  pool::Pool* pool_ = nullptr;
  std::byte* base_ = nullptr;
  std::uint64_t pool_size_ = 0;
  detail::Internal internal_;
  std::uint64_t meta_ = 0;  // tree header extent
  detail::TreeHeader* header_ = nullptr;
  std::uint64_t* table_ = nullptr;  // chunk table
  std::vector<std::uint64_t> chunks_;
  using ChunkIndex = std::vector<std::pair<std::uint64_t, std::uint32_t>>;
  ChunkIndex chunk_index_;  // sorted (offset, index)
  std::uint64_t committed_chunks_ = 0;
  std::uint64_t blocks_per_chunk_ = 0;
  std::uint64_t bump_ = 0;  // next unused block of the last chunk
  // Where each chunk starts: window_[w] is 1 + the index of the chunk that
  // starts in [kArenaOffset + w chunk_bytes, + chunk_bytes) (chunks do not
  // overlap, so at most one does), 0 for none: a block is found in O(1).
  std::vector<std::uint32_t> window_;
  std::uint64_t chunk_span_ = 0;     // the bytes a chunk's blocks span
  int window_shift_ = 0;             // log2 of a window of window_
  std::uint64_t block_inverse_ = 0;  // floor((2^32 - 1) / block_bytes_)
  // Blocks of the chunks restore found whose CRC no walk has checked yet,
  // one bit per block, chunk after chunk (chunk_words_ words each: one
  // allocation, not one per chunk, made before restore returns); a block
  // loses its bit when a walk has checked it or when it is handed out again.
  mutable std::vector<std::uint64_t> unchecked_;
  std::uint64_t unchecked_chunks_ = 0;
  std::uint64_t chunk_words_ = 0;  // (blocks_per_chunk_ + 63) / 64
  std::vector<std::uint64_t> free_;
  std::vector<std::uint64_t> dirty_;       // pool blocks written in this generation
  bool dirty_reused_ = false;              // dirty_ may list a block twice (freed and handed out again)
  std::vector<std::uint64_t> next_dirty_;  // pool blocks of the next generation, made by commit
  // DRAM blocks without a twin: made (alloc_block) or changed (touch) since
  // the last persist, each listed once as it loses its twin (a block freed
  // since stays listed: it only widens the commit's walk). C0 blocks stay in
  // DRAM over commits, so without this list the commit would have to walk
  // every DRAM block to find the changed ones: the whole tree when C0 holds it.
  std::vector<Ref> dram_changed_;
  // commit: the Morton keys (morton_key) of the octants whose children the
  // listed blocks hold, sorted; the commit enters a DRAM block that kept its
  // twin only if a key lies in its subtree.
  std::vector<std::uint64_t> changed_keys_;
  // More blocks listed than the commit would sort (a quarter of the DRAM
  // blocks): the list stops growing and the next commit enters every
  // writable block (a tree that is refined and coarsened for many steps
  // between persists lists each new block).
  bool changed_overflow_ = false;
  bool commit_prunes_ = false;       // commit: enter only DRAM blocks with a changed key below
  std::uint64_t commit_visits_ = 0;  // blocks the commit walk entered (PersistStats::blocks_visited)
  detail::DramSlab* slab_ = nullptr;
  std::unique_ptr<detail::DramSlab> slab_owner_;

  // ---- versions
  Ref committed_root_ = 0, work_root_ = 0;
  Ref work_next_root_ = 0;  // commit: the next working version's root
  std::uint64_t committed_gen_ = 0;
  // keep_previous (the header's flag): the version committed before
  // committed_gen_ (0: none), whose blocks the collector keeps.
  Ref previous_root_ = 0;
  std::uint64_t previous_gen_ = 0;
  std::uint32_t work_gen_ = 1;
  bool gc_disabled_ = false;
  // Collection off for a scope: merges and the commit move blocks, and a
  // collection must not see them half moved.
  struct NoCollection {
    Impl& t;
    bool was;
    explicit NoCollection(Impl& i) : t(i), was(i.gc_disabled_) { t.gc_disabled_ = true; }
    ~NoCollection() { t.gc_disabled_ = was; }
    NoCollection(const NoCollection&) = delete;
    NoCollection& operator=(const NoCollection&) = delete;
  };
  // collect_if_low(): collect once the tree holds this many chunks (twice
  // what the last collection found live, plus kGrowthChunks).
  static constexpr std::uint64_t kGrowthChunks = 4;
  std::uint64_t collect_at_chunks_ = kGrowthChunks;
  // Pool blocks the working version stopped reaching (copied on write,
  // dropped, replaced by a new twin or a merge, or by the next version's
  // copy of a path to DRAM), by the generation that replaced them: such a
  // block is garbage once no version reaches it, i.e. after its generation's
  // commit, or the one after with keep_previous. Without any, a collection
  // would find every block live, and the growth rule of collect_if_low skips
  // it: a tree built in C0 and persisted once (every block a new twin) does
  // not pay a walk of the whole tree at its next persist.
  std::uint64_t replaced_now_ = 0;   // in the working generation
  std::uint64_t replaced_last_ = 0;  // in the generation committed last
  std::uint64_t replaced_older_ = 0;
  void replaced() { ++replaced_now_; }
  bool garbage_possible() const {
    return replaced_older_ != 0 || ((header_->flags & detail::kKeepsPrevious) == 0 && replaced_last_ != 0);
  }
  std::uint64_t gc_runs_ = 0, merges_ = 0, merged_count_ = 0;
  // NVM writes: cache lines the working version stored into pool blocks
  // (new and copied blocks, merges, payload and pointer updates).
  std::uint64_t nvm_store_lines_ = 0;
  std::uint64_t block_lines_ = 0;  // lines of one block
  bool charge_reads_ = false;      // the pool's device charges NVM reads (emulated)

  // ---- background collection after restore
  std::thread bg_;
  std::atomic<bool> bg_done_{false};
  bool bg_running_ = false;
  std::uint64_t bg_chunks_ = 0;  // chunks [0, bg_chunks_) belong to the collector
  std::vector<std::uint64_t> bg_free_;
  Error bg_error_;

  // ---- C0 regions
  struct Region {
    bool hot = false;
    bool cold_now = false;  // merged out in this generation
    std::uint64_t freq = 0;
    std::uint64_t dram_blocks = 0;
  };
  int region_level_ = 1;
  int depth_ = 0;            // finest level reached (an upper bound: coarsening does not lower it)
  bool default_hot_ = true;  // no feature function chose yet: every region is hot
  std::unordered_map<std::uint64_t, Region> regions_;
  std::uint64_t dram_budget_ = 0, threshold_dram_ = 0;
  double threshold_nvbm_ = 0.1, t_transform_ = 2.0;
  std::uint64_t dram_allocs_since_check_ = 0;
  bool evict_pending_ = false;
  // The memory-order writer's pool phase: blocks below the regions are
  // allocated in the pool, never in the slab (alloc_block).
  bool force_c1_ = false;
  FeatureFn feature_;

  std::string file_;  // the pool file

  // ---- block access
  std::byte* blk(Ref r) const {
    return detail::in_dram(r) ? reinterpret_cast<std::byte*>(r & ~std::uint64_t{1}) : base_ + r;
  }
  detail::BlockHeader* hdr(Ref r) const { return reinterpret_cast<detail::BlockHeader*>(blk(r)); }
  // A DRAM block's twin: the pool block that holds its contents in the
  // committed version (written by the last persist), or 0 once the DRAM
  // block has changed since (or never had one).
  Ref& twin(Ref r) const { return *reinterpret_cast<Ref*>(blk(r) - 8); }
  void stamp(Ref r) const { hdr(r)->epoch = work_gen_; }
  std::uint64_t& child(Ref r, int s) const {
    return *reinterpret_cast<std::uint64_t*>(blk(r) + sizeof(detail::BlockHeader) +
                                             static_cast<std::size_t>(s) * stride_);
  }
  std::byte* data(Ref r, int s) const {
    return blk(r) + sizeof(detail::BlockHeader) + static_cast<std::size_t>(s) * stride_ + 8;
  }
  bool writable(Ref r) const {
    return detail::in_dram(r) || hdr(r)->epoch == work_gen_ || internal_.skip_copy_on_write;
  }
  // The newest generation a committed version holds (the broken variant
  // that skips copy-on-write writes committed blocks in place: it is left to
  // the crash harness to catch, not to these checks).
  std::uint32_t committed_limit() const {
    return internal_.skip_copy_on_write ? work_gen_ : static_cast<std::uint32_t>(committed_gen_);
  }
  // The octant of block r's slot s (the block's header names their parent).
  Octant slot_octant(Ref r, int s) const {
    const std::uint64_t code = hdr(r)->code;
    return code == detail::kNoParent ? Octant{} : detail::child_octant(detail::unpack(code), s);
  }
  // Which child of the level-(level-1) ancestor of `o` contains it.
  static int child_index(const Octant& o, int level) {
    const int b = kMaxLevel - level;
    return static_cast<int>(((o.x >> b) & 1u) | (((o.y >> b) & 1u) << 1) | (((o.z >> b) & 1u) << 2));
  }
  // A DRAM block lost its twin: listed for the next commit.
  void list_changed(Ref r) {
    if (dram_changed_.size() > slab_->in_use() / 4 + 64)
      changed_overflow_ = true;
    else
      dram_changed_.push_back(r);
  }
  // Every store into a block of the working version: a DRAM block loses its
  // twin (it differs from it now); a pool block counts as an NVM write.
  void touch(Ref r) {
    if (detail::in_dram(r)) {
      // Listed when it loses its twin (the broken stale_twin variant keeps
      // the twin, so its blocks are listed at every store).
      if (twin(r) != 0 || internal_.stale_twin) list_changed(r);
      if (!internal_.stale_twin) twin(r) = 0;
    } else {
      ++nvm_store_lines_;
    }
  }

  // ---- the checked read (chunks.cpp): every walk reads a child reference
  // through read_child and a root through read_root, which return it only
  // once it is believable:
  //  - an octant of the finest level has no children;
  //  - a pool reference is 8-aligned, lies in the pool and names a block of
  //    a chunk; a DRAM reference (bit 0) is read by a walk of the working
  //    version from a DRAM block, or from a pool block and names a block of
  //    the DRAM slab (so none is believed in a freshly restored tree);
  //  - the block's header names the octant it was reached from, and its
  //    generation is at most the walk's `max_epoch` (the committed one for
  //    committed versions) and, below a pool block, at most that block's
  //    (copy-on-write copies a block's whole path, so a child is never newer
  //    than its parent);
  //  - a pool block restore found is checked against its CRC the first time
  //    a walk reaches it (the background collector checks every one).
  // Anything else is Errc::corrupted naming the pool file.
  enum class Reader {
    walk,        // a walk of the working version: a pool block's read is charged to an emulated NVM device
    quiet,       // commit, merge, collection, stats: no charge
    background,  // the collector's thread after restore: every CRC checked, nothing recorded
  };
  Ref read_child(Ref r, int s, const Octant& o, std::uint32_t max_epoch, Reader who = Reader::walk) const {
    const Ref c = child(r, s);
    if (c == 0) return 0;
    check_child(r, c, o, max_epoch, who);
    return c;
  }
  Ref read_root(Ref r, std::uint32_t max_epoch, Reader who) const;
  // The checks of read_child (inline: every walk runs them for every
  // reference); bad_child says which one failed.
  void check_child(Ref parent, Ref c, const Octant& o, std::uint32_t max_epoch, Reader who) const {
    const bool dram = detail::in_dram(c);
    if (dram) {
      // Only the working version reaches DRAM blocks, and only through DRAM
      // blocks or pool blocks this process wrote (which point into its slab).
      if (who == Reader::background || max_epoch != work_gen_ || (!detail::in_dram(parent) && !slab_->owns(blk(c))))
        bad_child(parent, c, o, max_epoch, who);
    } else if (c % 8 != 0 || c < pool::kArenaOffset || c > pool_size_ - block_bytes_) {
      bad_child(parent, c, o, max_epoch, who);
    }
    const detail::BlockHeader* h = hdr(c);
    const std::uint32_t limit =
        detail::in_dram(parent) || internal_.skip_copy_on_write ? max_epoch : std::min(max_epoch, hdr(parent)->epoch);
    if (o.level >= kMaxLevel || h->code != detail::pack(o) || h->epoch > limit) bad_child(parent, c, o, max_epoch, who);
    if (!dram) {
      check_pool_block(c, who);
      if (who == Reader::walk && charge_reads_) pool_->device().read_charge(block_bytes_, false);
    }
  }
  [[noreturn]] void bad_child(Ref parent, Ref c, const Octant& o, std::uint32_t max_epoch, Reader who) const;
  // A pool block lies in a chunk; one of the chunks restore found is checked
  // against its CRC the first time a walk reaches it (the background
  // collector checks every one it reaches and records nothing: it runs
  // beside the walks).
  void check_pool_block(Ref r, Reader who) const {
    std::uint32_t chunk;
    std::uint64_t i;
    if (who == Reader::background) {
      if (hdr(r)->crc != detail::block_crc(blk(r), block_bytes_)) bad_block(r, "fails its CRC");
    } else if (!locate(r, chunk, i)) {
      bad_block(r, "is not a block of a chunk");
    } else if (chunk < unchecked_chunks_) {
      std::uint64_t& word = unchecked_[chunk * chunk_words_ + i / 64];
      const std::uint64_t bit = std::uint64_t{1} << (i % 64);
      if ((word & bit) == 0) return;
      if (hdr(r)->crc != detail::block_crc(blk(r), block_bytes_)) bad_block(r, "fails its CRC");
      word &= ~bit;
    }
  }
  [[noreturn]] void bad_block(Ref r, const char* what) const;
  [[noreturn]] void damaged(const Octant* o, const std::string& what) const;
  // The chunk and index of the block at r, if r is where a block of a
  // chunk starts (no division: every walk runs it for every pool block).
  // Windows are the largest power of two not above a chunk, so the chunk
  // holding r starts in r's window or one of the two before.
  bool locate(Ref r, std::uint32_t& chunk, std::uint64_t& index) const {
    if (r < pool::kArenaOffset) return false;
    const std::uint64_t w = (r - pool::kArenaOffset) >> window_shift_;
    for (std::uint64_t back = 0; back < 3 && back <= w; ++back) {
      const std::uint64_t k = w - back;
      if (k >= window_.size() || window_[k] == 0) continue;
      const std::uint64_t start = chunks_[window_[k] - 1];
      if (r < start || r - start >= chunk_span_) continue;
      const std::uint64_t off = r - start;
      // Below 2^32 the 32-bit reciprocal rounds down by at most one.
      std::uint64_t q = off >> 32 != 0 ? off / block_bytes_ : (off * block_inverse_) >> 32;
      if ((q + 1) * block_bytes_ <= off) ++q;
      if (q * block_bytes_ != off) return false;
      chunk = window_[k] - 1;
      index = q;
      return true;
    }
    return false;
  }
  void note_chunk(std::uint32_t index);

  // ---- records.cpp
  void configure(const Options& o);
  void set_chunk_geometry(std::uint64_t chunk_bytes);

  // ---- c0.cpp: regions, DRAM blocks, merges
  std::uint64_t region_of(const Octant& parent) const;
  bool hot(std::uint64_t region);
  Ref alloc_block(const Octant* parent);
  void free_private(Ref r);
  Ref copy_block(Ref r, const Octant* parent);
  Ref merge(Ref r);
  void merge_all();
  void maybe_evict();
  void evict(std::uint64_t region);
  void transform_layout_or_fail();

  // ---- chunks.cpp: the chunk store and the collector
  void add_chunk();
  Ref nvm_alloc();
  void install_background_gc();
  void collected();
  void collect_if_low();
  struct Marks {
    std::vector<std::vector<std::uint64_t>> bits;  // per chunk
  };
  bool locate_block(const ChunkIndex& chunk_index, Ref r, std::uint32_t& chunk, std::uint64_t& index) const;
  void mark(Ref r, Marks& m, const ChunkIndex& index, std::uint32_t max_epoch, Reader who) const;
  void mark_roots(Marks& m, bool committed, bool previous) const;
  Marks fresh_marks(std::size_t nchunks) const;
  Error stop_background_gc();
  void collect();
  void start_background_gc();

  // ---- commit.cpp
  using KeyRange = std::pair<const std::uint64_t*, const std::uint64_t*>;
  std::pair<Ref, Ref> commit(Ref r, KeyRange keys);
  std::pair<Ref, Ref> commit_child(Ref c, KeyRange keys);
  void sort_changed_keys();
  Ref next_generation_copy(Ref r);
  Ref commit_root(Ref r);

  // ---- leaves.cpp
  template <bool Write>
  std::size_t fill(detail::CursorState& s, std::size_t n);
  template <bool Write>
  std::size_t fill_morton(detail::CursorState& s);
  template <bool Write>
  std::size_t fill_memory(detail::CursorState& s);
  template <bool Write>
  std::size_t scan_slab(detail::CursorState& s, std::size_t n);
  template <bool Write>
  std::size_t scan_dirty(detail::CursorState& s, std::size_t n);
  template <bool Write>
  [[gnu::always_inline]] inline void scan_block(detail::CursorState& s, Ref r, std::uint64_t code, std::size_t& n,
                                                bool defer);
  void classify(detail::CursorState& s, Ref r, int slot);
  void classify_pending(detail::CursorState& s, std::size_t keep);
  template <bool Write>
  bool start_pool_subtree(detail::CursorState& s);
  void make_frames_writable(detail::CursorState& s);
  // Asks for the blocks r's children name (the header's line and the last
  // one; the lines between follow) before the walk reads them: a walk that
  // enters r visits them next, and a family block's children are otherwise
  // one dependent miss after another. Only a hint: a reference is not
  // followed, so a damaged one costs nothing.
  void prefetch_children(Ref r) const {
    for (int s = 0; s < fan_; ++s) {
      const Ref c = child(r, s);
      if (c == 0 || (!detail::in_dram(c) && c > pool_size_ - block_bytes_)) continue;
      // Integer arithmetic: a damaged DRAM reference may lie anywhere.
      const std::uintptr_t b = reinterpret_cast<std::uintptr_t>(blk(c));
      __builtin_prefetch(reinterpret_cast<const void*>(b));
      __builtin_prefetch(reinterpret_cast<const void*>(b + block_bytes_ - 1));
    }
  }

  // ---- queries.cpp
  template <class Leaf>
  void walk(Ref r, const Octant& parent, bool is_root, std::uint32_t max_epoch, const Leaf& leaf) const;
  template <class Leaf>
  void walk_working(const Leaf& leaf) const;
  Result<std::uint64_t> checksum_from(Ref root) const;
};

namespace detail {

// Where a flat iteration is: frame d holds the block whose slots are the
// octants of level d (frame 0: the root block, one slot), as a writing
// walk's Path does, and the batch handed out last.
struct CursorState {
  static constexpr std::size_t kBatch = LeafCursor::kBatch;
  struct Frame {
    Ref block = 0;
    Octant parent;  // the octant whose children the block holds (unused in frame 0)
    int slot = 0;
    int slots = 0;
    bool touched = false;  // the writer counted the block as changed
  };
  Octree::Impl* tree = nullptr;
  bool started = false, done = false;
  int depth = 0;
  int writable = -1;  // the writer: frames 0..writable hold writable blocks
  // The frame the walk started from: 0 (the root block), or, for a pool
  // subtree of the memory order, the level of the slot below which it lies.
  int base = 0;
  bool subtree_done = false;  // the walk came back to `base`
  // LeafOrder::memory: phase 0 scans the DRAM slab in memory order (chunk,
  // block), phase 1 the pool blocks of the working generation (the dirty
  // list), handing out the leaves of every block and listing the
  // references to pool blocks of older generations; phase 2 walks each
  // listed subtree (and the root's, if the root is such a block) depth
  // first, skipping DRAM references (phase 0 handed their leaves out).
  bool memory = false;
  int phase = -1;  // -1: not begun
  bool skip_dram = false;
  bool may_merge = true;                     // the writer may run C0 merges (not while pool_roots hold DRAM blocks)
  bool c1_only = false;                      // the writer's copies below the regions go to the pool (force_c1_)
  std::size_t chunk = 0, block = 0;          // phase 0: the next block of the slab (a batch never ends within one)
  std::size_t dirty_at = 0;                  // phase 1: the next entry of the dirty list
  std::vector<std::uint64_t> seen;           // phase 1: blocks handed out, when the list may repeat one
  std::vector<std::pair<Ref, int>> pending;  // phase 1: pool references met, not yet checked
  std::size_t pending_at = 0;                // the first of them not checked
  // Phases 0 and 1: references to DRAM blocks and to pool blocks of this
  // generation met, and such blocks scanned (they must match).
  std::uint64_t dram_refs = 0, dram_blocks = 0, gen_refs = 0, gen_blocks = 0;
  std::vector<std::pair<Ref, int>> pool_roots;  // (block, slot) whose child is a pool block
  std::size_t next_root = 0;
  Frame f[kMaxLevel + 2];
  LeafView views[kBatch];
  WritableLeaf writable_leaves[kBatch];
};

}  // namespace detail

}  // namespace cairn::octree
