// mesh.cpp — amr-mpi's distributed mesh (mesh.hpp).
#include "apps/amr-mpi/mesh.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>

#include "util/hash.hpp"
#include "util/io.hpp"

namespace cairn::apps::amr_mpi {

namespace fs = std::filesystem;
using amr::model::read_c;
using amr::model::store_step;
using amr::model::write_c;

Partition Partition::split(int level, const std::vector<std::uint64_t>& weight, int ranks) {
  Partition p;
  p.level = level;
  const std::uint64_t units = weight.size(), n = static_cast<std::uint64_t>(ranks);
  std::vector<std::uint64_t> before(units + 1, 0);  // weight of the units before each
  for (std::uint64_t u = 0; u < units; ++u) before[u + 1] = before[u] + weight[u];
  p.first.assign(n + 1, units);
  p.first[0] = 0;
  for (std::uint64_t r = 1; r < n; ++r) {
    const std::uint64_t target = before[units] * r / n;
    const auto u = static_cast<std::uint64_t>(std::lower_bound(before.begin(), before.end(), target) - before.begin());
    p.first[r] = std::clamp<std::uint64_t>(u, p.first[r - 1] + 1, units - (n - r));
  }
  return p;
}

std::string job_file(const Args& a, int ranks, const std::string& what) {
  return a.dir + "/" + a.name + ".n" + std::to_string(ranks) + what;
}
std::string node_dir(const Args& a, int rank) {
  return a.ranks_per_node > 0 ? a.dir + "/node" + std::to_string(rank / a.ranks_per_node) : a.dir;
}
namespace {
std::string rank_file(const Args& a, int rank, int ranks, const std::string& what) {
  return node_dir(a, rank) + "/" + a.name + ".n" + std::to_string(ranks) + what;
}
}  // namespace

std::string pool_path(const Args& a, int rank, int ranks) {
  return rank_file(a, rank, ranks, ".r" + std::to_string(rank) + ".pool");
}
int partner_of(const Args& a, int rank, int ranks) { return (rank + a.ranks_per_node) % ranks; }
int source_of(const Args& a, int rank, int ranks) { return (rank - a.ranks_per_node + ranks) % ranks; }
std::string replica_path(const Args& a, int holder, int ranks) {
  return rank_file(a, holder, ranks, ".r" + std::to_string(source_of(a, holder, ranks)) + ".replica");
}
std::string parity_path(const Args& a, int rank, int ranks) {
  return rank_file(a, rank, ranks, ".r" + std::to_string(rank) + ".xor.pool");
}

constexpr std::uint64_t kPartMagic = 0x3154524150524D41ull;

Result<void> write_partition(const std::string& path, const Partition& p) {
  std::vector<std::uint64_t> w{kPartMagic, static_cast<std::uint64_t>(p.level), static_cast<std::uint64_t>(p.ranks())};
  w.insert(w.end(), p.first.begin(), p.first.end());
  w.push_back(util::hash_bytes(w.data(), w.size() * 8, 0));
  util::AtomicFileOptions o;
  o.what = "the partition";
  return util::write_file_atomically(path, std::as_bytes(std::span(w)), o);
}

Result<Partition> read_partition(const std::string& path, int ranks, int level) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return make_error(Errc::not_found, path + ": no partition of a job of " + std::to_string(ranks) +
                                           " ranks here (start without --resume, or give --from-ranks)");
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::uint64_t> w(b.size() / 8);
  std::memcpy(w.data(), b.data(), w.size() * 8);
  if (w.size() < 4 || w[0] != kPartMagic) return make_error(Errc::foreign_file, path + " is not a partition");
  if (b.size() % 8 != 0 || w.size() != 3 + w[2] + 2 || w.back() != util::hash_bytes(w.data(), b.size() - 8, 0))
    return make_error(Errc::corrupted, path + " is truncated or damaged");
  if (static_cast<int>(w[2]) != ranks || static_cast<int>(w[1]) != level)
    return make_error(Errc::layout_mismatch, path + ": a partition of " + std::to_string(w[2]) + " ranks at level " +
                                                 std::to_string(w[1]) + ", not " + std::to_string(ranks) +
                                                 " at --level-min " + std::to_string(level));
  Partition p;
  p.level = level;
  p.first.assign(w.begin() + 3, w.end() - 1);
  return p;
}

std::vector<LeafRec> to_owners(const std::vector<std::vector<LeafRec>>& out) {
  const int ranks = static_cast<int>(out.size());
  std::vector<int> send_n(out.size()), recv_n(out.size()), sd(out.size()), rd(out.size());
  std::vector<LeafRec> send;
  for (int r = 0; r < ranks; ++r) {
    sd[r] = static_cast<int>(send.size() * sizeof(LeafRec));
    send_n[r] = static_cast<int>(out[r].size() * sizeof(LeafRec));
    send.insert(send.end(), out[r].begin(), out[r].end());
  }
  MPI_Alltoall(send_n.data(), 1, MPI_INT, recv_n.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < ranks; ++r) {
    rd[r] = total;
    total += recv_n[r];
  }
  std::vector<LeafRec> recv(static_cast<std::size_t>(total) / sizeof(LeafRec));
  MPI_Alltoallv(send.data(), send_n.data(), sd.data(), MPI_BYTE, recv.data(), recv_n.data(), rd.data(), MPI_BYTE,
                MPI_COMM_WORLD);
  return recv;
}

std::unordered_set<std::uint64_t> ancestors(const std::vector<LeafRec>& leaves) {
  std::unordered_set<std::uint64_t> above;
  for (const LeafRec& l : leaves)
    for (Octant q = l.octant(); q.level > 0;) {
      q = octree::parent_of(q);
      if (!above.insert(key(q)).second) break;
    }
  return above;
}

octree::Options tree_options(const Args& a) {
  octree::Options o;
  o.dims = 3;
  o.data_size = sizeof(double);
  o.pool_size = a.pool_size;
  o.keep_previous = true;  // the agreement's V-1 (main.cpp)
  o.background_gc = false;
  return o;
}

Result<std::unique_ptr<Octree>> fresh_tree(const std::string& path, const Args& a, std::uint64_t first_version) {
  std::error_code ec;
  fs::remove(path, ec);
  fs::create_directories(fs::path(path).parent_path(), ec);
  auto o = tree_options(a);
  o.first_version = first_version;
  return Octree::create(path, o);
}

Result<void> grow(Octree& t, int level, const std::vector<LeafRec>& leaves,
                  const std::function<bool(const Octant&)>& mine) {
  std::unordered_map<std::uint64_t, double> c;
  for (const LeafRec& l : leaves) c[key(l.octant())] = l.c;
  const std::unordered_set<std::uint64_t> above = ancestors(leaves);
  auto r = t.uniform(level, nullptr);
  if (r.ok())
    r = t.refine(
        true, [&](const Octant& q, const std::byte*) { return mine(q) && above.count(key(q)) != 0; }, nullptr);
  std::uint64_t placed = 0;
  bool tiles = true;
  if (r.ok())
    r = t.update_leaves([&](const Octant& q, std::byte* d) {
      if (!mine(q)) return false;
      const auto it = c.find(key(q));
      if (it == c.end()) {
        tiles = false;
        return false;
      }
      ++placed;
      write_c(d, it->second);
      return true;
    });
  if (r.ok() && (!tiles || placed != c.size()))
    r = make_error(Errc::corrupted, "the leaves received do not tile the units they belong to");
  return r;
}

// ------------------------------------------------------------ Part

// The ghost layer from the other ranks' leaves as they are now: the tree's
// foreign parts are coarsened to stubs where no ghost lies and refined down
// to every ghost, whose fraction is set. Collective.
Result<void> Part::refresh_ghosts() {
  std::vector<std::vector<LeafRec>> out(static_cast<std::size_t>(ranks_));
  auto v = tree_->visit_leaves([&](const Octant& o, const std::byte* d) {
    if (!owns(o)) return;
    int sent[6], n = 0;
    for (int axis = 0; axis < 3; ++axis)
      for (int side = 0; side < 2; ++side) {
        std::uint32_t p[3] = {o.x, o.y, o.z};
        if (side == 0 ? p[axis] == 0 : p[axis] + o.length() >= octree::kRootLength) continue;
        p[axis] = side == 0 ? p[axis] - o.length() : p[axis] + o.length();
        const int r = part_.owner(unit_of(Octant{o.level, p[0], p[1], p[2]}, part_.level));
        if (r == rank_ || std::find(sent, sent + n, r) != sent + n) continue;
        sent[n++] = r;
        out[static_cast<std::size_t>(r)].push_back(LeafRec::of(o, d));
      }
  });
  if (!v.ok()) return v.error();
  const std::vector<LeafRec> recv = to_owners(out);
  ghosts_.clear();
  for (const LeafRec& g : recv) ghosts_[key(g.octant())] = g.c;
  const std::unordered_set<std::uint64_t> above = ancestors(recv);  // of a ghost
  const auto zero = [](const Octant&, std::byte* d, const std::byte*) { write_c(d, 0.0); };
  auto r = tree_->coarsen(
      true,
      [&](const Octant& p, std::span<const octree::LeafView>) {
        return p.level >= part_.level && !owns(p) && above.count(key(p)) == 0;
      },
      [](const Octant&, std::byte* d, std::span<const octree::LeafView>) { write_c(d, 0.0); });
  if (!r.ok()) return r;
  r = tree_->refine(
      true, [&](const Octant& o, const std::byte*) { return !owns(o) && above.count(key(o)) != 0; }, zero);
  if (!r.ok()) return r;
  std::uint64_t placed = 0;
  r = tree_->update_leaves([&](const Octant& o, std::byte* d) {
    const auto it = ghosts_.find(key(o));
    if (it == ghosts_.end()) return false;
    ++placed;
    if (std::memcmp(d, &it->second, sizeof(double)) == 0) return false;  // unchanged: its block stays shared
    write_c(d, it->second);
    return true;
  });
  if (!r.ok()) return r;
  if (placed != ghosts_.size())
    return make_error(Errc::corrupted, "a ghost leaf lies inside one of this rank's own leaves");
  return {};
}

// One transport step on the leaves this rank owns (amr.cpp's transport,
// faces with no own leaf skipped).
Result<void> Part::transport(double t, double dt) {
  std::vector<double> c;  // every leaf's fraction, in Morton order
  std::unordered_map<std::uint64_t, std::uint32_t> index;
  auto v = tree_->visit_leaves([&](const Octant& o, const std::byte* d) {
    index.emplace(key(o), static_cast<std::uint32_t>(c.size()));
    c.push_back(read_c(d));
  });
  if (!v.ok()) return v.error();
  std::vector<double> dv(c.size(), 0.0);
  std::string missing;
  auto f = tree_->visit_faces([&](const octree::LeafView& a, int axis, bool upper, const octree::LeafView* b) {
    if (b == nullptr) return;
    const bool oa = owns(a.octant), ob = owns(b->octant);
    if (!oa && !ob) return;
    const Octant& other = oa ? b->octant : a.octant;
    if (!(oa && ob) && ghosts_.count(key(other)) == 0) {
      missing = "a leaf of this rank borders a foreign leaf that is not a ghost";
      return;
    }
    const std::uint32_t ia = index.at(key(a.octant)), ib = index.at(key(b->octant));
    const double flux = amr::model::face_flux(a.octant, axis, upper, c[ia], c[ib], t, dt, a_.period);
    dv[ia] -= flux;
    dv[ib] += flux;
  });
  if (!f.ok()) return f.error();
  if (!missing.empty()) return make_error(Errc::corrupted, missing);
  std::size_t i = 0;
  return tree_->update_leaves([&](const Octant& o, std::byte* d) {
    const std::size_t k = i++;
    if (!owns(o) || dv[k] == 0.0) return false;
    write_c(d, c[k] + dv[k] / amr::model::volume(o));
    return true;
  });
}

// Refinement and coarsening of own leaves (amr.cpp's adapt without its balance).
Result<void> Part::adapt() {
  auto r = tree_->refine(
      false,
      [&](const Octant& o, const std::byte* d) { return owns(o) && amr::model::refine_wanted(o, read_c(d), a_.size); },
      amr::model::inherit, a_.size);
  if (!r.ok()) return r;
  return tree_->coarsen(
      false,
      [&](const Octant& p, std::span<const octree::LeafView> fam) {
        return owns(p) && amr::model::family_coarsens(p, fam, a_.level_min);
      },
      amr::model::merge_mean);
}

// 2:1 face balance across the ranks; leaves the ghost layer current.
// Collective. Returns the rounds it took.
Result<int> Part::balance(const Octree::InitFn& init) {
  for (int round = 1;; ++round) {
    if (auto r = refresh_ghosts(); !r.ok()) return r.error();
    int changed = 0;
    for (;;) {
      std::vector<Octant> own;
      auto v = tree_->visit_leaves([&](const Octant& o, const std::byte*) {
        if (owns(o)) own.push_back(o);
      });
      if (!v.ok()) return v.error();
      std::unordered_set<std::uint64_t> split;
      for (const Octant& o : own)
        for (int axis = 0; axis < 3 && split.count(key(o)) == 0; ++axis)
          for (int side = -1; side <= 1; side += 2) {
            int dir[3] = {0, 0, 0};
            dir[axis] = side;
            auto n = tree_->neighbours(o, dir);
            if (!n.ok()) return n.error();
            for (const auto& l : n.value())
              if (l.octant.level > o.level + 1) split.insert(key(o));
          }
      if (split.empty()) break;
      auto r = tree_->refine(
          false, [&](const Octant& o, const std::byte*) { return split.count(key(o)) != 0; }, init);
      if (!r.ok()) return r.error();
      changed = 1;
    }
    int any = 0;
    MPI_Allreduce(&changed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any == 0) return round;
  }
}

Result<std::vector<LeafRec>> Part::own_leaves(const Octree& t, bool of_source) const {
  std::vector<LeafRec> out;
  auto v = t.visit_leaves([&](const Octant& o, const std::byte* d) {
    if (of_source ? source_owns(o) : owns(o)) out.push_back(LeafRec::of(o, d));
  });
  if (!v.ok()) return v.error();
  return out;
}

// Sends the partner the units of this rank that changed since the copy it
// holds (all of them after a start: seed 000's shipping of changed octants,
// a unit at a time), receives the source's, applies them to the copy held
// here and persists it. Collective (pairs).
Result<void> Part::protect(std::uint64_t step) {
  const int partner = partner_of(a_, rank_, ranks_), source = source_of(a_, rank_, ranks_);
  auto leaves = own_leaves(*tree_, false);
  if (!leaves.ok()) return leaves.error();
  std::unordered_map<std::uint64_t, std::uint64_t> hash;  // unit -> hash of its leaves
  for (const LeafRec& l : leaves.value()) {
    std::uint64_t& h = hash[unit_of(l.octant(), part_.level)];
    std::uint64_t bits;
    std::memcpy(&bits, &l.c, sizeof bits);
    h = util::mix64(util::mix64(h ^ key(l.octant())) ^ bits);
  }
  std::vector<std::uint64_t> units;
  for (const auto& [u, h] : hash)
    if (const auto it = sent_.find(u); full_ || it == sent_.end() || it->second != h) units.push_back(u);
  std::sort(units.begin(), units.end());
  const std::unordered_set<std::uint64_t> changed(units.begin(), units.end());
  std::vector<LeafRec> out;
  for (const LeafRec& l : leaves.value())
    if (changed.count(unit_of(l.octant(), part_.level)) != 0) out.push_back(l);
  std::uint64_t mine[2] = {units.size(), out.size()}, theirs[2] = {0, 0};
  MPI_Sendrecv(mine, 2, MPI_UINT64_T, partner, 11, theirs, 2, MPI_UINT64_T, source, 11, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  std::vector<std::uint64_t> their_units(theirs[0]);
  std::vector<LeafRec> their_leaves(theirs[1]);
  MPI_Sendrecv(units.data(), static_cast<int>(units.size()), MPI_UINT64_T, partner, 12, their_units.data(),
               static_cast<int>(theirs[0]), MPI_UINT64_T, source, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Sendrecv(out.data(), static_cast<int>(out.size() * sizeof(LeafRec)), MPI_BYTE, partner, 13, their_leaves.data(),
               static_cast<int>(theirs[1] * sizeof(LeafRec)), MPI_BYTE, source, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  // The source's changed units, replaced in the copy.
  const std::unordered_set<std::uint64_t> theirs_changed(their_units.begin(), their_units.end());
  const auto in_changed = [&](const Octant& o) {
    return o.level >= part_.level && theirs_changed.count(unit_of(o, part_.level)) != 0;
  };
  Octree& copy = *replica_;
  auto r = copy.coarsen(
      true, [&](const Octant& q, std::span<const octree::LeafView>) { return in_changed(q); },
      [](const Octant&, std::byte* d, std::span<const octree::LeafView>) { write_c(d, 0.0); });
  // The changed units are single leaves now: grown as a fresh tree's are.
  if (r.ok()) r = grow(copy, part_.level, their_leaves, in_changed);
  if (r.ok()) r = store_step(copy, step);
  if (!r.ok()) return r;
  auto ps = copy.persist();
  if (!ps.ok()) return ps.error();
  sent_ = std::move(hash);
  full_ = false;
  bytes_sent_ += units.size() * sizeof(std::uint64_t) + out.size() * sizeof(LeafRec);
  units_sent_ += units.size();
  units_owned_ += sent_.size();
  return {};
}

}  // namespace cairn::apps::amr_mpi
