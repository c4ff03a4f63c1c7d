// amr.cpp — the adaptive interface simulation (amr.hpp): initial sphere,
// upwind transport on the leaves, adaptation, persistence and restart.
#include "apps/amr/amr.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numbers>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "apps/amr/snapshot.hpp"
#include "util/io.hpp"

namespace cairn::apps::amr {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::pm_octree: return "pm-octree";
    case Backend::in_core: return "in-core";
    case Backend::lmdb: return "lmdb";
  }
  return "?";
}

namespace model {

using octree::Octant;
constexpr double kPi = std::numbers::pi;
constexpr double kRadius = 0.15, kCentre = 0.35;
double scale() { return 1.0 / octree::kRootLength; }

double edge(const Octant& o) { return o.length() * scale(); }
double volume(const Octant& o) { return std::pow(edge(o), 3); }

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

double face_flux(const Octant& o, int axis, bool upper, double ca, double cb, double t, double dt, double period) {
  const double h = edge(o);
  const std::uint32_t lo[3] = {o.x, o.y, o.z};
  double p[3] = {o.x * scale() + h / 2, o.y * scale() + h / 2, o.z * scale() + h / 2};
  p[axis] = lo[axis] * scale() + (upper ? h : 0.0);
  const double un = velocity(axis, p[0], p[1], p[2], t + dt / 2, period) * (upper ? 1.0 : -1.0);
  // Upwind values below kTiny carry nothing: without this cut-off the
  // scheme's numerical diffusion would spread ever smaller values (down to
  // 1e-300) a cell further every step, until every leaf of the domain
  // changed at every step. A flux is still taken from one leaf and given to
  // the other, so the volume stays conserved to rounding.
  const double up = un > 0 ? ca : cb;
  return up < kTiny ? 0.0 : un * h * h * dt * up;
}

// Distance from the sphere's centre to the octant's centre, and its half diagonal.
bool touches_surface(const Octant& o) {
  const double h = edge(o), half = 0.5 * std::sqrt(3.0) * h;
  const double dx = o.x * scale() + h / 2 - kCentre, dy = o.y * scale() + h / 2 - kCentre,
               dz = o.z * scale() + h / 2 - kCentre;
  const double d = std::sqrt(dx * dx + dy * dy + dz * dz);
  return std::fabs(d - kRadius) <= half;
}

bool refine_wanted(const Octant& o, double c, int level_max) { return o.level < level_max && c > kEps && c < 1 - kEps; }

bool coarsen_wanted(const Octant& parent, const double* children, int fan, int level_min) {
  if (parent.level < level_min) return false;
  bool empty = true, full = true;
  for (int k = 0; k < fan; ++k) {
    empty = empty && children[k] <= kEps;
    full = full && children[k] >= 1 - kEps;
  }
  return empty || full;
}

void Checksum::add(const Octant& o, double c) {
  std::uint64_t bits;
  std::memcpy(&bits, &c, sizeof bits);
  for (std::uint64_t v : {octree::morton(o, 3), bits}) {
    std::uint64_t z = v + 0x9E3779B97F4A7C15ull + h;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    h = z ^ (z >> 31);
  }
}

double read_c(const std::byte* d) {
  double c;
  std::memcpy(&c, d, sizeof c);
  return c;
}
void write_c(std::byte* d, double c) { std::memcpy(d, &c, sizeof c); }

std::uint64_t load_step(const octree::Octree& t) {
  std::uint64_t s;
  std::memcpy(&s, t.root_data(), sizeof s);
  return s;
}

Result<void> store_step(octree::Octree& t, std::uint64_t step) {
  return t.update_root([&](const Octant&, std::byte* d) {
    std::memcpy(d, &step, sizeof step);
    return true;
  });
}

void inherit(const Octant&, std::byte* d, const std::byte* parent) {
  write_c(d, parent != nullptr ? read_c(parent) : 0.0);
}

bool family_coarsens(const Octant& parent, std::span<const octree::LeafView> family, int level_min) {
  double c[8];
  for (std::size_t k = 0; k < family.size(); ++k) c[k] = read_c(family[k].data);
  return coarsen_wanted(parent, c, static_cast<int>(family.size()), level_min);
}

void merge_mean(const Octant&, std::byte* d, std::span<const octree::LeafView> family) {
  double s = 0;
  for (const auto& k : family) s += read_c(k.data);
  write_c(d, s / static_cast<double>(family.size()));
}

}  // namespace model

using namespace model;

namespace {

using octree::Octant;
using octree::Octree;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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
    const double flux = face_flux(a.octant, axis, upper, l.c[ia->second], l.c[ib->second], t, dt, period);
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
  auto r = tree.refine(
      false, [&](const Octant& o, const std::byte* d) { return refine_wanted(o, read_c(d), level_max); }, inherit,
      level_max);
  if (!r.ok()) return r;
  r = tree.coarsen(
      false, [&](const Octant& p, std::span<const octree::LeafView> fam) { return family_coarsens(p, fam, level_min); },
      merge_mean);
  if (!r.ok()) return r;
  return tree.balance(octree::Connect::face, inherit);
}

octree::Options tree_options(const Config& c) {
  octree::Options o;
  o.dims = 3;
  o.data_size = sizeof(double);
  // in-core: the scratch pool holds the root block alone.
  o.pool_size = c.backend == Backend::in_core ? std::min<std::uint64_t>(c.pool_size, 16u << 20) : c.pool_size;
  o.device = c.device;
  // in-core: every block in DRAM, nothing ever merged into the pool.
  o.dram_budget = c.backend == Backend::in_core ? ~0ull : c.dram_budget;
  return o;
}

Result<std::unique_ptr<Octree>> fresh_tree(const Config& c) {
  std::error_code ec;
  std::filesystem::remove(c.pool, ec);
  return Octree::create(c.pool, tree_options(c));
}

Result<std::unique_ptr<Octree>> initial(const Config& c) {
  auto t = fresh_tree(c);
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
  if (c.backend == Backend::pm_octree)
    if (auto r = tree.persist(); !r.ok()) return r.error();
  return std::move(t.value());
}

double initial_volume(const Octant& o, int level_max) {
  if (!touches_surface(o) || o.level == level_max) return sphere_fraction(o) * volume(o);
  double v = 0;
  for (int k = 0; k < 8; ++k) v += initial_volume(octree::child_of(o, k), level_max);
  return v;
}

// ---- in-core snapshots (snapshot.hpp)

std::string snapshot_path(const Config& c) { return c.pool + ".snapshot"; }

// Written atomically (util::write_file_atomically: the file strategy's protocol).
Result<std::uint64_t> write_snapshot(const Config& c, std::uint64_t step, const Octree& tree) {
  auto buf = encode_snapshot(step, tree);
  if (!buf.ok()) return buf.error();
  util::AtomicFileOptions o;
  o.what = "the snapshot of step " + std::to_string(step);
  o.mode = 0600;
  if (auto r = util::write_file_atomically(snapshot_path(c), std::as_bytes(std::span(buf.value())), o); !r.ok())
    return r.error();
  return static_cast<std::uint64_t>(buf.value().size());
}

// Reads the snapshot and rebuilds the in-core tree from its leaves.
Result<std::unique_ptr<Octree>> read_snapshot(const Config& c) {
  const std::string path = snapshot_path(c);
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(Errc::not_found, path + ": no snapshot to resume from (the run never wrote one)");
  const std::vector<unsigned char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto t = fresh_tree(c);
  if (!t.ok()) return t.error();
  auto step = decode_snapshot(buf, path, c.level_max, *t.value());
  if (!step.ok()) return step.error();
  if (auto r = store_step(*t.value(), step.value()); !r.ok()) return r.error();
  return std::move(t.value());
}

Result<std::unique_ptr<Octree>> resume_tree(const Config& c) {
  if (c.backend == Backend::in_core) return read_snapshot(c);
  auto o = tree_options(c);
  return Octree::restore(c.pool, o);
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

namespace {

Result<void> check_config(const Config& c) {
  if (c.level_min < 1 || c.level_min > c.level_max || c.level_max > 12)
    return make_error(Errc::invalid_argument, "levels must satisfy 1 <= level-min <= size <= 12");
  if (!(c.period > 0) || !(c.cfl > 0 && c.cfl <= 0.5) || c.persist_every == 0 || c.snapshot_every == 0)
    return make_error(Errc::invalid_argument,
                      "period > 0, 0 < cfl <= 0.5, persist-every >= 1 and snapshot-every >= 1 are required");
  return {};
}

[[noreturn]] void crash(std::uint64_t step) {
  std::fprintf(stderr, "amr: --crash-at: SIGKILL at the start of step %llu\n", static_cast<unsigned long long>(step));
  std::fflush(stderr);
  std::raise(SIGKILL);
  std::abort();
}

}  // namespace

double model::reference_volume(int level_max) { return initial_volume(Octant{}, level_max); }

Result<std::uint64_t> model::last_step(const Config& c, std::uint64_t first, std::uint64_t steps) {
  if (first > steps)
    return make_error(Errc::layout_mismatch, c.pool + " holds step " + std::to_string(first) +
                                                 " of a run with more steps than this one (" + std::to_string(steps) +
                                                 "): resume with the same --size, --period and --cfl");
  return c.step_limit > 0 ? std::min(steps, c.step_limit) : steps;
}

void model::step_begins(const Config& c, std::uint64_t s, double seconds_so_far, Report& report) {
  if (c.catch_up_step >= 0 && static_cast<std::uint64_t>(c.catch_up_step) == s)
    report.catch_up_seconds = seconds_so_far;
  if (c.crash_at >= 0 && static_cast<std::uint64_t>(c.crash_at) == s) crash(s);
}

Result<Report> run(const Config& c) {
  if (auto k = check_config(c); !k.ok()) return k.error();
  // Steps land exactly on T: dt = T / ceil(T / (cfl h_min / max|u|)), max|u| <= 2.
  const double h_min = 1.0 / static_cast<double>(1u << c.level_max);
  const std::uint64_t steps = static_cast<std::uint64_t>(std::ceil(c.period / (c.cfl * h_min / 2.0)));
  const double dt = c.period / static_cast<double>(steps);
  if (c.backend == Backend::lmdb) return run_lmdb(c, steps, dt);

  const auto t0 = Clock::now();
  Report rep;
  rep.dt = dt;
  rep.steps = steps;
  std::unique_ptr<Octree> tree;
  {
    auto t = c.resume ? resume_tree(c) : initial(c);
    if (!t.ok()) return t.error();
    tree = std::move(t.value());
  }
  if (c.resume) rep.restore_seconds = seconds_since(t0);
  if (c.backend == Backend::pm_octree && c.transform)
    tree->set_feature([&](const Octant& o, const std::byte* d) { return refine_wanted(o, read_c(d), c.level_max); });
  // The sphere's volume as the initial mesh holds it, the reference for
  // conservation: every leaf the surface cuts is at the finest level there,
  // every other leaf is pure, so a descent of the cut octants gives it
  // without the tree (a resumed run has another mesh).
  rep.volume0 = initial_volume(Octant{}, c.level_max);
  rep.first_step = load_step(*tree);
  const auto last = last_step(c, rep.first_step, steps);
  if (!last.ok()) return last.error();
  for (std::uint64_t s = rep.first_step; s < last.value(); ++s) {
    step_begins(c, s, seconds_since(t0), rep);
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
    if (c.backend == Backend::in_core) {
      if ((s + 1) % c.snapshot_every == 0 || s + 1 == last.value()) {
        const auto p0 = Clock::now();
        auto w = write_snapshot(c, s + 1, *tree);
        if (!w.ok()) return w.error();
        rep.persist_seconds += seconds_since(p0);
        rep.snapshot_bytes += w.value();
      }
      continue;
    }
    if ((s + 1) % c.persist_every == 0 || s + 1 == last.value()) {
      if (c.track_versions) {
        auto st = tree->stats();
        if (!st.ok()) return st.error();
        const auto& x = st.value();
        VersionSample v;
        v.step = s + 1;
        v.octants = x.octants;
        v.overlap =
            x.version_bytes > 0 ? static_cast<double>(x.shared_bytes) / static_cast<double>(x.version_bytes) : 0;
        v.single_bytes = x.version_bytes;
        v.both_bytes = x.version_bytes + x.nvm_bytes - x.shared_bytes;
        rep.versions.push_back(v);
        rep.overlap_min = std::min(rep.overlap_min, v.overlap);
        rep.overlap_max = std::max(rep.overlap_max, v.overlap);
      }
      const auto p0 = Clock::now();
      auto ps = tree->persist();
      if (!ps.ok()) return ps.error();
      rep.persist_seconds += seconds_since(p0);
      rep.blocks_persisted += ps.value().blocks_written;
      rep.nvm_bytes_flushed += ps.value().bytes_written;
    }
  }
  auto l = gather(*tree);
  if (!l.ok()) return l.error();
  rep.leaves = l.value().c.size();
  Checksum sum;
  for (std::size_t i = 0; i < l.value().c.size(); ++i) {
    const Octant& o = l.value().octant[i];
    rep.volume += l.value().c[i] * volume(o);
    rep.shape_error += std::fabs(l.value().c[i] - sphere_fraction(o)) * volume(o);
    sum.add(o, l.value().c[i]);
  }
  rep.checksum = sum.h;
  if (auto st = tree->stats(); st.ok()) rep.nvm_store_lines = st.value().nvm_store_lines;
  rep.seconds = seconds_since(t0);
  if (c.backend == Backend::in_core) {
    const std::string pool = c.pool;
    tree.reset();
    std::error_code ec;
    std::filesystem::remove(pool, ec);  // the scratch pool: in-core keeps nothing there
  }
  return rep;
}

}  // namespace cairn::apps::amr
