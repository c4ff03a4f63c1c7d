// commit.cpp — persist() (pm_persistent): the committed version's pool
// blocks, then durability in this order: every pool block written in this
// generation and the new chunk-table entries flushed, fence; the record
// written into the place the live record does not use and persisted; then
// the pool's root selector (one 8-byte commit word) names the new record. A
// crash before that store leaves the previous record, whose blocks were never
// written since (copy-on-write); after it, every block the new record reaches
// is durable.
#include <algorithm>
#include <chrono>
#include <tuple>

#include "octree/impl.hpp"

namespace cairn::octree {

using namespace detail;

// The committed version's blocks for the writable block r. Returns {ref in
// the committed version, ref in the next working version}. DRAM blocks stay
// in DRAM for the working version and get a pool twin (reused while neither
// they nor their children's committed refs changed). A pool block of this
// generation goes into the committed version with its children's committed
// refs; when a child's working ref differs (a DRAM subtree below), the next
// working version gets its own copy, of the next generation, that keeps the
// DRAM refs.
std::pair<Octree::Impl::Ref, Octree::Impl::Ref> Octree::Impl::commit(Ref r) {
  Ref cref[8], wref[8];
  bool differs = false;
  const Octant parent = unpack(hdr(r)->code);  // r is below the root block
  for (int s = 0; s < fan_; ++s) {
    const Ref c = read_child(r, s, child_octant(parent, s), work_gen_, Reader::quiet);
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

// A copy of r for the next working version, stamped with its generation
// and flushed by the next commit, not this one.
Octree::Impl::Ref Octree::Impl::next_generation_copy(Ref r) {
  const Ref w = nvm_alloc();
  dirty_.pop_back();
  next_dirty_.push_back(w);
  std::memcpy(blk(w), blk(r), block_bytes_);
  hdr(w)->epoch = work_gen_ + 1;
  return w;
}

Octree::Impl::Ref Octree::Impl::commit_root(Ref r) {  // the root block holds one slot and is never in DRAM
  const Ref c = read_child(r, 0, Octant{}, work_gen_, Reader::quiet);
  work_next_root_ = r;
  if (c == 0 || !writable(c)) return r;
  const auto [cc, wc] = commit(c);
  if (cc != c) child(r, 0) = cc, ++nvm_store_lines_;
  if (cc == wc) return r;
  work_next_root_ = next_generation_copy(r);
  child(work_next_root_, 0) = wc;
  return r;
}

Result<PersistStats> Octree::Impl::persist() {
  return guard([&]() -> Result<PersistStats> {
    const auto t0 = std::chrono::steady_clock::now();
    if (pool_->poisoned()) return make_error(Errc::poisoned, pool_->poison_reason());
    install_background_gc();
    // The commit allocates with collection off; with C0 holding the changed
    // blocks, it may be the only allocator, so it collects first if needed.
    collect_if_low();
    PersistStats ps;
    merged_count_ = 0;
    next_dirty_.clear();
    Ref committed_root;
    {
      const NoCollection off(*this);
      committed_root = commit_root(work_root_);
    }
    ps.merged_from_dram = merged_count_;
    // Everything new becomes durable (the dirty list may hold a block twice,
    // or a block freed again: flushing it once more is harmless).
    std::sort(dirty_.begin(), dirty_.end());
    dirty_.erase(std::unique(dirty_.begin(), dirty_.end()), dirty_.end());
    // Each block's CRC, over its final contents (a block freed again gets
    // one too: harmless).
    for (const Ref r : dirty_) hdr(r)->crc = block_crc(blk(r), block_bytes_);
    // No fence here: publish_root's commit_word drains the blocks, the
    // record and the root table together before it stores the commit word
    // (one write-back on a page-cache file system instead of three).
    const auto flush_blocks = [&] {
      for (const Ref r : dirty_) pool_->flush(blk(r), block_bytes_);
      if (chunks_.size() > committed_chunks_)
        pool_->flush(table_ + committed_chunks_, (chunks_.size() - committed_chunks_) * 8);
    };
    if (!internal_.publish_before_flush) flush_blocks();
    ps.blocks_written = dirty_.size();
    ps.bytes_written = dirty_.size() * block_bytes_;
    // The record, in the place the live one does not use; then the commit word.
    const std::uint64_t gen = work_gen_;
    const std::uint64_t at = record_at(meta_, header_->flags, gen);
    Record rec{};
    rec.magic = kRecordMagic;
    rec.generation = gen;
    rec.root = committed_root;
    rec.chunk_count = chunks_.size();
    rec.depth = static_cast<std::uint64_t>(depth_);
    rec.table_crc = util::crc32c(0, table_, chunks_.size() * 8);
    rec.checksum = record_checksum(rec);
    pool_->memcpy_nodrain(base_ + at, &rec, sizeof rec);
    if (auto r = pool_->publish_root(kRecordSlot, at, gen); !r.ok()) return r.error();
    if (internal_.publish_before_flush) {
      flush_blocks();
      pool_->drain();
    }
    if ((header_->flags & kKeepsPrevious) != 0) {
      previous_root_ = committed_root_;
      previous_gen_ = committed_gen_;
    }
    committed_root_ = committed_root;
    work_root_ = work_next_root_;
    committed_gen_ = gen;
    committed_chunks_ = chunks_.size();
    ++work_gen_;
    dirty_.swap(next_dirty_);  // the next version's copies of paths to DRAM
    next_dirty_.clear();
    for (auto& [code, g] : regions_) g.cold_now = false;
    // The subtree level of C0 regions follows the tree (seed Eq. 1).
    transform_layout();
    ps.version = gen;
    ps.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return ps;
  });
}

Result<PersistStats> Octree::persist() { return impl_->persist(); }

}  // namespace cairn::octree
