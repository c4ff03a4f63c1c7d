// sph.cpp — the SPH dam break (setup, kernels, verification) and its three
// stores: list, array and blocked (see sph.hpp for the design).
//
// The problem, for --size S with lattice number a (test 12, simsmall 26,
// simmedium 37, simlarge 53, native 63):
//   box       1 m (x) by 0.75 m (y, up) by 0.25 m (z); walls on all six sides.
//   dam       a x 2a x a particles on a cubic lattice of spacing s = 0.25/a m
//             at rest in the corner x, y, z near 0: a 0.25 x 0.5 x 0.25 m block
//             filling the depth of the box; n = 2 a^3 particles (3456,
//             35152, 101306, 297754, 500094), like Fluidanimate's sizes.
//   fluid     rest density rho0 = 1000 kg/m^3, kernel radius h = 2 s (about
//             33 neighbours), mass per particle such that the lattice's
//             interior density is exactly rho0 under W_poly6. Speed of sound
//             c = 15 m/s (about 5 x the largest velocity sqrt(2 g H) of the
//             dam's 0.5 m fall: density errors of a few per cent), pressure
//             p = c^2 (rho - rho0), at least 0; viscosity mu = 0.01 rho0 h c.
//   time      dt = 0.25 h / c (the acoustic CFL condition), so a step covers
//             the same fraction of a cell at every size.
//   walls     a spring-damper within s/2 of a wall: stiffness (c/h)^2, damping
//             c/h per unit mass (half the critical damping, stable at this dt).
#include "apps/sph/sph.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>

namespace cairn::apps::sph {

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::list: return "list";
    case Layout::array: return "array";
    case Layout::blocked: return "blocked";
  }
  return "?";
}

// ---------------------------------------------------------------- setup

Result<Setup> make_setup(const std::string& size_name) {
  struct Size {
    const char* name;
    std::size_t lattice;
    std::uint64_t iterations;
  };
  static constexpr Size kSizes[] = {
      {"test", 12, 40}, {"simsmall", 26, 50}, {"simmedium", 37, 30}, {"simlarge", 53, 15}, {"native", 63, 10}};
  const std::string want = size_name.empty() ? "simsmall" : size_name;
  const Size* size = nullptr;
  for (const Size& z : kSizes)
    if (want == z.name) size = &z;
  if (!size)
    return make_error(Errc::invalid_argument,
                      "--size '" + size_name +
                          "': sph takes test (3456 particles), simsmall (35K), simmedium (101K), simlarge (298K) "
                          "or native (500K)");
  Setup s{};
  s.size = want;
  const std::size_t a = size->lattice;
  s.lattice = a;
  s.particles = 2 * a * a * a;
  s.default_iterations = size->iterations;
  const double box[3] = {1.0, 0.75, 0.25};
  const double spacing = 0.25 / static_cast<double>(a), h = 2 * spacing;
  s.cell_count = 1;
  for (int d = 0; d < 3; ++d) {
    // Cells at least h (with a margin for float rounding): a neighbour within
    // h is then never more than one cell away.
    s.cells[d] = static_cast<std::size_t>(std::floor(box[d] / (h * 1.0001)));
    s.cell_count *= s.cells[d];
    s.box[d] = static_cast<float>(box[d]);
    s.cell_size[d] = static_cast<float>(box[d] / static_cast<double>(s.cells[d]));
    s.inv_cell_size[d] = static_cast<float>(static_cast<double>(s.cells[d]) / box[d]);
  }
  s.spacing = static_cast<float>(spacing);
  s.h = static_cast<float>(h);
  s.rho0 = 1000.0f;
  // sum over the lattice points within h of (h^2 - r^2)^3, the point itself included.
  double lattice_sum = 0;
  for (int i = -2; i <= 2; ++i)
    for (int j = -2; j <= 2; ++j)
      for (int k = -2; k <= 2; ++k) {
        const double r2 = (i * i + j * j + k * k) * spacing * spacing;
        if (r2 < h * h) lattice_sum += std::pow(h * h - r2, 3);
      }
  const double poly6 = 315.0 / (64.0 * std::numbers::pi * std::pow(h, 9));
  s.mass = static_cast<float>(1000.0 / (poly6 * lattice_sum));
  const double c = 15.0;
  s.stiffness = static_cast<float>(c * c);
  s.viscosity = static_cast<float>(0.01 * 1000.0 * h * c);
  s.gravity = 9.81f;
  s.dt = static_cast<float>(0.25 * h / c);
  s.wall_distance = static_cast<float>(spacing / 2);
  s.wall_stiffness = static_cast<float>((c / h) * (c / h));
  s.wall_damping = static_cast<float>(c / h);
  return s;
}

namespace {

// The cell of a position: per axis floor(p / side), clamped into the grid
// (NaN goes to cell 0; verification reports it).
std::uint32_t cell_of(const Setup& s, const float* p) {
  std::size_t idx[3];
  for (int d = 0; d < 3; ++d) {
    const float f = p[d] * s.inv_cell_size[d];
    const std::size_t n = s.cells[d];
    idx[d] = !(f > 0) ? 0 : f >= static_cast<float>(n) ? n - 1 : std::min(n - 1, static_cast<std::size_t>(f));
  }
  return static_cast<std::uint32_t>((idx[2] * s.cells[1] + idx[1]) * s.cells[0] + idx[0]);
}

// The up to 27 cells around c (c included) in ascending order.
int neighbour_cells(const Setup& s, std::size_t c, std::uint32_t* out) {
  const std::size_t nx = s.cells[0], ny = s.cells[1], nz = s.cells[2];
  const std::size_t x = c % nx, y = c / nx % ny, z = c / (nx * ny);
  int n = 0;
  for (std::size_t zz = z == 0 ? 0 : z - 1; zz <= std::min(z + 1, nz - 1); ++zz)
    for (std::size_t yy = y == 0 ? 0 : y - 1; yy <= std::min(y + 1, ny - 1); ++yy)
      for (std::size_t xx = x == 0 ? 0 : x - 1; xx <= std::min(x + 1, nx - 1); ++xx)
        out[n++] = static_cast<std::uint32_t>((zz * ny + yy) * nx + xx);
  return n;
}

// ---------------------------------------------------------------- kernels
//
// Templates over the store S, which provides for_cell(c, fn): fn(Particle&)
// on the particles of cell c in their order. Every layout runs the same
// instructions on the same values in the same order.

struct Constants {
  float h, h2, poly6, spiky, visc_lap, rmin;
  explicit Constants(const Setup& s) {
    const double radius = s.h;
    h = s.h;
    h2 = s.h * s.h;
    poly6 = static_cast<float>(315.0 / (64.0 * std::numbers::pi * std::pow(radius, 9)));
    spiky = static_cast<float>(45.0 / (std::numbers::pi * std::pow(radius, 6)));  // |grad W_spiky| / (h - r)^2
    visc_lap = spiky;                                                             // lap W_visc / (h - r)
    rmin = static_cast<float>(1e-6 * radius);
  }
};

float pressure(const Setup& s, float density) { return std::max(0.0f, s.stiffness * (density - s.rho0)); }

template <class S>
void compute_densities(S& store, const Setup& s, Team& team) {
  const Constants k(s);
  team.parallel_for(0, s.cell_count, [&](std::size_t lo, std::size_t hi) {
    std::uint32_t nb[27];
    for (std::size_t c = lo; c < hi; ++c) {
      const int nn = neighbour_cells(s, c, nb);
      store.for_cell(c, [&](Particle& pi) {
        float sum = 0;
        for (int q = 0; q < nn; ++q)
          store.for_cell(nb[q], [&](const Particle& pj) {
            const float dx = pi.p[0] - pj.p[0], dy = pi.p[1] - pj.p[1], dz = pi.p[2] - pj.p[2];
            const float r2 = dx * dx + dy * dy + dz * dz;
            if (r2 < k.h2) {
              const float d = k.h2 - r2;
              sum += pj.mass * (d * d * d);
            }
          });
        pi.density = sum * k.poly6;
      });
    }
  });
}

template <class S>
void compute_forces(S& store, const Setup& s, Team& team) {
  const Constants k(s);
  team.parallel_for(0, s.cell_count, [&](std::size_t lo, std::size_t hi) {
    std::uint32_t nb[27];
    for (std::size_t c = lo; c < hi; ++c) {
      const int nn = neighbour_cells(s, c, nb);
      store.for_cell(c, [&](Particle& pi) {
        const float pres_i = pressure(s, pi.density);
        float a[3] = {0, 0, 0};
        for (int q = 0; q < nn; ++q)
          store.for_cell(nb[q], [&](const Particle& pj) {
            if (&pj == &pi) return;
            const float d[3] = {pi.p[0] - pj.p[0], pi.p[1] - pj.p[1], pi.p[2] - pj.p[2]};
            const float r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            if (r2 >= k.h2) return;
            const float r = std::max(std::sqrt(r2), k.rmin);
            const float hr = k.h - r;
            const float m_rho = pj.mass / pj.density;
            // Pressure: -m_j (p_i + p_j) / (2 rho_j) grad W_spiky, pushing i away from j.
            const float fp = m_rho * 0.5f * (pres_i + pressure(s, pj.density)) * k.spiky * hr * hr / r;
            // Viscosity: mu m_j (v_j - v_i) / rho_j lap W_visc.
            const float fv = s.viscosity * m_rho * k.visc_lap * hr;
            for (int e = 0; e < 3; ++e) a[e] += fp * d[e] + fv * (pj.v[e] - pi.v[e]);
          });
        const float inv_rho = 1.0f / pi.density;
        for (int e = 0; e < 3; ++e) a[e] *= inv_rho;
        a[1] -= s.gravity;
        // Walls: spring-damper within wall_distance of each side of the box.
        for (int e = 0; e < 3; ++e) {
          const float below = s.wall_distance - pi.p[e];
          if (below > 0) a[e] += s.wall_stiffness * below - s.wall_damping * pi.v[e];
          const float above = s.wall_distance - (s.box[e] - pi.p[e]);
          if (above > 0) a[e] -= s.wall_stiffness * above + s.wall_damping * pi.v[e];
        }
        for (int e = 0; e < 3; ++e) pi.a[e] = a[e];
      });
    }
  });
}

// Leap-frog with half-step velocities; positions stay inside the box.
void advance(Particle& q, const Setup& s) {
  const float eps = 1e-3f * s.spacing;
  for (int e = 0; e < 3; ++e) {
    float hv = q.hv[e] + q.a[e] * s.dt;
    float x = q.p[e] + hv * s.dt;
    float v = 0.5f * (q.hv[e] + hv);
    if (x < eps) {
      x = eps;
      hv = std::max(hv, 0.0f);
      v = std::max(v, 0.0f);
    } else if (x > s.box[e] - eps) {
      x = s.box[e] - eps;
      hv = std::min(hv, 0.0f);
      v = std::min(v, 0.0f);
    }
    q.p[e] = x;
    q.hv[e] = hv;
    q.v[e] = v;
  }
}

// Per-thread histograms of a stable regrouping by cell: row t counts the
// keys of thread t's contiguous share; turned into the first destination of
// each (thread, cell), which depends only on the keys, not on the number of
// threads. Returns the particles per cell in `count`.
void histogram_to_offsets(std::vector<std::uint32_t>& hist, std::size_t threads, std::size_t cells,
                          std::uint32_t* count) {
  for (std::size_t c = 0; c < cells; ++c) {
    std::uint32_t in_cell = 0;
    for (std::size_t t = 0; t < threads; ++t) {
      const std::uint32_t h = hist[t * cells + c];
      hist[t * cells + c] = in_cell;
      in_cell += h;
    }
    count[c] = in_cell;
  }
}

}  // namespace

std::vector<Particle> initial_particles(const Setup& s) {
  std::vector<Particle> out;
  const std::size_t a = s.lattice;
  out.reserve(s.particles);
  for (std::size_t k = 0; k < a; ++k)
    for (std::size_t j = 0; j < 2 * a; ++j)
      for (std::size_t i = 0; i < a; ++i) {
        Particle q{};
        q.p[0] = (static_cast<float>(i) + 0.5f) * s.spacing;
        q.p[1] = (static_cast<float>(j) + 0.5f) * s.spacing;
        q.p[2] = (static_cast<float>(k) + 0.5f) * s.spacing;
        q.mass = s.mass;
        q.id = static_cast<std::uint32_t>(out.size());
        q.cell = cell_of(s, q.p);
        out.push_back(q);
      }
  return out;
}

// ---------------------------------------------------------------- stores

class SphApp::Store {
 public:
  explicit Store(const Setup& s) : s_(s) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual void declare(FieldSet& fields) = 0;
  // Fresh run: the particles in canonical order (sorted by cell).
  virtual void load(std::span<const Particle> canonical) = 0;
  virtual void step(Team& team) = 0;
  virtual void before_commit(Team& /*team*/) {}
  virtual void after_restore(Team& /*team*/) {}
  // Appends the particles in canonical order; returns how many are in a cell
  // other than their `cell`.
  virtual std::size_t collect(std::vector<Particle>& out) const = 0;
  virtual void visit(const std::function<void(Particle&)>& fn) = 0;
  // What is persisted, for describe().
  virtual std::string state() const = 0;

 protected:
  const Setup& s_;
  // Per-thread rows of cell counters, sized at the first step.
  std::vector<std::uint32_t> hist_;
};

namespace {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1 << 20));
  return buf;
}

// ---- list: Fluidanimate's per-cell linked lists of separately allocated nodes.
class ListStore final : public SphApp::Store {
 public:
  using Store::Store;

  void declare(FieldSet& fields) override { packed_ = fields.plain("particles", s_.particles * sizeof(Particle)); }

  void load(std::span<const Particle> canonical) override { build(canonical); }

  void step(Team& team) override {
    const std::size_t cells = s_.cell_count, nt = team.size();
    sub_head_.resize(nt * cells);
    sub_tail_.resize(nt * cells);
    hist_.resize(nt * cells);
    // 1. Each thread moves the nodes of its share of the cells, in cell order,
    //    to the ends of its own per-destination sub-lists.
    team.run([&](unsigned t, unsigned n_threads) {
      Node** head = &sub_head_[t * cells];
      Node** tail = &sub_tail_[t * cells];
      std::uint32_t* cnt = &hist_[t * cells];
      std::fill(head, head + cells, nullptr);
      std::fill(tail, tail + cells, nullptr);
      std::fill(cnt, cnt + cells, 0u);
      for (std::size_t c = cells * t / n_threads; c < cells * (t + 1) / n_threads; ++c) {
        for (Node* node = head_[c]; node;) {
          Node* next = node->next;
          const std::uint32_t key = cell_of(s_, node->q.p);
          node->q.cell = key;
          node->next = nullptr;
          (tail[key] ? tail[key]->next : head[key]) = node;
          tail[key] = node;
          ++cnt[key];
          node = next;
        }
      }
    });
    // 2. A cell's list is the sub-lists of threads 0, 1, ... joined: the
    //    order of (old cell, position), whatever the number of threads.
    team.parallel_for(0, cells, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c) {
        Node* first = nullptr;
        Node* last = nullptr;
        std::uint32_t n = 0;
        for (std::size_t t = 0; t < nt; ++t) {
          Node* h = sub_head_[t * cells + c];
          if (!h) continue;
          (last ? last->next : first) = h;
          last = sub_tail_[t * cells + c];
          n += hist_[t * cells + c];
        }
        head_[c] = first;
        count_[c] = n;
      }
    });
    compute_densities(*this, s_, team);
    compute_forces(*this, s_, team);
    team.parallel_for(0, cells, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c) for_cell(c, [&](Particle& q) { advance(q, s_); });
    });
  }

  // The walk of seed 001 §4.2: every node copied into the persisted field on
  // its own, cell by cell (threads take shares of the cells).
  void before_commit(Team& team) override {
    const std::size_t cells = s_.cell_count;
    first_.resize(cells + 1);
    first_[0] = 0;
    for (std::size_t c = 0; c < cells; ++c) first_[c + 1] = first_[c] + count_[c];
    Particle* out = packed_->data<Particle>();
    team.parallel_for(0, cells, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c) {
        std::size_t i = first_[c];
        for (const Node* node = head_[c]; node; node = node->next) out[i++] = node->q;
      }
    });
  }

  // The lists again, one new node per element of the restored field.
  void after_restore(Team& /*team*/) override {
    build(std::span<const Particle>(packed_->data<Particle>(), s_.particles));
  }

  std::size_t collect(std::vector<Particle>& out) const override {
    std::size_t misplaced = 0;
    for (std::size_t c = 0; c < s_.cell_count; ++c)
      for (const Node* node = head_[c]; node; node = node->next) {
        out.push_back(node->q);
        misplaced += node->q.cell != c;
      }
    return misplaced;
  }

  void visit(const std::function<void(Particle&)>& fn) override {
    for (std::size_t c = 0; c < s_.cell_count; ++c)
      for (Node* node = head_[c]; node; node = node->next) fn(node->q);
  }

  std::string state() const override {
    return "per-cell linked lists of " + std::to_string(sizeof(Node)) + "-byte nodes in DRAM, walked into " +
           mib(static_cast<double>(s_.particles * sizeof(Particle))) + " of state at each commit";
  }

  template <class F>
  void for_cell(std::size_t c, F&& fn) {
    for (Node* node = head_[c]; node; node = node->next) fn(node->q);
  }

 private:
  struct Node {
    Particle q;
    Node* next;
  };

  // Lists from particles in canonical order: each appended to its cell.
  void build(std::span<const Particle> canonical) {
    const std::size_t cells = s_.cell_count;
    nodes_.clear();
    nodes_.reserve(canonical.size());
    head_.assign(cells, nullptr);
    count_.assign(cells, 0);
    std::vector<Node*> tail(cells, nullptr);
    for (const Particle& q : canonical) {
      // A cell out of range (a damaged field) goes to the last cell, where
      // verification finds it misplaced.
      const std::size_t c = std::min<std::size_t>(q.cell, cells - 1);
      nodes_.push_back(std::make_unique<Node>(Node{q, nullptr}));
      Node* node = nodes_.back().get();
      (tail[c] ? tail[c]->next : head_[c]) = node;
      tail[c] = node;
      ++count_[c];
    }
  }

  Field* packed_ = nullptr;
  std::vector<std::unique_ptr<Node>> nodes_;  // ownership only; the lists are what the steps use
  std::vector<Node*> head_;
  std::vector<std::uint32_t> count_;
  std::vector<std::size_t> first_;
  std::vector<Node*> sub_head_, sub_tail_;
};

// ---- array: cells x kArrayCapacity slots, the state in place.
class ArrayStore final : public SphApp::Store {
 public:
  using Store::Store;

  void declare(FieldSet& fields) override {
    slots_ = fields.plain("slots", s_.cell_count * kArrayCapacity * sizeof(Particle));
    counts_ = fields.plain("counts", s_.cell_count * sizeof(std::uint32_t));
  }

  void load(std::span<const Particle> canonical) override {
    Particle* slots = slots_->data<Particle>();
    std::uint32_t* counts = counts_->data<std::uint32_t>();
    std::memset(static_cast<void*>(slots), 0, slots_->bytes());
    std::fill(counts, counts + s_.cell_count, 0u);
    for (const Particle& q : canonical) {
      if (counts[q.cell] == kArrayCapacity) overflow(q.cell, kArrayCapacity + 1);
      slots[q.cell * kArrayCapacity + counts[q.cell]++] = q;
    }
  }

  void step(Team& team) override {
    const std::size_t cells = s_.cell_count, nt = team.size(), n = s_.particles;
    Particle* slots = slots_->data<Particle>();
    std::uint32_t* counts = counts_->data<std::uint32_t>();
    stage_.resize(n);
    key_.resize(n);
    first_.resize(cells + 1);
    old_count_.assign(counts, counts + cells);
    hist_.resize(nt * cells);
    // 1. The particles, in canonical order, into a packed staging copy.
    first_[0] = 0;
    for (std::size_t c = 0; c < cells; ++c) first_[c + 1] = first_[c] + counts[c];
    team.parallel_for(0, cells, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c)
        std::copy(slots + c * kArrayCapacity, slots + c * kArrayCapacity + counts[c], stage_.data() + first_[c]);
    });
    // 2. A stable regrouping by new cell back into the slots.
    team.run([&](unsigned t, unsigned n_threads) {
      std::uint32_t* cnt = &hist_[t * cells];
      std::fill(cnt, cnt + cells, 0u);
      for (std::size_t i = n * t / n_threads; i < n * (t + 1) / n_threads; ++i)
        ++cnt[key_[i] = cell_of(s_, stage_[i].p)];
    });
    histogram_to_offsets(hist_, nt, cells, counts);
    for (std::size_t c = 0; c < cells; ++c)
      if (counts[c] > kArrayCapacity) overflow(c, counts[c]);
    team.run([&](unsigned t, unsigned n_threads) {
      std::uint32_t* rank = &hist_[t * cells];
      for (std::size_t i = n * t / n_threads; i < n * (t + 1) / n_threads; ++i) {
        Particle& q = slots[key_[i] * kArrayCapacity + rank[key_[i]]++];
        q = stage_[i];
        q.cell = key_[i];
      }
    });
    // Slots a cell no longer uses are cleared: the field is a function of the
    // particles alone.
    team.parallel_for(0, cells, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c)
        if (counts[c] < old_count_[c])
          std::memset(static_cast<void*>(slots + c * kArrayCapacity + counts[c]), 0,
                      (old_count_[c] - counts[c]) * sizeof(Particle));
    });
    bind();
    compute_densities(*this, s_, team);
    compute_forces(*this, s_, team);
    team.parallel_for(0, cells, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c) for_cell(c, [&](Particle& q) { advance(q, s_); });
    });
  }

  std::size_t collect(std::vector<Particle>& out) const override {
    const Particle* slots = slots_->data<Particle>();
    const std::uint32_t* counts = counts_->data<std::uint32_t>();
    std::size_t misplaced = 0;
    for (std::size_t c = 0; c < s_.cell_count; ++c)
      for (std::size_t j = 0; j < std::min<std::size_t>(counts[c], kArrayCapacity); ++j) {
        out.push_back(slots[c * kArrayCapacity + j]);
        misplaced += out.back().cell != c;
      }
    return misplaced;
  }

  void visit(const std::function<void(Particle&)>& fn) override {
    Particle* slots = slots_->data<Particle>();
    const std::uint32_t* counts = counts_->data<std::uint32_t>();
    for (std::size_t c = 0; c < s_.cell_count; ++c)
      for (std::size_t j = 0; j < std::min<std::size_t>(counts[c], kArrayCapacity); ++j)
        fn(slots[c * kArrayCapacity + j]);
  }

  std::string state() const override {
    const std::size_t bytes = s_.cell_count * (kArrayCapacity * sizeof(Particle) + sizeof(std::uint32_t));
    return std::to_string(s_.cell_count) + " cells x " + std::to_string(kArrayCapacity) + " slots, " +
           mib(static_cast<double>(bytes)) + " of state (" + mib(static_cast<double>(s_.particles * sizeof(Particle))) +
           " in use)";
  }

  template <class F>
  void for_cell(std::size_t c, F&& fn) {
    Particle* q = slots_now_ + c * kArrayCapacity;
    for (std::uint32_t j = 0, n = counts_now_[c]; j < n; ++j) fn(q[j]);
  }

 private:
  void bind() {
    slots_now_ = slots_->data<Particle>();
    counts_now_ = counts_->data<std::uint32_t>();
  }
  [[noreturn]] void overflow(std::size_t cell, std::size_t n) const {
    std::fprintf(stderr,
                 "sph: --layout array: cell %zu would hold %zu particles, more than its fixed capacity of %zu; "
                 "run with --layout blocked or list\n",
                 cell, n, kArrayCapacity);
    std::exit(2);
  }

  Field* slots_ = nullptr;
  Field* counts_ = nullptr;
  Particle* slots_now_ = nullptr;
  const std::uint32_t* counts_now_ = nullptr;
  std::vector<Particle> stage_;
  std::vector<std::uint32_t> key_, old_count_;
  std::vector<std::size_t> first_;
};

// ---- blocked: the particles packed in cell order, one dual field per 2 MB chunk.
class BlockedStore final : public SphApp::Store {
 public:
  using Store::Store;
  static constexpr unsigned kShift = 15;
  static_assert(kChunkParticles == std::size_t{1} << kShift);
  static constexpr std::size_t kMask = kChunkParticles - 1;

  void declare(FieldSet& fields) override {
    for (std::size_t first = 0, k = 0; first < s_.particles; first += kChunkParticles, ++k)
      chunks_.push_back(fields.dual("particles." + std::to_string(k),
                                    std::min(kChunkParticles, s_.particles - first) * sizeof(Particle)));
  }

  void load(std::span<const Particle> canonical) override {
    for (std::size_t k = 0; k < chunks_.size(); ++k)
      std::copy_n(canonical.begin() + static_cast<std::ptrdiff_t>(k * kChunkParticles), chunks_[k]->count<Particle>(),
                  chunks_[k]->initial<Particle>());
  }

  void step(Team& team) override {
    const std::size_t cells = s_.cell_count, nt = team.size(), n = s_.particles;
    in_.resize(chunks_.size());
    out_.resize(chunks_.size());
    for (std::size_t k = 0; k < chunks_.size(); ++k) {
      in_[k] = chunks_[k]->in<Particle>();
      out_[k] = chunks_[k]->out<Particle>();
    }
    key_.resize(n);
    count_.resize(cells);
    first_.resize(cells + 1);
    hist_.resize(nt * cells);
    // 1. A stable regrouping by new cell from the read version into the
    //    written one (every element of it is written).
    team.run([&](unsigned t, unsigned n_threads) {
      std::uint32_t* cnt = &hist_[t * cells];
      std::fill(cnt, cnt + cells, 0u);
      for (std::size_t i = n * t / n_threads; i < n * (t + 1) / n_threads; ++i) ++cnt[key_[i] = cell_of(s_, in(i).p)];
    });
    std::vector<std::uint32_t>& rank = hist_;
    histogram_to_offsets(rank, nt, cells, count_.data());
    first_[0] = 0;
    for (std::size_t c = 0; c < cells; ++c) first_[c + 1] = first_[c] + count_[c];
    team.run([&](unsigned t, unsigned n_threads) {
      std::uint32_t* r = &rank[t * cells];
      for (std::size_t i = n * t / n_threads; i < n * (t + 1) / n_threads; ++i) {
        const std::uint32_t key = key_[i];
        Particle& q = out(first_[key] + r[key]++);
        q = in(i);
        q.cell = key;
      }
    });
    compute_densities(*this, s_, team);
    compute_forces(*this, s_, team);
    // 2. Advance chunk by chunk; each is done when advanced, and in-place
    //    persistence starts flushing it while the next one is computed.
    for (std::size_t k = 0; k < chunks_.size(); ++k) {
      Particle* chunk = out_[k];
      team.parallel_for(0, chunks_[k]->count<Particle>(), [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) advance(chunk[i], s_);
      });
      chunks_[k]->done_writing();
    }
  }

  std::size_t collect(std::vector<Particle>& out) const override {
    for (const Field* f : chunks_) out.insert(out.end(), f->in<Particle>(), f->in<Particle>() + f->count<Particle>());
    return 0;  // the order is the cell assignment: judge() checks it
  }

  void visit(const std::function<void(Particle&)>& fn) override {
    for (const Field* f : chunks_) {
      auto* q = const_cast<Particle*>(f->in<Particle>());
      for (std::size_t i = 0; i < f->count<Particle>(); ++i) fn(q[i]);
    }
  }

  std::string state() const override {
    return std::to_string((s_.particles + kChunkParticles - 1) / kChunkParticles) + " chunks of at most 2 MiB, " +
           mib(static_cast<double>(s_.particles * sizeof(Particle))) + " of state";
  }

  template <class F>
  void for_cell(std::size_t c, F&& fn) {
    for (std::size_t i = first_[c], end = first_[c + 1]; i < end; ++i) fn(out(i));
  }

 private:
  const Particle& in(std::size_t i) const { return in_[i >> kShift][i & kMask]; }
  Particle& out(std::size_t i) const { return out_[i >> kShift][i & kMask]; }

  std::vector<Field*> chunks_;
  std::vector<const Particle*> in_;
  std::vector<Particle*> out_;
  std::vector<std::uint32_t> key_, count_;
  std::vector<std::size_t> first_;
};

}  // namespace

// ---------------------------------------------------------------- the app

SphApp::SphApp(Layout layout) : layout_(layout), layout_option_(layout_name(layout)) {}
SphApp::~SphApp() = default;

void SphApp::add_options(CLI::App& cli) {
  cli.add_option("--layout", layout_option_,
                 "Particle store: list (per-cell linked lists, walked at each commit), array (fixed capacity per "
                 "cell, persisted whole) or blocked (packed in 2 MB chunks; default)")
      ->check(CLI::IsMember({"list", "array", "blocked"}));
}

Result<void> SphApp::configure(const RunOptions& options) {
  if (layout_option_ == "list") {
    layout_ = Layout::list;
  } else if (layout_option_ == "array") {
    layout_ = Layout::array;
  } else if (layout_option_ == "blocked") {
    layout_ = Layout::blocked;
  } else {
    return make_error(Errc::invalid_argument, "--layout '" + layout_option_ + "': use list, array or blocked");
  }
  auto s = make_setup(options.size);
  if (!s.ok()) return s.error();
  setup_ = *s;
  switch (layout_) {
    case Layout::list: store_ = std::make_unique<ListStore>(setup_); break;
    case Layout::array: store_ = std::make_unique<ArrayStore>(setup_); break;
    case Layout::blocked: store_ = std::make_unique<BlockedStore>(setup_); break;
  }
  return {};
}

std::string SphApp::describe() const {
  const Setup& s = setup_;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%zu particles (%s: a %zux%zux%zu dam break in a 1 x 0.75 x 0.25 m box), %zux%zux%zu cells, "
                "h %.1f mm, dt %.3f ms; layout %s: ",
                s.particles, s.size.c_str(), s.lattice, 2 * s.lattice, s.lattice, s.cells[0], s.cells[1], s.cells[2],
                static_cast<double>(s.h) * 1e3, static_cast<double>(s.dt) * 1e3, layout_name(layout_));
  return buf + (store_ ? store_->state() : std::string());
}

void SphApp::declare(FieldSet& fields) { store_->declare(fields); }

void SphApp::initialize(Team& /*team*/) {
  std::vector<Particle> q = initial_particles(setup_);
  std::stable_sort(q.begin(), q.end(), [](const Particle& x, const Particle& y) { return x.cell < y.cell; });
  store_->load(q);
}

void SphApp::step(std::uint64_t /*iteration*/, Team& team) {
  const auto t0 = std::chrono::steady_clock::now();
  store_->step(team);
  step_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++steps_;
}

void SphApp::before_commit(Team& team) {
  const auto t0 = std::chrono::steady_clock::now();
  store_->before_commit(team);
  walk_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++walks_;
}

void SphApp::after_restore(Team& team) {
  const auto t0 = std::chrono::steady_clock::now();
  store_->after_restore(team);
  rebuild_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<Particle> SphApp::snapshot(std::size_t* misplaced) const {
  std::vector<Particle> out;
  out.reserve(setup_.particles);
  const std::size_t m = store_->collect(out);
  if (misplaced) *misplaced = m;
  return out;
}

void SphApp::visit(const std::function<void(Particle&)>& fn) { store_->visit(fn); }

namespace {

struct Moments {
  double mass = 0, my = 0, kinetic = 0, potential = 0;
};
Moments moments(std::span<const Particle> q, double gravity) {
  Moments m;
  for (const Particle& p : q) {
    const double mass = p.mass, y = p.p[1];
    double v2 = 0;
    for (int e = 0; e < 3; ++e) v2 += static_cast<double>(p.v[e]) * p.v[e];
    m.mass += mass;
    m.my += mass * y;
    m.kinetic += 0.5 * mass * v2;
    m.potential += mass * gravity * y;
  }
  return m;
}

}  // namespace

std::string SphApp::progress_note(Team& /*team*/) {
  const auto q = snapshot();
  const Moments m = moments(q, setup_.gravity);
  char buf[96];
  std::snprintf(buf, sizeof buf, "centre of mass at y = %.4f m, kinetic energy %.4f J", m.my / m.mass, m.kinetic);
  return buf;
}

// The checks, each able to fail:
//   conservation  exactly n particles with the ids 0..n-1 once each, and a
//                 total mass of exactly n m (a sum of equal floats in double:
//                 exact for any order, n < 2^29);
//   sanity        every value finite, every position inside the box, the
//                 particles in ascending cell order and each in its cell;
//   physics       the dam collapses: the centre of mass must be lower than at
//                 the start (for N >= 1; by more than 1e-9 of its height), and the mechanical energy E = KE +
//                 m g y must not grow: pressure, walls and viscosity only
//                 store or dissipate it. Quantity: (E_N - E_0) / E_0; the
//                 tolerance 1e-4 covers the float arithmetic and the leap-frog
//                 start (the first half step starts from rest: + g^2 dt^2 / 2
//                 per unit mass, ~1e-7 of E_0).
Verification SphApp::judge(std::span<const Particle> q, std::size_t misplaced, std::uint64_t iterations) const {
  const Setup& s = setup_;
  Verification v;
  v.quantity = "energy gain (E - E0) / E0";
  v.tolerance = 1e-4;
  std::string problems;
  auto problem = [&](const std::string& what) {
    if (problems.empty()) problems = what;
  };
  if (q.size() != s.particles)
    problem(std::to_string(q.size()) + " particles instead of " + std::to_string(s.particles));
  std::vector<bool> seen(s.particles);
  std::size_t bad_ids = 0, not_finite = 0, outside = 0, unsorted = 0, run = 0, fullest = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    const Particle& p = q[i];
    run = i > 0 && p.cell == q[i - 1].cell ? run + 1 : 1;
    fullest = std::max(fullest, run);
    if (p.id >= s.particles || seen[p.id])
      ++bad_ids;
    else
      seen[p.id] = true;
    float f[14];  // the floats of a particle: p, hv, v, a, density, mass
    std::memcpy(f, &p, sizeof f);
    for (const float x : f) not_finite += !std::isfinite(x);
    for (int e = 0; e < 3; ++e) outside += !(p.p[e] >= 0.0f && p.p[e] <= s.box[e]);
    unsorted += p.cell >= s.cell_count || (i > 0 && p.cell < q[i - 1].cell);
  }
  if (bad_ids) problem(std::to_string(bad_ids) + " particles with a duplicate or unknown id");
  if (not_finite) problem(std::to_string(not_finite) + " values not finite");
  if (outside) problem(std::to_string(outside) + " coordinates outside the box");
  if (unsorted || misplaced)
    problem(std::to_string(unsorted + misplaced) + " particles out of cell order or in the wrong cell");
  const Moments m = moments(q, s.gravity);
  const double want_mass = static_cast<double>(s.particles) * static_cast<double>(s.mass);
  if (m.mass != want_mass) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "total mass %.17g kg instead of %.17g kg", m.mass, want_mass);
    problem(buf);
  }
  const Moments m0 = moments(initial_particles(s), s.gravity);
  const double e0 = m0.potential, e = m.kinetic + m.potential;
  const double y0 = m0.my / m0.mass, y = m.my / m.mass;
  v.value = (e - e0) / e0;
  // Lower by more than 1e-9 of its height: the sums' rounding (another order
  // than the initial state's) is ~1e-13, one step's fall g dt^2 is ~1e-6.
  if (iterations > 0 && !(y0 - y > 1e-9 * y0)) problem("the centre of mass did not drop");
  v.passed = problems.empty() && v.value <= v.tolerance;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%zu particles, mass %.6g kg; centre of mass y %.4f -> %.4f m (%.2f mm lower), kinetic energy %.4g J; "
                "at most %zu particles in a cell",
                q.size(), m.mass, y0, y, (y0 - y) * 1e3, m.kinetic, fullest);
  v.detail = problems.empty() ? std::string(buf) : problems + "; " + buf;
  return v;
}

Verification SphApp::verify(std::uint64_t iterations, Team& /*team*/) {
  std::size_t misplaced = 0;
  const auto q = snapshot(&misplaced);
  Verification v = judge(q, misplaced, iterations);
  char buf[96];
  if (steps_) {
    std::snprintf(buf, sizeof buf, "; frame %.3f ms (mean of %llu steps)",
                  step_seconds_ * 1e3 / static_cast<double>(steps_), static_cast<unsigned long long>(steps_));
    v.detail += buf;
  }
  if (layout_ == Layout::list && walks_) {
    std::snprintf(buf, sizeof buf, "; list walked into the field in %.3f ms (mean of %llu)",
                  walk_seconds_ * 1e3 / static_cast<double>(walks_), static_cast<unsigned long long>(walks_));
    v.detail += buf;
  }
  if (layout_ == Layout::list && rebuild_seconds_ > 0) {
    std::snprintf(buf, sizeof buf, "; lists rebuilt after the restore in %.3f ms", rebuild_seconds_ * 1e3);
    v.detail += buf;
  }
  return v;
}

}  // namespace cairn::apps::sph
