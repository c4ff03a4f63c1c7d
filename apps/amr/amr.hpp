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
#include <string>

#include "cairn/error.hpp"
#include "cairn/octree.hpp"

namespace cairn::apps::amr {

struct Config {
  std::string pool;     // the PM-octree pool file
  int level_min = 2;    // coarsest leaves away from the interface
  int level_max = 5;    // finest level: the interface's (--size)
  double period = 3.0;  // T: the flow reverses at T/2 and the sphere is back at T
  double cfl = 0.3;     // dt = cfl * h_min / max |u|
  std::uint64_t persist_every = 1;
  std::int64_t crash_at = -1;  // SIGKILL at the start of this step (after the persist before it)
  bool resume = false;
  std::string vtk_dir;  // every vtk_every steps, a .vtu there
  std::uint64_t vtk_every = 0;
  std::uint64_t pool_size = 512ull << 20;  // collected when less than 10 % is free
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
  double overlap_min = 1, overlap_max = 0;  // shared / version bytes after each step (seed Fig. 3)
};

// The sphere of the test: radius 0.15 at (0.35, 0.35, 0.35).
double sphere_fraction(const octree::Octant& o);

Result<Report> run(const Config& config);

}  // namespace cairn::apps::amr
