// leaves.cpp — the flat iteration over the working version's leaves
// (LeafCursor) and the bulk payload update (LeafWriter): one explicit-stack
// walk that hands out a batch of leaves per call instead of calling back per
// leaf, and, for the writer, makes each family block writable once.
#include <emmintrin.h>

#include <cstddef>

#include "octree/impl.hpp"

namespace cairn::octree {

using namespace detail;

// Walks on from where `s` stopped until a batch is full or the tree ends;
// returns the leaves handed out. Every reference goes through read_child.
//
// The writer (Write) keeps frames 0..s.writable writable: before it hands
// out a leaf of frame d it makes frames writable+1..d writable (copying a
// shared block into the working version and relinking it in its parent, as
// Path::make_writable does), and a frame it returns to stays writable, so a
// block is copied once and no leaf re-checks the path. Each block it hands
// out leaves of counts as changed once (a C0 block loses its twin; a pool
// block counts a stored line per payload, as update_leaves would).
//
// C0 merges: a copy may allocate past the DRAM budget (evict_pending_). A
// merge moves C0 blocks below the regions, so it runs only where Path::at
// lets it, at a slot of a frame at or above region_level_ (the blocks of
// those frames never move, and no deeper frame is live), and only before
// any leaf of the current batch is handed out: with leaves already in the
// batch, the batch ends there and the merge runs at the next call.
//
// The walk runs from frame s.base (0: the root block) until the batch holds
// kBatch leaves (n counts those already in it) or it is back at s.base
// (s.subtree_done); returns the leaves in the batch.
template <bool Write>
std::size_t Octree::Impl::fill(CursorState& s, std::size_t n) {
  LeafView* views = s.views;
  WritableLeaf* out = s.writable_leaves;
  // The frame's fields in locals while the walk runs over its slots (the
  // batch's stores could otherwise alias them).
  for (;;) {
    const int d = s.depth;
    CursorState::Frame& f = s.f[d];
    Ref block = f.block;
    const Octant parent = f.parent;
    const int slots = f.slots;
    const bool may_merge = Write && s.may_merge && d <= region_level_;
    bool ready = !Write || (s.writable >= d && f.touched);  // the writer: block writable and counted
    int slot = f.slot;
    for (; slot < slots; ++slot) {
      if (may_merge && evict_pending_) {
        if (n > 0) {
          f.slot = slot;
          return n;
        }
        maybe_evict();
      }
      const Octant o = d == 0 ? Octant{} : child_octant(parent, slot);
      const Ref c = read_child(block, slot, o, work_gen_);
      if (c != 0) {
        // The memory order's walks cover committed subtrees: no DRAM block
        // lies below them.
        if (s.skip_dram && in_dram(c)) damaged(&o, "a block of the committed version names a DRAM block");
        prefetch_children(c);
        f.slot = slot;
        s.f[d + 1] = {c, o, 0, fan_, false};
        s.depth = d + 1;
        break;
      }
      if constexpr (Write) {
        if (!ready) {
          make_frames_writable(s);
          block = f.block;
          if (!f.touched && in_dram(block)) touch(block);
          f.touched = true;
          ready = true;
        }
        if (!in_dram(block)) ++nvm_store_lines_;
        out[n] = {o, data(block, slot)};
      } else {
        views[n] = {o, data(block, slot)};
      }
      if (++n == CursorState::kBatch) {
        f.slot = slot + 1;
        return n;
      }
    }
    if (slot < slots) continue;  // descended
    if (d == s.base) {
      f.slot = slot;
      s.subtree_done = true;
      return n;
    }
    s.depth = d - 1;
    s.writable = std::min(s.writable, d - 1);
    ++s.f[d - 1].slot;
  }
}

// The writer: frames writable+1..depth made writable, each shared block
// copied into the working version and relinked in its (writable) parent, as
// Path::make_writable does.
void Octree::Impl::make_frames_writable(CursorState& s) {
  for (int k = s.writable + 1; k <= s.depth; ++k) {
    CursorState::Frame& g = s.f[k];
    if (writable(g.block)) continue;
    const Ref copy = copy_block(g.block, k == 0 ? nullptr : &g.parent);
    if (k == 0) {
      work_root_ = copy;
    } else {
      CursorState::Frame& up = s.f[k - 1];
      child(up.block, up.slot) = copy;
      touch(up.block);
    }
    g.block = copy;
  }
  s.writable = s.depth;
}

// Morton order: one walk from the root.
template <bool Write>
std::size_t Octree::Impl::fill_morton(CursorState& s) {
  if (s.done) {
    if (Write) maybe_evict();  // what Path::settle does after a walk
    return 0;
  }
  if (!s.started) {
    s.started = true;
    const Ref root = read_root(work_root_, work_gen_, Reader::walk);
    s.f[0] = {root, Octant{}, 0, 1, false};
    s.depth = 0;
    s.base = 0;
    s.writable = -1;
    prefetch_children(root);
  }
  const std::size_t n = fill<Write>(s, 0);
  if (s.subtree_done) {
    s.done = true;
    if (Write && n == 0) maybe_evict();
  }
  return n;
}

// Memory order, phase 0: the DRAM slab's blocks in memory order, from where
// s stopped. Every block in use is a block of the working version (the slab
// releases a block as soon as the working version stops reaching it, and a
// free block holds kFreeDramBlock in its code); its leaf slots are handed
// out, its DRAM references skipped (those blocks are in the slab too) and
// its pool references checked (read_child) and listed for phase 1. The
// writer counts each DRAM block it hands leaves of as changed once (a DRAM
// block is always writable: no copy).
constexpr std::size_t kScanAhead = 40;  // blocks: about a batch, fetched while the caller works on the one before
// The dirty list's blocks lie less regularly: fetched further ahead.
constexpr std::size_t kDirtyAhead = 80;
// Pool references of the dirty list's blocks are checked this many
// references after they were met (their headers fetched meanwhile).
constexpr std::size_t kPendingLag = 32;

// Bit b of a slot's mask lane: the child's coordinate adds half the
// parent's edge along that axis (lane 0 is the level).
alignas(16) constexpr std::int32_t kChildLanes[8][4] = {{0, 0, 0, 0},  {0, -1, 0, 0},  {0, 0, -1, 0},  {0, -1, -1, 0},
                                                        {0, 0, 0, -1}, {0, -1, 0, -1}, {0, 0, -1, -1}, {0, -1, -1, -1}};
static_assert(sizeof(Octant) == 16 && sizeof(LeafView) == 24 && offsetof(LeafView, data) == 16 &&
              sizeof(WritableLeaf) == 24 && offsetof(WritableLeaf, data) == 16);

// One block's slots into the batch at `out`: every slot's view is written
// and the count advanced only for a leaf (no branch per slot: a block's
// pattern of leaves is not predictable); returns the slots that name pool
// blocks, as a mask.
template <int Slots>
inline unsigned emit_block(const std::byte* b, std::size_t stride, __m128i base, __m128i half, std::byte* out,
                           std::size_t& n, std::uint64_t& dram) {
  const std::byte* slot = b + sizeof(BlockHeader);
  unsigned pool = 0;
  for (int sl = 0; sl < Slots; ++sl, slot += stride) {
    Ref c;
    std::memcpy(&c, slot, sizeof c);
    std::byte* at = out + n * sizeof(LeafView);
    const __m128i lanes = _mm_load_si128(reinterpret_cast<const __m128i*>(kChildLanes[sl]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at), _mm_add_epi32(base, _mm_and_si128(half, lanes)));
    const std::byte* d = slot + 8;
    std::memcpy(at + 16, &d, sizeof d);
    n += c == 0;
    dram += c & 1;
    pool |= static_cast<unsigned>(c != 0 && !in_dram(c)) << sl;
  }
  return pool;
}

// One block of the working version that a memory-order scan reaches (a
// DRAM block of the slab, or a pool block of the working generation from
// the dirty list): its leaves into the batch; its pool references checked,
// and those of older generations listed for the walks (a reference of the
// working generation is a block of the dirty list, a DRAM one a block of
// the slab: both scanned on their own).
template <bool Write>
inline void Octree::Impl::scan_block(CursorState& s, Ref r, std::uint64_t code, std::size_t& n, bool defer) {
  std::byte* b = blk(r);
  auto* out = reinterpret_cast<std::byte*>(Write ? static_cast<void*>(s.writable_leaves) : static_cast<void*>(s.views));
  const std::size_t before = n;
  unsigned pool;
  Octant parent;
  if (code == kNoParent) {  // the root block: one slot, the root octant
    pool = emit_block<1>(b, stride_, _mm_setzero_si128(), _mm_setzero_si128(), out, n, s.dram_refs);
  } else {
    // The children's octants: (level + 1, x, y, z) plus half the edge
    // along the axes of the slot's bits.
    parent = unpack(code);
    const __m128i base = _mm_setr_epi32(parent.level + 1, static_cast<std::int32_t>(parent.x),
                                        static_cast<std::int32_t>(parent.y), static_cast<std::int32_t>(parent.z));
    const __m128i half = _mm_set1_epi32(static_cast<std::int32_t>(parent.length() >> 1));
    pool = fan_ == 8 ? emit_block<8>(b, stride_, base, half, out, n, s.dram_refs)
                     : emit_block<4>(b, stride_, base, half, out, n, s.dram_refs);
  }
  if constexpr (Write) {
    // Both kinds are writable: a DRAM block counts as changed (its twin is
    // dropped), a pool block a stored line per payload, as in fill.
    if (in_dram(r)) {
      if (n != before) touch(r);
    } else {
      nvm_store_lines_ += n - before;
    }
  }
  for (; pool != 0; pool &= pool - 1) {
    const int sl = __builtin_ctz(pool);
    if (defer) {
      // Checked a few dozen blocks on (classify_pending): the child's
      // header is fetched now, so the check does not wait for it. A hint
      // only; the reference is bounded to the pool, not followed.
      const Ref c = child(r, sl);
      if (c <= pool_size_ - block_bytes_) __builtin_prefetch(reinterpret_cast<const void*>(base_ + c));
      s.pending.push_back({r, sl});
    } else {
      classify(s, r, sl);
    }
  }
}

// A pool reference of a scanned block, checked (read_child): one of the
// working generation is a block of the dirty list (scanned itself), an
// older one heads a committed subtree, walked in phase 2.
void Octree::Impl::classify(CursorState& s, Ref r, int sl) {
  const std::uint64_t code = hdr(r)->code;
  const Octant o = code == kNoParent ? Octant{} : child_octant(unpack(code), sl);
  const Ref c = read_child(r, sl, o, work_gen_, Reader::quiet);
  if (hdr(c)->epoch != work_gen_)
    s.pool_roots.push_back({r, sl});
  else
    ++s.gen_refs;
}

// Classifies the pending references but the last `keep`.
void Octree::Impl::classify_pending(CursorState& s, std::size_t keep) {
  while (s.pending.size() - s.pending_at > keep) {
    const auto [r, sl] = s.pending[s.pending_at++];
    classify(s, r, sl);
  }
  if (s.pending_at == s.pending.size()) {
    s.pending.clear();
    s.pending_at = 0;
  } else if (s.pending_at >= 4096) {
    s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(s.pending_at));
    s.pending_at = 0;
  }
}

template <bool Write>
std::size_t Octree::Impl::scan_slab(CursorState& s, std::size_t n) {
  const std::size_t per = slab_->per_chunk(), chunks = slab_->chunk_count();
  const std::size_t step = block_bytes_ + 8;
  for (; s.chunk < chunks; ++s.chunk, s.block = 0) {
    for (; s.block < per; ++s.block) {
      // A block's slots go into one batch: one with no room for a whole
      // family ends here.
      if (n + 8 > CursorState::kBatch) return n;
      std::byte* b = slab_->block_at(s.chunk, s.block);
      // The lines a few blocks ahead (the hardware's prefetcher stops at
      // page boundaries; a hint past the chunk's end is harmless).
      const std::uintptr_t ahead = reinterpret_cast<std::uintptr_t>(b) + kScanAhead * step;
      __builtin_prefetch(reinterpret_cast<const void*>(ahead));
      __builtin_prefetch(reinterpret_cast<const void*>(ahead + step - 1));
      std::uint64_t code;
      std::memcpy(&code, b, sizeof code);
      if (code == kFreeDramBlock) continue;
      ++s.dram_blocks;
      scan_block<Write>(s, reinterpret_cast<Ref>(b) | 1, code, n, false);
    }
  }
  return n;
}

// Memory order, phase 1: the pool blocks of the working generation, from
// the dirty list (allocation order: mostly memory order). Every one not
// freed since (a freed one holds kFreeDramBlock) is a block of the working
// version: copy-on-write gives a block of this generation a path of blocks
// of this generation or DRAM. The list holds a block twice if it was freed
// and handed out again in this generation: then a bitmap of the blocks
// seen keeps each once.
template <bool Write>
std::size_t Octree::Impl::scan_dirty(CursorState& s, std::size_t n) {
  if (s.dirty_at == 0 && dirty_reused_) s.seen.assign(chunks_.size() * chunk_words_, 0);
  for (; s.dirty_at < dirty_.size(); ++s.dirty_at) {
    if (n + 8 > CursorState::kBatch) return n;
    const Ref r = dirty_[s.dirty_at];
    if (s.dirty_at + kDirtyAhead < dirty_.size()) {
      const std::uintptr_t ahead = reinterpret_cast<std::uintptr_t>(blk(dirty_[s.dirty_at + kDirtyAhead]));
      __builtin_prefetch(reinterpret_cast<const void*>(ahead));
      __builtin_prefetch(reinterpret_cast<const void*>(ahead + block_bytes_ - 1));
    }
    const std::uint64_t code = hdr(r)->code;
    if (code == kFreeDramBlock) continue;
    if (!s.seen.empty()) {
      std::uint32_t chunk;
      std::uint64_t i;
      if (!locate(r, chunk, i)) bad_block(r, "is not a block of a chunk");
      std::uint64_t& word = s.seen[chunk * chunk_words_ + i / 64];
      const std::uint64_t bit = std::uint64_t{1} << (i % 64);
      if ((word & bit) != 0) continue;
      word |= bit;
    }
    if (charge_reads_) pool_->device().read_charge(block_bytes_, false);
    ++s.gen_blocks;
    scan_block<Write>(s, r, code, n, true);
    classify_pending(s, kPendingLag);
  }
  classify_pending(s, 0);
  return n;
}

// Memory order, phase 2: the next listed pool subtree (the root's, or below
// a DRAM block's slot) as a walk from that slot's frame; false when none is
// left.
template <bool Write>
bool Octree::Impl::start_pool_subtree(CursorState& s) {
  if (s.next_root >= s.pool_roots.size()) return false;
  const auto [b, slot] = s.pool_roots[s.next_root++];
  s.started = true;
  s.subtree_done = false;
  if (slot < 0) {  // the root block is a pool block
    const Ref root = read_root(work_root_, work_gen_, Reader::walk);
    s.f[0] = {root, Octant{}, 0, 1, false};
    s.base = 0;
    s.depth = 0;
    s.writable = -1;
    prefetch_children(root);
    return true;
  }
  const std::uint64_t code = hdr(b)->code;
  const Octant parent = code == kNoParent ? Octant{} : unpack(code);
  const int base = code == kNoParent ? 0 : parent.level + 1;
  s.f[base] = {b, parent, slot, slot + 1, true};
  s.base = base;
  s.depth = base;
  s.writable = base;  // b is a DRAM block: writable
  return true;
}

template <bool Write>
std::size_t Octree::Impl::fill_memory(CursorState& s) {
  if (s.done) {
    if (Write) maybe_evict();
    return 0;
  }
  if (s.phase < 0) {
    // Without DRAM blocks or blocks of this generation (a tree just
    // restored) there is nothing to scan in memory order: the walk from the
    // root is the whole tree (and may move blocks into C0 as it copies).
    if (slab_->in_use() == 0 && dirty_.empty()) {
      s.memory = false;
      return fill_morton<Write>(s);
    }
    s.phase = 0;
    s.skip_dram = true;
    // With DRAM blocks, the walks hold some of them (pool_roots) across
    // batches: no C0 merge may move them, so no copy may land in the slab
    // either (it could push C0 past its budget). Without (every block in
    // the pool, as after a persist that merged C0), the walks copy into C0
    // and merge as the Morton-order writer does: the slab scan is over by
    // then, and the listed blocks are pool blocks, which merges do not move.
    s.may_merge = slab_->in_use() == 0;
    s.c1_only = !s.may_merge;
    // A root of an older generation heads a subtree of older blocks only.
    if (in_dram(work_root_))
      ++s.dram_refs;
    else if (hdr(read_root(work_root_, work_gen_, Reader::quiet))->epoch != work_gen_)
      s.pool_roots.push_back({0, -1});
    else
      ++s.gen_refs;
  }
  std::size_t n = 0;
  if (s.phase == 0) {
    n = scan_slab<Write>(s, n);
    if (s.chunk < slab_->chunk_count()) return n;  // the batch is full
    s.phase = 1;
  }
  if (s.phase == 1) {
    n = scan_dirty<Write>(s, n);
    if (s.dirty_at < dirty_.size()) return n;
    // The scans followed no reference to a DRAM block or a pool block of
    // this generation: each such block has exactly one, so the references
    // counted must equal the blocks scanned (a damaged reference the block's
    // CRC did not catch would otherwise drop its subtree silently).
    if (s.dram_refs != s.dram_blocks || s.gen_refs != s.gen_blocks)
      damaged(nullptr, "the working version's references to DRAM blocks (" + std::to_string(s.dram_refs) +
                           ") or to blocks of this generation (" + std::to_string(s.gen_refs) +
                           ") do not match the blocks found (" + std::to_string(s.dram_blocks) + ", " +
                           std::to_string(s.gen_blocks) + ")");
    s.seen.clear();
    s.seen.shrink_to_fit();
    s.phase = 2;
  }
  struct C1Only {
    Impl& t;
    C1Only(Impl& i, bool on) : t(i) { t.force_c1_ = on; }
    ~C1Only() { t.force_c1_ = false; }
  } c1(*this, Write && s.c1_only);
  for (;;) {
    if (s.started && !s.subtree_done) {
      n = fill<Write>(s, n);
      if (!s.subtree_done) return n;  // the batch is full
    }
    if (n == CursorState::kBatch) return n;
    if (!start_pool_subtree<Write>(s)) {
      s.done = true;
      if (Write && n == 0) maybe_evict();
      return n;
    }
  }
}

std::size_t Octree::Impl::fill_views(CursorState& s) {
  return s.memory ? fill_memory<false>(s) : fill_morton<false>(s);
}
std::size_t Octree::Impl::fill_writable(CursorState& s) {
  return s.memory ? fill_memory<true>(s) : fill_morton<true>(s);
}

namespace {

template <class T, class Fill>
Result<std::span<const T>> next_batch(CursorState* s, const T* batch, const Fill& fill) {
  if (s == nullptr) return std::span<const T>{};
  Result<std::span<const T>> r =
      guard([&]() -> Result<std::span<const T>> { return std::span<const T>(batch, fill(*s)); });
  if (!r.ok()) s->done = true;  // the walk's frames are not trusted past a failed check
  return r;
}

std::unique_ptr<CursorState> new_state(Octree::Impl* t, LeafOrder order) {
  auto s = std::make_unique<CursorState>();
  s->tree = t;
  s->memory = order == LeafOrder::memory;
  s->phase = -1;
  return s;
}

}  // namespace

LeafCursor::LeafCursor(std::unique_ptr<CursorState> s) : s_(std::move(s)) {}
LeafCursor::LeafCursor(LeafCursor&&) noexcept = default;
LeafCursor& LeafCursor::operator=(LeafCursor&&) noexcept = default;
LeafCursor::~LeafCursor() = default;
Result<std::span<const LeafView>> LeafCursor::next() {
  return next_batch<LeafView>(s_.get(), s_ ? s_->views : nullptr, [](CursorState& s) { return s.tree->fill_views(s); });
}

LeafWriter::LeafWriter(std::unique_ptr<CursorState> s) : s_(std::move(s)) {}
LeafWriter::LeafWriter(LeafWriter&&) noexcept = default;
LeafWriter& LeafWriter::operator=(LeafWriter&&) noexcept = default;
LeafWriter::~LeafWriter() = default;
Result<std::span<const WritableLeaf>> LeafWriter::next() {
  return next_batch<WritableLeaf>(s_.get(), s_ ? s_->writable_leaves : nullptr,
                                  [](CursorState& s) { return s.tree->fill_writable(s); });
}

// The cursor only reads (its checks record which restored blocks passed,
// in mutable state, as every const walk's do).
LeafCursor Octree::leaves(LeafOrder order) const { return LeafCursor(new_state(impl_.get(), order)); }
LeafWriter Octree::write_leaves(LeafOrder order) { return LeafWriter(new_state(impl_.get(), order)); }

}  // namespace cairn::octree
