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

// ------------------------------------------------------- the checked read

void Octree::Impl::damaged(const Octant* o, const std::string& what) const {
  std::string where;
  if (o != nullptr)
    where = " (below the octant of level " + std::to_string(o->level) + " at " + std::to_string(o->x) + "," +
            std::to_string(o->y) + "," + std::to_string(o->z) + ")";
  fail(Errc::corrupted, file_ + " is damaged: " + what + where +
                            "; the tree cannot be read. Restore it from another copy, or remove the pool file and "
                            "start again");
}

void Octree::Impl::bad_child(Ref parent, Ref c, const Octant& o, std::uint32_t max_epoch, Reader who) const {
  if (in_dram(c)) damaged(&o, "a child reference names a DRAM block");
  if (c % 8 != 0 || c < pool::kArenaOffset || c > pool_size_ - block_bytes_)
    damaged(&o, "a child reference points outside the pool (" + std::to_string(c) + ")");
  if (o.level >= kMaxLevel) damaged(&o, "an octant of the finest level has children");
  if (hdr(c)->code != pack(o)) damaged(&o, "a block names another octant than the one it was reached from");
  (void)parent, (void)max_epoch, (void)who;
  damaged(&o, "a block is of a later generation than the version reaching it");
}

void Octree::Impl::bad_block(Ref r, const char* what) const {
  damaged(nullptr, "the block at offset " + std::to_string(r) + " " + what);
}

Octree::Impl::Ref Octree::Impl::read_root(Ref r, std::uint32_t max_epoch, Reader who) const {
  if (in_dram(r) || r % 8 != 0 || r < pool::kArenaOffset || r > pool_size_ - block_bytes_)
    damaged(nullptr, "the root reference points outside the pool (" + std::to_string(r) + ")");
  const BlockHeader* h = hdr(r);
  if (h->code != kNoParent || h->epoch > max_epoch) damaged(nullptr, "the root block fails its check");
  check_pool_block(r, who);
  return r;
}

// Chunk `index` (chunks_[index]) joins the window table.
void Octree::Impl::note_chunk(std::uint32_t index) {
  const std::uint64_t w = (chunks_[index] - pool::kArenaOffset) >> window_shift_;
  if (w >= window_.size()) window_.resize(w + 1, 0);
  window_[w] = index + 1;
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
  note_chunk(static_cast<std::uint32_t>(chunks_.size() - 1));
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
    dirty_reused_ = true;  // it may be on the dirty list already
  } else {
    r = chunks_.back() + bump_ * block_bytes_;
    ++bump_;
  }
  // A block of a restored chunk is written from scratch now: nothing of it
  // is left to check.
  std::uint32_t chunk;
  std::uint64_t i;
  if (unchecked_chunks_ != 0 && locate(r, chunk, i) && chunk < unchecked_chunks_)
    unchecked_[chunk * chunk_words_ + i / 64] &= ~(std::uint64_t{1} << (i % 64));
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
  if (free_frac < threshold_nvbm_) {
    collect();
  } else if (chunks_.size() >= collect_at_chunks_) {
    // Doubled since the last collection; if no block was replaced since,
    // every block is live and a collection would find what this finds.
    if (garbage_possible())
      collect();
    else
      collect_at_chunks_ = 2 * (chunks_.size() - free_.size() / blocks_per_chunk_) + kGrowthChunks;
  }
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

// Marks the pool blocks reachable from the (checked) block `r`; shared
// subtrees once.
void Octree::Impl::mark(Ref r, Marks& m, const ChunkIndex& index, std::uint32_t max_epoch, Reader who) const {
  if (!in_dram(r)) {
    std::uint32_t c;
    std::uint64_t i;
    const bool found = who == Reader::background ? locate_block(index, r, c, i) : locate(r, c, i);
    if (!found || c >= m.bits.size()) fail(Errc::corrupted, file_ + ": a block lies outside every chunk");
    auto& word = m.bits[c][i / 64];
    if (word & (std::uint64_t{1} << (i % 64))) return;
    word |= std::uint64_t{1} << (i % 64);
  }
  const std::uint64_t code = hdr(r)->code;
  if (code == kNoParent) {
    if (const Ref c = read_child(r, 0, Octant{}, max_epoch, who); c != 0) mark(c, m, index, max_epoch, who);
    return;
  }
  const Octant parent = unpack(code);
  for (int s = 0; s < fan_; ++s)
    if (const Ref c = read_child(r, s, child_octant(parent, s), max_epoch, who); c != 0)
      mark(c, m, index, max_epoch, who);
}

// Marks from the versions' roots: the committed one and the kept one before
// it (each checked as a committed version: all in the pool, no block newer
// than the committed generation) and the working one.
void Octree::Impl::mark_roots(Marks& m, bool committed, bool previous) const {
  const std::uint32_t gen = committed_limit();
  if (committed && committed_root_ != 0)
    mark(read_root(committed_root_, gen, Reader::quiet), m, chunk_index_, gen, Reader::quiet);
  if (previous && previous_root_ != 0)
    mark(read_root(previous_root_, gen, Reader::quiet), m, chunk_index_, gen, Reader::quiet);
  mark(read_root(work_root_, work_gen_, Reader::quiet), m, chunk_index_, work_gen_, Reader::quiet);
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
  mark_roots(m, !internal_.gc_ignores_committed, !internal_.gc_ignores_previous);
  free_.clear();
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const std::uint64_t limit = c + 1 == chunks_.size() ? bump_ : blocks_per_chunk_;
    for (std::uint64_t i = 0; i < limit; ++i)
      if (!(m.bits[c][i / 64] & (std::uint64_t{1} << (i % 64)))) free_.push_back(chunks_[c] + i * block_bytes_);
  }
  std::reverse(free_.begin(), free_.end());  // lowest addresses first
  // What the working generation replaced the committed version still
  // reaches, and the kept previous version what the last one replaced.
  replaced_older_ = 0;
  if ((header_->flags & kKeepsPrevious) == 0) replaced_last_ = 0;
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
      mark(read_root(root, gen, Reader::background), m, index, gen, Reader::background);
      if (previous != 0) mark(read_root(previous, gen, Reader::background), m, index, gen, Reader::background);
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
    mark_roots(m, true, true);
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
