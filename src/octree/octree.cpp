// octree.cpp — PM-octree (include/cairn/octree.hpp): family blocks in DRAM
// and in a pool, copy-on-write between the committed and the working
// version, merge, commit, restore, garbage collection, layout transformation
// and the meshing operations.
//
// On-media layout (all in one cairn pool):
//   root slot 0 -> tree header (written once at create): magic, layout,
//                  dims, data_size, block size, chunk size, chunk table
//   root slot 1 -> the commit record of the last persisted version, one of
//                  two record places after the header (generation g uses
//                  place g % 2, so the live record is never overwritten):
//                  generation, root block, number of chunks, checksum
//   chunk table -> offsets of the chunks (arena extents of chunk_bytes),
//                  append-only; entries past the committed count are free
//   chunk       -> family blocks of block_bytes, no chunk header
//   block       -> {code of the parent octant, generation, check} then 2^d
//                  slots {child reference, payload}
// A child reference is 0 (a leaf), a pool offset (even) or a DRAM address
// with bit 0 set (C0; only the working version has those).
//
// Commit order (persist): C0 merged into new pool blocks; every block written
// in this generation and the new chunk-table entries flushed; the record
// written to its place and persisted; then the pool's root selector (one
// 8-byte store) names the new record. A crash before that store leaves the
// previous record, whose blocks were never written since (copy-on-write).
#include "cairn/octree.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "cairn/extended/pool.hpp"
#include "octree/internal.hpp"
#include "util/hash.hpp"
#include "util/io.hpp"

namespace cairn::octree {

namespace {

constexpr std::uint64_t kTreeMagic = 0x45455254434F4D50ull;  // "PMOCTREE"
constexpr std::uint64_t kRecordMagic = 0x44524F434552544Full;
constexpr std::uint32_t kTreeLayout = 1;
constexpr unsigned kHeaderSlot = 0, kRecordSlot = 1;
constexpr std::uint64_t kNoParent = ~std::uint64_t{0};  // the root block's parent code
constexpr std::size_t kHeaderBytes = 128, kRecordBytes = 128;
// Header flag: the version before the committed one is kept intact
// (Options::keep_previous). Pools without it have 0 there. Such a tree has
// three record places (generation g in place g % 3), so that the record of
// the kept version is not overwritten by the next persist before its commit
// point either: a crash during that persist still finds it.
constexpr std::uint64_t kKeepsPrevious = 1;
std::uint64_t record_places(std::uint64_t flags) { return (flags & kKeepsPrevious) != 0 ? 3 : 2; }
std::uint64_t record_at(std::uint64_t meta, std::uint64_t flags, std::uint64_t generation) {
  return meta + kHeaderBytes + (generation % record_places(flags)) * kRecordBytes;
}

struct TreeHeader {
  std::uint64_t magic;
  std::uint32_t layout;
  std::uint32_t dims;
  std::uint32_t data_size;
  std::uint32_t block_bytes;
  std::uint64_t chunk_bytes;
  std::uint64_t chunk_table;     // offset of the table
  std::uint64_t chunk_capacity;  // entries
  std::uint64_t flags;           // kKeepsPrevious
  std::uint64_t reserved[8];
  std::uint64_t checksum;
};
static_assert(sizeof(TreeHeader) == kHeaderBytes);

struct Record {
  std::uint64_t magic;
  std::uint64_t generation;
  std::uint64_t root;         // root block
  std::uint64_t chunk_count;  // table entries in use
  std::uint64_t depth;        // finest level ever reached (an upper bound)
  std::uint64_t reserved[10];
  std::uint64_t checksum;
};
static_assert(sizeof(Record) == kRecordBytes);

struct BlockHeader {
  std::uint64_t code;   // the parent octant (kNoParent for the root block)
  std::uint32_t epoch;  // the generation that wrote the block
  std::uint32_t check;
};
static_assert(sizeof(BlockHeader) == 16);

using Ref = std::uint64_t;
inline bool in_dram(Ref r) { return (r & 1) != 0; }

std::uint64_t pack(const Octant& o) {
  return (static_cast<std::uint64_t>(o.level) << 57) | (static_cast<std::uint64_t>(o.x) << 38) |
         (static_cast<std::uint64_t>(o.y) << 19) | o.z;
}
Octant unpack(std::uint64_t c) {
  constexpr std::uint64_t m = (1u << 19) - 1;
  return {static_cast<int>(c >> 57), static_cast<std::uint32_t>((c >> 38) & m),
          static_cast<std::uint32_t>((c >> 19) & m), static_cast<std::uint32_t>(c & m)};
}
std::uint32_t block_check(std::uint64_t code, std::uint32_t epoch) {
  return static_cast<std::uint32_t>(util::mix64(code ^ (epoch * 0x9E3779B97F4A7C15ull) ^ kTreeMagic) >> 32);
}

// Internal failure: thrown inside the recursive operations, returned at the API.
struct Fail {
  Error error;
};
[[noreturn]] void fail(Errc c, std::string msg) { throw Fail{{c, std::move(msg)}}; }

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

// 0 (unknown) counts as plenty: no merge for lack of a number.
std::uint64_t mem_available() {
  const std::uint64_t m = util::memory_available();
  return m == 0 ? ~std::uint64_t{0} : m;
}

// DRAM blocks (C0): a slab of equal blocks, each preceded by 8 bytes that
// hold its twin (see Impl::twin).
class DramSlab {
 public:
  explicit DramSlab(std::size_t block_bytes) : bytes_(block_bytes + 8) {}
  ~DramSlab() {
    for (void* c : chunks_) std::free(c);
  }
  std::byte* alloc() {
    if (free_.empty()) {
      const std::size_t per = std::max<std::size_t>(1, (1u << 20) / bytes_);
      void* c = std::aligned_alloc(64, (per * bytes_ + 63) / 64 * 64);
      if (c == nullptr) throw std::bad_alloc();
      chunks_.push_back(c);
      for (std::size_t i = per; i-- > 0;) free_.push_back(static_cast<std::byte*>(c) + i * bytes_ + 8);
    }
    std::byte* b = free_.back();
    free_.pop_back();
    ++in_use_;
    return b;
  }
  void release(std::byte* b) {
    free_.push_back(b);
    --in_use_;
  }
  std::uint64_t in_use() const { return in_use_; }

 private:
  std::size_t bytes_;
  std::vector<void*> chunks_;
  std::vector<std::byte*> free_;
  std::uint64_t in_use_ = 0;
};

}  // namespace

std::uint64_t morton(const Octant& o, int dims) {
  std::uint64_t m = 0;
  for (int b = kMaxLevel - 1; b >= 0; --b) {
    m = (m << dims) | ((o.x >> b) & 1u) | (((o.y >> b) & 1u) << 1);
    if (dims == 3) m |= static_cast<std::uint64_t>((o.z >> b) & 1u) << 2;
  }
  return (m << 5) | static_cast<std::uint64_t>(o.level);
}

Octant child_of(const Octant& o, int c) {
  const std::uint32_t h = o.length() >> 1;
  return {o.level + 1, o.x + ((c & 1) ? h : 0), o.y + ((c & 2) ? h : 0), o.z + ((c & 4) ? h : 0)};
}

Octant parent_of(const Octant& o) {
  const std::uint32_t mask = ~((o.length() << 1) - 1);
  return {o.level - 1, o.x & mask, o.y & mask, o.z & mask};
}

// ------------------------------------------------------------------ Impl

class Octree::Impl {
 public:
  // ---- geometry of blocks
  int dims_ = 3, fan_ = 8;
  std::uint32_t data_size_ = 0;
  std::size_t stride_ = 8, block_bytes_ = 0;

  // ---- storage
  std::unique_ptr<pool::Pool> pool_owner_;  // null when the pool is borrowed (crash harness)
  pool::Pool* pool_ = nullptr;
  std::byte* base_ = nullptr;
  detail::Internal internal_;
  std::uint64_t meta_ = 0;  // tree header extent
  TreeHeader* header_ = nullptr;
  std::uint64_t* table_ = nullptr;  // chunk table
  std::vector<std::uint64_t> chunks_;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> chunk_index_;  // sorted (offset, index)
  std::uint64_t committed_chunks_ = 0;
  std::uint64_t blocks_per_chunk_ = 0;
  std::uint64_t bump_ = 0;  // next unused block of the last chunk
  std::vector<std::uint64_t> free_;
  std::vector<std::uint64_t> dirty_;  // pool blocks written in this generation
  DramSlab* slab_ = nullptr;
  std::unique_ptr<DramSlab> slab_owner_;

  // ---- versions
  Ref committed_root_ = 0, work_root_ = 0;
  std::uint64_t committed_gen_ = 0;
  // keep_previous (the header's flag): the version committed before
  // committed_gen_ (0: none), whose blocks the collector keeps.
  Ref previous_root_ = 0;
  std::uint64_t previous_gen_ = 0;
  std::uint32_t work_gen_ = 1;
  bool gc_disabled_ = false;
  // collect_if_low(): collect once the tree holds this many chunks (twice
  // what the last collection found live, plus kGrowthChunks).
  static constexpr std::uint64_t kGrowthChunks = 4;
  std::uint64_t collect_at_chunks_ = kGrowthChunks;
  std::uint64_t gc_runs_ = 0, merges_ = 0;
  // NVM writes: cache lines the working version stored into pool blocks
  // (new and copied blocks, merges, payload and pointer updates).
  std::uint64_t nvm_store_lines_ = 0;
  std::uint64_t block_lines_ = 0;  // lines of one block
  bool charge_reads_ = false;      // the pool's device charges NVM reads (emulated)
  // Every store into a block of the working version: a DRAM block loses its
  // twin (it differs from it now); a pool block counts as an NVM write.
  void touch(Ref r) {
    if (in_dram(r)) {
      if (!internal_.stale_twin) twin(r) = 0;
    } else {
      ++nvm_store_lines_;
    }
  }

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
  FeatureFn feature_;

  std::string file_;  // the pool file

  // ---- traversal state: frame d holds the block whose slots are the
  // octants of level d (frame 0: the root block, one slot).
  struct Frame {
    Ref block = 0;
    Octant parent;  // the octant whose children the block holds (unused in frame 0)
    int slot = 0;
  };
  Frame path_[kMaxLevel + 2];

  ~Impl() {
    if (bg_.joinable()) bg_.join();
  }

  // ---- block access
  std::byte* blk(Ref r) const { return in_dram(r) ? reinterpret_cast<std::byte*>(r & ~std::uint64_t{1}) : base_ + r; }
  BlockHeader* hdr(Ref r) const { return reinterpret_cast<BlockHeader*>(blk(r)); }
  // A DRAM block's twin: the pool block that holds its contents in the
  // committed version (written by the last persist), or 0 once the DRAM
  // block has changed since (or never had one).
  Ref& twin(Ref r) const { return *reinterpret_cast<Ref*>(blk(r) - 8); }
  void stamp(Ref r) const {
    BlockHeader* h = hdr(r);
    h->epoch = work_gen_;
    h->check = block_check(h->code, work_gen_);
  }
  std::uint64_t& child(Ref r, int s) const {
    return *reinterpret_cast<std::uint64_t*>(blk(r) + sizeof(BlockHeader) + static_cast<std::size_t>(s) * stride_);
  }
  std::byte* data(Ref r, int s) const {
    return blk(r) + sizeof(BlockHeader) + static_cast<std::size_t>(s) * stride_ + 8;
  }
  bool writable(Ref r) const { return in_dram(r) || hdr(r)->epoch == work_gen_ || internal_.skip_copy_on_write; }
  int slots_of(int d) const { return d == 0 ? 1 : fan_; }
  Octant octant_at(int d, int s) const { return d == 0 ? Octant{} : child_of(path_[d].parent, s); }

  // Checks a block reached from the octant whose code is `parent`.
  // A traversal reaching a block: checked, and its read charged to an
  // emulated NVM device when the block is in the pool.
  void validate(Ref r, std::uint64_t parent) const {
    validate(r, parent, work_gen_);
    if (charge_reads_ && !in_dram(r)) pool_->device().read_charge(block_bytes_, false);
  }
  void validate(Ref r, std::uint64_t parent, std::uint32_t max_epoch) const {
    if (!in_dram(r) && (r % 8 != 0 || r < pool::kArenaOffset || r > pool_->size() - block_bytes_))
      fail(Errc::corrupted,
           "a child reference points outside the pool (" + std::to_string(r) + "): " + file_ + " is damaged");
    const BlockHeader* h = hdr(r);
    if (h->code != parent || h->check != block_check(h->code, h->epoch) || h->epoch > max_epoch)
      fail(Errc::corrupted, "an octant block fails its check (octant code " + std::to_string(parent) + "): " + file_ +
                                " is damaged; restore cannot use it");
  }

  // ---- regions
  std::uint64_t region_of(const Octant& parent) const {
    if (parent.level < region_level_) return kNoParent;
    Octant a = parent;
    const std::uint32_t mask = ~((kRootLength >> region_level_) - 1);
    a.level = region_level_, a.x &= mask, a.y &= mask, a.z &= mask;
    return pack(a);
  }
  bool hot(std::uint64_t region) {
    if (region == kNoParent || dram_budget_ == 0) return false;
    auto it = regions_.find(region);
    if (it == regions_.end()) return default_hot_;
    return !it->second.cold_now && (default_hot_ || it->second.hot);
  }

  // ---- allocation
  void add_chunk() {
    if (chunks_.size() >= header_->chunk_capacity) fail(Errc::out_of_space, file_ + ": the chunk table is full");
    auto off = pool_->arena().alloc(header_->chunk_bytes);
    if (!off.ok() && off.error().code == Errc::device_full) fail(Errc::device_full, off.error().message);
    if (!off.ok())
      fail(Errc::out_of_space,
           file_ + ": the pool is full (" + off.error().message + "); create the tree with a larger pool_size");
    table_[chunks_.size()] = off.value();  // flushed at persist with the record
    chunk_index_.insert(
        std::upper_bound(chunk_index_.begin(), chunk_index_.end(), std::make_pair(off.value(), std::uint32_t{0})),
        {off.value(), static_cast<std::uint32_t>(chunks_.size())});
    chunks_.push_back(off.value());
    bump_ = 0;
  }

  void install_background_gc() {
    if (!bg_running_ || !bg_done_.load(std::memory_order_acquire)) return;
    bg_.join();
    bg_running_ = false;
    free_.insert(free_.end(), bg_free_.begin(), bg_free_.end());
    bg_free_.clear();
    bg_free_.shrink_to_fit();
    collected();
  }

  // After a collection found what is live (the free list is complete): the
  // next one is due once the chunks have doubled from that.
  void collected() {
    const std::uint64_t live_chunks = chunks_.size() - free_.size() / blocks_per_chunk_;
    collect_at_chunks_ = 2 * live_chunks + kGrowthChunks;
    ++gc_runs_;
  }

  // Collects when the free part of the pool is below threshold_NVBM, or when
  // the tree's chunks have doubled since the last collection found what was
  // live (so a tree whose versions each rewrite most blocks reuses a few
  // chunks, warm in cache and mapped, instead of touching the whole pool).
  void collect_if_low() {
    if (bg_running_ || free_.size() >= blocks_per_chunk_) return;
    const auto& a = pool_->arena();
    const double free_frac = 1.0 - static_cast<double>(a.blocks_in_use()) / static_cast<double>(a.block_count());
    if (free_frac < threshold_nvbm_ || chunks_.size() >= collect_at_chunks_) collect();
  }

  Ref nvm_alloc() {
    install_background_gc();
    if (free_.empty() && (chunks_.empty() || bump_ == blocks_per_chunk_)) {
      if (!gc_disabled_) collect_if_low();
      if (free_.empty()) add_chunk();
    }
    Ref r;
    if (!free_.empty()) {
      r = free_.back();
      free_.pop_back();
    } else {
      r = chunks_.back() + bump_ * block_bytes_;
      ++bump_;
    }
    dirty_.push_back(r);
    nvm_store_lines_ += block_lines_;
    return r;
  }

  // A new block for the children of `parent`, header set, contents undefined.
  Ref alloc_block(const Octant* parent) {
    const std::uint64_t code = parent != nullptr ? pack(*parent) : kNoParent;
    const std::uint64_t region = parent != nullptr ? region_of(*parent) : kNoParent;
    Ref r;
    // Blocks above the C0 regions (few: at most fan^region_level) are on
    // every path from the root, so they live in DRAM whenever C0 exists.
    const bool top = parent != nullptr && parent->level < region_level_ && dram_budget_ > 0;
    if (top || hot(region)) {
      r = reinterpret_cast<Ref>(slab_->alloc()) | 1;
      twin(r) = 0;
      if (!top) {
        Region& g = regions_[region];
        ++g.dram_blocks;
        ++g.freq;
      }
      if (slab_->in_use() * block_bytes_ > dram_budget_) evict_pending_ = true;
      if (++dram_allocs_since_check_ * block_bytes_ >= (64u << 20)) {
        dram_allocs_since_check_ = 0;
        if (mem_available() < threshold_dram_) evict_pending_ = true;
      }
    } else {
      r = nvm_alloc();
      if (region != kNoParent) ++regions_[region].freq;
    }
    BlockHeader* h = hdr(r);
    h->code = code;
    h->epoch = work_gen_;
    h->check = block_check(code, work_gen_);
    return r;
  }

  // Frees a block only the working version can reach (shared ones wait for GC).
  void free_private(Ref r) {
    if (in_dram(r)) {
      const BlockHeader* h = hdr(r);
      if (h->code != kNoParent) {
        auto it = regions_.find(region_of(unpack(h->code)));
        if (it != regions_.end() && it->second.dram_blocks > 0) --it->second.dram_blocks;
      }
      slab_->release(blk(r));
    } else if (hdr(r)->epoch == work_gen_) {
      free_.push_back(r);
    }
  }

  Ref copy_block(Ref r, const Octant* parent) {
    const Ref c = alloc_block(parent);
    std::memcpy(blk(c) + sizeof(BlockHeader), blk(r) + sizeof(BlockHeader), block_bytes_ - sizeof(BlockHeader));
    return c;
  }

  // Makes the blocks of frames 0..d writable, copying shared ones and
  // relinking each copy in its (already writable) parent.
  void make_writable(int d) {
    for (int k = 0; k <= d; ++k) {
      Frame& f = path_[k];
      if (writable(f.block)) continue;
      const Ref c = copy_block(f.block, k == 0 ? nullptr : &f.parent);
      if (k == 0)
        work_root_ = c;
      else
        child(path_[k - 1].block, path_[k - 1].slot) = c, touch(path_[k - 1].block);
      f.block = c;
    }
  }

  // New children for the leaf at frame d, slot s (frames 0..d writable).
  Ref split(int d, int s, const InitFn& init) {
    const Octant o = octant_at(d, s);
    if (o.level >= kMaxLevel) fail(Errc::invalid_argument, "cannot refine past level " + std::to_string(kMaxLevel));
    const Ref nb = alloc_block(&o);
    depth_ = std::max(depth_, o.level + 1);
    const std::byte* pd = data(path_[d].block, s);
    for (int c = 0; c < fan_; ++c) {
      child(nb, c) = 0;
      std::byte* cd = data(nb, c);
      std::memset(cd, 0, stride_ - 8);
      if (init) init(child_of(o, c), cd, pd);
    }
    child(path_[d].block, s) = nb;
    touch(path_[d].block);
    return nb;
  }

  // ---- merge C0 into C1: DRAM blocks below `r` (writable) move to the pool.
  Ref merge(Ref r) {
    const Ref tw = in_dram(r) ? twin(r) : 0;
    for (int s = 0; s < fan_; ++s) {
      const Ref c = child(r, s);
      if (c != 0 && writable(c)) {
        const Ref m = merge(c);
        if (m != c) child(r, s) = m, touch(r);
      }
    }
    if (!in_dram(r)) return r;
    // A DRAM block whose children merged into their twins may equal its own
    // twin again: the committed block then serves (shared, copied on the
    // next write) and nothing is written.
    if (tw != 0 && std::memcmp(blk(r) + sizeof(BlockHeader), blk(tw) + sizeof(BlockHeader),
                               block_bytes_ - sizeof(BlockHeader)) == 0) {
      free_private(r);
      return tw;
    }
    const Ref n = nvm_alloc();
    std::memcpy(blk(n), blk(r), block_bytes_);
    stamp(n);  // a DRAM block kept over persists carries an older generation
    free_private(r);
    ++merged_count_;
    return n;
  }
  std::uint64_t merged_count_ = 0;

  // ---- commit (persist): the committed version's blocks for the writable
  // block r. Returns {ref in the committed version, ref in the next working
  // version}. DRAM blocks stay in DRAM for the working version and get a
  // pool twin (reused while neither they nor their children's committed refs
  // changed). A pool block of this generation goes into the committed
  // version with its children's committed refs; when a child's working ref
  // differs (a DRAM subtree below), the next working version gets its own
  // copy, of the next generation, that keeps the DRAM refs.
  std::pair<Ref, Ref> commit(Ref r) {
    Ref cref[8], wref[8];
    bool differs = false;
    for (int s = 0; s < fan_; ++s) {
      const Ref c = child(r, s);
      cref[s] = wref[s] = c;
      if (c != 0 && writable(c)) std::tie(cref[s], wref[s]) = commit(c);
      differs = differs || cref[s] != wref[s];
    }
    if (in_dram(r)) {
      Ref n = twin(r);
      for (int s = 0; s < fan_ && n != 0; ++s)
        if (child(n, s) != cref[s]) n = 0;
      if (n == 0) {
        n = nvm_alloc();
        std::memcpy(blk(n), blk(r), block_bytes_);
        stamp(n);
        for (int s = 0; s < fan_; ++s) child(n, s) = cref[s];
        twin(r) = n;
        ++merged_count_;
      }
      return {n, r};
    }
    for (int s = 0; s < fan_; ++s)
      if (child(r, s) != cref[s]) child(r, s) = cref[s], ++nvm_store_lines_;
    if (!differs) return {r, r};
    const Ref w = next_generation_copy(r);
    for (int s = 0; s < fan_; ++s) child(w, s) = wref[s];
    return {r, w};
  }
  std::vector<Ref> next_dirty_;  // pool blocks of the next generation, made by commit
  // A copy of r for the next working version, stamped with its generation
  // and flushed by the next commit, not this one.
  Ref next_generation_copy(Ref r) {
    const Ref w = nvm_alloc();
    dirty_.pop_back();
    next_dirty_.push_back(w);
    std::memcpy(blk(w), blk(r), block_bytes_);
    hdr(w)->epoch = work_gen_ + 1;
    hdr(w)->check = block_check(hdr(w)->code, work_gen_ + 1);
    return w;
  }
  Ref commit_root(Ref r) {  // the root block holds one slot and is never in DRAM
    const Ref c = child(r, 0);
    work_next_root_ = r;
    if (c == 0 || !writable(c)) return r;
    const auto [cc, wc] = commit(c);
    if (cc != c) child(r, 0) = cc, ++nvm_store_lines_;
    if (cc == wc) return r;
    work_next_root_ = next_generation_copy(r);
    child(work_next_root_, 0) = wc;
    return r;
  }
  Ref work_next_root_ = 0;

  // Moves every DRAM block into the pool (before the C0 regions change). A
  // DRAM block is reached only through writable blocks, so a shared root
  // has none below it.
  void merge_all() {
    const Ref c = child(work_root_, 0);
    if (c != 0 && writable(c)) {
      gc_disabled_ = true;
      const Ref m = merge(c);
      gc_disabled_ = false;
      if (m != c) child(work_root_, 0) = m, touch(work_root_);
    }
    for (auto& [code, g] : regions_) g.dram_blocks = 0;
  }

  // Merges the least frequently accessed hot regions out of DRAM while over
  // budget. Call only where no frame below region_level_ is live.
  void maybe_evict() {
    if (!evict_pending_) return;
    evict_pending_ = false;
    const bool low_mem = mem_available() < threshold_dram_;
    while (slab_->in_use() * block_bytes_ > dram_budget_ || (low_mem && slab_->in_use() > 0)) {
      std::uint64_t victim = kNoParent, best = ~std::uint64_t{0};
      for (const auto& [code, g] : regions_)
        if (g.dram_blocks > 0 && g.freq < best) best = g.freq, victim = code;
      if (victim == kNoParent) break;
      evict(victim);
    }
  }

  void evict(std::uint64_t region) {
    Region& g = regions_[region];
    g.cold_now = true;
    ++merges_;
    const Octant target = unpack(region);
    // Walk from the root to the region's octant (every block on the way is
    // writable: it leads to a DRAM block).
    Ref r = work_root_;
    int s = 0;
    Octant o{};
    while (o.level < target.level) {
      const Ref c = child(r, s);
      if (c == 0) return;
      const int idx = child_index(target, o.level + 1);
      r = c, s = idx, o = child_of(o, idx);
    }
    const Ref c = child(r, s);
    if (c == 0 || !writable(c)) return;
    gc_disabled_ = true;
    const Ref m = merge(c);
    gc_disabled_ = false;
    child(r, s) = m;
    touch(r);
    g.dram_blocks = 0;
  }

  // Which child of the level-(level-1) ancestor of `o` contains it.
  static int child_index(const Octant& o, int level) {
    const int b = kMaxLevel - level;
    return static_cast<int>(((o.x >> b) & 1u) | (((o.y >> b) & 1u) << 1) | (((o.z >> b) & 1u) << 2));
  }

  // ---- garbage collection
  struct Marks {
    std::vector<std::vector<std::uint64_t>> bits;  // per chunk
  };
  using ChunkIndex = std::vector<std::pair<std::uint64_t, std::uint32_t>>;
  bool locate_block(const ChunkIndex& chunk_index, Ref r, std::uint32_t& chunk, std::uint64_t& index) const {
    auto it = std::upper_bound(chunk_index.begin(), chunk_index.end(),
                               std::make_pair(r, std::numeric_limits<std::uint32_t>::max()));
    if (it == chunk_index.begin()) return false;
    --it;
    if (r >= it->first + blocks_per_chunk_ * block_bytes_) return false;
    chunk = it->second;
    index = (r - it->first) / block_bytes_;
    return (r - it->first) % block_bytes_ == 0;
  }
  // Marks the pool blocks reachable from `r`; shared subtrees once.
  void mark(Ref r, std::uint64_t parent_code, Marks& m, const ChunkIndex& index, std::uint32_t max_epoch) const {
    validate(r, parent_code, max_epoch);
    if (!in_dram(r)) {
      std::uint32_t c;
      std::uint64_t i;
      if (!locate_block(index, r, c, i) || c >= m.bits.size())
        fail(Errc::corrupted, file_ + ": a block lies outside every chunk");
      auto& word = m.bits[c][i / 64];
      if (word & (std::uint64_t{1} << (i % 64))) return;
      word |= std::uint64_t{1} << (i % 64);
    }
    const int n = parent_code == kNoParent ? 1 : fan_;
    for (int s = 0; s < n; ++s) {
      const Ref c = child(r, s);
      if (c == 0) continue;
      const Octant o = parent_code == kNoParent ? Octant{} : child_of(unpack(parent_code), s);
      mark(c, pack(o), m, index, max_epoch);
    }
  }

  Marks fresh_marks(std::size_t nchunks) const {
    Marks m;
    m.bits.assign(nchunks, std::vector<std::uint64_t>((blocks_per_chunk_ + 63) / 64, 0));
    return m;
  }

  // Waits for a background collection and drops its result (a full one
  // follows); the collector's error, if it found damage.
  Error stop_background_gc() {
    if (!bg_running_) return {};
    bg_.join();
    bg_running_ = false;
    bg_free_.clear();
    return bg_error_;
  }

  void collect() {
    (void)stop_background_gc();
    Marks m = fresh_marks(chunks_.size());
    if (committed_root_ != 0 && !internal_.gc_ignores_committed)
      mark(committed_root_, kNoParent, m, chunk_index_, work_gen_);
    if (previous_root_ != 0 && !internal_.gc_ignores_previous)
      mark(previous_root_, kNoParent, m, chunk_index_, work_gen_);
    mark(work_root_, kNoParent, m, chunk_index_, work_gen_);
    free_.clear();
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      const std::uint64_t limit = c + 1 == chunks_.size() ? bump_ : blocks_per_chunk_;
      for (std::uint64_t i = 0; i < limit; ++i)
        if (!(m.bits[c][i / 64] & (std::uint64_t{1} << (i % 64)))) free_.push_back(chunks_[c] + i * block_bytes_);
    }
    std::reverse(free_.begin(), free_.end());  // lowest addresses first
    collected();
  }

  // After restore: mark from the committed root in a thread; chunks of the
  // restored pool are swept, new blocks come from new chunks meanwhile.
  void start_background_gc() {
    bg_chunks_ = chunks_.size();
    bg_running_ = true;
    bg_done_ = false;
    bump_ = blocks_per_chunk_;  // no block of an old chunk is handed out until the sweep
    // The collector works on copies: the main thread adds chunks meanwhile.
    bg_ = std::thread([this, root = committed_root_, previous = previous_root_, chunks = chunks_, index = chunk_index_,
                       gen = static_cast<std::uint32_t>(committed_gen_)] {
      try {
        Marks m = fresh_marks(chunks.size());
        mark(root, kNoParent, m, index, gen);
        if (previous != 0) mark(previous, kNoParent, m, index, gen);
        for (std::size_t c = 0; c < chunks.size(); ++c)
          for (std::uint64_t i = 0; i < blocks_per_chunk_; ++i)
            if (!(m.bits[c][i / 64] & (std::uint64_t{1} << (i % 64)))) bg_free_.push_back(chunks[c] + i * block_bytes_);
      } catch (const Fail& f) {
        bg_error_ = f.error;
        bg_free_.clear();
      }
      bg_done_.store(true, std::memory_order_release);
    });
  }
};

// --------------------------------------------------------------- lifecycle

namespace {

std::size_t block_bytes_for(int dims, std::uint32_t data_size, std::size_t& stride) {
  stride = 8 + (static_cast<std::size_t>(data_size) + 7) / 8 * 8;
  return sizeof(BlockHeader) + (std::size_t{1} << dims) * stride;
}

Result<void> check_options(const Options& o) {
  if (o.dims != 2 && o.dims != 3) return make_error(Errc::invalid_argument, "dims must be 2 or 3");
  if (o.data_size > (1u << 20)) return make_error(Errc::invalid_argument, "data_size above 1 MiB per octant");
  if (!(o.threshold_nvbm >= 0 && o.threshold_nvbm < 1))
    return make_error(Errc::invalid_argument, "threshold_nvbm must be in [0, 1)");
  if (!(o.t_transform >= 1)) return make_error(Errc::invalid_argument, "t_transform must be at least 1");
  if (o.first_version < 1 || o.first_version > (1ull << 31))
    return make_error(Errc::invalid_argument, "first_version must be in [1, 2^31]");
  return {};
}

void configure(Octree::Impl& t, const Options& o) {
  t.dims_ = o.dims;
  t.fan_ = 1 << o.dims;
  t.data_size_ = o.data_size;
  t.block_bytes_ = block_bytes_for(o.dims, o.data_size, t.stride_);
  t.dram_budget_ = o.dram_budget;
  t.threshold_dram_ = o.threshold_dram;
  t.threshold_nvbm_ = o.threshold_nvbm;
  t.t_transform_ = o.t_transform;
  t.block_lines_ = (t.block_bytes_ + 63) / 64;
  t.slab_owner_ = std::make_unique<DramSlab>(t.block_bytes_);
  t.slab_ = t.slab_owner_.get();
}

std::uint64_t header_checksum(const TreeHeader& h) { return pool::checksum64(&h, offsetof(TreeHeader, checksum)); }
std::uint64_t record_checksum(const Record& r) { return pool::checksum64(&r, offsetof(Record, checksum)); }

}  // namespace

Octree::Octree(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Octree::~Octree() = default;

namespace {

Result<std::unique_ptr<Octree::Impl>> format_impl(pool::Pool& pool, const Options& o, const detail::Internal& in) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  if (pool.root(kHeaderSlot).offset != 0)
    return make_error(Errc::already_exists, pool.path() + " already holds a structure in root slot 0");
  auto impl = std::make_unique<Octree::Impl>();
  Octree::Impl& t = *impl;
  configure(t, o);
  t.internal_ = in;
  t.file_ = pool.path();
  t.pool_ = &pool;
  t.base_ = pool.base();
  t.charge_reads_ = pool.device().name().starts_with("emulated:");
  pool.arena().reset_empty();
  return guard([&]() -> Result<std::unique_ptr<Octree::Impl>> {
    // Chunks: a thirty-second of the pool, between 16 blocks and 1 MiB.
    const std::uint64_t bs = pool.arena().block_size();
    const std::uint64_t want = std::clamp<std::uint64_t>(pool.size() / 32, t.block_bytes_ * 16,
                                                         std::max<std::uint64_t>(1u << 20, t.block_bytes_ * 16));
    const std::uint64_t chunk_bytes = (want + bs - 1) / bs * bs;
    const std::uint64_t capacity = pool.size() / chunk_bytes + 1;
    const std::uint64_t flags = o.keep_previous ? kKeepsPrevious : 0;
    auto meta = pool.arena().alloc(kHeaderBytes + record_places(flags) * kRecordBytes + capacity * 8);
    if (!meta.ok()) return meta.error();
    t.meta_ = meta.value();
    t.header_ = reinterpret_cast<TreeHeader*>(t.base_ + t.meta_);
    TreeHeader h{};
    h.magic = kTreeMagic;
    h.layout = kTreeLayout;
    h.dims = static_cast<std::uint32_t>(o.dims);
    h.data_size = o.data_size;
    h.block_bytes = static_cast<std::uint32_t>(t.block_bytes_);
    h.chunk_bytes = chunk_bytes;
    h.chunk_table = t.meta_ + kHeaderBytes + record_places(flags) * kRecordBytes;
    h.chunk_capacity = capacity;
    h.flags = flags;
    h.checksum = header_checksum(h);
    pool.memcpy_persist(t.header_, &h, sizeof h);
    t.table_ = reinterpret_cast<std::uint64_t*>(t.base_ + h.chunk_table);
    t.blocks_per_chunk_ = chunk_bytes / t.block_bytes_;
    t.work_gen_ = static_cast<std::uint32_t>(o.first_version);
    if (auto r = pool.publish_root(kHeaderSlot, t.meta_, 0); !r.ok()) return r.error();
    // The root octant, in the working version only.
    t.work_root_ = t.alloc_block(nullptr);
    std::memset(t.blk(t.work_root_) + sizeof(BlockHeader), 0, t.block_bytes_ - sizeof(BlockHeader));
    return std::move(impl);
  });
}

// The tree header and the records of a persisted tree, checked.
struct Records {
  std::uint64_t meta = 0;  // header extent
  const TreeHeader* header = nullptr;
  const Record* committed = nullptr;
  const Record* previous = nullptr;  // the kept version before it (keep_previous), or none
  std::uint64_t previous_at = 0;     // the place of the generation before the committed one
};

Result<Records> read_records(const pool::Pool& pool, const Options& o, std::size_t block_bytes) {
  const std::string& path = pool.path();
  const std::byte* base = pool.base();
  Records r;
  const pool::RootSlot hs = pool.root(kHeaderSlot);
  if (hs.offset == 0 || hs.offset + kHeaderBytes > pool.size())
    return make_error(Errc::foreign_file,
                      path + " is a cairn pool but not a PM-octree (no tree header in root slot 0)");
  r.meta = hs.offset;
  r.header = reinterpret_cast<const TreeHeader*>(base + r.meta);
  const TreeHeader& h = *r.header;
  if (h.magic != kTreeMagic)
    return make_error(Errc::foreign_file, path + " holds another structure, not a PM-octree (bad tree magic)");
  if (h.checksum != header_checksum(h))
    return make_error(Errc::corrupted, path + ": the tree header fails its checksum");
  if (h.layout != kTreeLayout)
    return make_error(Errc::wrong_version, path + ": tree layout " + std::to_string(h.layout) + ", this build reads " +
                                               std::to_string(kTreeLayout));
  if (h.dims != static_cast<std::uint32_t>(o.dims) || h.data_size != o.data_size)
    return make_error(Errc::layout_mismatch, path + " holds a " + std::to_string(h.dims) + "D tree with " +
                                                 std::to_string(h.data_size) + "-byte payloads; asked for " +
                                                 std::to_string(o.dims) + "D with " + std::to_string(o.data_size));
  if (h.block_bytes != block_bytes || h.chunk_table + h.chunk_capacity * 8 > pool.size() ||
      h.chunk_bytes % block_bytes >= h.chunk_bytes)
    return make_error(Errc::corrupted, path + ": the tree header's geometry is inconsistent");
  const pool::RootSlot rs = pool.root(kRecordSlot);
  if (rs.offset == 0)
    return make_error(Errc::no_version, path + ": the tree was never persisted (pm_persistent); nothing to restore");
  if (rs.offset != record_at(r.meta, h.flags, rs.version))
    return make_error(Errc::corrupted, path + ": the commit record is not where the header says");
  r.committed = reinterpret_cast<const Record*>(base + rs.offset);
  const Record& c = *r.committed;
  if (c.magic != kRecordMagic || c.checksum != record_checksum(c) || c.generation != rs.version ||
      c.chunk_count > h.chunk_capacity)
    return make_error(Errc::corrupted,
                      path + ": the commit record of version " + std::to_string(rs.version) + " fails its checks");
  // The version before it, when the tree keeps it: the record in the place
  // of the generation before, one generation older and intact.
  r.previous_at = record_at(r.meta, h.flags, rs.version + record_places(h.flags) - 1);
  const Record& p = *reinterpret_cast<const Record*>(base + r.previous_at);
  if ((h.flags & kKeepsPrevious) != 0 && p.magic == kRecordMagic && p.checksum == record_checksum(p) &&
      p.generation + 1 == c.generation && p.chunk_count <= c.chunk_count)
    r.previous = &p;
  return r;
}

Result<std::unique_ptr<Octree::Impl>> attach_impl(pool::Pool& pool, const Options& o, const detail::Internal& in) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  const std::string& path = pool.path();
  auto impl = std::make_unique<Octree::Impl>();
  Octree::Impl& t = *impl;
  configure(t, o);
  t.internal_ = in;
  t.file_ = path;
  t.pool_ = &pool;
  t.base_ = pool.base();
  t.charge_reads_ = pool.device().name().starts_with("emulated:");
  auto found = read_records(pool, o, t.block_bytes_);
  if (!found.ok()) return found.error();
  t.meta_ = found.value().meta;
  t.header_ = reinterpret_cast<TreeHeader*>(t.base_ + t.meta_);
  const TreeHeader& h = *t.header_;
  t.table_ = reinterpret_cast<std::uint64_t*>(t.base_ + h.chunk_table);
  t.blocks_per_chunk_ = h.chunk_bytes / t.block_bytes_;
  const Record* committed = found.value().committed;
  const Record* previous = found.value().previous;
  if (o.version != 0 && o.version != committed->generation) {
    if (previous == nullptr || o.version != previous->generation)
      return make_error(Errc::no_version,
                        path + " holds version " + std::to_string(committed->generation) +
                            (previous != nullptr ? " and " + std::to_string(previous->generation) : std::string()) +
                            ", not version " + std::to_string(o.version));
    // Back to the previous version, durably: first the record of the version
    // before it is voided (its blocks were not kept while the newer version
    // was committed, so it must not pass for a kept version afterwards), then
    // the selector names the previous record again and the newer one is
    // abandoned (the next persist overwrites it).
    const std::uint64_t zero = 0;
    t.pool_->memcpy_persist(t.base_ + record_at(t.meta_, h.flags, previous->generation + 2), &zero, sizeof zero);
    if (auto r = t.pool_->publish_root(kRecordSlot, found.value().previous_at, previous->generation); !r.ok())
      return r.error();
    committed = previous;
    previous = nullptr;
  }
  const Record& rec = *committed;
  // The arena: the header extent and every committed chunk (O(chunks)).
  auto rb = t.pool_->arena().rebuild();
  if (auto m = rb.mark(t.meta_, kHeaderBytes + record_places(h.flags) * kRecordBytes + h.chunk_capacity * 8); !m.ok())
    return m.error();
  for (std::uint64_t c = 0; c < rec.chunk_count; ++c) {
    if (auto m = rb.mark(t.table_[c], h.chunk_bytes); !m.ok())
      return make_error(Errc::corrupted, path + ": chunk " + std::to_string(c) + ": " + m.error().message);
    t.chunks_.push_back(t.table_[c]);
    t.chunk_index_.push_back({t.table_[c], static_cast<std::uint32_t>(c)});
  }
  rb.finish();
  std::sort(t.chunk_index_.begin(), t.chunk_index_.end());
  t.committed_chunks_ = rec.chunk_count;
  t.committed_gen_ = rec.generation;
  t.work_gen_ = static_cast<std::uint32_t>(rec.generation + 1);
  t.committed_root_ = t.work_root_ = rec.root;
  if (previous != nullptr) {
    t.previous_root_ = previous->root;
    t.previous_gen_ = previous->generation;
  }
  t.depth_ = static_cast<int>(std::min<std::uint64_t>(rec.depth, kMaxLevel));
  auto ok = guard([&]() -> Result<void> {
    t.validate(rec.root, kNoParent);
    if (t.previous_root_ != 0) t.validate(t.previous_root_, kNoParent);
    return {};
  });
  if (!ok.ok()) return ok.error();
  t.bump_ = t.blocks_per_chunk_;
  if (o.background_gc && !t.chunks_.empty())
    t.start_background_gc();
  else if (!t.chunks_.empty()) {
    auto g = guard([&]() -> Result<void> {
      t.collect();
      return {};
    });
    if (!g.ok()) return g.error();
  }
  return impl;
}

}  // namespace

Result<std::unique_ptr<Octree>> Octree::create(const std::string& path, const Options& o) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  pool::CreateOptions co;
  co.size = o.pool_size;
  co.reserve_as_used = o.reserve_as_used;
  if (!o.device.empty()) {
    auto d = devices::make_device(o.device);
    if (!d.ok()) return d.error();
    co.device = std::move(d.value());
  }
  auto p = pool::Pool::create(path, std::move(co));
  if (!p.ok()) return p.error();
  auto impl = format_impl(*p.value(), o, {});
  if (!impl.ok()) return impl.error();
  impl.value()->pool_owner_ = std::move(p.value());
  return std::unique_ptr<Octree>(new Octree(std::move(impl.value())));
}

Result<std::unique_ptr<Octree>> Octree::restore(const std::string& path, const Options& o) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  pool::OpenOptions oo;
  if (!o.device.empty()) {
    auto d = devices::make_device(o.device);
    if (!d.ok()) return d.error();
    oo.device = std::move(d.value());
  }
  auto p = pool::Pool::open(path, std::move(oo));
  if (!p.ok()) return p.error();
  auto impl = attach_impl(*p.value(), o, {});
  if (!impl.ok()) return impl.error();
  impl.value()->pool_owner_ = std::move(p.value());
  return std::unique_ptr<Octree>(new Octree(std::move(impl.value())));
}

Result<Versions> Octree::versions(const std::string& path, const Options& o) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  auto p = pool::Pool::open(path, {});
  if (!p.ok()) return p.error();
  std::size_t stride;
  auto found = read_records(*p.value(), o, block_bytes_for(o.dims, o.data_size, stride));
  if (!found.ok()) return found.error();
  Versions v;
  v.committed = found.value().committed->generation;
  if (found.value().previous != nullptr) v.previous = found.value().previous->generation;
  return v;
}

Result<std::unique_ptr<Octree>> detail::Factory::format(pool::Pool& pool, const Options& o, const Internal& in) {
  auto impl = format_impl(pool, o, in);
  if (!impl.ok()) return impl.error();
  return std::unique_ptr<Octree>(new Octree(std::move(impl.value())));
}

Result<std::unique_ptr<Octree>> detail::Factory::attach(pool::Pool& pool, const Options& o, const Internal& in) {
  auto impl = attach_impl(pool, o, in);
  if (!impl.ok()) return impl.error();
  return std::unique_ptr<Octree>(new Octree(std::move(impl.value())));
}

Result<void> Octree::remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    const int err = errno;
    return make_error(err == ENOENT ? Errc::not_found : Errc::io_error,
                      "cannot delete " + path + ": " + std::strerror(err));
  }
  return {};
}

Result<PersistStats> Octree::persist() {
  Impl& t = *impl_;
  return guard([&]() -> Result<PersistStats> {
    const auto t0 = std::chrono::steady_clock::now();
    if (t.pool_->poisoned()) return make_error(Errc::poisoned, t.pool_->poison_reason());
    t.install_background_gc();
    // The commit allocates with collection off; with C0 holding the changed
    // blocks, it may be the only allocator, so it collects first if needed.
    t.collect_if_low();
    PersistStats ps;
    t.merged_count_ = 0;
    t.gc_disabled_ = true;
    t.next_dirty_.clear();
    const Ref committed_root = t.commit_root(t.work_root_);
    t.gc_disabled_ = false;
    ps.merged_from_dram = t.merged_count_;
    // Everything new becomes durable (the dirty list may hold a block twice,
    // or a block freed again: flushing it once more is harmless).
    std::sort(t.dirty_.begin(), t.dirty_.end());
    t.dirty_.erase(std::unique(t.dirty_.begin(), t.dirty_.end()), t.dirty_.end());
    const auto flush_blocks = [&] {
      for (const Ref r : t.dirty_) t.pool_->flush(t.blk(r), t.block_bytes_);
      if (t.chunks_.size() > t.committed_chunks_)
        t.pool_->flush(t.table_ + t.committed_chunks_, (t.chunks_.size() - t.committed_chunks_) * 8);
      t.pool_->drain();
    };
    if (!t.internal_.publish_before_flush) flush_blocks();
    ps.blocks_written = t.dirty_.size();
    ps.bytes_written = t.dirty_.size() * t.block_bytes_;
    // The record, in the place the live one does not use; then the commit word.
    const std::uint64_t gen = t.work_gen_;
    const std::uint64_t at = record_at(t.meta_, t.header_->flags, gen);
    Record rec{};
    rec.magic = kRecordMagic;
    rec.generation = gen;
    rec.root = committed_root;
    rec.chunk_count = t.chunks_.size();
    rec.depth = static_cast<std::uint64_t>(t.depth_);
    rec.checksum = record_checksum(rec);
    t.pool_->memcpy_persist(t.base_ + at, &rec, sizeof rec);
    if (auto r = t.pool_->publish_root(kRecordSlot, at, gen); !r.ok()) return r.error();
    if (t.internal_.publish_before_flush) flush_blocks();
    if ((t.header_->flags & kKeepsPrevious) != 0) {
      t.previous_root_ = t.committed_root_;
      t.previous_gen_ = t.committed_gen_;
    }
    t.committed_root_ = committed_root;
    t.work_root_ = t.work_next_root_;
    t.committed_gen_ = gen;
    t.committed_chunks_ = t.chunks_.size();
    ++t.work_gen_;
    t.dirty_.swap(t.next_dirty_);  // the next version's copies of paths to DRAM
    t.next_dirty_.clear();
    for (auto& [code, g] : t.regions_) g.cold_now = false;
    // The subtree level of C0 regions follows the tree (seed Eq. 1).
    transform_layout();
    ps.version = gen;
    ps.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return ps;
  });
}

// ------------------------------------------------------------- traversal

namespace {

// Read-only depth-first traversal of a version from `root`, leaves in Morton
// order; validates every block it enters.
template <class Leaf>
void walk(const Octree::Impl& t, Ref r, const Octant& parent, bool is_root, const Leaf& leaf) {
  const int n = is_root ? 1 : t.fan_;
  for (int s = 0; s < n; ++s) {
    const Octant o = is_root ? Octant{} : child_of(parent, s);
    const Ref c = t.child(r, s);
    if (c == 0) {
      leaf(o, t.data(r, s));
      continue;
    }
    t.validate(c, pack(o));
    walk(t, c, o, false, leaf);
  }
}

}  // namespace

Result<void> Octree::visit_leaves(const VisitFn& fn) const {
  const Impl& t = *impl_;
  return guard([&]() -> Result<void> {
    walk(t, t.work_root_, Octant{}, true, [&](const Octant& o, const std::byte* d) { fn(o, d); });
    return {};
  });
}

Result<std::uint64_t> Octree::checksum() const { return checksum_from(impl_->work_root_); }

Result<std::uint64_t> Octree::previous_checksum() const {
  if (impl_->previous_root_ == 0)
    return make_error(Errc::no_version, impl_->file_ + ": no previous version is kept (keep_previous)");
  return checksum_from(impl_->previous_root_);
}

Result<std::uint64_t> Octree::checksum_from(std::uint64_t root) const {
  const Impl& t = *impl_;
  return guard([&]() -> Result<std::uint64_t> {
    std::uint64_t h = 0x243F6A8885A308D3ull;
    walk(t, root, Octant{}, true, [&](const Octant& o, const std::byte* d) {
      h = util::hash_combine(h, util::mix64(pack(o)));
      if (t.data_size_ > 0) h = util::hash_combine(h, util::hash_bytes(d, t.data_size_));
    });
    return h;
  });
}

Result<std::uint64_t> Octree::leaf_count() const {
  const Impl& t = *impl_;
  return guard([&]() -> Result<std::uint64_t> {
    std::uint64_t n = 0;
    walk(t, t.work_root_, Octant{}, true, [&](const Octant&, const std::byte*) { ++n; });
    return n;
  });
}

Result<LeafView> Octree::find_leaf(std::uint32_t x, std::uint32_t y, std::uint32_t z) const {
  const Impl& t = *impl_;
  if (x >= kRootLength || y >= kRootLength || z >= kRootLength || (t.dims_ == 2 && z != 0))
    return make_error(Errc::invalid_argument, "point outside the domain");
  return guard([&]() -> Result<LeafView> {
    const Octant p{kMaxLevel, x, y, z};
    Ref r = t.work_root_;
    int s = 0;
    Octant o{};
    for (;;) {
      const Ref c = t.child(r, s);
      if (c == 0) return LeafView{o, t.data(r, s)};
      t.validate(c, pack(o));
      s = Impl::child_index(p, o.level + 1);
      r = c;
      o = child_of(o, s);
    }
  });
}

// ----------------------------------------------------------------- meshing

namespace {

struct Ops {
  Octree::Impl& t;

  void enter(int d, Ref block, const Octant& parent) {
    t.path_[d].block = block;
    t.path_[d].parent = parent;
  }

  // refine: frames 0..d set; visits the slots of frame d.
  void refine(int d, bool recursive, const Octree::RefineFn& fn, const Octree::InitFn& init, int max_level) {
    for (int s = 0; s < t.slots_of(d); ++s) {
      if (d <= t.region_level_) t.maybe_evict();
      t.path_[d].slot = s;
      const Octant o = t.octant_at(d, s);
      Ref c = t.child(t.path_[d].block, s);
      if (c == 0) {
        if (o.level >= max_level || !fn(o, t.data(t.path_[d].block, s))) continue;
        t.make_writable(d);
        c = t.split(d, s, init);
        if (!recursive) continue;
      } else {
        t.validate(c, pack(o));
      }
      enter(d + 1, c, o);
      refine(d + 1, recursive, fn, init, max_level);
    }
  }

  // coarsen: post-order; `fresh` holds the leaves made in this pass (not
  // offered again unless recursive).
  void coarsen(int d, bool recursive, const Octree::CoarsenFn& fn, const Octree::MergeFn& merge,
               std::unordered_set<std::uint64_t>& fresh, std::vector<LeafView>& family) {
    for (int s = 0; s < t.slots_of(d); ++s) {
      if (d <= t.region_level_) t.maybe_evict();
      t.path_[d].slot = s;
      Ref c = t.child(t.path_[d].block, s);
      if (c == 0) continue;
      const Octant o = t.octant_at(d, s);
      t.validate(c, pack(o));
      enter(d + 1, c, o);
      coarsen(d + 1, recursive, fn, merge, fresh, family);
      t.path_[d].slot = s;
      c = t.child(t.path_[d].block, s);  // may be a copy now
      bool leaves = true;
      for (int k = 0; k < t.fan_ && leaves; ++k) {
        leaves = t.child(c, k) == 0;
        if (!recursive && leaves && fresh.count(pack(child_of(o, k)))) leaves = false;
      }
      if (!leaves) continue;
      family.clear();
      for (int k = 0; k < t.fan_; ++k) family.push_back({child_of(o, k), t.data(c, k)});
      if (!fn(o, family)) continue;
      t.make_writable(d);
      std::byte* pd = t.data(t.path_[d].block, s);
      if (merge) merge(o, pd, family);
      t.child(t.path_[d].block, s) = 0;
      t.touch(t.path_[d].block);
      t.free_private(c);
      if (!recursive) fresh.insert(pack(o));
    }
  }

  // Offers the payload of frame d's current slot to `fn` as a scratch copy;
  // only if fn reports a change is the path made writable and the payload
  // written back.
  template <class Fn>
  void rewrite(int d, std::vector<std::byte>& scratch, const Fn& fn) {
    const int s = t.path_[d].slot;
    std::memcpy(scratch.data(), t.data(t.path_[d].block, s), t.data_size_);
    if (!fn(scratch.data())) return;
    t.make_writable(d);
    std::memcpy(t.data(t.path_[d].block, s), scratch.data(), t.data_size_);
    t.touch(t.path_[d].block);
  }

  // follow: frames 0..d set; `handles` are the application's octants of
  // frame d's slots.
  void follow(int d, const void* const* handles, const Octree::Follow& fns, std::vector<std::byte>& scratch) {
    for (int s = 0; s < t.slots_of(d); ++s) {
      if (d <= t.region_level_) t.maybe_evict();
      t.path_[d].slot = s;
      const Octant o = t.octant_at(d, s);
      Ref c = t.child(t.path_[d].block, s);
      const void* kids[8] = {};
      if (fns.children(o, handles[s], kids)) {
        if (c == 0) {
          t.make_writable(d);
          c = t.split(d, s, fns.init);
        } else {
          t.validate(c, pack(o));
        }
        enter(d + 1, c, o);
        follow(d + 1, kids, fns, scratch);
        continue;
      }
      if (c != 0) {
        t.validate(c, pack(o));
        t.make_writable(d);
        drop(c, o);
        t.child(t.path_[d].block, s) = 0;
        t.touch(t.path_[d].block);
      }
      rewrite(d, scratch, [&](std::byte* data) { return fns.update(o, handles[s], data); });
    }
  }

  // Frees the working version's private blocks of the subtree whose family
  // block is `r` (the children of `o`); a shared block, and everything below
  // it, belongs to the committed version too and waits for the collector.
  void drop(Ref r, const Octant& o) {
    if (!t.writable(r)) return;
    for (int k = 0; k < t.fan_; ++k) {
      const Ref c = t.child(r, k);
      if (c == 0) continue;
      const Octant q = child_of(o, k);
      t.validate(c, pack(q));
      drop(c, q);
    }
    t.free_private(r);
  }

  // Descends to the octant `q`, splitting leaves on the way; every octant
  // made internal is reported. Leaves path_ at q's frame. The frames of the
  // previous descent stay valid (copies and splits update path_ in place), so
  // a descent starts at the deepest octant its target shares with the
  // previous one instead of at the root: balance visits octants in Morton
  // order, whose neighbours mostly share all but the last levels.
  int cached = -1;  // levels of path_ valid from the previous descent; -1: none
  Octant last{};
  std::uint64_t merges_seen = 0;

  static Octant ancestor(const Octant& q, int level) {
    const std::uint32_t mask = level == 0 ? 0 : ~((kRootLength >> level) - 1);
    return {level, q.x & mask, q.y & mask, q.z & mask};
  }

  template <class Made>
  void ensure(const Octant& q, const Octree::InitFn& init, const Made& made) {
    if (t.merges_ != merges_seen) cached = -1;  // a C0 merge moved blocks of the cached path
    merges_seen = t.merges_;
    int start = 0;
    if (cached >= 0) {
      start = std::min(cached, q.level);
      while (start > 0 && !(ancestor(q, start) == ancestor(last, start))) --start;
    }
    if (start == 0) {
      enter(0, t.work_root_, Octant{});
      t.path_[0].slot = 0;
    }
    Octant o = ancestor(q, start);
    for (int d = start; o.level < q.level; ++d) {
      Ref c = t.child(t.path_[d].block, t.path_[d].slot);
      if (c == 0) {
        t.make_writable(d);
        c = t.split(d, t.path_[d].slot, init);
        made(o);
      } else {
        t.validate(c, pack(o));
      }
      const int idx = Octree::Impl::child_index(q, o.level + 1);
      enter(d + 1, c, o);
      t.path_[d + 1].slot = idx;
      o = child_of(o, idx);
    }
    cached = q.level;
    last = q;
  }
};

// The 2d face directions, or every direction of {-1,0,1}^d but 0.
std::vector<std::array<int, 3>> directions(int dims, Connect connect) {
  std::vector<std::array<int, 3>> out;
  for (int dz = (dims == 3 ? -1 : 0); dz <= (dims == 3 ? 1 : 0); ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        const int nz = (dx != 0) + (dy != 0) + (dz != 0);
        if (nz == 0 || (connect == Connect::face && nz != 1)) continue;
        out.push_back({dx, dy, dz});
      }
  return out;
}

// The same-level octant next to `o` in direction `dir`; false outside the domain.
bool shifted(const Octant& o, const int dir[3], int dims, Octant& out) {
  const std::int64_t len = o.length();
  const std::int64_t c[3] = {static_cast<std::int64_t>(o.x) + dir[0] * len,
                             static_cast<std::int64_t>(o.y) + dir[1] * len,
                             static_cast<std::int64_t>(o.z) + (dims == 3 ? dir[2] : 0) * len};
  for (int a = 0; a < dims; ++a)
    if (c[a] < 0 || c[a] >= static_cast<std::int64_t>(kRootLength)) return false;
  out = {o.level, static_cast<std::uint32_t>(c[0]), static_cast<std::uint32_t>(c[1]), static_cast<std::uint32_t>(c[2])};
  return true;
}

}  // namespace

Result<void> Octree::uniform(int level, const InitFn& init) {
  if (level < 0 || level > kMaxLevel) return make_error(Errc::invalid_argument, "level out of range");
  return refine(
      true, [](const Octant&, const std::byte*) { return true; }, init, level);
}

Result<void> Octree::refine(bool recursive, const RefineFn& fn, const InitFn& init, int max_level) {
  Impl& t = *impl_;
  if (!fn) return make_error(Errc::invalid_argument, "refine: no refine callback");
  max_level = std::min(max_level, kMaxLevel);
  return guard([&]() -> Result<void> {
    Ops ops{t};
    ops.enter(0, t.work_root_, Octant{});
    ops.refine(0, recursive, fn, init, max_level);
    t.maybe_evict();
    return {};
  });
}

Result<void> Octree::coarsen(bool recursive, const CoarsenFn& fn, const MergeFn& merge) {
  Impl& t = *impl_;
  if (!fn) return make_error(Errc::invalid_argument, "coarsen: no coarsen callback");
  return guard([&]() -> Result<void> {
    Ops ops{t};
    std::unordered_set<std::uint64_t> fresh;
    std::vector<LeafView> family;
    ops.enter(0, t.work_root_, Octant{});
    ops.coarsen(0, recursive, fn, merge, fresh, family);
    t.maybe_evict();
    return {};
  });
}

Result<void> Octree::follow(const void* root, const Follow& fns) {
  Impl& t = *impl_;
  if (!fns.children || !fns.update) return make_error(Errc::invalid_argument, "follow: no children or update callback");
  return guard([&]() -> Result<void> {
    Ops ops{t};
    std::vector<std::byte> scratch(t.stride_);
    const void* handles[1] = {root};
    ops.enter(0, t.work_root_, Octant{});
    ops.follow(0, handles, fns, scratch);
    t.maybe_evict();
    return {};
  });
}

Result<void> Octree::balance(Connect connect, const InitFn& init) {
  Impl& t = *impl_;
  return guard([&]() -> Result<void> {
    // Balanced iff every internal octant's same-level neighbours exist. The
    // worklist holds internal octants by level, finest first: making a
    // neighbour exist only makes coarser octants internal.
    std::vector<std::vector<Octant>> work(kMaxLevel + 1);
    {
      // Collect internal octants.
      std::vector<std::pair<Ref, Octant>> stack{{t.work_root_, Octant{}}};
      bool root = true;
      while (!stack.empty()) {
        auto [r, p] = stack.back();
        stack.pop_back();
        const int n = root ? 1 : t.fan_;
        for (int s = 0; s < n; ++s) {
          const Ref c = t.child(r, s);
          if (c == 0) continue;
          const Octant o = root ? Octant{} : child_of(p, s);
          work[static_cast<std::size_t>(o.level)].push_back(o);
          stack.push_back({c, o});
        }
        root = false;
      }
    }
    const auto dirs = directions(t.dims_, connect);
    Ops ops{t};
    for (int level = kMaxLevel; level >= 1; --level) {
      auto& list = work[static_cast<std::size_t>(level)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Octant p = list[i];
        const int shift = kMaxLevel - p.level;
        const int bits[3] = {static_cast<int>((p.x >> shift) & 1u), static_cast<int>((p.y >> shift) & 1u),
                             static_cast<int>((p.z >> shift) & 1u)};
        for (const auto& d : dirs) {
          // A neighbour inside p's own parent is a sibling: it exists.
          bool sibling = true;
          for (int a = 0; a < t.dims_ && sibling; ++a)
            if (d[static_cast<std::size_t>(a)] != 0) sibling = (d[static_cast<std::size_t>(a)] > 0) == (bits[a] == 0);
          if (sibling) continue;
          Octant q;
          if (!shifted(p, d.data(), t.dims_, q)) continue;
          ops.ensure(q, init, [&](const Octant& made) { work[static_cast<std::size_t>(made.level)].push_back(made); });
        }
        t.maybe_evict();  // between descents no frame is live
      }
      list.clear();
      list.shrink_to_fit();
    }
    return {};
  });
}

Result<void> Octree::update_leaves(const UpdateFn& fn) {
  Impl& t = *impl_;
  return guard([&]() -> Result<void> {
    std::vector<std::byte> scratch(t.stride_);
    Ops ops{t};
    // Depth-first over path_, so that a changed leaf can make its path writable.
    struct Rec {
      Impl& t;
      Ops& ops;
      const UpdateFn& fn;
      std::vector<std::byte>& scratch;
      void go(int d) {
        for (int s = 0; s < t.slots_of(d); ++s) {
          if (d <= t.region_level_) t.maybe_evict();
          t.path_[d].slot = s;
          const Octant o = t.octant_at(d, s);
          const Ref c = t.child(t.path_[d].block, s);
          if (c == 0) {
            ops.rewrite(d, scratch, [&](std::byte* data) { return fn(o, data); });
            continue;
          }
          t.validate(c, pack(o));
          ops.enter(d + 1, c, o);
          go(d + 1);
        }
      }
    } rec{t, ops, fn, scratch};
    ops.enter(0, t.work_root_, Octant{});
    rec.go(0);
    t.maybe_evict();
    return {};
  });
}

const std::byte* Octree::root_data() const { return impl_->data(impl_->work_root_, 0); }

Result<void> Octree::update_root(const UpdateFn& fn) {
  Impl& t = *impl_;
  return guard([&]() -> Result<void> {
    std::vector<std::byte> scratch(t.stride_);
    Ops ops{t};
    ops.enter(0, t.work_root_, Octant{});
    t.path_[0].slot = 0;
    ops.rewrite(0, scratch, [&](std::byte* data) { return fn(Octant{}, data); });
    return {};
  });
}

Result<std::vector<LeafView>> Octree::neighbours(const Octant& leaf, const int direction[3]) const {
  const Impl& t = *impl_;
  return guard([&]() -> Result<std::vector<LeafView>> {
    std::vector<LeafView> out;
    Octant q;
    if (!shifted(leaf, direction, t.dims_, q)) return out;
    // Down from the root towards q.
    Ref r = t.work_root_;
    int s = 0;
    Octant o{};
    while (o.level < q.level) {
      const Ref c = t.child(r, s);
      if (c == 0) {
        out.push_back({o, t.data(r, s)});  // a coarser leaf
        return out;
      }
      t.validate(c, pack(o));
      s = Impl::child_index(q, o.level + 1);
      r = c;
      o = child_of(o, s);
    }
    // q itself: a leaf, or the finer leaves of q that touch `leaf`.
    std::vector<std::tuple<Ref, int, Octant>> stack{{r, s, o}};
    while (!stack.empty()) {
      auto [br, bs, oc] = stack.back();
      stack.pop_back();
      const Ref c = t.child(br, bs);
      if (c == 0) {
        out.push_back({oc, t.data(br, bs)});
        continue;
      }
      t.validate(c, pack(oc));
      for (int k = t.fan_ - 1; k >= 0; --k) {
        const Octant ch = child_of(oc, k);
        bool touches = true;
        const std::uint32_t cc[3] = {ch.x, ch.y, ch.z}, qc[3] = {q.x, q.y, q.z};
        for (int a = 0; a < t.dims_ && touches; ++a) {
          if (direction[a] > 0) touches = cc[a] == qc[a];
          if (direction[a] < 0) touches = cc[a] + ch.length() == qc[a] + q.length();
        }
        if (touches) stack.push_back({c, k, ch});
      }
    }
    return out;
  });
}

Result<void> Octree::visit_faces(const FaceFn& fn) const {
  std::vector<LeafView> leaves;
  if (auto v = visit_leaves([&](const Octant& o, const std::byte* d) { leaves.push_back({o, d}); }); !v.ok())
    return v.error();
  for (const LeafView& l : leaves)
    for (int axis = 0; axis < impl_->dims_; ++axis)
      for (int upper = 0; upper < 2; ++upper) {
        int dir[3] = {0, 0, 0};
        dir[axis] = upper ? 1 : -1;
        auto n = neighbours(l.octant, dir);
        if (!n.ok()) return n.error();
        const auto& nb = n.value();
        if (nb.empty())
          fn(l, axis, upper != 0, nullptr);
        else if (nb.size() == 1 && nb[0].octant.level < l.octant.level)
          fn(l, axis, upper != 0, &nb[0]);  // hanging: from the fine side
        else if (nb.size() == 1 && nb[0].octant.level == l.octant.level && upper)
          fn(l, axis, true, &nb[0]);  // conforming: once, from the lower leaf
      }
  return {};
}

Result<std::vector<std::uint64_t>> Octree::partition(
    int parts, const std::function<double(const Octant&, const std::byte*)>& weight) const {
  if (parts < 1) return make_error(Errc::invalid_argument, "partition: parts must be at least 1");
  std::vector<double> w;
  if (auto v = visit_leaves([&](const Octant& o, const std::byte* d) { w.push_back(weight ? weight(o, d) : 1.0); });
      !v.ok())
    return v.error();
  double total = 0;
  for (double x : w) total += x;
  std::vector<std::uint64_t> bounds{0};
  double acc = 0;
  std::size_t i = 0;
  for (int p = 1; p < parts; ++p) {
    const double target = total * p / parts;
    while (i < w.size() && acc + w[i] / 2 < target) acc += w[i++];
    bounds.push_back(i);
  }
  bounds.push_back(w.size());
  return bounds;
}

Result<void> Octree::write_vtk(const std::string& path, const std::vector<Field>& fields) const {
  std::vector<LeafView> leaves;
  if (auto v = visit_leaves([&](const Octant& o, const std::byte* d) { leaves.push_back({o, d}); }); !v.ok())
    return v.error();
  std::ofstream f(path);
  if (!f) return make_error(Errc::io_error, "cannot write " + path);
  const int dims = impl_->dims_, corners = 1 << dims;
  // VTK corner order: quads counter-clockwise; hexahedra bottom then top.
  static const int order[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                                  {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};
  f << "<?xml version=\"1.0\"?>\n<VTKFile type=\"UnstructuredGrid\" version=\"0.1\" byte_order=\"LittleEndian\">\n"
    << "<UnstructuredGrid>\n<Piece NumberOfPoints=\"" << leaves.size() * static_cast<std::size_t>(corners)
    << "\" NumberOfCells=\"" << leaves.size() << "\">\n<Points>\n"
    << "<DataArray type=\"Float64\" NumberOfComponents=\"3\" format=\"ascii\">\n";
  f.precision(17);
  const double scale = 1.0 / kRootLength;
  for (const LeafView& l : leaves)
    for (int c = 0; c < corners; ++c) {
      const double len = l.octant.length();
      f << (l.octant.x + order[c][0] * len) * scale << ' ' << (l.octant.y + order[c][1] * len) * scale << ' '
        << (dims == 3 ? (l.octant.z + order[c][2] * len) * scale : 0.0) << '\n';
    }
  f << "</DataArray>\n</Points>\n<Cells>\n<DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">\n";
  for (std::size_t i = 0; i < leaves.size() * static_cast<std::size_t>(corners); ++i) f << i << '\n';
  f << "</DataArray>\n<DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">\n";
  for (std::size_t i = 1; i <= leaves.size(); ++i) f << i * static_cast<std::size_t>(corners) << '\n';
  f << "</DataArray>\n<DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">\n";
  for (std::size_t i = 0; i < leaves.size(); ++i) f << (dims == 3 ? 12 : 9) << '\n';
  f << "</DataArray>\n</Cells>\n<CellData>\n<DataArray type=\"Int32\" Name=\"level\" format=\"ascii\">\n";
  for (const LeafView& l : leaves) f << l.octant.level << '\n';
  f << "</DataArray>\n";
  for (const Field& fd : fields) {
    f << "<DataArray type=\"Float64\" Name=\"" << fd.name << "\" format=\"ascii\">\n";
    for (const LeafView& l : leaves) f << fd.value(l.octant, l.data) << '\n';
    f << "</DataArray>\n";
  }
  f << "</CellData>\n</Piece>\n</UnstructuredGrid>\n</VTKFile>\n";
  if (!f) return make_error(Errc::io_error, "writing " + path + " failed");
  return {};
}

// ------------------------------------------------------ memory and layout

Result<Stats> Octree::stats() const {
  Impl& t = *impl_;
  return guard([&]() -> Result<Stats> {
    t.install_background_gc();
    Stats st;
    st.block_bytes = t.block_bytes_;
    st.committed_version = t.committed_gen_;
    st.previous_version = t.previous_gen_;
    st.merges = t.merges_;
    st.nvm_store_lines = t.nvm_store_lines_;
    st.gc_runs = t.gc_runs_;
    for (const auto& [c, g] : t.regions_)
      if (g.dram_blocks > 0 || g.hot) ++st.c0_regions;
    std::unordered_set<Ref> committed;
    if (t.committed_root_ != 0) {
      std::vector<Ref> stack{t.committed_root_};
      while (!stack.empty()) {
        const Ref r = stack.back();
        stack.pop_back();
        if (!committed.insert(r).second) continue;
        const int n = r == t.committed_root_ ? 1 : t.fan_;
        for (int s = 0; s < n; ++s)
          if (const Ref c = t.child(r, s); c != 0) stack.push_back(c);
      }
    }
    std::unordered_set<Ref> work;
    std::vector<std::pair<Ref, int>> stack{{t.work_root_, 0}};
    while (!stack.empty()) {
      const auto [r, level] = stack.back();
      stack.pop_back();
      work.insert(r);
      ++st.blocks;
      if (in_dram(r)) {
        st.dram_bytes += t.block_bytes_;
        // A C0 block equal to its twin holds committed contents: a cached copy.
        if (t.twin(r) != 0 && committed.count(t.twin(r))) st.shared_bytes += t.block_bytes_;
      } else if (committed.count(r)) {
        st.shared_bytes += t.block_bytes_;
      }
      const int n = r == t.work_root_ ? 1 : t.fan_;
      for (int s = 0; s < n; ++s) {
        ++st.octants;
        if (const Ref c = t.child(r, s); c != 0)
          stack.push_back({c, level + 1});
        else {
          ++st.leaves;
          st.depth = std::max(st.depth, r == t.work_root_ ? 0 : level);
        }
      }
    }
    std::uint64_t nvm_blocks = 0;
    for (const Ref r : work)
      if (!in_dram(r)) ++nvm_blocks;
    for (const Ref r : committed)
      if (!work.count(r)) ++nvm_blocks;
    if (t.previous_root_ != 0) {
      std::unordered_set<Ref> seen;
      std::vector<Ref> todo{t.previous_root_};
      while (!todo.empty()) {
        const Ref r = todo.back();
        todo.pop_back();
        if (committed.count(r) || work.count(r) || !seen.insert(r).second) continue;
        ++st.previous_blocks;
        const int n = r == t.previous_root_ ? 1 : t.fan_;
        for (int s = 0; s < n; ++s)
          if (const Ref c = t.child(r, s); c != 0) todo.push_back(c);
      }
    }
    st.nvm_bytes = nvm_blocks * t.block_bytes_;
    st.version_bytes = st.blocks * t.block_bytes_;
    st.free_blocks = t.free_.size();
    st.chunk_blocks = t.chunks_.size() * t.blocks_per_chunk_;
    const auto& a = t.pool_->arena();
    st.pool_free_bytes =
        (a.block_count() - a.blocks_in_use()) * a.block_size() + t.free_.size() * t.block_bytes_ +
        (t.chunks_.empty() ? 0 : (t.blocks_per_chunk_ - std::min(t.bump_, t.blocks_per_chunk_)) * t.block_bytes_);
    return st;
  });
}

Result<void> Octree::gc() {
  Impl& t = *impl_;
  return guard([&]() -> Result<void> {
    if (Error e = t.stop_background_gc(); e.code != Errc::ok) return e;
    t.collect();
    return {};
  });
}

Result<void> Octree::verify() const {
  Impl& t = *impl_;
  return guard([&]() -> Result<void> {
    t.install_background_gc();
    Impl::Marks m = t.fresh_marks(t.chunks_.size());
    if (t.committed_root_ != 0) t.mark(t.committed_root_, kNoParent, m, t.chunk_index_, t.work_gen_);
    if (t.previous_root_ != 0) t.mark(t.previous_root_, kNoParent, m, t.chunk_index_, t.work_gen_);
    t.mark(t.work_root_, kNoParent, m, t.chunk_index_, t.work_gen_);
    std::uint64_t reachable = 0;
    for (const auto& bits : m.bits)
      for (const std::uint64_t w : bits) reachable += static_cast<std::uint64_t>(__builtin_popcountll(w));
    for (const Ref r : t.free_) {
      std::uint32_t c;
      std::uint64_t i;
      if (!t.locate_block(t.chunk_index_, r, c, i))
        return make_error(Errc::corrupted, t.file_ + ": a free block lies outside every chunk");
      if (m.bits[c][i / 64] & (std::uint64_t{1} << (i % 64)))
        return make_error(Errc::corrupted,
                          t.file_ + ": a reachable block is on the free list (offset " + std::to_string(r) + ")");
    }
    // Every block of every chunk is reachable, free, or (in the last chunk)
    // not handed out yet; blocks of the working generation freed since the
    // last collection may be missing from the free list (they are reclaimed
    // at the next one), so this holds exactly right after a collection.
    const std::uint64_t untouched =
        t.chunks_.empty() ? 0 : t.blocks_per_chunk_ - std::min(t.bump_, t.blocks_per_chunk_);
    if (!t.bg_running_ && reachable + t.free_.size() + untouched > t.chunks_.size() * t.blocks_per_chunk_)
      return make_error(Errc::corrupted, t.file_ + ": more blocks in use and free than the chunks hold");
    return {};
  });
}

void Octree::set_feature(FeatureFn fn) { impl_->feature_ = std::move(fn); }

void Octree::transform_layout() {
  Impl& t = *impl_;
  // Subtree level (Eq. 1): depth - floor(log_fanout(DRAM blocks)), at least 1.
  const int depth = t.depth_;
  const double budget_blocks = std::max(1.0, static_cast<double>(t.dram_budget_) / static_cast<double>(t.block_bytes_));
  const int lsub =
      depth - static_cast<int>(std::floor(std::log(budget_blocks) / std::log(static_cast<double>(t.fan_))));
  const int level = std::clamp(lsub, 1, std::max(1, depth));
  if (level != t.region_level_) {
    t.merge_all();  // the regions' DRAM blocks are counted per region
    t.region_level_ = level;
    t.regions_.clear();
  }
  if (!t.feature_ || t.dram_budget_ == 0) return;
  // Feature-directed sampling (seed §3.3): per subtree at that level, up to
  // 100 random descents to a leaf; its frequency is how many satisfy the feature.
  std::vector<std::pair<std::uint64_t, Ref>> roots;  // (region code, its child block or 0)
  std::vector<std::tuple<Ref, int, Octant>> stack{{t.work_root_, 0, Octant{}}};
  while (!stack.empty()) {
    auto [r, s, o] = stack.back();
    stack.pop_back();
    const Ref c = t.child(r, s);
    if (o.level == level) {
      if (c != 0) roots.push_back({pack(o), c});
      continue;
    }
    if (c == 0) continue;
    for (int k = t.fan_ - 1; k >= 0; --k) stack.push_back({c, k, child_of(o, k)});
  }
  if (roots.empty()) return;
  std::mt19937_64 rng(t.committed_gen_);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> freq;  // (freq, region)
  for (const auto& [code, block] : roots) {
    std::uint64_t hits = 0;
    for (int i = 0; i < 100; ++i) {
      Ref r = block;
      Octant o = unpack(code);
      for (;;) {
        const int k = static_cast<int>(rng() % static_cast<std::uint64_t>(t.fan_));
        o = child_of(o, k);
        const Ref c = t.child(r, k);
        if (c == 0) {
          hits += t.feature_(o, t.data(r, k)) ? 1 : 0;
          break;
        }
        r = c;
      }
    }
    freq.push_back({hits, code});
  }
  std::sort(freq.rbegin(), freq.rend());
  // Which subtrees fit the DRAM budget: each one's blocks (counted up to the
  // budget; one per internal octant), the hottest first.
  const auto budget = static_cast<std::uint64_t>(budget_blocks);
  std::unordered_map<std::uint64_t, std::uint64_t> size;
  for (const auto& [code, block] : roots) {
    std::uint64_t n = 0;
    std::vector<Ref> st{block};
    while (!st.empty() && n <= budget) {
      const Ref r = st.back();
      st.pop_back();
      ++n;
      for (int s = 0; s < t.fan_; ++s)
        if (const Ref c = t.child(r, s); c != 0) st.push_back(c);
    }
    size[code] = n;
  }
  std::uint64_t used = 0;
  if (t.default_hot_) {
    // First choice: the hottest subtrees while they fit.
    t.default_hot_ = false;
    for (const auto& [f, code] : freq) {
      const bool fits = used + size[code] <= budget;
      t.regions_[code].hot = fits;
      used += fits ? size[code] : 0;
    }
  } else {
    // Fill the room left with the hottest cold subtrees that fit, then swap
    // while a cold subtree is much hotter than the coldest C0 one (and fits
    // in its place).
    for (auto& [f, code] : freq) {
      t.regions_[code].freq = f;
      used += t.regions_[code].hot ? size[code] : 0;
    }
    for (const auto& [f, code] : freq)
      if (!t.regions_[code].hot && used + size[code] <= budget) t.regions_[code].hot = true, used += size[code];
    for (;;) {
      std::uint64_t hot_code = kNoParent, cold_code = kNoParent;
      std::uint64_t hot_min = ~std::uint64_t{0}, cold_max = 0;
      for (const auto& [f, code] : freq) {
        const bool h = t.regions_[code].hot;
        if (h && f < hot_min) hot_min = f, hot_code = code;
        if (!h && (cold_code == kNoParent || f > cold_max)) cold_max = f, cold_code = code;
      }
      if (hot_code == kNoParent || cold_code == kNoParent ||
          static_cast<double>(cold_max) <= t.t_transform_ * static_cast<double>(hot_min) ||
          used - size[hot_code] + size[cold_code] > budget)
        break;
      t.regions_[hot_code].hot = false;
      t.regions_[cold_code].hot = true;
      used = used - size[hot_code] + size[cold_code];
    }
  }
}

int Octree::dims() const { return impl_->dims_; }
std::uint32_t Octree::data_size() const { return impl_->data_size_; }
std::uint64_t Octree::version() const { return impl_->committed_gen_; }
const std::string& Octree::path() const { return impl_->file_; }

}  // namespace cairn::octree
