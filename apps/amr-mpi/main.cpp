// main.cpp — `amr-mpi`: the amr app's adaptive interface (apps/amr) on a
// PM-octree partitioned across MPI ranks by Morton ranges, every rank's part
// persisted with pm_persistent and made one global version by agreement. It
// ends with the same checksum as `amr` on one process with the same
// switches, resumes after a kill at the version every rank holds, and
// resumes on another number of ranks (--from-ranks).
//
// Sample runs:
//   mpirun -n 4 amr-mpi --size 5 --period 0.5 --dir /dev/shm/a
//   amr --size 5 --period 0.5                                    (the same checksum)
//   mpirun -n 4 amr-mpi --size 5 --period 0.5 --dir /dev/shm/a --crash-at 20     (rank 0 SIGKILLed)
//   mpirun -n 4 amr-mpi --size 5 --period 0.5 --dir /dev/shm/a --resume          (continues at 20)
//   mpirun -n 3 amr-mpi --size 5 --period 0.5 --dir /dev/shm/a --resume --from-ranks 4
//   cairn launch -n 4 -- amr-mpi --size 5 --period 0.5 --dir /dev/shm/a --crash-at 20
//
// Partition. The octants of level --level-min are the units (64 in 3D at
// level 2); rank r owns a contiguous Morton range of units, chosen so that
// each range holds about the same number of leaves, and every leaf inside
// them. Coarsening never goes above --level-min, so a family never spans two
// ranks and refinement and coarsening are local. The partition is written
// once per job (<name>.n<P>.partition) and read back on restart.
//
// Each rank's tree holds its own leaves, a ghost layer (the other ranks'
// leaves that share a face with one of its own, at their true level, with
// their fraction) and coarse stubs covering the rest of the domain. With the
// ghost layer complete, the tree's face traversal reports, for every leaf
// this rank owns, the same faces in the same order as the whole tree on one
// process does, so each leaf's fluxes are summed in the same order and the
// fractions agree bit for bit. 2:1 balance is distributed: refresh the
// ghosts, refine own leaves that have a face neighbour more than one level
// finer, until no rank changes; the smallest balanced refinement is unique,
// so this is the tree one process builds.
//
// Versions (cairn/dist.hpp's agreement, on the octree). Every rank persists
// the same steps; the octree keeps the version before its committed one
// (Options::keep_previous), so when a rank died before committing version
// V while others committed it, every rank can still give V-1. A commit is
// pm_persistent, then an all-reduce; restart takes G = the smallest
// committed version over the ranks and restores G everywhere (a rank that
// holds G+1 goes back to G durably).
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "apps/amr/amr.hpp"
#include "cairn/dist.hpp"
#include "cairn/octree.hpp"
#include "dist/heartbeat.hpp"
#include "util/hash.hpp"

namespace {

namespace amr = cairn::apps::amr;
namespace fs = std::filesystem;
using cairn::Errc;
using cairn::Result;
using cairn::octree::Octant;
using cairn::octree::Octree;
using Clock = std::chrono::steady_clock;

struct Args {
  int size = 4, level_min = 2;
  double period = 3.0, cfl = 0.3;
  std::uint64_t persist_every = 1, step_limit = 0;
  std::string dir, name = "amr-mpi";
  std::int64_t crash_at = -1, crash_in_commit = -1;
  bool crash_in_restore = false;
  int crash_rank = 0;
  bool resume = false, quiet = false;
  int from_ranks = 0;
  std::uint64_t pool_size = 256ull << 20;
  std::string commit = "collective";  // | local (no agreement) | none (nothing persisted): `cairn bench dist`
  std::string redundancy = "local";   // | partner: a copy of each rank's leaves on the next node
  int ranks_per_node = 0;             // > 0: simulated nodes of this many ranks, node k in <dir>/node<k>
};

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "amr-mpi rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  return 2;
}

double read_c(const std::byte* d) {
  double c;
  std::memcpy(&c, d, sizeof c);
  return c;
}
void write_c(std::byte* d, double c) { std::memcpy(d, &c, sizeof c); }
std::uint64_t key(const Octant& o) { return cairn::octree::morton(o, 3); }

// ------------------------------------------------------------ partition

// The unit (octant of `level`) an octant of that level or finer lies in, as
// its index in Morton order.
std::uint64_t unit_of(const Octant& o, int level) { return key(o) >> (5 + 3 * (cairn::octree::kMaxLevel - level)); }

struct Partition {
  int level = 2;
  std::vector<std::uint64_t> first;  // ranks + 1: each rank's first unit, then the unit count
  int ranks() const { return static_cast<int>(first.size()) - 1; }
  int owner(std::uint64_t unit) const {
    return static_cast<int>(std::upper_bound(first.begin(), first.end(), unit) - first.begin()) - 1;
  }
  // Contiguous ranges of about equal weight, at least one unit each: rank r
  // starts at the first unit whose preceding weight reaches r/P of the total.
  static Partition split(int level, const std::vector<std::uint64_t>& weight, int ranks) {
    Partition p;
    p.level = level;
    const std::uint64_t units = weight.size(), n = static_cast<std::uint64_t>(ranks);
    std::vector<std::uint64_t> before(units + 1, 0);  // weight of the units before each
    for (std::uint64_t u = 0; u < units; ++u) before[u + 1] = before[u] + weight[u];
    p.first.assign(n + 1, units);
    p.first[0] = 0;
    for (std::uint64_t r = 1; r < n; ++r) {
      const std::uint64_t target = before[units] * r / n;
      const auto u =
          static_cast<std::uint64_t>(std::lower_bound(before.begin(), before.end(), target) - before.begin());
      p.first[r] = std::clamp<std::uint64_t>(u, p.first[r - 1] + 1, units - (n - r));
    }
    return p;
  }
};

std::string job_file(const Args& a, int ranks, const std::string& what) {
  return a.dir + "/" + a.name + ".n" + std::to_string(ranks) + what;
}
// A rank's files live on its node: <dir>/node<k> when nodes are simulated.
std::string node_dir(const Args& a, int rank) {
  return a.ranks_per_node > 0 ? a.dir + "/node" + std::to_string(rank / a.ranks_per_node) : a.dir;
}
std::string rank_file(const Args& a, int rank, int ranks, const std::string& what) {
  return node_dir(a, rank) + "/" + a.name + ".n" + std::to_string(ranks) + what;
}
std::string pool_path(const Args& a, int rank, int ranks) {
  return rank_file(a, rank, ranks, ".r" + std::to_string(rank) + ".pool");
}
// With --redundancy partner, rank r keeps the copy of its source's leaves:
// the same local rank on the node before (its partner is on the node after).
int partner_of(const Args& a, int rank, int ranks) { return (rank + a.ranks_per_node) % ranks; }
int source_of(const Args& a, int rank, int ranks) { return (rank - a.ranks_per_node + ranks) % ranks; }
std::string replica_path(const Args& a, int holder, int ranks) {
  return rank_file(a, holder, ranks, ".r" + std::to_string(source_of(a, holder, ranks)) + ".replica");
}

// "AMRPART1", level, ranks, first[ranks + 1], hash of all that: written once,
// durably (write, fsync, rename, fsync the directory), before any rank persists.
constexpr std::uint64_t kPartMagic = 0x3154524150524D41ull;

Result<void> write_partition(const std::string& path, const Partition& p) {
  std::vector<std::uint64_t> w{kPartMagic, static_cast<std::uint64_t>(p.level), static_cast<std::uint64_t>(p.ranks())};
  w.insert(w.end(), p.first.begin(), p.first.end());
  w.push_back(cairn::util::hash_bytes(w.data(), w.size() * 8, 0));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return cairn::make_error(Errc::io_error, "cannot create " + tmp + ": " + std::strerror(errno));
  const auto bytes = static_cast<ssize_t>(w.size() * 8);
  const bool ok = ::write(fd, w.data(), static_cast<std::size_t>(bytes)) == bytes && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0)
    return cairn::make_error(Errc::io_error, "cannot write " + path + ": " + std::strerror(errno));
  if (const int dfd = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

Result<Partition> read_partition(const std::string& path, int ranks, int level) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return cairn::make_error(Errc::not_found, path + ": no partition of a job of " + std::to_string(ranks) +
                                                  " ranks here (start without --resume, or give --from-ranks)");
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::uint64_t> w(b.size() / 8);
  std::memcpy(w.data(), b.data(), w.size() * 8);
  if (w.size() < 4 || w[0] != kPartMagic) return cairn::make_error(Errc::foreign_file, path + " is not a partition");
  if (b.size() % 8 != 0 || w.size() != 3 + w[2] + 2 || w.back() != cairn::util::hash_bytes(w.data(), b.size() - 8, 0))
    return cairn::make_error(Errc::corrupted, path + " is truncated or damaged");
  if (static_cast<int>(w[2]) != ranks || static_cast<int>(w[1]) != level)
    return cairn::make_error(Errc::layout_mismatch, path + ": a partition of " + std::to_string(w[2]) +
                                                        " ranks at level " + std::to_string(w[1]) + ", not " +
                                                        std::to_string(ranks) + " at --level-min " +
                                                        std::to_string(level));
  Partition p;
  p.level = level;
  p.first.assign(w.begin() + 3, w.end() - 1);
  return p;
}

// ------------------------------------------------------ the rank's part

struct LeafRec {
  std::uint32_t level, x, y, z;
  double c;
  Octant octant() const { return {static_cast<int>(level), x, y, z}; }
};

cairn::octree::Options tree_options(const Args& a) {
  cairn::octree::Options o;
  o.dims = 3;
  o.data_size = sizeof(double);
  o.pool_size = a.pool_size;
  o.keep_previous = true;  // the agreement's V-1 (see the top of this file)
  o.background_gc = false;
  return o;
}

std::uint64_t load_step(const Octree& t) {
  std::uint64_t s;
  std::memcpy(&s, t.root_data(), sizeof s);
  return s;
}
Result<void> store_step(Octree& t, std::uint64_t step) {
  return t.update_root([&](const Octant&, std::byte* d) {
    std::memcpy(d, &step, sizeof step);
    return true;
  });
}

Result<std::unique_ptr<Octree>> fresh_tree(const std::string& path, const Args& a, std::uint64_t first_version = 1) {
  std::error_code ec;
  fs::remove(path, ec);
  fs::create_directories(fs::path(path).parent_path(), ec);
  auto o = tree_options(a);
  o.first_version = first_version;
  return Octree::create(path, o);
}

// A tree of stubs at `level` refined down to `leaves` (those `mine` accepts
// hold their fractions): how a rank's tree is rebuilt from leaves sent to it.
Result<void> grow(Octree& t, int level, const std::vector<LeafRec>& leaves,
                  const std::function<bool(const Octant&)>& mine) {
  std::unordered_map<std::uint64_t, double> c;
  std::unordered_set<std::uint64_t> above;
  for (const LeafRec& l : leaves) {
    c[key(l.octant())] = l.c;
    for (Octant q = l.octant(); q.level > 0;) {
      q = cairn::octree::parent_of(q);
      if (!above.insert(key(q)).second) break;
    }
  }
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
    r = cairn::make_error(Errc::corrupted, "the leaves received do not tile the units they belong to");
  return r;
}

class Part {
 public:
  Part(const Args& a, Partition p, int rank, int ranks) : a_(a), part_(std::move(p)), rank_(rank), ranks_(ranks) {}
  const Partition& partition() const { return part_; }
  bool owns(const Octant& o) const { return o.level >= part_.level && part_.owner(unit_of(o, part_.level)) == rank_; }
  Octree& tree() { return *tree_; }
  void set_tree(std::unique_ptr<Octree> t) { tree_ = std::move(t); }
  std::uint64_t ghosts() const { return ghosts_.size(); }

  // The ghost layer from the other ranks' leaves as they are now: the tree's
  // foreign parts are coarsened to stubs where no ghost lies and refined down
  // to every ghost, whose fraction is set. Collective.
  Result<void> refresh_ghosts() {
    std::vector<std::vector<LeafRec>> out(static_cast<std::size_t>(ranks_));
    auto v = tree_->visit_leaves([&](const Octant& o, const std::byte* d) {
      if (!owns(o)) return;
      int sent[6], n = 0;
      for (int axis = 0; axis < 3; ++axis)
        for (int side = 0; side < 2; ++side) {
          std::uint32_t p[3] = {o.x, o.y, o.z};
          if (side == 0 ? p[axis] == 0 : p[axis] + o.length() >= cairn::octree::kRootLength) continue;
          p[axis] = side == 0 ? p[axis] - o.length() : p[axis] + o.length();
          const int r = part_.owner(unit_of(Octant{o.level, p[0], p[1], p[2]}, part_.level));
          if (r == rank_ || std::find(sent, sent + n, r) != sent + n) continue;
          sent[n++] = r;
          out[static_cast<std::size_t>(r)].push_back(
              LeafRec{static_cast<std::uint32_t>(o.level), o.x, o.y, o.z, read_c(d)});
        }
    });
    if (!v.ok()) return v.error();
    std::vector<int> send_n(static_cast<std::size_t>(ranks_)), recv_n(send_n.size()), sd(send_n.size()),
        rd(send_n.size());
    std::vector<LeafRec> send;
    for (int r = 0; r < ranks_; ++r) {
      sd[r] = static_cast<int>(send.size() * sizeof(LeafRec));
      send_n[r] = static_cast<int>(out[r].size() * sizeof(LeafRec));
      send.insert(send.end(), out[r].begin(), out[r].end());
    }
    MPI_Alltoall(send_n.data(), 1, MPI_INT, recv_n.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < ranks_; ++r) {
      rd[r] = total;
      total += recv_n[r];
    }
    std::vector<LeafRec> recv(static_cast<std::size_t>(total) / sizeof(LeafRec));
    MPI_Alltoallv(send.data(), send_n.data(), sd.data(), MPI_BYTE, recv.data(), recv_n.data(), rd.data(), MPI_BYTE,
                  MPI_COMM_WORLD);
    ghosts_.clear();
    std::unordered_set<std::uint64_t> above;  // strict ancestors of a ghost
    for (const LeafRec& g : recv) {
      const Octant o = g.octant();
      ghosts_[key(o)] = g.c;
      for (Octant q = o; q.level > 0;) {
        q = cairn::octree::parent_of(q);
        if (!above.insert(key(q)).second) break;
      }
    }
    const auto zero = [](const Octant&, std::byte* d, const std::byte*) { write_c(d, 0.0); };
    auto r = tree_->coarsen(
        true,
        [&](const Octant& p, std::span<const cairn::octree::LeafView>) {
          return p.level >= part_.level && !owns(p) && above.count(key(p)) == 0;
        },
        [](const Octant&, std::byte* d, std::span<const cairn::octree::LeafView>) { write_c(d, 0.0); });
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
      return cairn::make_error(Errc::corrupted, "a ghost leaf lies inside one of this rank's own leaves");
    return {};
  }

  // One transport step on the leaves this rank owns (amr.cpp's transport,
  // faces with no own leaf skipped).
  Result<void> transport(double t, double dt) {
    std::vector<Octant> octant;
    std::vector<double> c;
    std::unordered_map<std::uint64_t, std::uint32_t> index;
    auto v = tree_->visit_leaves([&](const Octant& o, const std::byte* d) {
      index.emplace(key(o), static_cast<std::uint32_t>(octant.size()));
      octant.push_back(o);
      c.push_back(read_c(d));
    });
    if (!v.ok()) return v.error();
    std::vector<double> dv(c.size(), 0.0);
    std::string missing;
    auto f = tree_->visit_faces(
        [&](const cairn::octree::LeafView& a, int axis, bool upper, const cairn::octree::LeafView* b) {
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
    if (!missing.empty()) return cairn::make_error(Errc::corrupted, missing);
    std::size_t i = 0;
    return tree_->update_leaves([&](const Octant& o, std::byte* d) {
      const std::size_t k = i++;
      if (!owns(o) || dv[k] == 0.0) return false;
      write_c(d, c[k] + dv[k] / amr::model::volume(o));
      return true;
    });
  }

  // Refinement and coarsening of own leaves (amr.cpp's adapt without its balance).
  Result<void> adapt() {
    auto r = tree_->refine(
        false,
        [&](const Octant& o, const std::byte* d) {
          return owns(o) && amr::model::refine_wanted(o, read_c(d), a_.size);
        },
        copy_parent, a_.size);
    if (!r.ok()) return r;
    return tree_->coarsen(
        false,
        [&](const Octant& p, std::span<const cairn::octree::LeafView> fam) {
          if (!owns(p)) return false;
          double c[8];
          for (std::size_t k = 0; k < fam.size(); ++k) c[k] = read_c(fam[k].data);
          return amr::model::coarsen_wanted(p, c, static_cast<int>(fam.size()), a_.level_min);
        },
        [](const Octant&, std::byte* d, std::span<const cairn::octree::LeafView> fam) {
          double s = 0;
          for (const auto& k : fam) s += read_c(k.data);
          write_c(d, s / static_cast<double>(fam.size()));
        });
  }

  // 2:1 face balance across the ranks; leaves the ghost layer current.
  // Collective. Returns the rounds it took.
  Result<int> balance(const Octree::InitFn& init) {
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

  static void copy_parent(const Octant&, std::byte* d, const std::byte* parent) {
    write_c(d, parent != nullptr ? read_c(parent) : 0.0);
  }

  // ---- the partner copy (--redundancy partner)
  // The copy this rank holds of its source's leaves, in a PM-octree of its own.
  Octree* replica() { return replica_.get(); }
  void set_replica(std::unique_ptr<Octree> t) { replica_ = std::move(t); }
  bool source_owns(const Octant& o) const {
    return o.level >= part_.level && part_.owner(unit_of(o, part_.level)) == source_of(a_, rank_, ranks_);
  }
  // This rank's own leaves (all, or those of `units`) as records.
  std::vector<LeafRec> own_leaves(const Octree& t, bool of_source) const {
    std::vector<LeafRec> out;
    (void)t.visit_leaves([&](const Octant& o, const std::byte* d) {
      if (of_source ? source_owns(o) : owns(o))
        out.push_back(LeafRec{static_cast<std::uint32_t>(o.level), o.x, o.y, o.z, read_c(d)});
    });
    return out;
  }
  // Sends the partner the units of this rank that changed since the copy it
  // holds (all of them after a start: seed 000's shipping of changed octants,
  // a unit at a time), receives the source's, applies them to the copy held
  // here and persists it. Collective (pairs).
  Result<void> protect(std::uint64_t step) {
    const int partner = partner_of(a_, rank_, ranks_), source = source_of(a_, rank_, ranks_);
    std::unordered_map<std::uint64_t, std::uint64_t> hash;  // unit -> hash of its leaves
    std::vector<LeafRec> leaves;
    auto v = tree_->visit_leaves([&](const Octant& o, const std::byte* d) {
      if (!owns(o)) return;
      std::uint64_t& h = hash[unit_of(o, part_.level)];
      std::uint64_t bits;
      std::memcpy(&bits, d, sizeof bits);
      h = cairn::util::mix64(cairn::util::mix64(h ^ key(o)) ^ bits);
      leaves.push_back(LeafRec{static_cast<std::uint32_t>(o.level), o.x, o.y, o.z, read_c(d)});
    });
    if (!v.ok()) return v.error();
    std::vector<std::uint64_t> units;
    for (const auto& [u, h] : hash)
      if (full_ || sent_[u] != h) units.push_back(u);
    std::sort(units.begin(), units.end());
    const std::unordered_set<std::uint64_t> changed(units.begin(), units.end());
    std::vector<LeafRec> out;
    for (const LeafRec& l : leaves)
      if (changed.count(unit_of(l.octant(), part_.level)) != 0) out.push_back(l);
    std::uint64_t mine[2] = {units.size(), out.size()}, theirs[2] = {0, 0};
    MPI_Sendrecv(mine, 2, MPI_UINT64_T, partner, 11, theirs, 2, MPI_UINT64_T, source, 11, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    std::vector<std::uint64_t> their_units(theirs[0]);
    std::vector<LeafRec> their_leaves(theirs[1]);
    MPI_Sendrecv(units.data(), static_cast<int>(units.size()), MPI_UINT64_T, partner, 12, their_units.data(),
                 static_cast<int>(theirs[0]), MPI_UINT64_T, source, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(out.data(), static_cast<int>(out.size() * sizeof(LeafRec)), MPI_BYTE, partner, 13, their_leaves.data(),
                 static_cast<int>(theirs[1] * sizeof(LeafRec)), MPI_BYTE, source, 13, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    // The source's changed units, replaced in the copy.
    const std::unordered_set<std::uint64_t> theirs_changed(their_units.begin(), their_units.end());
    const auto in_changed = [&](const Octant& o) {
      return o.level >= part_.level && theirs_changed.count(unit_of(o, part_.level)) != 0;
    };
    Octree& copy = *replica_;
    auto r = copy.coarsen(
        true, [&](const Octant& q, std::span<const cairn::octree::LeafView>) { return in_changed(q); },
        [](const Octant&, std::byte* d, std::span<const cairn::octree::LeafView>) { write_c(d, 0.0); });
    if (r.ok()) {
      // The changed units are single leaves now: grow them as a fresh tree's.
      std::unordered_map<std::uint64_t, double> c;
      std::unordered_set<std::uint64_t> above;
      for (const LeafRec& l : their_leaves) {
        c[key(l.octant())] = l.c;
        for (Octant q = l.octant(); q.level > 0;) {
          q = cairn::octree::parent_of(q);
          if (!above.insert(key(q)).second) break;
        }
      }
      r = copy.refine(
          true, [&](const Octant& q, const std::byte*) { return in_changed(q) && above.count(key(q)) != 0; }, nullptr);
      std::uint64_t placed = 0;
      if (r.ok())
        r = copy.update_leaves([&](const Octant& q, std::byte* d) {
          if (!in_changed(q)) return false;
          const auto it = c.find(key(q));
          if (it == c.end()) return false;
          ++placed;
          write_c(d, it->second);
          return true;
        });
      if (r.ok() && placed != c.size())
        r = cairn::make_error(Errc::corrupted, "the partner copy's units do not match the leaves received");
    }
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
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  std::uint64_t units_sent() const { return units_sent_; }
  std::uint64_t units_owned() const { return units_owned_; }

 private:
  const Args& a_;
  Partition part_;
  int rank_, ranks_;
  std::unique_ptr<Octree> tree_;
  std::unordered_map<std::uint64_t, double> ghosts_;  // by key: the fraction its owner sent
  std::unique_ptr<Octree> replica_;
  std::unordered_map<std::uint64_t, std::uint64_t> sent_;  // unit -> hash, as the partner's copy holds it
  bool full_ = true;                                       // the partner's copy is not known: send everything
  std::uint64_t bytes_sent_ = 0, units_sent_ = 0, units_owned_ = 0;
};

bool all_ok(bool ok) { return cairn::dist::all_ok(MPI_COMM_WORLD, ok); }

// The heartbeat `cairn launch` watches ($CAIRN_HEARTBEAT_DIR), as a
// dist::Context writes it: after restore and after each global commit.
class Beat {
 public:
  explicit Beat(int rank) {
    if (const char* dir = std::getenv("CAIRN_HEARTBEAT_DIR"); dir != nullptr && *dir != 0)
      fd_ = ::open(cairn::dist::detail::heartbeat_path(dir, rank).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  }
  ~Beat() {
    if (fd_ >= 0) ::close(fd_);
  }
  Beat(const Beat&) = delete;
  Beat& operator=(const Beat&) = delete;
  // `restored`: the version this run resumed at (0: a fresh run), in every beat.
  void operator()(std::uint64_t version, std::uint64_t restored) {
    if (fd_ < 0) return;
    const auto now = Clock::now();
    cairn::dist::detail::Heartbeat h;
    h.version = version;
    h.pid = static_cast<std::uint64_t>(::getpid());
    h.restored = restored;
    h.interval_ns =
        last_ == Clock::time_point{}
            ? 0
            : static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count());
    last_ = now;
    cairn::dist::detail::write_heartbeat(fd_, h);
  }

 private:
  int fd_ = -1;
  Clock::time_point last_{};
};

// A new, empty partner copy: stubs at the partition's level, filled by the
// first protect() (which sends everything).
Result<void> fresh_replica(Part& p, const Args& a, int rank, int ranks) {
  auto t = fresh_tree(replica_path(a, rank, ranks), a);
  if (!t.ok()) return t.error();
  if (auto r = t.value()->uniform(a.level_min, nullptr); !r.ok()) return r;
  p.set_replica(std::move(t.value()));
  return {};
}

// Collective commit: every rank's pm_persistent, then the agreement.
Result<std::uint64_t> commit(Part& p, const Args& a, int rank, std::uint64_t step, double& seconds,
                             std::uint64_t& blocks) {
  if (a.crash_in_commit >= 0 && static_cast<std::uint64_t>(a.crash_in_commit) == step && rank == a.crash_rank &&
      !a.resume) {
    // Dies before its own commit while the others make theirs: on restart,
    // they hold a version this rank never reached and must go back one.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    raise(SIGKILL);
  }
  const auto t0 = Clock::now();
  auto ps = p.tree().persist();
  if (a.commit == "local" && !ps.ok()) return ps.error();
  if (a.commit != "local" && !all_ok(ps.ok()))
    return ps.ok() ? cairn::make_error(Errc::io_error, "another rank's persist failed") : ps.error();
  if (p.replica() != nullptr) {
    // Every rank holds the version; now its copy goes to the partner, and the
    // version is global once every copy is durable too.
    auto r = p.protect(load_step(p.tree()));
    if (!all_ok(r.ok()))
      return r.ok() ? cairn::make_error(Errc::io_error, "another rank's partner copy failed") : r.error();
  }
  seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  blocks += ps.value().blocks_written;
  return ps.value().version;
}

// Sends `leaves` and `step` to rank `to` while receiving from rank `from`
// (either may be -1: nothing that way).
void exchange_leaves(const std::vector<LeafRec>& leaves, std::uint64_t step, int to, std::vector<LeafRec>& got,
                     std::uint64_t& got_step, int from) {
  std::uint64_t head[2] = {leaves.size(), step}, in[2] = {0, 0};
  MPI_Request req[2];
  int n = 0;
  if (to >= 0) MPI_Isend(head, 2, MPI_UINT64_T, to, 21, MPI_COMM_WORLD, &req[n++]);
  if (from >= 0) MPI_Recv(in, 2, MPI_UINT64_T, from, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (to >= 0)
    MPI_Isend(leaves.data(), static_cast<int>(leaves.size() * sizeof(LeafRec)), MPI_BYTE, to, 22, MPI_COMM_WORLD,
              &req[n++]);
  if (from >= 0) {
    got.resize(in[0]);
    got_step = in[1];
    MPI_Recv(got.data(), static_cast<int>(in[0] * sizeof(LeafRec)), MPI_BYTE, from, 22, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
  }
  MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
}

// Restart on the job's own ranks: the version every rank holds. With partner
// copies, a rank whose pool is missing or damaged (a lost node) is rebuilt
// from the copy its partner holds, and the copy it held is sent again by its
// source; both are committed as the global version before the job goes on.
Result<std::uint64_t> restore(Part& p, const Args& a, int rank, int ranks) {
  const bool partnered = a.redundancy == "partner";
  const std::string path = pool_path(a, rank, ranks);
  const auto v = Octree::versions(path, tree_options(a));
  const auto rv = partnered ? Octree::versions(replica_path(a, rank, ranks), tree_options(a))
                            : cairn::Result<cairn::octree::Versions>(cairn::octree::Versions{});
  // Who lost what: [2r] its pool, [2r + 1] the copy it holds.
  const int mine[2] = {v.ok() ? 0 : 1, rv.ok() ? 0 : 1};
  std::vector<int> lost(2 * static_cast<std::size_t>(ranks));
  MPI_Allgather(mine, 2, MPI_INT, lost.data(), 2, MPI_INT, MPI_COMM_WORLD);
  const auto own_lost = [&](int r) { return lost[2 * static_cast<std::size_t>(r)] != 0; };
  const auto copy_lost = [&](int r) { return lost[2 * static_cast<std::size_t>(r) + 1] != 0; };
  for (int r = 0; r < ranks; ++r) {
    if (!own_lost(r) && !copy_lost(r)) continue;
    if (r == rank)
      std::fprintf(stderr, "amr-mpi rank %d: lost %s\n", rank,
                   (!v.ok() ? v.error().message : replica_path(a, rank, ranks) + ": " + rv.error().message).c_str());
    if (!partnered) {
      if (!v.ok()) return v.error();
      return cairn::make_error(Errc::not_found, "rank " + std::to_string(r) + " cannot restore (its message names it)");
    }
    const int holder = partner_of(a, r, ranks);
    if (own_lost(r) && copy_lost(holder))
      return cairn::make_error(Errc::not_found, "rank " + std::to_string(r) +
                                                    "'s pool is lost and so is its partner "
                                                    "copy on rank " +
                                                    std::to_string(holder) +
                                                    " (two neighbouring nodes lost): nothing to rebuild it from");
  }
  std::uint64_t g = ~0ull;
  if (v.ok()) g = v.value().committed;
  if (partnered && rv.ok()) g = std::min(g, rv.value().committed);
  MPI_Allreduce(MPI_IN_PLACE, &g, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  const auto gives = [&](const cairn::Result<cairn::octree::Versions>& x) {
    return !x.ok() || x.value().committed == g || x.value().previous == g;
  };
  const bool own_gives = gives(v), copy_gives = !partnered || gives(rv);
  if (!all_ok(own_gives && copy_gives)) {
    if (own_gives && copy_gives)
      return cairn::make_error(Errc::no_version, "another rank lacks the global version " + std::to_string(g));
    const auto& x = own_gives ? rv : v;
    return cairn::make_error(Errc::no_version,
                             (own_gives ? replica_path(a, rank, ranks) : path) + " holds version " +
                                 std::to_string(x.value().committed) +
                                 (x.value().previous != 0 ? " and " + std::to_string(x.value().previous) : "") +
                                 ", not the global version " + std::to_string(g) +
                                 " that another rank stopped at: it cannot go back (was it written with "
                                 "keep_previous?)");
  }
  auto o = tree_options(a);
  o.version = g;
  cairn::Result<void> r;
  if (v.ok()) {
    auto t = Octree::restore(path, o);
    if (t.ok())
      p.set_tree(std::move(t.value()));
    else
      r = t.error();
  }
  if (r.ok() && partnered && rv.ok()) {
    auto t = Octree::restore(replica_path(a, rank, ranks), o);
    if (t.ok())
      p.set_replica(std::move(t.value()));
    else
      r = t.error();
  }
  if (a.crash_in_restore && rank == a.crash_rank) raise(SIGKILL);  // its restore done, the others' maybe not
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to restore") : r.error();
  if (v.ok() && v.value().committed != g)
    std::printf("amr-mpi rank %d: back from version %" PRIu64 " to the global version %" PRIu64 "\n", rank,
                v.value().committed, g);
  if (!partnered) return g;
  // Lost pools, from the copies their partners hold; then lost copies, from
  // their sources' trees. Each is committed as version g.
  const int source = source_of(a, rank, ranks), partner = partner_of(a, rank, ranks);
  std::vector<LeafRec> got;
  std::uint64_t step = 0;
  exchange_leaves(own_lost(source) ? p.own_leaves(*p.replica(), true) : std::vector<LeafRec>{},
                  p.replica() != nullptr ? load_step(*p.replica()) : 0, own_lost(source) ? source : -1, got, step,
                  own_lost(rank) ? partner : -1);
  if (own_lost(rank)) {
    std::error_code ec;
    if (fs::exists(path, ec)) fs::rename(path, path + ".damaged", ec);  // kept for inspection, never read again
    auto t = fresh_tree(path, a, g);
    if (t.ok()) {
      p.set_tree(std::move(t.value()));
      r = grow(p.tree(), a.level_min, got, [&](const Octant& q) { return p.owns(q); });
      if (r.ok()) r = store_step(p.tree(), step);
      if (r.ok())
        r = p.tree().persist().ok() ? cairn::Result<void>{}
                                    : cairn::make_error(Errc::io_error, path + ": cannot persist the rebuilt tree");
    } else {
      r = t.error();
    }
    if (r.ok())
      std::printf("amr-mpi rank %d: rebuilt version %" PRIu64 " (%zu leaves) from its partner copy on rank %d\n", rank,
                  g, got.size(), partner);
  }
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to rebuild") : r.error();
  got.clear();
  std::error_code ec;
  exchange_leaves(copy_lost(partner) ? p.own_leaves(p.tree(), false) : std::vector<LeafRec>{}, load_step(p.tree()),
                  copy_lost(partner) ? partner : -1, got, step, copy_lost(rank) ? source : -1);
  if (copy_lost(rank)) {
    if (fs::exists(replica_path(a, rank, ranks), ec))
      fs::rename(replica_path(a, rank, ranks), replica_path(a, rank, ranks) + ".damaged", ec);
    auto t = fresh_tree(replica_path(a, rank, ranks), a, g);
    if (t.ok()) {
      p.set_replica(std::move(t.value()));
      r = grow(*p.replica(), a.level_min, got, [&](const Octant& q) { return p.source_owns(q); });
      if (r.ok()) r = store_step(*p.replica(), step);
      if (r.ok())
        r = p.replica()->persist().ok() ? cairn::Result<void>{}
                                        : cairn::make_error(Errc::io_error, "cannot persist the rebuilt partner copy");
    } else {
      r = t.error();
    }
  }
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to rebuild") : r.error();
  return g;
}

// Restart on another number of ranks: the old job's ranks are read (new
// rank i reads old ranks i, i+P, ...) at the version all of them hold, their
// leaves go to their new owners (a new partition by their counts), and the
// new trees are committed before the old job's files are removed.
Result<std::uint64_t> repartition(std::unique_ptr<Part>& part, const Args& a, int rank, int ranks) {
  auto old = read_partition(job_file(a, a.from_ranks, ".partition"), a.from_ranks, a.level_min);
  if (!all_ok(old.ok()))
    return old.ok() ? cairn::make_error(Errc::not_found, "the old partition is unreadable") : old.error();
  std::vector<cairn::octree::Versions> held;
  bool ok = true;
  std::string error;
  for (int j = rank; j < a.from_ranks; j += ranks) {
    auto v = Octree::versions(pool_path(a, j, a.from_ranks), tree_options(a));
    if (!v.ok()) {
      ok = false;
      error = "old rank " + std::to_string(j) + ": " + v.error().message;
      break;
    }
    held.push_back(v.value());
  }
  if (!all_ok(ok))
    return cairn::make_error(Errc::not_found, error.empty() ? "another rank cannot read the old job" : error);
  std::uint64_t mine = ~0ull, g = 0;
  for (const auto& h : held) mine = std::min(mine, h.committed);
  MPI_Allreduce(&mine, &g, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  for (const auto& h : held) ok = ok && (h.committed == g || h.previous == g);
  if (!all_ok(ok)) return cairn::make_error(Errc::no_version, "the old job's ranks hold no version all of them have");
  // Their own leaves, and the counts per unit for the new partition.
  const std::uint64_t units = std::uint64_t{1} << (3 * a.level_min);
  std::vector<std::uint64_t> count(units, 0);
  std::vector<LeafRec> leaves;
  std::uint64_t step_min = ~0ull, step_max = 0;
  for (int j = rank; j < a.from_ranks; j += ranks) {
    auto o = tree_options(a);
    o.version = g;
    auto t = Octree::restore(pool_path(a, j, a.from_ranks), o);
    if (!t.ok()) {
      ok = false;
      error = "old rank " + std::to_string(j) + ": " + t.error().message;
      break;
    }
    step_min = std::min(step_min, load_step(*t.value()));
    step_max = std::max(step_max, load_step(*t.value()));
    Part reader(a, old.value(), j, a.from_ranks);
    auto v = t.value()->visit_leaves([&](const Octant& q, const std::byte* d) {
      if (!reader.owns(q)) return;
      ++count[unit_of(q, a.level_min)];
      leaves.push_back(LeafRec{static_cast<std::uint32_t>(q.level), q.x, q.y, q.z, read_c(d)});
    });
    if (!v.ok()) {
      ok = false;
      error = v.error().message;
      break;
    }
  }
  if (!all_ok(ok))
    return cairn::make_error(Errc::corrupted, error.empty() ? "another rank cannot read the old job" : error);
  MPI_Allreduce(MPI_IN_PLACE, count.data(), static_cast<int>(units), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &step_min, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &step_max, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (step_min != step_max)
    return cairn::make_error(Errc::corrupted,
                             "the old job's ranks hold different steps at version " + std::to_string(g));
  const Partition fresh = Partition::split(a.level_min, count, ranks);
  // Each leaf to its new owner.
  std::vector<std::vector<LeafRec>> out(static_cast<std::size_t>(ranks));
  for (const LeafRec& l : leaves)
    out[static_cast<std::size_t>(fresh.owner(unit_of(l.octant(), a.level_min)))].push_back(l);
  std::vector<int> sn(static_cast<std::size_t>(ranks)), rn(sn.size()), sd(sn.size()), rd(sn.size());
  std::vector<LeafRec> send;
  for (int r = 0; r < ranks; ++r) {
    sd[r] = static_cast<int>(send.size() * sizeof(LeafRec));
    sn[r] = static_cast<int>(out[r].size() * sizeof(LeafRec));
    send.insert(send.end(), out[r].begin(), out[r].end());
  }
  MPI_Alltoall(sn.data(), 1, MPI_INT, rn.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < ranks; ++r) {
    rd[r] = total;
    total += rn[r];
  }
  std::vector<LeafRec> mine_leaves(static_cast<std::size_t>(total) / sizeof(LeafRec));
  MPI_Alltoallv(send.data(), sn.data(), sd.data(), MPI_BYTE, mine_leaves.data(), rn.data(), rd.data(), MPI_BYTE,
                MPI_COMM_WORLD);
  // The new partition is durable before any new tree is.
  const std::string part_path = job_file(a, ranks, ".partition");
  if (rank == 0) ok = write_partition(part_path, fresh).ok();
  if (!all_ok(ok)) return cairn::make_error(Errc::io_error, "cannot write " + part_path);
  part = std::make_unique<Part>(a, fresh, rank, ranks);
  auto t = fresh_tree(pool_path(a, rank, ranks), a);
  if (!all_ok(t.ok()))
    return t.ok() ? cairn::make_error(Errc::io_error, "another rank cannot create its pool") : t.error();
  part->set_tree(std::move(t.value()));
  Octree& tree = part->tree();
  auto r = grow(tree, a.level_min, mine_leaves, [&](const Octant& q) { return part->owns(q); });
  if (r.ok()) r = part->refresh_ghosts();
  if (r.ok()) r = store_step(tree, step_min);
  if (r.ok() && a.redundancy == "partner") r = fresh_replica(*part, a, rank, ranks);
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to rebuild") : r.error();
  double s = 0;
  std::uint64_t b = 0;
  auto v = commit(*part, a, rank, ~0ull, s, b);
  if (!v.ok()) return v.error();
  // Global in the new layout: the old job's files can go (its partition
  // first, so a restart never reads a half-removed old job).
  if (rank == 0) fs::remove(job_file(a, a.from_ranks, ".partition"));
  MPI_Barrier(MPI_COMM_WORLD);
  for (int j = rank; j < a.from_ranks; j += ranks) {
    fs::remove(pool_path(a, j, a.from_ranks));
    fs::remove(replica_path(a, j, a.from_ranks));
  }
  if (rank == 0)
    std::printf("amr-mpi: repartitioned step %" PRIu64 " (version %" PRIu64 ") from %d ranks to %d\n", step_min, g,
                a.from_ranks, ranks);
  return v.value();
}

// The initial sphere: units split by the leaves the initial refinement gives
// them (without balance: an estimate), then the mesh amr.cpp builds.
Result<void> initial(std::unique_ptr<Part>& part, const Args& a, int rank, int ranks) {
  const std::uint64_t units = std::uint64_t{1} << (3 * a.level_min);
  std::vector<std::uint64_t> count(units, 0);
  std::function<std::uint64_t(const Octant&)> leaves = [&](const Octant& o) -> std::uint64_t {
    if (o.level >= a.level_min && (o.level == a.size || !amr::model::touches_surface(o))) return 1;
    std::uint64_t n = 0;
    for (int k = 0; k < 8; ++k) n += leaves(cairn::octree::child_of(o, k));
    return n;
  };
  // Each rank counts a share of the units; the sum is the same everywhere.
  for (std::uint64_t u = static_cast<std::uint64_t>(rank); u < units; u += static_cast<std::uint64_t>(ranks)) {
    Octant o{a.level_min, 0, 0, 0};
    const std::uint32_t len = o.length();
    for (int b = 0; b < a.level_min; ++b) {
      const std::uint64_t c = (u >> (3 * b)) & 7;
      o.x += (c & 1) ? len << b : 0;
      o.y += (c & 2) ? len << b : 0;
      o.z += (c & 4) ? len << b : 0;
    }
    count[u] = leaves(o);
  }
  MPI_Allreduce(MPI_IN_PLACE, count.data(), static_cast<int>(units), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  const Partition p = Partition::split(a.level_min, count, ranks);
  bool ok = true;
  const std::string part_path = job_file(a, ranks, ".partition");
  if (rank == 0) ok = write_partition(part_path, p).ok();
  if (!all_ok(ok)) return cairn::make_error(Errc::io_error, "cannot write " + part_path);
  part = std::make_unique<Part>(a, p, rank, ranks);
  auto t = fresh_tree(pool_path(a, rank, ranks), a);
  if (!all_ok(t.ok()))
    return t.ok() ? cairn::make_error(Errc::io_error, "another rank cannot create its pool") : t.error();
  part->set_tree(std::move(t.value()));
  Octree& tree = part->tree();
  auto r = tree.uniform(a.level_min, nullptr);
  if (r.ok())
    r = tree.refine(
        true, [&](const Octant& q, const std::byte*) { return part->owns(q) && amr::model::touches_surface(q); },
        nullptr, a.size);
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed") : r;
  auto b = part->balance(nullptr);
  if (!b.ok()) return b.error();
  r = tree.update_leaves([&](const Octant& q, std::byte* d) {
    if (!part->owns(q)) return false;
    write_c(d, amr::sphere_fraction(q));
    return true;
  });
  if (r.ok()) r = part->refresh_ghosts();  // the ghosts' fractions
  if (r.ok()) r = store_step(tree, 0);
  if (r.ok() && a.redundancy == "partner") r = fresh_replica(*part, a, rank, ranks);
  return r;
}

int run(const Args& a) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (a.level_min < 1 || a.level_min > a.size || a.size > 12)
    return fail(rank, "levels must satisfy 1 <= --level-min <= --size <= 12");
  if ((std::uint64_t{1} << (3 * a.level_min)) < static_cast<std::uint64_t>(ranks))
    return fail(rank, "more ranks than octants at --level-min " + std::to_string(a.level_min));
  if (a.commit == "none" && a.resume) return fail(rank, "--commit none persists nothing to resume from");
  if (a.redundancy == "partner" && (a.ranks_per_node < 1 || ranks % a.ranks_per_node != 0 ||
                                    ranks / a.ranks_per_node < 2 || a.commit != "collective"))
    return fail(rank,
                "--redundancy partner needs --ranks-per-node K dividing the ranks into at least two nodes, and "
                "collective commits");
  if (!(a.period > 0) || !(a.cfl > 0 && a.cfl <= 0.5) || a.persist_every == 0)
    return fail(rank, "period > 0, 0 < cfl <= 0.5 and persist-every >= 1 are required");
  std::error_code ec;
  fs::create_directories(a.dir, ec);
  const auto t0 = Clock::now();
  // The amr app's step count and dt (amr.cpp's run).
  const double h_min = 1.0 / static_cast<double>(1u << a.size);
  const std::uint64_t steps = static_cast<std::uint64_t>(std::ceil(a.period / (a.cfl * h_min / 2.0)));
  const double dt = a.period / static_cast<double>(steps);

  std::unique_ptr<Part> part;
  double persist_s = 0, restore_ms = 0;
  std::uint64_t blocks = 0, version = 0;
  if (!a.resume) {
    if (auto r = initial(part, a, rank, ranks); !all_ok(r.ok()))
      return fail(rank, r.ok() ? "another rank failed" : r.error().message);
    if (a.commit != "none") {
      auto v = commit(*part, a, rank, 0, persist_s, blocks);
      if (!v.ok()) return fail(rank, v.error().message);
      version = v.value();
    }
  } else if (a.from_ranks > 0 && a.from_ranks != ranks) {
    auto v = repartition(part, a, rank, ranks);
    if (!v.ok()) return fail(rank, v.error().message);
    version = v.value();
  } else {
    auto p = read_partition(job_file(a, ranks, ".partition"), ranks, a.level_min);
    if (!all_ok(p.ok())) return fail(rank, p.ok() ? "another rank cannot read the partition" : p.error().message);
    part = std::make_unique<Part>(a, p.value(), rank, ranks);
    auto v = restore(*part, a, rank, ranks);
    if (!v.ok()) return fail(rank, v.error().message);
    version = v.value();
    // The restored ghost leaves are current; which ones they are is not persisted.
    if (auto r = part->refresh_ghosts(); !all_ok(r.ok()))
      return fail(rank, r.ok() ? "another rank failed" : r.error().message);
  }
  if (a.resume) restore_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  Beat beat(rank);
  const std::uint64_t first_version = version;
  beat(version, a.resume ? first_version : 0);
  Octree& tree = part->tree();
  const std::uint64_t first = load_step(tree);
  amr::Config cfg;
  cfg.pool = pool_path(a, rank, ranks);
  cfg.step_limit = a.step_limit;
  const auto last = amr::model::last_step(cfg, first, steps);
  if (!last.ok()) return fail(rank, last.error().message);
  int rounds = 0;
  const auto loop0 = Clock::now();
  for (std::uint64_t s = first; s < last.value(); ++s) {
    if (a.crash_at >= 0 && static_cast<std::uint64_t>(a.crash_at) == s && rank == a.crash_rank &&
        !(a.resume && s == first))
      raise(SIGKILL);
    auto r = part->transport(static_cast<double>(s) * dt, dt);
    if (r.ok()) r = part->adapt();
    if (!all_ok(r.ok())) return fail(rank, r.ok() ? "another rank failed" : r.error().message);
    auto b = part->balance(Part::copy_parent);
    if (!b.ok()) return fail(rank, b.error().message);
    rounds += b.value();
    if (auto w = store_step(tree, s + 1); !w.ok()) return fail(rank, w.error().message);
    if (a.commit != "none" && ((s + 1) % a.persist_every == 0 || s + 1 == last.value())) {
      auto v = commit(*part, a, rank, s + 1, persist_s, blocks);
      if (!v.ok()) return fail(rank, v.error().message);
      version = v.value();
      beat(version, a.resume ? first_version : 0);
    }
  }

  double loop_s = std::chrono::duration<double>(Clock::now() - loop0).count();

  // The checksum, volume and shape error of the whole mesh, chained through
  // the ranks in Morton order: the same sums, in the same order, as one process.
  struct Chain {
    std::uint64_t h, leaves;
    double volume, shape;
  } chain{amr::model::Checksum{}.h, 0, 0, 0};
  if (rank > 0) MPI_Recv(&chain, sizeof chain, MPI_BYTE, rank - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  amr::model::Checksum sum;
  sum.h = chain.h;
  std::uint64_t own = 0;
  auto v = tree.visit_leaves([&](const Octant& o, const std::byte* d) {
    if (!part->owns(o)) return;
    const double c = read_c(d);
    chain.volume += c * amr::model::volume(o);
    chain.shape += std::fabs(c - amr::sphere_fraction(o)) * amr::model::volume(o);
    sum.add(o, c);
    ++own;
  });
  if (!v.ok()) return fail(rank, v.error().message);
  chain.h = sum.h;
  chain.leaves += own;
  if (rank + 1 < ranks) MPI_Send(&chain, sizeof chain, MPI_BYTE, rank + 1, 7, MPI_COMM_WORLD);
  std::uint64_t own_min = own, own_max = own, ghosts = part->ghosts();
  MPI_Allreduce(MPI_IN_PLACE, &own_min, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &own_max, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &ghosts, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &persist_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &loop_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &blocks, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  std::uint64_t partner[3] = {part->bytes_sent(), part->units_sent(), part->units_owned()};
  MPI_Allreduce(MPI_IN_PLACE, partner, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank + 1 == ranks) {
    const double volume0 = amr::model::reference_volume(a.size);
    const double rel = std::fabs(chain.volume - volume0) / volume0;
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!a.quiet)
      std::printf("amr-mpi: %d ranks, levels %d-%d, %" PRIu64 " steps of %.6g from step %" PRIu64 " (version %" PRIu64
                  "), %" PRIu64 " leaves (%" PRIu64 "-%" PRIu64 " per rank, %" PRIu64
                  " ghosts), %d balance rounds; persist %.3f s of %.3f s, %" PRIu64 " blocks written%s\n",
                  ranks, a.level_min, a.size, steps, dt, first, version, chain.leaves, own_min, own_max, ghosts, rounds,
                  persist_s, seconds, blocks,
                  a.resume ? (", restored in " + std::to_string(restore_ms) + " ms").c_str() : "");
    if (part->replica() != nullptr && partner[2] > 0)
      std::printf("amr-mpi: partner copies: %" PRIu64 " bytes sent in all, %" PRIu64 " of %" PRIu64
                  " units sent (%.1f %%: only the units that changed since the partner's copy)\n",
                  partner[0], partner[1], partner[2],
                  100.0 * static_cast<double>(partner[1]) / static_cast<double>(partner[2]));
    std::printf("amr-mpi: loop %.6f s for %" PRIu64 " steps, commit %.6f s (slowest rank), commit mode %s\n", loop_s,
                last.value() - first, persist_s, a.commit.c_str());
    std::printf(
        "amr: volume %.12g (initial %.12g, relative change %.2e), shape error at T %.6e, checksum %016llx: %s\n",
        chain.volume, volume0, rel, chain.shape, static_cast<unsigned long long>(chain.h),
        rel < 1e-10 ? "VERIFIED" : "NOT VERIFIED (volume not conserved)");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Args a;
  CLI::App cli{"amr-mpi: the amr app's adaptive interface on a PM-octree partitioned across MPI ranks"};
  cli.add_option("--size", a.size, "finest level (the interface's), as amr --size")->check(CLI::Range(1, 12));
  cli.add_option("--level-min", a.level_min, "coarsest level; its octants are the partition's units");
  cli.add_option("--period", a.period, "T: the flow reverses at T/2");
  cli.add_option("--cfl", a.cfl, "dt = cfl * h_min / max|u|");
  cli.add_option("--persist-every", a.persist_every, "steps between collective commits");
  cli.add_option("--steps", a.step_limit, "stop after this step (0: all)");
  cli.add_option("--dir", a.dir, "directory of the ranks' pools and the partition")->required();
  cli.add_option("--name", a.name, "base name of the job's files");
  cli.add_option("--pool-size", a.pool_size, "bytes of each rank's pool");
  cli.add_option("--crash-at", a.crash_at, "SIGKILL --crash-rank at the start of this step");
  cli.add_option("--crash-in-commit", a.crash_in_commit,
                 "SIGKILL --crash-rank during the commit of this step, before its own persist");
  cli.add_option("--redundancy", a.redundancy,
                 "local (default) | partner: a copy of each rank's leaves on the next node")
      ->check(CLI::IsMember({"local", "partner"}));
  cli.add_option("--ranks-per-node", a.ranks_per_node, "simulated nodes of this many ranks, each in <dir>/node<k>");
  cli.add_flag("--crash-in-restore", a.crash_in_restore,
               "--resume: SIGKILL --crash-rank right after its own restore, before the others agree");
  cli.add_option("--crash-rank", a.crash_rank, "the rank --crash-at and --crash-in-commit kill (default 0)");
  cli.add_flag("--resume", a.resume, "continue from the version every rank holds");
  cli.add_option("--from-ranks", a.from_ranks, "--resume: the old job ran on this many ranks (repartition)");
  cli.add_flag("--quiet", a.quiet, "only the verification line");
  cli.add_option("--commit", a.commit,
                 "collective (default) | local: each rank persists, no agreement | none: nothing persisted")
      ->check(CLI::IsMember({"collective", "local", "none"}));
  int code = 0;
  try {
    cli.parse(argc, argv);
    code = run(a);
  } catch (const CLI::ParseError& e) {
    code = cli.exit(e) == 0 ? 0 : 2;
  }
  if (code != 0) MPI_Abort(MPI_COMM_WORLD, code);
  MPI_Finalize();
  return code;
}
