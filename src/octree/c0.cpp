// c0.cpp — the PM-octree's C0: DRAM blocks in a slab, the C0 regions
// (subtrees at level L_sub, seed Eq. 1), where a new block goes (DRAM or
// pool), merging regions into the pool when DRAM runs short, and the
// dynamic layout transformation (feature-directed sampling, seed §3.3).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <tuple>

#include "octree/impl.hpp"
#include "util/io.hpp"

namespace cairn::octree {

using namespace detail;

namespace {

// 0 (unknown) counts as plenty: no merge for lack of a number.
std::uint64_t mem_available() {
  const std::uint64_t m = util::memory_available();
  return m == 0 ? ~std::uint64_t{0} : m;
}

}  // namespace

// ------------------------------------------------------------ the DRAM slab

DramSlab::~DramSlab() {
  for (void* c : chunks_) std::free(c);
}

std::byte* DramSlab::alloc() {
  if (free_.empty()) {
    const std::size_t per = std::max<std::size_t>(1, (1u << 20) / bytes_);
    chunk_bytes_ = (per * bytes_ + 63) / 64 * 64;
    per_chunk_ = per;
    void* c = std::aligned_alloc(64, chunk_bytes_);
    if (c == nullptr) throw std::bad_alloc();
    chunks_.push_back(c);
    const auto start = reinterpret_cast<std::uintptr_t>(c);
    starts_.insert(std::upper_bound(starts_.begin(), starts_.end(), start), start);
    for (std::size_t i = per; i-- > 0;) {
      std::byte* b = static_cast<std::byte*>(c) + i * bytes_ + 8;
      std::memcpy(b, &kFreeDramBlock, sizeof kFreeDramBlock);  // not in use (a scan of the slab skips it)
      free_.push_back(b);
    }
  }
  std::byte* b = free_.back();
  free_.pop_back();
  ++in_use_;
  return b;
}

bool DramSlab::owns(const std::byte* b) const {
  const auto p = reinterpret_cast<std::uintptr_t>(b);
  auto it = std::upper_bound(starts_.begin(), starts_.end(), p);
  if (it == starts_.begin()) return false;
  const std::uintptr_t at = p - *--it;
  return at < chunk_bytes_ && at % bytes_ == 8 && at + bytes_ - 8 <= chunk_bytes_;
}

// ---------------------------------------------------------------- regions

std::uint64_t Octree::Impl::region_of(const Octant& parent) const {
  if (parent.level < region_level_) return kNoParent;
  Octant a = parent;
  const std::uint32_t mask = ~((kRootLength >> region_level_) - 1);
  a.level = region_level_, a.x &= mask, a.y &= mask, a.z &= mask;
  return pack(a);
}

bool Octree::Impl::hot(std::uint64_t region) {
  if (region == kNoParent || dram_budget_ == 0) return false;
  auto it = regions_.find(region);
  if (it == regions_.end()) return default_hot_;
  return !it->second.cold_now && (default_hot_ || it->second.hot);
}

// A new block for the children of `parent`, header set, contents undefined.
Octree::Impl::Ref Octree::Impl::alloc_block(const Octant* parent) {
  const std::uint64_t code = parent != nullptr ? pack(*parent) : kNoParent;
  const std::uint64_t region = parent != nullptr ? region_of(*parent) : kNoParent;
  Ref r;
  // Blocks above the C0 regions (few: at most fan^region_level) are on
  // every path from the root, so they live in DRAM whenever C0 exists.
  const bool top = parent != nullptr && parent->level < region_level_ && dram_budget_ > 0;
  // The memory-order writer's second phase (force_c1_) puts copies below
  // the regions in the pool: it must not create DRAM blocks its slab scan
  // has not seen, nor trigger a merge while it holds DRAM references.
  if (top || (!force_c1_ && hot(region))) {
    r = reinterpret_cast<Ref>(slab_->alloc()) | 1;
    twin(r) = 0;
    list_changed(r);  // the next commit gives it a twin
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
  h->crc = 0;  // written when the block is persisted
  return r;
}

// Frees a block only the working version can reach (shared ones wait for GC).
void Octree::Impl::free_private(Ref r) {
  if (in_dram(r)) {
    if (twin(r) != 0) replaced();  // the committed version's copy of it
    const BlockHeader* h = hdr(r);
    if (h->code != kNoParent) {
      auto it = regions_.find(region_of(unpack(h->code)));
      if (it != regions_.end() && it->second.dram_blocks > 0) --it->second.dram_blocks;
    }
    slab_->release(blk(r));
  } else if (hdr(r)->epoch == work_gen_) {
    // Marked free: a memory-order scan of the dirty list skips it.
    hdr(r)->code = kFreeDramBlock;
    ++nvm_store_lines_;
    free_.push_back(r);
  } else {
    replaced();
  }
}

Octree::Impl::Ref Octree::Impl::copy_block(Ref r, const Octant* parent) {
  if (!in_dram(r)) replaced();
  const Ref c = alloc_block(parent);
  std::memcpy(blk(c) + sizeof(BlockHeader), blk(r) + sizeof(BlockHeader), block_bytes_ - sizeof(BlockHeader));
  return c;
}

// ------------------------------------------------------ merge C0 into C1

// DRAM blocks below `r` (writable) move to the pool.
Octree::Impl::Ref Octree::Impl::merge(Ref r) {
  const Ref tw = in_dram(r) ? twin(r) : 0;
  const Octant parent = unpack(hdr(r)->code);  // r is below the root block
  for (int s = 0; s < fan_; ++s) {
    const Ref c = read_child(r, s, child_octant(parent, s), work_gen_, Reader::quiet);
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
  stamp(n);         // a DRAM block kept over persists carries an older generation
  free_private(r);  // its twin, if any, is replaced
  ++merged_count_;
  return n;
}

// Moves every DRAM block into the pool (before the C0 regions change). A
// DRAM block is reached only through writable blocks, so a shared root
// has none below it.
void Octree::Impl::merge_all() {
  const Ref c = read_child(work_root_, 0, Octant{}, work_gen_, Reader::quiet);
  if (c != 0 && writable(c)) {
    const NoCollection off(*this);
    const Ref m = merge(c);
    if (m != c) child(work_root_, 0) = m, touch(work_root_);
  }
  for (auto& [code, g] : regions_) g.dram_blocks = 0;
}

// Merges the least frequently accessed hot regions out of DRAM while over
// budget. Only a Path calls it (Path::at, Path::settle): where no frame of
// a walk points into a block a merge may move.
void Octree::Impl::maybe_evict() {
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

void Octree::Impl::evict(std::uint64_t region) {
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
    const Ref c = read_child(r, s, o, work_gen_, Reader::quiet);
    if (c == 0) return;
    const int idx = child_index(target, o.level + 1);
    r = c, s = idx, o = child_octant(o, idx);
  }
  const Ref c = read_child(r, s, o, work_gen_, Reader::quiet);
  if (c == 0 || !writable(c)) return;
  const NoCollection off(*this);
  const Ref m = merge(c);
  child(r, s) = m;
  touch(r);
  g.dram_blocks = 0;
}

// ------------------------------------------------- layout transformation

// The transformation only moves blocks between DRAM and the pool: if its
// sampling meets a damaged block it stops there, and the walk that next
// reaches the block reports the damage.
void Octree::Impl::transform_layout() {
  try {
    transform_layout_or_fail();
  } catch (const Fail&) {
  }
}

void Octree::Impl::transform_layout_or_fail() {
  // Subtree level (Eq. 1): depth - floor(log_fanout(DRAM blocks)), at least 1.
  const int depth = depth_;
  const double budget_blocks = std::max(1.0, static_cast<double>(dram_budget_) / static_cast<double>(block_bytes_));
  const int lsub = depth - static_cast<int>(std::floor(std::log(budget_blocks) / std::log(static_cast<double>(fan_))));
  const int level = std::clamp(lsub, 1, std::max(1, depth));
  if (level != region_level_) {
    merge_all();  // the regions' DRAM blocks are counted per region
    region_level_ = level;
    regions_.clear();
  }
  if (!feature_ || dram_budget_ == 0) return;
  // Feature-directed sampling (seed §3.3): per subtree at that level, up to
  // 100 random descents to a leaf; its frequency is how many satisfy the feature.
  std::vector<std::pair<std::uint64_t, Ref>> roots;  // (region code, its child block or 0)
  std::vector<std::tuple<Ref, int, Octant>> stack{{work_root_, 0, Octant{}}};
  while (!stack.empty()) {
    auto [r, s, o] = stack.back();
    stack.pop_back();
    const Ref c = read_child(r, s, o, work_gen_, Reader::quiet);
    if (o.level == level) {
      if (c != 0) roots.push_back({pack(o), c});
      continue;
    }
    if (c == 0) continue;
    for (int k = fan_ - 1; k >= 0; --k) stack.push_back({c, k, child_octant(o, k)});
  }
  if (roots.empty()) return;
  std::mt19937_64 rng(committed_gen_);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> freq;  // (freq, region)
  for (const auto& [code, block] : roots) {
    std::uint64_t hits = 0;
    for (int i = 0; i < 100; ++i) {
      Ref r = block;
      Octant o = unpack(code);
      for (;;) {
        const int k = static_cast<int>(rng() % static_cast<std::uint64_t>(fan_));
        const Ref c = read_child(r, k, child_octant(o, k), work_gen_, Reader::quiet);
        o = child_octant(o, k);
        if (c == 0) {
          hits += feature_(o, data(r, k)) ? 1 : 0;
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
      for (int s = 0; s < fan_; ++s)
        if (const Ref c = read_child(r, s, slot_octant(r, s), work_gen_, Reader::quiet); c != 0) st.push_back(c);
    }
    size[code] = n;
  }
  std::uint64_t used = 0;
  if (default_hot_) {
    // First choice: the hottest subtrees while they fit.
    default_hot_ = false;
    for (const auto& [f, code] : freq) {
      const bool fits = used + size[code] <= budget;
      regions_[code].hot = fits;
      used += fits ? size[code] : 0;
    }
  } else {
    // Fill the room left with the hottest cold subtrees that fit, then swap
    // while a cold subtree is much hotter than the coldest C0 one (and fits
    // in its place).
    for (auto& [f, code] : freq) {
      regions_[code].freq = f;
      used += regions_[code].hot ? size[code] : 0;
    }
    for (const auto& [f, code] : freq)
      if (!regions_[code].hot && used + size[code] <= budget) regions_[code].hot = true, used += size[code];
    for (;;) {
      std::uint64_t hot_code = kNoParent, cold_code = kNoParent;
      std::uint64_t hot_min = ~std::uint64_t{0}, cold_max = 0;
      for (const auto& [f, code] : freq) {
        const bool h = regions_[code].hot;
        if (h && f < hot_min) hot_min = f, hot_code = code;
        if (!h && (cold_code == kNoParent || f > cold_max)) cold_max = f, cold_code = code;
      }
      if (hot_code == kNoParent || cold_code == kNoParent ||
          static_cast<double>(cold_max) <= t_transform_ * static_cast<double>(hot_min) ||
          used - size[hot_code] + size[cold_code] > budget)
        break;
      regions_[hot_code].hot = false;
      regions_[cold_code].hot = true;
      used = used - size[hot_code] + size[cold_code];
    }
  }
}

void Octree::set_feature(FeatureFn fn) { impl_->set_feature(std::move(fn)); }
void Octree::transform_layout() { impl_->transform_layout(); }

}  // namespace cairn::octree
