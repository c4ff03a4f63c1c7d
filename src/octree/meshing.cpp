// meshing.cpp — the PM-octree's writing walks: refine, coarsen, follow,
// 2:1 balance, update_leaves and update_root. Each runs over a Path, one
// frame per level, so that a change can make the path above it writable
// (copy-on-write climbs to the root); the Path also decides where a C0
// merge may run during a walk.
#include <algorithm>
#include <array>
#include <unordered_set>

#include "octree/impl.hpp"

namespace cairn::octree {

using namespace detail;

// A writing walk's path from the root. Frame d holds the block whose slots
// are the octants of level d (frame 0: the root block, one slot), the octant
// whose children they are, and the slot the walk is at. Every child
// reference is read through child(), the checked read.
//
// Merges: a C0 merge (maybe_evict) moves the DRAM blocks of a region to the
// pool and rewrites the reference above them, so it must not run while a
// frame points into a block it may move. The blocks of frames 0..L_sub hold
// octants of levels up to L_sub, whose parents lie above the regions: those
// blocks never move. So a pending merge runs only when the walk moves to a
// slot of a frame at or above L_sub (at(), frames below are dead then), or
// between descents (settle()); the frames re-read the reference of their
// slot afterwards.
class Octree::Impl::Path {
 public:
  explicit Path(Impl& t) : t_(t) { f_[0] = {t.work_root_, Octant{}, 0}; }

  int slots(int d) const { return d == 0 ? 1 : t_.fan_; }
  Ref block(int d) const { return f_[d].block; }
  int slot(int d) const { return f_[d].slot; }
  // The octant at frame d's slot.
  Octant octant(int d) const { return d == 0 ? Octant{} : child_octant(f_[d].parent, f_[d].slot); }
  std::byte* data(int d) const { return t_.data(f_[d].block, f_[d].slot); }

  // Moves frame d to slot s; where no deeper frame can be live, a pending
  // merge runs first.
  void at(int d, int s) {
    if (d <= t_.region_level_) t_.maybe_evict();
    f_[d].slot = s;
  }
  // Between descents (no frame is live): a pending merge runs, and the
  // frames kept for the next descent are dropped if it moved blocks.
  void settle() {
    const std::uint64_t merges = t_.merges_;
    t_.maybe_evict();
    if (t_.merges_ != merges) cached_ = -1;
  }

  // The reference at frame d's slot, checked (0: a leaf).
  Ref child(int d) const { return t_.read_child(f_[d].block, f_[d].slot, octant(d), t_.work_gen_); }
  // Whether the octant at frame d's slot has children. The reference is
  // not followed (balance read every block through the checked read when
  // it listed the internal octants, and the blocks made since are its own),
  // so this costs no read of the child's block.
  bool internal(int d) const { return t_.child(f_[d].block, f_[d].slot) != 0; }
  // Frame d + 1 holds the block `c` of the children of frame d's octant.
  void enter(int d, Ref c) { f_[d + 1] = {c, octant(d), 0}; }

  // Makes the blocks of frames 0..d writable, copying shared ones and
  // relinking each copy in its (already writable) parent.
  void make_writable(int d) {
    for (int k = 0; k <= d; ++k) {
      Frame& f = f_[k];
      if (t_.writable(f.block)) continue;
      const Ref c = t_.copy_block(f.block, k == 0 ? nullptr : &f.parent);
      if (k == 0)
        t_.work_root_ = c;
      else
        t_.child(f_[k - 1].block, f_[k - 1].slot) = c, t_.touch(f_[k - 1].block);
      f.block = c;
    }
  }
  // Stores `c` at frame d's slot (frames 0..d writable).
  void set_child(int d, Ref c) {
    t_.child(f_[d].block, f_[d].slot) = c;
    t_.touch(f_[d].block);
  }
  // New children for the leaf at frame d's slot (frames 0..d writable).
  Ref split(int d, const InitFn& init) {
    const Octant o = octant(d);
    if (o.level >= kMaxLevel) fail(Errc::invalid_argument, "cannot refine past level " + std::to_string(kMaxLevel));
    const Ref nb = t_.alloc_block(&o);
    t_.depth_ = std::max(t_.depth_, o.level + 1);
    const std::byte* pd = data(d);
    for (int c = 0; c < t_.fan_; ++c) {
      t_.child(nb, c) = 0;
      std::byte* cd = t_.data(nb, c);
      std::memset(cd, 0, t_.stride_ - 8);
      if (init) init(child_octant(o, c), cd, pd);
    }
    set_child(d, nb);
    return nb;
  }

  // Descends to the octant `q`, splitting leaves on the way; every octant
  // made internal is reported. Leaves the path at q's frame. The frames of
  // the previous descent stay valid (copies and splits update them in
  // place), so a descent starts at the deepest octant its target shares with
  // the previous one instead of at the root: balance visits octants in Morton
  // order, whose neighbours mostly share all but the last levels.
  template <class Made>
  void descend(const Octant& q, const InitFn& init, const Made& made) {
    int start = 0;
    if (cached_ >= 0) {
      start = std::min(cached_, q.level);
      while (start > 0 && !(ancestor(q, start) == ancestor(last_, start))) --start;
    }
    if (start == 0) f_[0] = {t_.work_root_, Octant{}, 0};
    Octant o = ancestor(q, start);
    for (int d = start; o.level < q.level; ++d) {
      Ref c = child(d);
      if (c == 0) {
        make_writable(d);
        c = split(d, init);
        made(o);
      }
      const int idx = Impl::child_index(q, o.level + 1);
      enter(d, c);
      f_[d + 1].slot = idx;
      o = child_octant(o, idx);
    }
    cached_ = q.level;
    last_ = q;
  }

 private:
  struct Frame {
    Ref block = 0;
    Octant parent;  // the octant whose children the block holds (unused in frame 0)
    int slot = 0;
  };
  static Octant ancestor(const Octant& q, int level) {
    const std::uint32_t mask = level == 0 ? 0 : ~((kRootLength >> level) - 1);
    return {level, q.x & mask, q.y & mask, q.z & mask};
  }

  Impl& t_;
  Frame f_[kMaxLevel + 2];
  int cached_ = -1;  // levels of the frames valid from the previous descent; -1: none
  Octant last_{};
};

// The walks, each over a Path.
struct Octree::Impl::Ops {
  Impl& t;
  Path p{t};

  // refine: frames 0..d set; visits the slots of frame d.
  void refine(int d, bool recursive, const RefineFn& fn, const InitFn& init, int max_level) {
    for (int s = 0; s < p.slots(d); ++s) {
      p.at(d, s);
      const Octant o = p.octant(d);
      Ref c = p.child(d);
      if (c == 0) {
        if (o.level >= max_level || !fn(o, p.data(d))) continue;
        p.make_writable(d);
        c = p.split(d, init);
        if (!recursive) continue;
      }
      p.enter(d, c);
      refine(d + 1, recursive, fn, init, max_level);
    }
  }

  // coarsen: post-order; `fresh` holds the leaves made in this pass (not
  // offered again unless recursive).
  void coarsen(int d, bool recursive, const CoarsenFn& fn, const MergeFn& merge,
               std::unordered_set<std::uint64_t>& fresh, std::vector<LeafView>& family) {
    for (int s = 0; s < p.slots(d); ++s) {
      p.at(d, s);
      const Ref below = p.child(d);
      if (below == 0) continue;
      const Octant o = p.octant(d);
      p.enter(d, below);
      coarsen(d + 1, recursive, fn, merge, fresh, family);
      const Ref c = p.child(d);  // may be a copy now
      // A family of leaves: only whether its references are 0 is read.
      bool leaves = true;
      for (int k = 0; k < t.fan_ && leaves; ++k) {
        leaves = t.child(c, k) == 0;
        if (!recursive && leaves && fresh.count(pack(child_octant(o, k)))) leaves = false;
      }
      if (!leaves) continue;
      family.clear();
      for (int k = 0; k < t.fan_; ++k) family.push_back({child_octant(o, k), t.data(c, k)});
      if (!fn(o, family)) continue;
      p.make_writable(d);
      if (merge) merge(o, p.data(d), family);
      p.set_child(d, 0);
      t.free_private(c);
      if (!recursive) fresh.insert(pack(o));
    }
  }

  // Offers the payload of frame d's slot to `fn` as a scratch copy; only if
  // fn reports a change is the path made writable and the payload written
  // back.
  template <class Fn>
  void rewrite(int d, std::vector<std::byte>& scratch, const Fn& fn) {
    std::memcpy(scratch.data(), p.data(d), t.data_size_);
    if (!fn(scratch.data())) return;
    p.make_writable(d);
    std::memcpy(p.data(d), scratch.data(), t.data_size_);
    t.touch(p.block(d));
  }

  // follow: frames 0..d set; `handles` are the application's octants of
  // frame d's slots.
  void follow(int d, const void* const* handles, const Follow& fns, std::vector<std::byte>& scratch) {
    for (int s = 0; s < p.slots(d); ++s) {
      p.at(d, s);
      const Octant o = p.octant(d);
      Ref c = p.child(d);
      const void* kids[8] = {};
      if (fns.children(o, handles[s], kids)) {
        if (c == 0) {
          p.make_writable(d);
          c = p.split(d, fns.init);
        }
        p.enter(d, c);
        follow(d + 1, kids, fns, scratch);
        continue;
      }
      if (c != 0) {
        p.make_writable(d);
        drop(c, o);
        p.set_child(d, 0);
      }
      rewrite(d, scratch, [&](std::byte* data) { return fns.update(o, handles[s], data); });
    }
  }

  // Frees the working version's private blocks of the subtree whose family
  // block is `r` (the children of `o`); a shared block, and everything below
  // it, belongs to the committed version too and waits for the collector.
  void drop(Ref r, const Octant& o) {
    if (!t.writable(r)) {
      t.replaced();  // the collector frees it once no version reaches it
      return;
    }
    for (int k = 0; k < t.fan_; ++k) {
      const Octant q = child_octant(o, k);
      if (const Ref c = t.read_child(r, k, q, t.work_gen_); c != 0) drop(c, q);
    }
    t.free_private(r);
  }

  // update_leaves: depth first, so that a changed leaf can make its path
  // writable.
  void update(int d, const UpdateFn& fn, std::vector<std::byte>& scratch) {
    for (int s = 0; s < p.slots(d); ++s) {
      p.at(d, s);
      const Octant o = p.octant(d);
      const Ref c = p.child(d);
      if (c == 0) {
        rewrite(d, scratch, [&](std::byte* data) { return fn(o, data); });
        continue;
      }
      p.enter(d, c);
      update(d + 1, fn, scratch);
    }
  }
};

namespace {

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

}  // namespace

Result<void> Octree::Impl::refine(bool recursive, const RefineFn& fn, const InitFn& init, int max_level) {
  if (!fn) return make_error(Errc::invalid_argument, "refine: no refine callback");
  max_level = std::min(max_level, kMaxLevel);
  return guard([&]() -> Result<void> {
    Ops ops{*this};
    ops.refine(0, recursive, fn, init, max_level);
    ops.p.settle();
    return {};
  });
}

Result<void> Octree::Impl::coarsen(bool recursive, const CoarsenFn& fn, const MergeFn& merge) {
  if (!fn) return make_error(Errc::invalid_argument, "coarsen: no coarsen callback");
  return guard([&]() -> Result<void> {
    Ops ops{*this};
    std::unordered_set<std::uint64_t> fresh;
    std::vector<LeafView> family;
    ops.coarsen(0, recursive, fn, merge, fresh, family);
    ops.p.settle();
    return {};
  });
}

Result<void> Octree::Impl::follow(const void* root, const Follow& fns) {
  if (!fns.children || !fns.update) return make_error(Errc::invalid_argument, "follow: no children or update callback");
  return guard([&]() -> Result<void> {
    Ops ops{*this};
    std::vector<std::byte> scratch(stride_);
    const void* handles[1] = {root};
    ops.follow(0, handles, fns, scratch);
    ops.p.settle();
    return {};
  });
}

Result<void> Octree::Impl::balance(Connect connect, const InitFn& init) {
  return guard([&]() -> Result<void> {
    // Balanced iff every internal octant's same-level neighbours exist. The
    // worklist holds internal octants by level, finest first: making a
    // neighbour exist only makes coarser octants internal.
    std::vector<std::vector<Octant>> work(kMaxLevel + 1);
    {
      // Collect internal octants.
      std::vector<Ref> stack{work_root_};
      while (!stack.empty()) {
        const Ref r = stack.back();
        stack.pop_back();
        const int n = hdr(r)->code == kNoParent ? 1 : fan_;
        for (int s = 0; s < n; ++s) {
          const Octant o = slot_octant(r, s);
          const Ref c = read_child(r, s, o, work_gen_, Reader::quiet);
          if (c == 0) continue;
          work[static_cast<std::size_t>(o.level)].push_back(o);
          stack.push_back(c);
        }
      }
    }
    auto dirs = directions(dims_, connect);
    const auto axes = [](const std::array<int, 3>& d) { return (d[0] != 0) | (d[1] != 0) << 1 | (d[2] != 0) << 2; };
    std::stable_sort(dirs.begin(), dirs.end(), [&](const auto& a, const auto& b) {
      // Faces first (their results decide which edges and corners are
      // needed, below), then edges and the corner in Gray order of the axes
      // moved on (xy, yz, xyz, xz): each target differs from the one before
      // along one axis, so its descent starts from a nearby path.
      static constexpr int rank[8] = {0, 0, 1, 3, 2, 6, 4, 5};
      return rank[axes(a)] < rank[axes(b)];
    });
    Path path(*this);
    for (int level = kMaxLevel; level >= 1; --level) {
      auto& list = work[static_cast<std::size_t>(level)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Octant p = list[i];
        const int shift = kMaxLevel - p.level;
        const int bits[3] = {static_cast<int>((p.x >> shift) & 1u), static_cast<int>((p.y >> shift) & 1u),
                             static_cast<int>((p.z >> shift) & 1u)};
        int internal_faces = 0;  // the axes along which p's face neighbour is internal
        for (const auto& d : dirs) {
          // Only directions that leave p's parent along every axis they
          // move on can find a missing neighbour. Along an axis where d
          // points to p's sibling side, q = p + d has the same parent as
          // p + d', d' being d without that axis: (parent of p) + d' at the
          // coarser level. d' is checked too (it leaves the parent along
          // every axis it moves on), and once p + d' exists its parent is
          // internal, so q, a child of that parent, exists. This keeps 2^d - 1
          // of the 3^d - 1 directions of full balance (7 of 26 in 3D; the
          // sibling test before kept 19).
          bool leaves_parent = true;
          for (int a = 0; a < dims_ && leaves_parent; ++a)
            if (d[static_cast<std::size_t>(a)] != 0)
              leaves_parent = (d[static_cast<std::size_t>(a)] > 0) == (bits[a] == 1);
          if (!leaves_parent) continue;
          // The face pass decides the rest: if p's face neighbour f = p + e_a
          // is internal, it is on the worklist of this level too, and its own
          // directions include d - e_a (f shares p's position in its parent
          // along the other axes, so d - e_a leaves f's parent on every axis
          // it moves on), which reaches q = f + (d - e_a) or, skipped in
          // turn, follows from a direction with fewer axes. So an edge or
          // corner direction that moves along such an axis is not descended.
          const int moved = axes(d);
          const bool face = (moved & (moved - 1)) == 0;
          if (!face && (moved & internal_faces) != 0) continue;
          Octant q;
          if (!shifted(p, d.data(), dims_, q)) continue;
          path.descend(q, init,
                       [&](const Octant& made) { work[static_cast<std::size_t>(made.level)].push_back(made); });
          if (face && path.internal(q.level)) internal_faces |= moved;
        }
        path.settle();
      }
      list.clear();
      list.shrink_to_fit();
    }
    return {};
  });
}

Result<void> Octree::Impl::update_leaves(const UpdateFn& fn) {
  return guard([&]() -> Result<void> {
    std::vector<std::byte> scratch(stride_);
    Ops ops{*this};
    ops.update(0, fn, scratch);
    ops.p.settle();
    return {};
  });
}

Result<void> Octree::Impl::update_root(const UpdateFn& fn) {
  return guard([&]() -> Result<void> {
    std::vector<std::byte> scratch(stride_);
    Ops ops{*this};
    ops.rewrite(0, scratch, [&](std::byte* data) { return fn(Octant{}, data); });
    return {};
  });
}

Result<void> Octree::uniform(int level, const InitFn& init) {
  if (level < 0 || level > kMaxLevel) return make_error(Errc::invalid_argument, "level out of range");
  return refine(
      true, [](const Octant&, const std::byte*) { return true; }, init, level);
}
Result<void> Octree::refine(bool recursive, const RefineFn& fn, const InitFn& init, int max_level) {
  return impl_->refine(recursive, fn, init, max_level);
}
Result<void> Octree::coarsen(bool recursive, const CoarsenFn& fn, const MergeFn& merge) {
  return impl_->coarsen(recursive, fn, merge);
}
Result<void> Octree::follow(const void* root, const Follow& fns) { return impl_->follow(root, fns); }
Result<void> Octree::balance(Connect connect, const InitFn& init) { return impl_->balance(connect, init); }
Result<void> Octree::update_leaves(const UpdateFn& fn) { return impl_->update_leaves(fn); }
Result<void> Octree::update_root(const UpdateFn& fn) { return impl_->update_root(fn); }

}  // namespace cairn::octree
