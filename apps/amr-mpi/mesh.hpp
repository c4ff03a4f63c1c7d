// mesh.hpp — amr-mpi's distributed mesh: the partition of the octants of
// the coarsest level into Morton ranges, each rank's part of the PM-octree
// with its ghost layer, the amr app's numerics on it, and the partner copy
// (internal to apps/amr-mpi).
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
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "apps/amr/amr.hpp"
#include "cairn/octree.hpp"

namespace cairn::apps::amr_mpi {

using octree::Octant;
using octree::Octree;

// The switches of a run (main.cpp parses them).
struct Args {
  int size = 4, level_min = 2;
  double period = 3.0, cfl = 0.3;
  std::uint64_t persist_every = 1, step_limit = 0;
  std::string dir, name = "amr-mpi";
  std::int64_t crash_at = -1, crash_in_commit = -1, stop_at = -1;
  bool crash_in_restore = false;
  int crash_rank = 0;
  bool resume = false, quiet = false;
  int from_ranks = 0;
  std::uint64_t pool_size = 256ull << 20;
  std::string commit = "collective";  // | local (no agreement) | none (nothing persisted): `cairn bench dist`
  std::string redundancy = "local";   // | partner: a copy of each rank's leaves on the next node | xor: parity
  int ranks_per_node = 0;             // > 0: simulated nodes of this many ranks, node k in <dir>/node<k>
  int xor_group = 4;                  // nodes per XOR parity group
  std::string pfs_dir;                // flushed versions (the parallel file system), every pfs_every-th
  std::uint64_t pfs_every = 10;
};

inline std::uint64_t key(const Octant& o) { return octree::morton(o, 3); }

// ------------------------------------------------------------ partition

// The unit (octant of `level`) an octant of that level or finer lies in, as
// its index in Morton order.
inline std::uint64_t unit_of(const Octant& o, int level) { return key(o) >> (5 + 3 * (octree::kMaxLevel - level)); }

struct Partition {
  int level = 2;
  std::vector<std::uint64_t> first;  // ranks + 1: each rank's first unit, then the unit count
  int ranks() const { return static_cast<int>(first.size()) - 1; }
  int owner(std::uint64_t unit) const {
    return static_cast<int>(std::upper_bound(first.begin(), first.end(), unit) - first.begin()) - 1;
  }
  // Contiguous ranges of about equal weight, at least one unit each: rank r
  // starts at the first unit whose preceding weight reaches r/P of the total.
  static Partition split(int level, const std::vector<std::uint64_t>& weight, int ranks);
};

// ------------------------------------------------------------ files
// The job's files: <dir>/<name>.n<P>.partition; a rank's pool and the
// partner copy it holds on its node's directory.
std::string job_file(const Args& a, int ranks, const std::string& what);
std::string node_dir(const Args& a, int rank);  // <dir>/node<k> when nodes are simulated
std::string pool_path(const Args& a, int rank, int ranks);
// With --redundancy partner, rank r keeps the copy of its source's leaves:
// the same local rank on the node before (its partner is on the node after).
int partner_of(const Args& a, int rank, int ranks);
int source_of(const Args& a, int rank, int ranks);
std::string replica_path(const Args& a, int holder, int ranks);
// With --redundancy xor, rank r's parity segments (a stream pool; parity.hpp).
std::string parity_path(const Args& a, int rank, int ranks);

// "AMRPART1", level, ranks, first[ranks + 1], hash of all that: written once
// per job, durably (write, fsync, rename, fsync the directory), before any
// rank persists.
Result<void> write_partition(const std::string& path, const Partition& p);
Result<Partition> read_partition(const std::string& path, int ranks, int level);

// ------------------------------------------------------------ leaves and trees

struct LeafRec {
  std::uint32_t level, x, y, z;
  double c;
  Octant octant() const { return {static_cast<int>(level), x, y, z}; }
  static LeafRec of(const Octant& o, const std::byte* data) {
    return {static_cast<std::uint32_t>(o.level), o.x, o.y, o.z, amr::model::read_c(data)};
  }
};

// Every record to the rank it is listed for (an all-to-all); what this rank receives.
std::vector<LeafRec> to_owners(const std::vector<std::vector<LeafRec>>& out);
// The keys of the strict ancestors of the leaves.
std::unordered_set<std::uint64_t> ancestors(const std::vector<LeafRec>& leaves);

// Every tree of the job: 3D, a fraction per octant, the previous version kept
// (the agreement's V-1), collected in the foreground.
octree::Options tree_options(const Args& a);
// A new tree at `path` (an old file there removed), its first version numbered `first_version`.
Result<std::unique_ptr<Octree>> fresh_tree(const std::string& path, const Args& a, std::uint64_t first_version = 1);
// Refines `t` down to `leaves` below `level` where `mine` says so and sets
// their fractions; every leaf `mine` accepts must be one of them (corrupted
// otherwise): how a rank's tree, or a unit of a copy, is rebuilt from leaves sent to it.
Result<void> grow(Octree& t, int level, const std::vector<LeafRec>& leaves,
                  const std::function<bool(const Octant&)>& mine);

// ------------------------------------------------------------ a rank's part

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
  Result<void> refresh_ghosts();

  // One transport step on the leaves this rank owns (amr.cpp's transport,
  // faces with no own leaf skipped).
  Result<void> transport(double t, double dt);

  // Refinement and coarsening of own leaves (amr.cpp's adapt without its balance).
  Result<void> adapt();

  // 2:1 face balance across the ranks; leaves the ghost layer current.
  // Collective. Returns the rounds it took.
  Result<int> balance(const Octree::InitFn& init);

  // ---- the partner copy (--redundancy partner)
  // The copy this rank holds of its source's leaves, in a PM-octree of its own.
  Octree* replica() { return replica_.get(); }
  void set_replica(std::unique_ptr<Octree> t) { replica_ = std::move(t); }
  bool source_owns(const Octant& o) const {
    return o.level >= part_.level && part_.owner(unit_of(o, part_.level)) == source_of(a_, rank_, ranks_);
  }
  // This rank's own leaves (all, or those of `units`) as records.
  Result<std::vector<LeafRec>> own_leaves(const Octree& t, bool of_source) const;
  // Sends the partner the units of this rank that changed since the copy it
  // holds (all of them after a start: seed 000's shipping of changed octants,
  // a unit at a time), receives the source's, applies them to the copy held
  // here and persists it. Collective (pairs).
  Result<void> protect(std::uint64_t step);
  // The partner's copy is new: the next protect() sends every unit.
  void resend_all() { full_ = true; }
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
}  // namespace cairn::apps::amr_mpi
