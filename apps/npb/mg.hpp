// mg.hpp — NPB MG: V-cycle multigrid for the discrete Poisson problem
// A u = v on a periodic n^3 grid, v zero except +1 at the ten largest and -1
// at the ten smallest of n^3 numbers from the NPB generator (zran3).
//
// Written from the NPB 3.x specification: operators A (coefficients a), the
// smoother S (coefficients c, chosen by class), restriction P (rprj3, full
// weighting) and trilinear prolongation Q (interp), on levels 1..lt with
// 2^k interior points per dimension plus one periodic ghost layer on each
// side (comm3). The verified quantity is the L2 norm of the final residual.
//
// Persistence: one step is ONE V-cycle followed by the residual update,
//   u' = u + Q(coarse correction of P r);  r~ = v - A u';  u' += S r~;  r' = v - A u'.
// The state is the finest u and r (with ghosts); the coarse levels are
// scratch, v is read-only and regenerated identically on resume. A step
// reads r_in only before it writes any of r_out, and updates u point by point
// (u_out[i] from u_in[i]; stencils read u_out only once it is complete), and it
// writes every element of u_out and r_out, ghosts included. So u and r may
// live in DualRegions (in = read(), out = write()) or in plain regions
// (in == out).
//
// Reductions (the norm) are summed per plane and added in plane order, so
// results do not depend on the thread count (parallel.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "apps/npb/parallel.hpp"

namespace cairn::npb {

struct MgClass {
  char name;
  int n;    // interior points per dimension (a power of two)
  int nit;  // V-cycles
  double verify;
};

inline constexpr double kMgTolerance = 1e-8;  // relative, on the residual norm

// Classes S, W, A, B, C; nullopt for anything else.
std::optional<MgClass> mg_class(char name);

// Persisted scalars. Trivially copyable, fixed layout.
struct MgScalars {
  std::int64_t iter = 0;  // V-cycles completed
  double rnm2 = 0;        // L2 norm of r after the last V-cycle (initial residual before any)
  double rnmu = 0;        // max |r|
};
static_assert(sizeof(MgScalars) == 24);

// A step reports each output array once it will not write it again (for
// proactive flushing, seed 004 §4.2): u before the final residual pass.
enum class MgPart { u, r };
using MgWritten = std::function<void(MgPart)>;

struct MgResult {
  bool verified;
  double rnm2;
  double reference;
  double relative_error;
};

class MgSolver {
 public:
  // Generates v (zran3; serial, deterministic) and the coarse levels.
  explicit MgSolver(const MgClass& cls);

  const MgClass& problem() const { return cls_; }
  // Doubles in one finest-level array, ghosts included: (n + 2)^3.
  std::size_t points() const { return cube(cls_.n + 2); }
  std::int64_t total_steps() const { return cls_.nit; }
  // Steps may continue past nit; only a state after exactly nit V-cycles verifies.
  bool done(const MgScalars& s) const { return s.iter >= cls_.nit; }

  // The starting state: u = 0, r = v - A u = v.
  void init(double* u, double* r, MgScalars& s, const LoopRunner& loops) const;
  // One V-cycle and residual. u_in may be u_out and r_in may be r_out; s_in may be s_out.
  void step(const double* u_in, const double* r_in, double* u_out, double* r_out, const MgScalars& s_in,
            MgScalars& s_out, const LoopRunner& loops, const MgWritten& written = {});
  // L2 norm (sqrt of mean square over the interior) and max norm of r.
  void norms(const double* r, double& rnm2, double& rnmu, const LoopRunner& loops) const;

  MgResult verify(const MgScalars& s) const;

  // The right-hand side, with ghosts.
  const double* v() const { return v_.data(); }

 private:
  static std::size_t cube(int m) { return static_cast<std::size_t>(m) * m * m; }
  void zran3();
  // The operators; `loops` runs their plane loops (levels below 16^3 serially).
  void resid(const double* u, const double* v, double* r, int m, const LoopRunner& loops) const;
  void psinv(const double* r, double* u, int m, const LoopRunner& loops) const;
  void rprj3(const double* r, int mk, double* s, int mj, const LoopRunner& loops) const;
  void interp(const double* z, int mm, const double* base, double* u, int n, const LoopRunner& loops) const;
  static void comm3(double* u, int m, const LoopRunner& loops);

  MgClass cls_;
  int lt_;  // finest level: n = 2^lt
  double a_[4], c_[4];
  std::vector<double> v_;
  // Levels 1..lt-1 (index k): scratch for the V-cycle.
  std::vector<std::vector<double>> u_, r_;
  mutable std::vector<double> partial_;
};

}  // namespace cairn::npb
