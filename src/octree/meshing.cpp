// meshing.cpp — the PM-octree's writing walks: refine, coarsen, follow,
// 2:1 balance, update_leaves and update_root. They run over path_, one frame
// per level, so that a change can make the path above it writable
// (copy-on-write climbs to the root); a C0 merge runs only between the
// children of octants above L_sub, where no frame points into a block it
// may move.
#include <algorithm>
#include <array>
#include <unordered_set>

#include "octree/impl.hpp"

namespace cairn::octree {

using namespace detail;

// Makes the blocks of frames 0..d writable, copying shared ones and
// relinking each copy in its (already writable) parent.
void Octree::Impl::make_writable(int d) {
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
Octree::Impl::Ref Octree::Impl::split(int d, int s, const InitFn& init) {
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

struct Octree::Impl::Ops {
  Impl& t;

  void enter(int d, Ref block, const Octant& parent) {
    t.path_[d].block = block;
    t.path_[d].parent = parent;
  }

  // refine: frames 0..d set; visits the slots of frame d.
  void refine(int d, bool recursive, const RefineFn& fn, const InitFn& init, int max_level) {
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
  void coarsen(int d, bool recursive, const CoarsenFn& fn, const MergeFn& merge,
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
  void follow(int d, const void* const* handles, const Follow& fns, std::vector<std::byte>& scratch) {
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
  void ensure(const Octant& q, const InitFn& init, const Made& made) {
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
      const int idx = Impl::child_index(q, o.level + 1);
      enter(d + 1, c, o);
      t.path_[d + 1].slot = idx;
      o = child_of(o, idx);
    }
    cached = q.level;
    last = q;
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
  Impl& t = *this;
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

Result<void> Octree::Impl::coarsen(bool recursive, const CoarsenFn& fn, const MergeFn& merge) {
  Impl& t = *this;
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

Result<void> Octree::Impl::follow(const void* root, const Follow& fns) {
  Impl& t = *this;
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

Result<void> Octree::Impl::balance(Connect connect, const InitFn& init) {
  Impl& t = *this;
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

Result<void> Octree::Impl::update_leaves(const UpdateFn& fn) {
  Impl& t = *this;
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

Result<void> Octree::Impl::update_root(const UpdateFn& fn) {
  Impl& t = *this;
  return guard([&]() -> Result<void> {
    std::vector<std::byte> scratch(t.stride_);
    Ops ops{t};
    ops.enter(0, t.work_root_, Octant{});
    t.path_[0].slot = 0;
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
