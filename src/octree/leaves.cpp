// leaves.cpp — the flat iteration over the working version's leaves
// (LeafCursor) and the bulk payload update (LeafWriter): one explicit-stack
// walk that hands out a batch of leaves per call instead of calling back per
// leaf, and, for the writer, makes each family block writable once.
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
template <bool Write>
std::size_t Octree::Impl::fill(CursorState& s) {
  if (s.done) {
    if (Write) maybe_evict();  // what Path::settle does after a walk
    return 0;
  }
  if (!s.started) {
    s.started = true;
    const Ref root = read_root(work_root_, work_gen_, Reader::walk);
    s.f[0] = {root, Octant{}, 0, 1, false};
    s.depth = 0;
    s.writable = -1;
    prefetch_children(root);
  }
  std::size_t n = 0;
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
    const bool may_merge = Write && d <= region_level_;
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
    if (d == 0) {
      f.slot = slot;
      s.done = true;
      if (Write && n == 0) maybe_evict();
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

std::size_t Octree::Impl::fill_views(CursorState& s) { return fill<false>(s); }
std::size_t Octree::Impl::fill_writable(CursorState& s) { return fill<true>(s); }

namespace {

template <class T, class Fill>
Result<std::span<const T>> next_batch(CursorState* s, const T* batch, const Fill& fill) {
  if (s == nullptr) return std::span<const T>{};
  Result<std::span<const T>> r =
      guard([&]() -> Result<std::span<const T>> { return std::span<const T>(batch, fill(*s)); });
  if (!r.ok()) s->done = true;  // the walk's frames are not trusted past a failed check
  return r;
}

std::unique_ptr<CursorState> new_state(Octree::Impl* t) {
  auto s = std::make_unique<CursorState>();
  s->tree = t;
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
LeafCursor Octree::leaves() const { return LeafCursor(new_state(impl_.get())); }
LeafWriter Octree::write_leaves() { return LeafWriter(new_state(impl_.get())); }

}  // namespace cairn::octree
