// amr.cpp — the adaptive interface simulation (amr.hpp): initial sphere,
// upwind transport on the leaves, adaptation, persistence and restart.
#include "apps/amr/amr.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numbers>
#include <unordered_map>
#include <vector>

namespace cairn::apps::amr {
namespace {

using octree::Octant;
using octree::Octree;
using Clock = std::chrono::steady_clock;

constexpr double kPi = std::numbers::pi;
constexpr double kRadius = 0.15, kCentre = 0.35;
constexpr double kEps =
    1e-3;  // a fraction this close to 0 or 1 counts as pure fluid or pure void (upwind smears the rest)

double scale() { return 1.0 / octree::kRootLength; }
double edge(const Octant& o) { return o.length() * scale(); }
double volume(const Octant& o) { return std::pow(edge(o), 3); }

double read_c(const std::byte* d) {
  double c;
  std::memcpy(&c, d, sizeof c);
  return c;
}
void write_c(std::byte* d, double c) { std::memcpy(d, &c, sizeof c); }

// The time-reversing deformation field (LeVeque 1996; Enright et al. 2002).
double velocity(int axis, double x, double y, double z, double t, double period) {
  const double r = std::cos(kPi * t / period);
  const double sx = std::sin(kPi * x), sy = std::sin(kPi * y), sz = std::sin(kPi * z);
  switch (axis) {
    case 0: return 2 * sx * sx * std::sin(2 * kPi * y) * std::sin(2 * kPi * z) * r;
    case 1: return -std::sin(2 * kPi * x) * sy * sy * std::sin(2 * kPi * z) * r;
    default: return -std::sin(2 * kPi * x) * std::sin(2 * kPi * y) * sz * sz * r;
  }
}

// Distance from the sphere's centre to the octant's centre, and its half diagonal.
bool touches_surface(const Octant& o) {
  const double h = edge(o), half = 0.5 * std::sqrt(3.0) * h;
  const double dx = o.x * scale() + h / 2 - kCentre, dy = o.y * scale() + h / 2 - kCentre,
               dz = o.z * scale() + h / 2 - kCentre;
  const double d = std::sqrt(dx * dx + dy * dy + dz * dz);
  return std::fabs(d - kRadius) <= half;
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

// The leaves, their fractions and where each leaf is (by Morton position).
struct Leaves {
  std::vector<Octant> octant;
  std::vector<double> c;
  std::unordered_map<std::uint64_t, std::uint32_t> index;
};

Result<Leaves> gather(const Octree& t) {
  Leaves l;
  auto v = t.visit_leaves([&](const Octant& o, const std::byte* d) {
    l.index.emplace(octree::morton(o, 3), static_cast<std::uint32_t>(l.octant.size()));
    l.octant.push_back(o);
    l.c.push_back(read_c(d));
  });
  if (!v.ok()) return v.error();
  return l;
}

double fluid_volume(const Leaves& l) {
  double v = 0;
  for (std::size_t i = 0; i < l.c.size(); ++i) v += l.c[i] * volume(l.octant[i]);
  return v;
}

// One transport step: upwind fluxes across every face, then the new fractions.
Result<void> transport(Octree& tree, const Leaves& l, double t, double dt, double period) {
  std::vector<double> dv(l.c.size(), 0.0);
  bool missing = false;
  auto f = tree.visit_faces([&](const octree::LeafView& a, int axis, bool upper, const octree::LeafView* b) {
    if (b == nullptr) return;  // the walls: the field's normal component is 0 there
    const auto ia = l.index.find(octree::morton(a.octant, 3));
    const auto ib = l.index.find(octree::morton(b->octant, 3));
    if (ia == l.index.end() || ib == l.index.end()) {
      missing = true;
      return;
    }
    const Octant& o = a.octant;
    const double h = edge(o);
    const std::uint32_t lo[3] = {o.x, o.y, o.z};
    double p[3] = {o.x * scale() + h / 2, o.y * scale() + h / 2, o.z * scale() + h / 2};
    p[axis] = lo[axis] * scale() + (upper ? h : 0.0);
    const double un = velocity(axis, p[0], p[1], p[2], t + dt / 2, period) * (upper ? 1.0 : -1.0);
    const double up = un > 0 ? l.c[ia->second] : l.c[ib->second];
    const double flux = un * h * h * dt * up;  // volume leaving a through its face
    dv[ia->second] -= flux;
    dv[ib->second] += flux;
  });
  if (!f.ok()) return f.error();
  if (missing) return make_error(Errc::corrupted, "a face names a leaf the traversal did not see");
  std::size_t i = 0;
  return tree.update_leaves([&](const Octant& o, std::byte* d) {
    const double c = l.c[i] + dv[i] / volume(o);
    ++i;
    if (dv[i - 1] == 0.0) return false;  // unchanged: its block stays shared
    write_c(d, c);
    return true;
  });
}

Result<void> adapt(Octree& tree, int level_min, int level_max) {
  const Octree::InitFn copy = [](const Octant&, std::byte* d, const std::byte* parent) {
    write_c(d, parent != nullptr ? read_c(parent) : 0.0);
  };
  auto r = tree.refine(
      false,
      [&](const Octant& o, const std::byte* d) {
        const double c = read_c(d);
        return o.level < level_max && c > kEps && c < 1 - kEps;
      },
      copy, level_max);
  if (!r.ok()) return r;
  r = tree.coarsen(
      false,
      [&](const Octant& p, std::span<const octree::LeafView> fam) {
        if (p.level < level_min) return false;
        bool empty = true, full = true;
        for (const auto& k : fam) {
          const double c = read_c(k.data);
          empty = empty && c <= kEps;
          full = full && c >= 1 - kEps;
        }
        return empty || full;
      },
      [](const Octant&, std::byte* d, std::span<const octree::LeafView> fam) {
        double s = 0;
        for (const auto& k : fam) s += read_c(k.data);
        write_c(d, s / static_cast<double>(fam.size()));
      });
  if (!r.ok()) return r;
  return tree.balance(octree::Connect::face, copy);
}

Result<std::unique_ptr<Octree>> initial(const Config& c) {
  std::error_code ec;
  std::filesystem::remove(c.pool, ec);
  octree::Options o;
  o.dims = 3;
  o.data_size = sizeof(double);
  o.pool_size = c.pool_size;
  auto t = Octree::create(c.pool, o);
  if (!t.ok()) return t.error();
  Octree& tree = *t.value();
  if (auto r = tree.uniform(c.level_min, nullptr); !r.ok()) return r.error();
  if (auto r = tree.refine(
          true, [&](const Octant& q, const std::byte*) { return touches_surface(q); }, nullptr, c.level_max);
      !r.ok())
    return r.error();
  if (auto r = tree.balance(octree::Connect::face, nullptr); !r.ok()) return r.error();
  if (auto r = tree.update_leaves([](const Octant& q, std::byte* d) {
        write_c(d, sphere_fraction(q));
        return true;
      });
      !r.ok())
    return r.error();
  if (auto r = store_step(tree, 0); !r.ok()) return r.error();
  if (auto r = tree.persist(); !r.ok()) return r.error();
  return std::move(t.value());
}

double initial_volume(const Octant& o, int level_max) {
  if (!touches_surface(o) || o.level == level_max) return sphere_fraction(o) * volume(o);
  double v = 0;
  for (int k = 0; k < 8; ++k) v += initial_volume(octree::child_of(o, k), level_max);
  return v;
}

}  // namespace

double sphere_fraction(const Octant& o) {
  const double h = edge(o), half = 0.5 * std::sqrt(3.0) * h;
  const double cx = o.x * scale() + h / 2 - kCentre, cy = o.y * scale() + h / 2 - kCentre,
               cz = o.z * scale() + h / 2 - kCentre;
  const double d = std::sqrt(cx * cx + cy * cy + cz * cz);
  if (d + half <= kRadius) return 1.0;
  if (d - half >= kRadius) return 0.0;
  // Cut by the surface: the fraction of 8^3 sample points inside.
  constexpr int n = 8;
  int inside = 0;
  for (int k = 0; k < n; ++k)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        const double x = o.x * scale() + (i + 0.5) * h / n - kCentre, y = o.y * scale() + (j + 0.5) * h / n - kCentre,
                     z = o.z * scale() + (k + 0.5) * h / n - kCentre;
        inside += x * x + y * y + z * z <= kRadius * kRadius ? 1 : 0;
      }
  return static_cast<double>(inside) / (n * n * n);
}

Result<Report> run(const Config& c) {
  if (c.level_min < 1 || c.level_min > c.level_max || c.level_max > 12)
    return make_error(Errc::invalid_argument, "levels must satisfy 1 <= level-min <= size <= 12");
  if (!(c.period > 0) || !(c.cfl > 0 && c.cfl <= 0.5) || c.persist_every == 0)
    return make_error(Errc::invalid_argument, "period > 0, 0 < cfl <= 0.5 and persist-every >= 1 are required");
  const auto t0 = Clock::now();
  Report rep;
  // Steps land exactly on T: dt = T / ceil(T / (cfl h_min / max|u|)), max|u| <= 2.
  const double h_min = 1.0 / static_cast<double>(1u << c.level_max);
  const std::uint64_t steps = static_cast<std::uint64_t>(std::ceil(c.period / (c.cfl * h_min / 2.0)));
  const double dt = c.period / static_cast<double>(steps);
  rep.dt = dt;
  rep.steps = steps;

  std::unique_ptr<Octree> tree;
  if (c.resume) {
    octree::Options o;
    o.dims = 3;
    o.data_size = sizeof(double);
    auto t = Octree::restore(c.pool, o);
    if (!t.ok()) return t.error();
    tree = std::move(t.value());
  } else {
    auto t = initial(c);
    if (!t.ok()) return t.error();
    tree = std::move(t.value());
  }
  // The sphere's volume as the initial mesh holds it, the reference for
  // conservation: every leaf the surface cuts is at the finest level there,
  // every other leaf is pure, so a descent of the cut octants gives it
  // without the tree (a resumed run has another mesh).
  rep.volume0 = initial_volume(Octant{}, c.level_max);
  rep.first_step = load_step(*tree);
  if (rep.first_step > steps)
    return make_error(Errc::layout_mismatch, c.pool + " holds step " + std::to_string(rep.first_step) +
                                                 " of a run with more steps than this one (" + std::to_string(steps) +
                                                 "): resume with the same --size, --period and --cfl");

  for (std::uint64_t s = rep.first_step; s < steps; ++s) {
    if (c.crash_at >= 0 && static_cast<std::uint64_t>(c.crash_at) == s) {
      std::fprintf(stderr, "amr: --crash-at %lld: SIGKILL at the start of step %llu\n",
                   static_cast<long long>(c.crash_at), static_cast<unsigned long long>(s));
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
    auto l = gather(*tree);
    if (!l.ok()) return l.error();
    if (auto r = transport(*tree, l.value(), static_cast<double>(s) * dt, dt, c.period); !r.ok()) return r.error();
    if (auto r = adapt(*tree, c.level_min, c.level_max); !r.ok()) return r.error();
    if (auto r = store_step(*tree, s + 1); !r.ok()) return r.error();
    if (!c.vtk_dir.empty() && c.vtk_every > 0 && (s + 1) % c.vtk_every == 0) {
      char name[64];
      std::snprintf(name, sizeof name, "/amr_%06llu.vtu", static_cast<unsigned long long>(s + 1));
      auto w = tree->write_vtk(c.vtk_dir + name,
                               {{"fraction", [](const Octant&, const std::byte* d) { return read_c(d); }}});
      if (!w.ok()) return w.error();
    }
    if ((s + 1) % c.persist_every == 0 || s + 1 == steps) {
      auto st = tree->stats();
      if (!st.ok()) return st.error();
      if (st.value().version_bytes > 0) {
        const double overlap =
            static_cast<double>(st.value().shared_bytes) / static_cast<double>(st.value().version_bytes);
        rep.overlap_min = std::min(rep.overlap_min, overlap);
        rep.overlap_max = std::max(rep.overlap_max, overlap);
      }
      const auto p0 = Clock::now();
      auto ps = tree->persist();
      if (!ps.ok()) return ps.error();
      rep.persist_seconds += std::chrono::duration<double>(Clock::now() - p0).count();
      rep.blocks_persisted += ps.value().blocks_written;
    }
  }
  auto l = gather(*tree);
  if (!l.ok()) return l.error();
  rep.leaves = l.value().c.size();
  rep.volume = fluid_volume(l.value());
  for (std::size_t i = 0; i < l.value().c.size(); ++i)
    rep.shape_error += std::fabs(l.value().c[i] - sphere_fraction(l.value().octant[i])) * volume(l.value().octant[i]);
  auto sum = tree->checksum();
  if (!sum.ok()) return sum.error();
  rep.checksum = sum.value();
  rep.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return rep;
}

}  // namespace cairn::apps::amr
