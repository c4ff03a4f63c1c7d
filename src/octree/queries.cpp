// queries.cpp — the PM-octree's reading walks (visit, checksum, find,
// neighbours, faces), partition, VTK output and stats(). None of them
// changes the tree; each checks every block it enters.
#include <bit>
#include <fstream>
#include <tuple>

#include "octree/impl.hpp"
#include "util/hash.hpp"

namespace cairn::octree {

using namespace detail;

// Read-only depth-first traversal of a version from the (checked) block `r`
// holding the children of `parent` (the root block: is_root), leaves in
// Morton order; every reference goes through the checked read.
template <class Leaf>
void Octree::Impl::walk(Ref r, const Octant& parent, bool is_root, std::uint32_t max_epoch, const Leaf& leaf) const {
  const int n = is_root ? 1 : fan_;
  prefetch_children(r);
  for (int s = 0; s < n; ++s) {
    const Octant o = is_root ? Octant{} : child_octant(parent, s);
    const Ref c = read_child(r, s, o, max_epoch);
    if (c == 0)
      leaf(o, data(r, s));
    else
      walk(c, o, false, max_epoch, leaf);
  }
}

// A walk of the working version from its root.
template <class Leaf>
void Octree::Impl::walk_working(const Leaf& leaf) const {
  walk(read_root(work_root_, work_gen_, Reader::walk), Octant{}, true, work_gen_, leaf);
}

Result<void> Octree::Impl::visit_leaves(const VisitFn& fn) const {
  const Impl& t = *this;
  return guard([&]() -> Result<void> {
    t.walk_working([&](const Octant& o, const std::byte* d) { fn(o, d); });
    return {};
  });
}

Result<std::uint64_t> Octree::Impl::previous_checksum() const {
  if (previous_root_ == 0) return make_error(Errc::no_version, file_ + ": no previous version is kept (keep_previous)");
  return checksum_from(previous_root_);
}

Result<std::uint64_t> Octree::Impl::checksum_from(Ref root) const {
  const Impl& t = *this;
  // The committed and the kept version hold no block newer than the
  // committed generation.
  const std::uint32_t max_epoch = root == work_root_ ? work_gen_ : committed_limit();
  return guard([&]() -> Result<std::uint64_t> {
    std::uint64_t h = 0x243F6A8885A308D3ull;
    t.walk(t.read_root(root, max_epoch, Reader::walk), Octant{}, true, max_epoch,
           [&](const Octant& o, const std::byte* d) {
             h = util::hash_combine(h, util::mix64(pack(o)));
             if (t.data_size_ > 0) h = util::hash_combine(h, util::hash_bytes(d, t.data_size_));
           });
    return h;
  });
}

Result<std::uint64_t> Octree::Impl::leaf_count() const {
  const Impl& t = *this;
  return guard([&]() -> Result<std::uint64_t> {
    std::uint64_t n = 0;
    t.walk_working([&](const Octant&, const std::byte*) { ++n; });
    return n;
  });
}

Result<LeafView> Octree::Impl::find_leaf(std::uint32_t x, std::uint32_t y, std::uint32_t z) const {
  const Impl& t = *this;
  if (x >= kRootLength || y >= kRootLength || z >= kRootLength || (t.dims_ == 2 && z != 0))
    return make_error(Errc::invalid_argument, "point outside the domain");
  return guard([&]() -> Result<LeafView> {
    const Octant p{kMaxLevel, x, y, z};
    Ref r = t.read_root(t.work_root_, t.work_gen_, Reader::walk);
    int s = 0;
    Octant o{};
    for (;;) {
      const Ref c = t.read_child(r, s, o, t.work_gen_);
      if (c == 0) return LeafView{o, t.data(r, s)};
      s = Impl::child_index(p, o.level + 1);
      r = c;
      o = child_octant(o, s);
    }
  });
}

Result<std::vector<LeafView>> Octree::Impl::neighbours(const Octant& leaf, const int direction[3]) const {
  const Impl& t = *this;
  return guard([&]() -> Result<std::vector<LeafView>> {
    std::vector<LeafView> out;
    Octant q;
    if (!shifted(leaf, direction, t.dims_, q)) return out;
    // Down from the root towards q.
    Ref r = t.read_root(t.work_root_, t.work_gen_, Reader::walk);
    int s = 0;
    Octant o{};
    while (o.level < q.level) {
      const Ref c = t.read_child(r, s, o, t.work_gen_);
      if (c == 0) {
        out.push_back({o, t.data(r, s)});  // a coarser leaf
        return out;
      }
      s = Impl::child_index(q, o.level + 1);
      r = c;
      o = child_octant(o, s);
    }
    // q itself: a leaf, or the finer leaves of q that touch `leaf`.
    std::vector<std::tuple<Ref, int, Octant>> stack{{r, s, o}};
    while (!stack.empty()) {
      auto [br, bs, oc] = stack.back();
      stack.pop_back();
      const Ref c = t.read_child(br, bs, oc, t.work_gen_);
      if (c == 0) {
        out.push_back({oc, t.data(br, bs)});
        continue;
      }
      for (int k = t.fan_ - 1; k >= 0; --k) {
        const Octant ch = child_octant(oc, k);
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
    for (int axis = 0; axis < dims(); ++axis)
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
  const int dims = this->dims(), corners = 1 << dims;
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

Result<Stats> Octree::Impl::stats() {
  Impl& t = *this;
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
    // Committed versions: all in the pool, no block newer than the committed generation.
    const std::uint32_t gen = t.committed_limit();
    const auto children = [&](Ref r, std::uint32_t max_epoch, auto&& each) {
      const int n = t.hdr(r)->code == kNoParent ? 1 : t.fan_;
      for (int s = 0; s < n; ++s) each(t.read_child(r, s, t.slot_octant(r, s), max_epoch, Reader::quiet));
    };
    // Which pool blocks each version reaches: a bit per block of the chunks
    // (every pool block a walk accepts lies in one), three flat bitmaps
    // instead of a hash set node per block (at 1e7 blocks their frees left
    // the allocator seconds of consolidation, charged to whatever allocated
    // next).
    const std::uint64_t words = t.chunks_.size() * t.chunk_words_;
    std::vector<std::uint64_t> committed(words), work(words), previous(words);
    const auto bit = [&](Ref r) {
      std::uint32_t chunk = 0;
      std::uint64_t i = 0;
      if (!t.locate(r, chunk, i)) t.bad_block(r, "is not a block of a chunk");
      return std::pair<std::uint64_t, std::uint64_t>{chunk * t.chunk_words_ + i / 64, std::uint64_t{1} << (i % 64)};
    };
    const auto test = [&](const std::vector<std::uint64_t>& m, Ref r) {
      const auto [w, b] = bit(r);
      return (m[w] & b) != 0;
    };
    // Sets r's bit; false if it was set.
    const auto insert = [&](std::vector<std::uint64_t>& m, Ref r) {
      const auto [w, b] = bit(r);
      if ((m[w] & b) != 0) return false;
      m[w] |= b;
      return true;
    };
    if (t.committed_root_ != 0) {
      std::vector<Ref> stack{t.read_root(t.committed_root_, gen, Reader::quiet)};
      while (!stack.empty()) {
        const Ref r = stack.back();
        stack.pop_back();
        if (!insert(committed, r)) continue;
        children(r, gen, [&](Ref c) {
          if (c != 0) stack.push_back(c);
        });
      }
    }
    // The working version is a tree: each of its blocks is reached once.
    std::vector<std::pair<Ref, int>> stack{{t.read_root(t.work_root_, t.work_gen_, Reader::quiet), 0}};
    while (!stack.empty()) {
      const auto [r, level] = stack.back();
      stack.pop_back();
      ++st.blocks;
      if (in_dram(r)) {
        st.dram_bytes += t.block_bytes_;
        // A C0 block equal to its twin holds committed contents: a cached copy.
        if (t.twin(r) != 0 && test(committed, t.twin(r))) st.shared_bytes += t.block_bytes_;
      } else {
        insert(work, r);
        if (test(committed, r)) st.shared_bytes += t.block_bytes_;
      }
      const bool root = r == t.work_root_;
      children(r, t.work_gen_, [&](Ref c) {
        ++st.octants;
        if (c != 0) {
          stack.push_back({c, level + 1});
        } else {
          ++st.leaves;
          st.depth = std::max(st.depth, root ? 0 : level);
        }
      });
    }
    // Pool blocks either version reaches.
    std::uint64_t nvm_blocks = 0;
    for (std::uint64_t w = 0; w < words; ++w)
      nvm_blocks += static_cast<std::uint64_t>(std::popcount(committed[w] | work[w]));
    if (t.previous_root_ != 0) {
      std::vector<Ref> todo{t.read_root(t.previous_root_, gen, Reader::quiet)};
      while (!todo.empty()) {
        const Ref r = todo.back();
        todo.pop_back();
        if (test(committed, r) || test(work, r) || !insert(previous, r)) continue;
        ++st.previous_blocks;
        children(r, gen, [&](Ref c) {
          if (c != 0) todo.push_back(c);
        });
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

Result<void> Octree::visit_leaves(const VisitFn& fn) const { return impl_->visit_leaves(fn); }
Result<std::uint64_t> Octree::checksum() const { return impl_->checksum(); }
Result<std::uint64_t> Octree::previous_checksum() const { return impl_->previous_checksum(); }
Result<std::uint64_t> Octree::leaf_count() const { return impl_->leaf_count(); }
Result<LeafView> Octree::find_leaf(std::uint32_t x, std::uint32_t y, std::uint32_t z) const {
  return impl_->find_leaf(x, y, z);
}
Result<std::vector<LeafView>> Octree::neighbours(const Octant& leaf, const int direction[3]) const {
  return impl_->neighbours(leaf, direction);
}
Result<Stats> Octree::stats() const { return impl_->stats(); }
const std::byte* Octree::root_data() const { return impl_->root_data(); }

}  // namespace cairn::octree
