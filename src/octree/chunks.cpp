// chunks.cpp — the PM-octree's chunk store (pool blocks in append-only
// chunks), the checks of a block a walk reaches, garbage collection
// (foreground, and in the background after restore) and verify().
//
// There is no allocation log: a collection marks the blocks reachable from
// the committed root, the kept previous one and the working root, and every
// other block of every chunk is free. Blocks freed within their own
// generation go back to the free list at once.
#include <algorithm>
#include <limits>

#include "octree/impl.hpp"

namespace cairn::octree {

using namespace detail;

void Octree::Impl::validate(Ref r, std::uint64_t parent) const {
  validate(r, parent, work_gen_);
  if (charge_reads_ && !in_dram(r)) pool_->device().read_charge(block_bytes_, false);
}

void Octree::Impl::validate(Ref r, std::uint64_t parent, std::uint32_t max_epoch) const {
  if (!in_dram(r) && (r % 8 != 0 || r < pool::kArenaOffset || r > pool_->size() - block_bytes_))
    fail(Errc::corrupted,
         "a child reference points outside the pool (" + std::to_string(r) + "): " + file_ + " is damaged");
  const BlockHeader* h = hdr(r);
  if (h->code != parent || h->check != block_check(h->code, h->epoch) || h->epoch > max_epoch)
    fail(Errc::corrupted, "an octant block fails its check (octant code " + std::to_string(parent) + "): " + file_ +
                              " is damaged; restore cannot use it");
}

// ------------------------------------------------------------ chunk store

void Octree::Impl::add_chunk() {
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

Octree::Impl::Ref Octree::Impl::nvm_alloc() {
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

// ------------------------------------------------------------- collection

void Octree::Impl::install_background_gc() {
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
void Octree::Impl::collected() {
  const std::uint64_t live_chunks = chunks_.size() - free_.size() / blocks_per_chunk_;
  collect_at_chunks_ = 2 * live_chunks + kGrowthChunks;
  ++gc_runs_;
}

// Collects when the free part of the pool is below threshold_NVBM, or when
// the tree's chunks have doubled since the last collection found what was
// live (so a tree whose versions each rewrite most blocks reuses a few
// chunks, warm in cache and mapped, instead of touching the whole pool).
void Octree::Impl::collect_if_low() {
  if (bg_running_ || free_.size() >= blocks_per_chunk_) return;
  const auto& a = pool_->arena();
  const double free_frac = 1.0 - static_cast<double>(a.blocks_in_use()) / static_cast<double>(a.block_count());
  if (free_frac < threshold_nvbm_ || chunks_.size() >= collect_at_chunks_) collect();
}

bool Octree::Impl::locate_block(const ChunkIndex& chunk_index, Ref r, std::uint32_t& chunk,
                                std::uint64_t& index) const {
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
void Octree::Impl::mark(Ref r, std::uint64_t parent_code, Marks& m, const ChunkIndex& index,
                        std::uint32_t max_epoch) const {
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

Octree::Impl::Marks Octree::Impl::fresh_marks(std::size_t nchunks) const {
  Marks m;
  m.bits.assign(nchunks, std::vector<std::uint64_t>((blocks_per_chunk_ + 63) / 64, 0));
  return m;
}

// Waits for a background collection and drops its result (a full one
// follows); the collector's error, if it found damage.
Error Octree::Impl::stop_background_gc() {
  if (!bg_running_) return {};
  bg_.join();
  bg_running_ = false;
  bg_free_.clear();
  return bg_error_;
}

void Octree::Impl::collect() {
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
void Octree::Impl::start_background_gc() {
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

Result<void> Octree::Impl::gc() {
  return guard([&]() -> Result<void> {
    if (Error e = stop_background_gc(); e.code != Errc::ok) return e;
    collect();
    return {};
  });
}

Result<void> Octree::Impl::verify() {
  return guard([&]() -> Result<void> {
    install_background_gc();
    Marks m = fresh_marks(chunks_.size());
    if (committed_root_ != 0) mark(committed_root_, kNoParent, m, chunk_index_, work_gen_);
    if (previous_root_ != 0) mark(previous_root_, kNoParent, m, chunk_index_, work_gen_);
    mark(work_root_, kNoParent, m, chunk_index_, work_gen_);
    std::uint64_t reachable = 0;
    for (const auto& bits : m.bits)
      for (const std::uint64_t w : bits) reachable += static_cast<std::uint64_t>(__builtin_popcountll(w));
    for (const Ref r : free_) {
      std::uint32_t c;
      std::uint64_t i;
      if (!locate_block(chunk_index_, r, c, i))
        return make_error(Errc::corrupted, file_ + ": a free block lies outside every chunk");
      if (m.bits[c][i / 64] & (std::uint64_t{1} << (i % 64)))
        return make_error(Errc::corrupted,
                          file_ + ": a reachable block is on the free list (offset " + std::to_string(r) + ")");
    }
    // Every block of every chunk is reachable, free, or (in the last chunk)
    // not handed out yet; blocks of the working generation freed since the
    // last collection may be missing from the free list (they are reclaimed
    // at the next one), so this holds exactly right after a collection.
    const std::uint64_t untouched = chunks_.empty() ? 0 : blocks_per_chunk_ - std::min(bump_, blocks_per_chunk_);
    if (!bg_running_ && reachable + free_.size() + untouched > chunks_.size() * blocks_per_chunk_)
      return make_error(Errc::corrupted, file_ + ": more blocks in use and free than the chunks hold");
    return {};
  });
}

Result<void> Octree::gc() { return impl_->gc(); }
Result<void> Octree::verify() const { return impl_->verify(); }

}  // namespace cairn::octree
