// sph.hpp — the sph proxy application: a smoothed-particle-hydrodynamics
// fluid in the style of PARSEC's Fluidanimate (seed 001 §3.1, §4), with three
// layouts of its particle/cell store (seed 001 Figs. 8-9):
//
//   list     Fluidanimate's original: one singly-linked list of individually
//            allocated nodes per cell, in DRAM. Persisting it is a walk: before
//            every commit each element is copied into a plain field
//            ("particles", n elements in cell order); after a restore the
//            lists are rebuilt node by node (Simulation::before_commit /
//            after_restore). The walk is what makes it slow to save.
//   array    one flat plain field with a fixed capacity per cell, sized for
//            the worst case and mostly empty ("slots", cells x kArrayCapacity,
//            plus "counts"); it is the working state and is persisted whole
//            (the seed's 4.8 GB instead of 225 MB).
//   blocked  the particles packed in cell order in chunks of 2 MB (32768
//            particles of 64 bytes): one dual field per chunk, "particles.0",
//            "particles.1", ... — cairn's BlockedArray idea through the
//            framework's fields. The particle count is fixed, so every chunk
//            is in use and only chunks in use are persisted; each is handed to
//            the in-place flusher as soon as the step has advanced it.
//
// One step ("frame"), the same arithmetic in the same order for every layout
// (the kernels are templates over the store), so the three layouts give
// bit-identical particles, for any --threads:
//   1. rebuild   every particle goes to the cell of its position; a stable
//                regrouping: a new cell lists its particles in the order of
//                (old cell, position in the old cell).
//   2. density   rho_i = sum_j m_j W_poly6(|x_i - x_j|, h), j over the 27
//                neighbour cells in ascending cell order, i itself included.
//   3. forces    pressure p = k (rho - rho0) (clamped at 0; Muller 2003 with
//                the symmetrised spiky-gradient term), viscosity with the
//                viscosity-kernel Laplacian, gravity, and penalty walls
//                (spring-damper within s/2 of each wall, as Fluidanimate).
//   4. advance   leap-frog with half-step velocities: hv' = hv + a dt,
//                x' = x + hv' dt, v' = (hv + hv') / 2; positions are clamped
//                into the box (the normal velocity into a wall is removed).
// Each particle gathers from its neighbours (no pair-symmetric updates), so
// threads never write the same particle and no atomics are needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "apps/common/app.hpp"

namespace cairn::apps::sph {

// One particle as stored by every layout: 16 words, so that a 2 MB chunk
// holds exactly 32768 of them. p, hv, v and cell carry state from step to
// step; a and density are recomputed by every step (persisted with the rest,
// as in Fluidanimate's cells). `cell` is the cell the last rebuild put the
// particle in: with the stored order it defines the lists after a restore.
struct Particle {
  float p[3];   // position (m)
  float hv[3];  // velocity at the last half step (m/s)
  float v[3];   // velocity at the last full step (m/s)
  float a[3];   // acceleration of the last step (m/s^2)
  float density;
  float mass;
  std::uint32_t id;    // 0 .. n-1, unique
  std::uint32_t cell;  // see above
};
static_assert(sizeof(Particle) == 64, "a 2 MB chunk holds 32768 particles");

enum class Layout { list, array, blocked };
const char* layout_name(Layout layout);

// Cells of the array layout: a fixed number of slots each. A cell has a side
// of at least h = 2 s and holds about 8 particles at rest (at most 27 on a
// perfect lattice); a cell that would need more ends the run with an error.
inline constexpr std::size_t kArrayCapacity = 32;
// Particles per chunk of the blocked layout (2 MB).
inline constexpr std::size_t kChunkParticles = (std::size_t{2} << 20) / sizeof(Particle);

// The problem, fixed by --size (see sph.cpp for the numbers).
struct Setup {
  std::string size;     // test, simsmall, simmedium, simlarge, native
  std::size_t lattice;  // the dam is lattice x 2 lattice x lattice particles
  std::size_t particles;
  std::size_t cells[3];  // grid cells per axis (x, y, z); y is up
  std::size_t cell_count;
  float box[3];  // the box is [0, box[d]] per axis (m)
  float cell_size[3], inv_cell_size[3];
  float spacing;  // initial particle distance s (m)
  float h;        // kernel radius, 2 s, at most the cell side
  float mass;     // per particle: the lattice's interior density is rho0
  float rho0, stiffness, viscosity, gravity, dt;
  float wall_distance, wall_stiffness, wall_damping;
  std::uint64_t default_iterations;
};
// The setup of a size name, or an error listing the valid ones.
Result<Setup> make_setup(const std::string& size);
// The initial dam-break state in id order: a block of fluid at rest in the
// corner x, z near 0 of the box, filling its depth.
std::vector<Particle> initial_particles(const Setup& setup);

// The application. Public beyond the Simulation interface for the tests.
class SphApp final : public Simulation {
 public:
  // `layout` is the default of --layout.
  explicit SphApp(Layout layout = Layout::blocked);
  ~SphApp() override;

  std::string name() const override { return "sph"; }
  void add_options(CLI::App& cli) override;
  Result<void> configure(const RunOptions& options) override;
  std::string describe() const override;
  std::uint64_t default_iterations() const override { return setup_.default_iterations; }
  void declare(FieldSet& fields) override;
  void initialize(Team& team) override;
  void step(std::uint64_t iteration, Team& team) override;
  void before_commit(Team& team) override;
  void after_restore(Team& team) override;
  std::string progress_note(Team& team) override;
  Verification verify(std::uint64_t iterations, Team& team) override;

  Layout layout() const { return layout_; }
  const Setup& setup() const { return setup_; }
  // The particles in canonical order (cell by cell, each cell in its order),
  // and how many sit in a cell other than their `cell` says. Valid between
  // steps while the run's fields exist (e.g. inside verify()).
  std::vector<Particle> snapshot(std::size_t* misplaced = nullptr) const;
  // Calls fn on every live particle, in canonical order (tests use it to
  // break the state).
  void visit(const std::function<void(Particle&)>& fn);
  // The checks of verify() on a snapshot: count, ids, mass, finite values,
  // inside the box, cell order, and the physics (see sph.cpp).
  Verification judge(std::span<const Particle> particles, std::size_t misplaced, std::uint64_t iterations) const;

  class Store;  // one per layout (sph.cpp)

 private:
  Layout layout_;
  std::string layout_option_;
  Setup setup_{};
  std::unique_ptr<Store> store_;
  // For the report's detail line: steps, the list's walks and rebuild.
  double step_seconds_ = 0, walk_seconds_ = 0, rebuild_seconds_ = 0;
  std::uint64_t steps_ = 0, walks_ = 0;
};

}  // namespace cairn::apps::sph
