// amr.hpp — an adaptive interface simulation on the PM-octree (seed 000's
// droplet workload in spirit): a sphere of fluid, as a volume fraction on the
// leaves, advected by the time-reversing 3D deformation field of LeVeque and
// Enright et al. The mesh is refined to the finest level around the interface
// and coarsened away from it every step, 2:1 balanced, and the tree is made
// persistent with pm_persistent after every K steps; a run killed at any
// moment resumes from the last persisted step and ends bit-identically.
//
// Transport: first-order upwind finite volumes on the leaves (fluxes across
// every face once, hanging faces from the fine side), so the volume of fluid
// is conserved to rounding. Refinement copies a parent's fraction to its
// children and coarsening averages them: both conserve volume too.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/octree.hpp"

namespace cairn::apps::amr {

// How the mesh lives and persists (seed 000 §5's three octrees).
//   pm-octree  the PM-octree: C0 in DRAM up to dram_budget, C1 in the pool,
//              pm_persistent every persist_every steps
//   in-core    the same octree with every block in DRAM and no pm_persistent;
//              a snapshot file (write, fsync, rename) every snapshot_every
//              steps; restart reads it and recomputes the lost steps
//   lmdb       out-of-core, as Etree: leaves keyed by Morton code in an LMDB
//              B+-tree on the device's file system, every access through it;
//              one write transaction per persist_every steps
enum class Backend { pm_octree, in_core, lmdb };
const char* backend_name(Backend b);

struct Config {
  Backend backend = Backend::pm_octree;
  std::string pool;     // the PM-octree pool file (in-core: its scratch pool and <pool>.snapshot; lmdb: a directory)
  int level_min = 2;    // coarsest leaves away from the interface
  int level_max = 5;    // finest level: the interface's (--size)
  double period = 3.0;  // T: the flow reverses at T/2 and the sphere is back at T
  double cfl = 0.3;     // dt = cfl * h_min / max |u|
  std::uint64_t persist_every = 1;
  std::int64_t crash_at = -1;  // SIGKILL at the start of this step (after the persist before it)
  bool resume = false;
  std::string vtk_dir;  // every vtk_every steps, a .vtu there
  std::uint64_t vtk_every = 0;
  std::uint64_t pool_size = 512ull << 20;  // collected when less than 10 % is free (lmdb: its map size)
  std::string device;                      // the pool's device ("" : $CAIRN_DEVICE), e.g. emulated:pcm-2017
  std::uint64_t dram_budget = ~0ull;       // pm-octree: bytes of blocks in DRAM (C0)
  bool transform = true;                   // pm-octree: feature-directed layout transformation
  std::uint64_t snapshot_every = 10;       // in-core: steps between snapshots
  bool track_versions = false;             // pm-octree: the two versions' sizes after every persist
  std::int64_t catch_up_step = -1;         // note when the run reaches this step (restart experiments)
  std::uint64_t step_limit = 0;            // > 0: stop after this step (benchmarks; the sphere is not back)
};

// After a persist (track_versions): the two versions (seed 000 Fig. 3).
struct VersionSample {
  std::uint64_t step = 0, octants = 0;
  double overlap = 0;              // shared bytes / bytes of V(i)
  std::uint64_t both_bytes = 0;    // blocks reachable from V(i) or V(i-1), DRAM and pool
  std::uint64_t single_bytes = 0;  // V(i) alone
};

struct Report {
  std::uint64_t steps = 0, first_step = 0;  // first_step > 0 after --resume
  std::uint64_t leaves = 0;
  double volume0 = 0, volume = 0;  // fluid volume at t = 0 and at the end
  double shape_error = 0;          // L1 distance of the fraction at t = T from the initial sphere
  double dt = 0;
  std::uint64_t checksum = 0;  // of the final tree (leaves and payload)
  double seconds = 0, persist_seconds = 0;
  std::uint64_t blocks_persisted = 0;       // summed over the persists
  double overlap_min = 1, overlap_max = 0;  // shared / version bytes after each persist (track_versions)
  std::vector<VersionSample> versions;      // track_versions
  double restore_seconds = 0;               // resume: until the state was back in memory
  double catch_up_seconds = -1;             // from the start until step catch_up_step began
  std::uint64_t nvm_store_lines = 0;        // pm-octree: cache lines stored into pool blocks
  std::uint64_t nvm_bytes_flushed = 0;      // pm-octree: bytes written back to the device
  std::uint64_t snapshot_bytes = 0;         // in-core: bytes of snapshot files written
};

// The sphere of the test: radius 0.15 at (0.35, 0.35, 0.35).
double sphere_fraction(const octree::Octant& o);

Result<Report> run(const Config& config);

// ---- shared by the backends (amr.cpp, lmdb_mesh.cpp)
namespace model {
inline constexpr double kEps = 1e-3;    // a fraction this close to 0 or 1 is pure
inline constexpr double kTiny = 1e-12;  // an upwind fraction below this carries no flux
double edge(const octree::Octant& o);
double volume(const octree::Octant& o);
double velocity(int axis, double x, double y, double z, double t, double period);
// The upwind volume leaving leaf `a` (fraction ca) through its face (axis,
// upper) towards a neighbour of fraction cb, in one step.
double face_flux(const octree::Octant& a, int axis, bool upper, double ca, double cb, double t, double dt,
                 double period);
bool touches_surface(const octree::Octant& o);
bool refine_wanted(const octree::Octant& o, double c, int level_max);
bool coarsen_wanted(const octree::Octant& parent, const double* children, int fan, int level_min);
// Adaptation's payload rules: a new child takes its parent's fraction; a
// family (read from its leaves) is merged when coarsen_wanted says so, into
// the mean of its fractions.
void inherit(const octree::Octant& child, std::byte* d, const std::byte* parent);
bool family_coarsens(const octree::Octant& parent, std::span<const octree::LeafView> family, int level_min);
void merge_mean(const octree::Octant& parent, std::byte* d, std::span<const octree::LeafView> family);
// The sphere's volume on the initial mesh (the reference for conservation).
double reference_volume(int level_max);
// The step after the last one this run computes (step_limit, or all), or
// layout_mismatch when the stored step `first` lies past this run's end.
Result<std::uint64_t> last_step(const Config& c, std::uint64_t first, std::uint64_t steps);
// At the start of step s: note the catch-up time, SIGKILL at --crash-at.
void step_begins(const Config& c, std::uint64_t s, double seconds_so_far, Report& report);
// A leaf's payload is its fraction; the root octant's payload is the step
// (committed with the tree).
double read_c(const std::byte* d);
void write_c(std::byte* d, double c);
std::uint64_t load_step(const octree::Octree& t);
Result<void> store_step(octree::Octree& t, std::uint64_t step);
// The run's checksum: leaves and fractions in Morton order, equal for every backend.
struct Checksum {
  std::uint64_t h = 0x243F6A8885A308D3ull;
  void add(const octree::Octant& o, double c);
};
}  // namespace model

Result<Report> run_lmdb(const Config& config, std::uint64_t steps, double dt);

}  // namespace cairn::apps::amr
