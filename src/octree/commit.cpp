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

namespace {

// Bit i of v to bit 3i (v below 2^21).
std::uint64_t spread3(std::uint64_t v) {
  v &= 0x1FFFFF;
  v = (v | v << 32) & 0x1F00000000FFFFull;
  v = (v | v << 16) & 0x1F0000FF0000FFull;
  v = (v | v << 8) & 0x100F00F00F00F00Full;
  v = (v | v << 4) & 0x10C30C30C30C30C3ull;
  v = (v | v << 2) & 0x1249249249249249ull;
  return v;
}

// An octant's key in Morton order, its level in the low bits: the octants
// of o's subtree (o included) are exactly the keys in subtree_keys(o) (an
// octant anchored strictly inside o's cube is finer than o, and one
// anchored at o's corner sorts by level). Slot s of a block is child s in
// Morton order (x the low bit, then y, z), so its children's ranges follow
// each other. 2D octants have z = 0: their ranges are those of 3D octants.
std::uint64_t morton_key(const Octant& o) {
  const std::uint64_t m = spread3(o.x) | spread3(o.y) << 1 | spread3(o.z) << 2;
  return m << 5 | static_cast<std::uint64_t>(o.level);
}
std::pair<std::uint64_t, std::uint64_t> subtree_keys(const Octant& o) {
  const std::uint64_t first = morton_key(o);
  const std::uint64_t span = std::uint64_t{1} << (3 * (kMaxLevel - o.level));
  return {first, ((first >> 5) + span) << 5};
}

}  // namespace

// The keys of the octants whose children the DRAM blocks changed since the
// last persist hold, sorted: the commit below enters a DRAM block that kept
// its twin only where one of them lies below. When more than a quarter of
// the DRAM blocks changed (a rewrite of most of the tree) the walk saves
// little and the sort costs more: the commit then enters every writable
// block.
void Octree::Impl::sort_changed_keys() {
  changed_keys_.clear();
  commit_prunes_ = !changed_overflow_ && dram_changed_.size() <= slab_->in_use() / 4;
  if (!commit_prunes_) return;
  for (const Ref r : dram_changed_)
    if (const std::uint64_t code = hdr(r)->code; code != kNoParent) changed_keys_.push_back(morton_key(unpack(code)));
  std::sort(changed_keys_.begin(), changed_keys_.end());
  changed_keys_.erase(std::unique(changed_keys_.begin(), changed_keys_.end()), changed_keys_.end());
}

// The committed version's blocks for the child block c (keys: the changed
// keys in the subtree of the octant whose children it holds). A DRAM block
// that kept its twin and has no changed block below is the twin in the
// committed version: neither it nor its children's committed refs changed
// (every store drops the twin and lists the block, and a child's new twin
// or a new child is a store). Pool blocks of the working generation are
// entered: the working version wrote them (the paths to DRAM copied by the
// last commit among them), so there are as many as were written.
std::pair<Octree::Impl::Ref, Octree::Impl::Ref> Octree::Impl::commit_child(Ref c, KeyRange keys) {
  if (c == 0 || !writable(c)) return {c, c};
  if (in_dram(c) && commit_prunes_ && twin(c) != 0 && keys.first == keys.second) return {twin(c), c};
  return commit(c, keys);
}

// The committed version's blocks for the writable block r. Returns {ref in
// the committed version, ref in the next working version}. DRAM blocks stay
// in DRAM for the working version and get a pool twin (reused while neither
// they nor their children's committed refs changed). A pool block of this
// generation goes into the committed version with its children's committed
// refs; when a child's working ref differs (a DRAM subtree below), the next
// working version gets its own copy, of the next generation, that keeps the
// DRAM refs.
std::pair<Octree::Impl::Ref, Octree::Impl::Ref> Octree::Impl::commit(Ref r, KeyRange keys) {
  ++commit_visits_;
  Ref cref[8], wref[8];
  bool differs = false;
  const Octant parent = unpack(hdr(r)->code);  // r is below the root block
  const std::uint64_t* at = keys.first;
  for (int s = 0; s < fan_; ++s) {
    const Octant o = child_octant(parent, s);
    const Ref c = read_child(r, s, o, work_gen_, Reader::quiet);
    // The changed keys in o's subtree (the children's ranges follow each
    // other; none to narrow below a block without any, or when the commit
    // enters every block).
    const std::uint64_t* first = at;
    if (at != keys.second) {
      const auto [lo, hi] = subtree_keys(o);
      first = std::lower_bound(at, keys.second, lo);
      at = std::lower_bound(first, keys.second, hi);
    }
    std::tie(cref[s], wref[s]) = commit_child(c, {first, at});
    differs = differs || cref[s] != wref[s];
  }
  if (in_dram(r)) {
    Ref n = twin(r);
    for (int s = 0; s < fan_ && n != 0; ++s)
      if (child(n, s) != cref[s]) n = 0;
    if (n == 0) {
      if (twin(r) != 0) replaced();  // the old twin leaves the committed version
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
  ++commit_visits_;
  const Ref c = read_child(r, 0, Octant{}, work_gen_, Reader::quiet);
  work_next_root_ = r;
  if (c == 0 || !writable(c)) return r;
  sort_changed_keys();
  const std::uint64_t* keys = changed_keys_.data();
  const auto [cc, wc] = commit_child(c, {keys, keys + changed_keys_.size()});
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
    commit_visits_ = 0;
    next_dirty_.clear();
    Ref committed_root;
    {
      const NoCollection off(*this);
      committed_root = commit_root(work_root_);
    }
    ps.merged_from_dram = merged_count_;
    ps.blocks_visited = commit_visits_;
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
    // What this generation replaced is garbage once the versions after it
    // stop reaching it; the next version's copies of paths to DRAM replace
    // their originals in the next generation.
    replaced_older_ += replaced_last_;
    replaced_last_ = replaced_now_;
    replaced_now_ = next_dirty_.size();
    dirty_.swap(next_dirty_);  // the next version's copies of paths to DRAM
    next_dirty_.clear();
    dirty_reused_ = false;  // next_dirty_ got each block once
    // Every DRAM block the committed version reaches has its twin now (the
    // list is kept until here: a failed persist leaves it for the next).
    dram_changed_.clear();
    changed_overflow_ = false;
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
