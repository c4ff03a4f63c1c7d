// mg.cpp — NPB MG: zran3, the V-cycle operators and the V-cycle as a
// persistence step. Arrays are cubes of side m = 2^k + 2 (k the level),
// indexed (i3 * m + i2) * m + i1; indices 0 and m - 1 are periodic ghosts.
#include "apps/npb/mg.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "apps/npb/randlc.hpp"

namespace cairn::npb {

namespace {

std::size_t at(int m, int i3, int i2, int i1) {
  return (static_cast<std::size_t>(i3) * static_cast<std::size_t>(m) + static_cast<std::size_t>(i2)) *
             static_cast<std::size_t>(m) +
         static_cast<std::size_t>(i1);
}

int side(int level) { return (1 << level) + 2; }

// fn(i3) for every plane i3 in [first, last); on the coarse levels (few
// points) serially, the hand-off to other threads would cost more.
template <class F>
void for_planes(const LoopRunner& loops, int m, int first, int last, F&& fn) {
  if (last <= first) return;
  const auto count = static_cast<std::size_t>(last - first);
  const LoopBody body = [&](std::size_t lo, std::size_t hi) {
    for (std::size_t k = lo; k < hi; ++k) fn(first + static_cast<int>(k));
  };
  if (m < 18)
    body(0, count);
  else
    loops(count, body);
}

}  // namespace

std::optional<MgClass> mg_class(char name) {
  switch (name) {
    case 'S': return MgClass{'S', 32, 4, 0.5307707005734e-04};
    case 'W': return MgClass{'W', 128, 4, 0.6467329375339e-05};
    case 'A': return MgClass{'A', 256, 4, 0.2433365309069e-05};
    case 'B': return MgClass{'B', 256, 20, 0.1800564401355e-05};
    case 'C': return MgClass{'C', 512, 20, 0.5706732285740e-06};
    default: return std::nullopt;
  }
}

MgSolver::MgSolver(const MgClass& cls) : cls_(cls), lt_(0), a_{}, c_{} {
  while ((1 << lt_) < cls.n) ++lt_;
  assert((1 << lt_) == cls.n && lt_ >= 2);
  // The operator A and the smoother S (the classes from B on use a different S).
  a_[0] = -8.0 / 3.0;
  a_[1] = 0.0;
  a_[2] = 1.0 / 6.0;
  a_[3] = 1.0 / 12.0;
  const bool small = cls.name == 'S' || cls.name == 'W' || cls.name == 'A';
  c_[0] = small ? -3.0 / 8.0 : -3.0 / 17.0;
  c_[1] = small ? 1.0 / 32.0 : 1.0 / 33.0;
  c_[2] = small ? -1.0 / 64.0 : -1.0 / 61.0;
  c_[3] = 0.0;
  v_.resize(points());
  u_.resize(static_cast<std::size_t>(lt_));
  r_.resize(static_cast<std::size_t>(lt_));
  for (int k = 1; k < lt_; ++k) {
    u_[k].resize(cube(side(k)));
    r_[k].resize(cube(side(k)));
  }
  partial_.resize(2 * (static_cast<std::size_t>(cls.n) + 2));
  zran3();
}

// v: zero except -1 at the ten smallest and +1 at the ten largest of the n^3
// numbers of the generator's stream (seed 314159265, consecutive along i1,
// then i2, then i3).
void MgSolver::zran3() {
  const int n = cls_.n, m = n + 2;
  double* v = v_.data();
  std::fill(v_.begin(), v_.end(), 0.0);
  std::uint64_t x = kRandSeed;
  for (int i3 = 1; i3 <= n; ++i3)
    for (int i2 = 1; i2 <= n; ++i2) vranlc(static_cast<std::size_t>(n), x, kRandMultiplier, v + at(m, i3, i2, 1));

  // The ten largest, ascending (hi[0] the smallest of them), and the ten
  // smallest, descending; strict comparisons, scanned in storage order.
  constexpr int kCharges = 10;
  struct Pick {
    double value;
    std::size_t where;
  };
  Pick hi[kCharges], lo[kCharges];
  for (int i = 0; i < kCharges; ++i) {
    hi[i] = Pick{0.0, 0};
    lo[i] = Pick{1.0, 0};
  }
  for (int i3 = 1; i3 <= n; ++i3)
    for (int i2 = 1; i2 <= n; ++i2)
      for (int i1 = 1; i1 <= n; ++i1) {
        const std::size_t w = at(m, i3, i2, i1);
        const double z = v[w];
        if (z > hi[0].value) {
          hi[0] = Pick{z, w};
          for (int i = 0; i + 1 < kCharges && hi[i].value > hi[i + 1].value; ++i) std::swap(hi[i], hi[i + 1]);
        }
        if (z < lo[0].value) {
          lo[0] = Pick{z, w};
          for (int i = 0; i + 1 < kCharges && lo[i].value < lo[i + 1].value; ++i) std::swap(lo[i], lo[i + 1]);
        }
      }
  std::fill(v_.begin(), v_.end(), 0.0);
  for (int i = 0; i < kCharges; ++i) v[lo[i].where] = -1.0;
  for (int i = 0; i < kCharges; ++i) v[hi[i].where] = +1.0;
  comm3(v, m, serial_loops());
}

// Periodic ghosts: i1 faces, then i2 faces (rows including their i1 ghosts),
// then i3 faces (whole planes).
void MgSolver::comm3(double* u, int m, const LoopRunner& loops) {
  const std::size_t mm = static_cast<std::size_t>(m);
  for_planes(loops, m, 1, m - 1, [&](int i3) {
    for (int i2 = 1; i2 < m - 1; ++i2) {
      double* row = u + at(m, i3, i2, 0);
      row[0] = row[m - 2];
      row[m - 1] = row[1];
    }
    double* plane = u + at(m, i3, 0, 0);
    std::copy_n(plane + (mm - 2) * mm, mm, plane);
    std::copy_n(plane + mm, mm, plane + (mm - 1) * mm);
  });
  std::copy_n(u + at(m, m - 2, 0, 0), mm * mm, u);
  std::copy_n(u + at(m, 1, 0, 0), mm * mm, u + at(m, m - 1, 0, 0));
}

// r = v - A u on the interior, then ghosts. v may be r (pointwise).
void MgSolver::resid(const double* u, const double* v, double* r, int m, const LoopRunner& loops) const {
  const std::ptrdiff_t s2 = m, s3 = static_cast<std::ptrdiff_t>(m) * m;
  const double a0 = a_[0], a2 = a_[2], a3 = a_[3];  // a_[1] == 0: no face term
  for_planes(loops, m, 1, m - 1, [&](int i3) {
    std::vector<double> u1(static_cast<std::size_t>(m)), u2(static_cast<std::size_t>(m));
    for (int i2 = 1; i2 < m - 1; ++i2) {
      const std::size_t o = at(m, i3, i2, 0);
      const double* c = u + o;
      for (int i1 = 0; i1 < m; ++i1) {
        u1[i1] = c[i1 - s2] + c[i1 + s2] + c[i1 - s3] + c[i1 + s3];
        u2[i1] = c[i1 - s2 - s3] + c[i1 + s2 - s3] + c[i1 - s2 + s3] + c[i1 + s2 + s3];
      }
      const double* vr = v + o;
      double* rr = r + o;
      for (int i1 = 1; i1 < m - 1; ++i1)
        rr[i1] = vr[i1] - a0 * c[i1] - a2 * (u2[i1] + u1[i1 - 1] + u1[i1 + 1]) - a3 * (u2[i1 - 1] + u2[i1 + 1]);
    }
  });
  comm3(r, m, loops);
}

// u += S r on the interior, then ghosts.
void MgSolver::psinv(const double* r, double* u, int m, const LoopRunner& loops) const {
  const std::ptrdiff_t s2 = m, s3 = static_cast<std::ptrdiff_t>(m) * m;
  const double c0 = c_[0], c1 = c_[1], c2 = c_[2];  // c_[3] == 0: no corner term
  for_planes(loops, m, 1, m - 1, [&](int i3) {
    std::vector<double> r1(static_cast<std::size_t>(m)), r2(static_cast<std::size_t>(m));
    for (int i2 = 1; i2 < m - 1; ++i2) {
      const std::size_t o = at(m, i3, i2, 0);
      const double* c = r + o;
      for (int i1 = 0; i1 < m; ++i1) {
        r1[i1] = c[i1 - s2] + c[i1 + s2] + c[i1 - s3] + c[i1 + s3];
        r2[i1] = c[i1 - s2 - s3] + c[i1 + s2 - s3] + c[i1 - s2 + s3] + c[i1 + s2 + s3];
      }
      double* uu = u + o;
      for (int i1 = 1; i1 < m - 1; ++i1)
        uu[i1] = uu[i1] + c0 * c[i1] + c1 * (c[i1 - 1] + c[i1 + 1] + r1[i1]) + c2 * (r2[i1] + r1[i1 - 1] + r1[i1 + 1]);
    }
  });
  comm3(u, m, loops);
}

// s (side mj) = full-weighting restriction of r (side mk = 2 mj - 2); coarse
// point j sits on fine point 2j.
void MgSolver::rprj3(const double* r, int mk, double* s, int mj, const LoopRunner& loops) const {
  assert(mk == 2 * mj - 2 && mk > 3);
  const std::ptrdiff_t s2 = mk, s3 = static_cast<std::ptrdiff_t>(mk) * mk;
  for_planes(loops, mk, 1, mj - 1, [&](int j3) {
    std::vector<double> x1(static_cast<std::size_t>(mk)), y1(static_cast<std::size_t>(mk));
    for (int j2 = 1; j2 < mj - 1; ++j2) {
      // Fine rows i2 .. i2 + 2 of planes i3 .. i3 + 2 surround the coarse point.
      const int i3 = 2 * j3 - 1, i2 = 2 * j2 - 1;
      const double* b = r + at(mk, i3, i2, 0);
      for (int j1 = 1; j1 < mj; ++j1) {
        const int i1 = 2 * j1 - 1;
        x1[i1] = b[i1 + s3] + b[i1 + s3 + 2 * s2] + b[i1 + s2] + b[i1 + 2 * s3 + s2];
        y1[i1] = b[i1] + b[i1 + 2 * s3] + b[i1 + 2 * s2] + b[i1 + 2 * s3 + 2 * s2];
      }
      const double* ctr = b + s3 + s2;  // row (i3 + 1, i2 + 1)
      double* out = s + at(mj, j3, j2, 0);
      for (int j1 = 1; j1 < mj - 1; ++j1) {
        const int i1 = 2 * j1 - 1;
        const double y2 = b[i1 + 1] + b[i1 + 1 + 2 * s3] + b[i1 + 1 + 2 * s2] + b[i1 + 1 + 2 * s3 + 2 * s2];
        const double x2 = b[i1 + 1 + s3] + b[i1 + 1 + s3 + 2 * s2] + b[i1 + 1 + s2] + b[i1 + 1 + 2 * s3 + s2];
        out[j1] = 0.5 * ctr[i1 + 1] + 0.25 * (ctr[i1] + ctr[i1 + 2] + x2) + 0.125 * (x1[i1] + x1[i1 + 2] + y2) +
                  0.0625 * (y1[i1] + y1[i1 + 2]);
      }
    }
  });
  comm3(s, mj, loops);
}

// u = base + Q z, trilinear prolongation of z (side mm) onto u (side n =
// 2 mm - 2). Every point of u is written, ghosts included (they come out
// periodic when z's are). base is u itself, another array (a step's u_in),
// or null for zero.
void MgSolver::interp(const double* z, int mm, const double* base, double* u, int n, const LoopRunner& loops) const {
  assert(n == 2 * mm - 2);
  const std::ptrdiff_t t2 = mm, t3 = static_cast<std::ptrdiff_t>(mm) * mm;
  const auto add = [base, u](std::size_t i, double value) { u[i] = (base ? base[i] : 0.0) + value; };
  for_planes(loops, n, 0, mm - 1, [&](int i3) {
    std::vector<double> z1(static_cast<std::size_t>(mm)), z2(static_cast<std::size_t>(mm)),
        z3(static_cast<std::size_t>(mm));
    for (int i2 = 0; i2 < mm - 1; ++i2) {
      const double* c = z + at(mm, i3, i2, 0);
      for (int i1 = 0; i1 < mm; ++i1) {
        z1[i1] = c[i1 + t2] + c[i1];
        z2[i1] = c[i1 + t3] + c[i1];
        z3[i1] = c[i1 + t3 + t2] + c[i1 + t3] + z1[i1];
      }
      const std::size_t f00 = at(n, 2 * i3, 2 * i2, 0), f01 = at(n, 2 * i3, 2 * i2 + 1, 0);
      const std::size_t f10 = at(n, 2 * i3 + 1, 2 * i2, 0), f11 = at(n, 2 * i3 + 1, 2 * i2 + 1, 0);
      for (int i1 = 0; i1 < mm - 1; ++i1) {
        const std::size_t e = 2 * static_cast<std::size_t>(i1);
        add(f00 + e, c[i1]);
        add(f00 + e + 1, 0.5 * (c[i1 + 1] + c[i1]));
        add(f01 + e, 0.5 * z1[i1]);
        add(f01 + e + 1, 0.25 * (z1[i1] + z1[i1 + 1]));
        add(f10 + e, 0.5 * z2[i1]);
        add(f10 + e + 1, 0.25 * (z2[i1] + z2[i1 + 1]));
        add(f11 + e, 0.25 * z3[i1]);
        add(f11 + e + 1, 0.125 * (z3[i1] + z3[i1 + 1]));
      }
    }
  });
}

void MgSolver::norms(const double* r, double& rnm2, double& rnmu, const LoopRunner& loops) const {
  const int n = cls_.n, m = n + 2;
  double* sums = partial_.data();
  double* maxes = partial_.data() + m;
  for_planes(loops, m, 1, n + 1, [&](int i3) {
    double sum = 0.0, max_abs = 0.0;
    for (int i2 = 1; i2 <= n; ++i2) {
      const double* row = r + at(m, i3, i2, 0);
      for (int i1 = 1; i1 <= n; ++i1) {
        sum += row[i1] * row[i1];
        max_abs = std::max(max_abs, std::fabs(row[i1]));
      }
    }
    sums[i3] = sum;
    maxes[i3] = max_abs;
  });
  double sum = 0.0, max_abs = 0.0;
  for (int i3 = 1; i3 <= n; ++i3) {
    sum += sums[i3];
    max_abs = std::max(max_abs, maxes[i3]);
  }
  const double points = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  rnm2 = std::sqrt(sum / points);
  rnmu = max_abs;
}

void MgSolver::init(double* u, double* r, MgScalars& s, const LoopRunner& loops) const {
  const int m = side(lt_);
  const std::size_t plane = static_cast<std::size_t>(m) * static_cast<std::size_t>(m);
  for_planes(loops, m, 0, m, [&](int i3) { std::fill_n(u + static_cast<std::size_t>(i3) * plane, plane, 0.0); });
  resid(u, v_.data(), r, m, loops);
  s = MgScalars{};
  norms(r, s.rnm2, s.rnmu, loops);
}

void MgSolver::step(const double* u_in, const double* r_in, double* u_out, double* r_out, const MgScalars& s_in,
                    MgScalars& s_out, const LoopRunner& loops, const MgWritten& written) {
  MgScalars s = s_in;
  const int lt = lt_;
  // Down: restrict the residual to every level; r_in is not read after this.
  rprj3(r_in, side(lt), r_[lt - 1].data(), side(lt - 1), loops);
  for (int k = lt - 1; k >= 2; --k) rprj3(r_[k].data(), side(k), r_[k - 1].data(), side(k - 1), loops);
  // Coarsest level: one smoothing step from zero.
  std::fill(u_[1].begin(), u_[1].end(), 0.0);
  psinv(r_[1].data(), u_[1].data(), side(1), loops);
  // Up: prolongate, take the residual, smooth.
  for (int k = 2; k < lt; ++k) {
    interp(u_[k - 1].data(), side(k - 1), nullptr, u_[k].data(), side(k), loops);
    resid(u_[k].data(), r_[k].data(), r_[k].data(), side(k), loops);
    psinv(r_[k].data(), u_[k].data(), side(k), loops);
  }
  // Finest level: u_out = u_in + Q u_{lt-1}; r_out = v - A u_out; u_out += S r_out.
  const int m = side(lt);
  interp(u_[lt - 1].data(), side(lt - 1), u_in, u_out, m, loops);
  resid(u_out, v_.data(), r_out, m, loops);
  psinv(r_out, u_out, m, loops);
  if (written) written(MgPart::u);
  // The residual of the new u (the benchmark's resid after mg3P).
  resid(u_out, v_.data(), r_out, m, loops);
  if (written) written(MgPart::r);
  s.iter += 1;
  norms(r_out, s.rnm2, s.rnmu, loops);
  s_out = s;
}

MgResult MgSolver::verify(const MgScalars& s) const {
  const double err = std::fabs(s.rnm2 - cls_.verify) / cls_.verify;
  return MgResult{s.iter == cls_.nit && err <= kMgTolerance, s.rnm2, cls_.verify, err};
}

}  // namespace cairn::npb
