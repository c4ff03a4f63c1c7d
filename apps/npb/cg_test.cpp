// cg_test.cpp — the NPB CG kernel: class S verifies against the official zeta,
// a corrupted state fails verification, and the persistence-step form is
// exact: a run split through copies of its state, dual or aliased buffers,
// and any thread count give the same bits as one uninterrupted run.
#include "apps/npb/cg.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "apps/common/app.hpp"
#include "apps/npb/randlc.hpp"

namespace cairn::npb {
namespace {

__extension__ typedef unsigned __int128 Wide;

TEST(NpbRandlc, ExactModularArithmetic) {
  std::uint64_t x = 0x123456789ULL;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t a = (x * 2654435761ULL) & kRandModulusMask;
    const std::uint64_t b = (x * 40503ULL + 7) & kRandModulusMask;
    EXPECT_EQ(mul_mod46(a, b), static_cast<std::uint64_t>((Wide{a} * b) & kRandModulusMask));
    x = mul_mod46(kRandMultiplier, x);
  }
  std::uint64_t p = 1;
  for (std::uint64_t n = 0; n < 100; ++n) {
    EXPECT_EQ(pow_mod46(kRandMultiplier, n), p);
    p = mul_mod46(p, kRandMultiplier);
  }
  std::uint64_t s = kRandSeed;
  const double first = randlc(s);
  EXPECT_EQ(s, static_cast<std::uint64_t>((Wide{kRandSeed} * kRandMultiplier) & kRandModulusMask));
  EXPECT_EQ(first, static_cast<double>(s) / 70368744177664.0);  // 2^46
}

TEST(NpbCg, ClassSMatrixIsSymmetricWithSortedRows) {
  const CsrMatrix m = cg_make_matrix(*cg_class('S'));
  ASSERT_EQ(m.n, 1400);
  ASSERT_EQ(m.rowstr.back(), static_cast<std::int64_t>(m.a.size()));
  std::vector<std::vector<std::pair<int, double>>> rows(static_cast<std::size_t>(m.n));
  for (int i = 0; i < m.n; ++i) {
    bool diagonal = false;
    for (std::int64_t k = m.rowstr[i]; k < m.rowstr[i + 1]; ++k) {
      if (k > m.rowstr[i]) {
        ASSERT_LT(m.colidx[k - 1], m.colidx[k]);
      }
      diagonal |= m.colidx[k] == i;
      rows[i].emplace_back(m.colidx[k], m.a[k]);
    }
    EXPECT_TRUE(diagonal) << "row " << i;
  }
  auto find = [&](int i, int j) {
    for (auto [c, v] : rows[i])
      if (c == j) return v;
    return std::numeric_limits<double>::quiet_NaN();
  };
  for (int i = 0; i < m.n; i += 7)
    for (auto [j, v] : rows[i]) EXPECT_NEAR(find(j, i), v, 1e-14 * (1 + std::fabs(v))) << i << "," << j;
}

// A CG state: the four vectors and the scalars.
struct State {
  explicit State(int n) : x(n), z(n), r(n), p(n) {}
  std::vector<double> x, z, r, p;
  CgScalars s;
};

bool same_bits(const State& a, const State& b) {
  auto same = [](const std::vector<double>& u, const std::vector<double>& v) {
    return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(double)) == 0;
  };
  return same(a.x, b.x) && same(a.z, b.z) && same(a.r, b.r) && same(a.p, b.p) &&
         std::memcmp(&a.s, &b.s, sizeof(CgScalars)) == 0;
}

// How a run keeps its state between steps:
//   aliased  one buffer per vector, in == out (plain regions);
//   dual     two per vector, roles swapping every step (DualRegions); the
//            version about to be written is poisoned with NaN first, as
//            DualRegion::write() holds the state of two steps ago;
//   mixed    z, r, p dual and x aliased: what npb-cg registers.
enum class Buffers { aliased, dual, mixed };

void poison(std::vector<double>& v) { std::fill(v.begin(), v.end(), std::numeric_limits<double>::quiet_NaN()); }

// Runs `steps` steps on st (which holds the newest version before and after).
void run_steps(CgSolver& cg, State& st, std::int64_t steps, Buffers mode, const LoopRunner& loops) {
  if (mode == Buffers::aliased) {
    const CgVectors v{st.x.data(), st.z.data(), st.r.data(), st.p.data()};
    for (std::int64_t i = 0; i < steps; ++i) cg.step(v, v, st.s, st.s, loops);
    return;
  }
  State other(cg.n());
  State* in = &st;
  State* out = &other;
  for (std::int64_t i = 0; i < steps; ++i) {
    poison(out->z);
    poison(out->r);
    poison(out->p);
    double* x_out = out->x.data();
    if (mode == Buffers::mixed) {
      x_out = in->x.data();
    } else {
      poison(out->x);
    }
    out->s = CgScalars{-1, -1, std::nan(""), std::nan(""), std::nan("")};
    cg.step(CgVectors{in->x.data(), in->z.data(), in->r.data(), in->p.data()},
            CgVectors{x_out, out->z.data(), out->r.data(), out->p.data()}, in->s, out->s, loops);
    if (mode == Buffers::mixed) std::swap(in->x, out->x);  // x stays the one buffer: hand it along
    std::swap(in, out);
  }
  if (in != &st) st = *in;
}

State fresh(const CgSolver& cg) {
  State st(cg.n());
  cg.init(CgVectors{st.x.data(), st.z.data(), st.r.data(), st.p.data()}, st.s, serial_loops());
  return st;
}

LoopRunner team_loops(apps::Team& team) {
  return [&team](std::size_t n, const LoopBody& body) { team.parallel_for(0, n, body); };
}

TEST(NpbCg, ClassSVerifies) {
  CgSolver cg(*cg_class('S'));
  State st = fresh(cg);
  EXPECT_EQ(cg.total_steps(), 15 * 25);
  run_steps(cg, st, cg.total_steps(), Buffers::aliased, serial_loops());
  EXPECT_TRUE(cg.done(st.s));
  const CgResult res = cg.verify(st.s);
  EXPECT_EQ(res.reference, 8.5971775078648);
  EXPECT_LE(std::fabs(res.zeta - 8.5971775078648) / 8.5971775078648, 1e-10) << "zeta " << res.zeta;
  EXPECT_TRUE(res.verified);
  std::printf("class S zeta = %.13f (official 8.5971775078648, relative error %.2e), rnorm %.3e\n", res.zeta,
              res.relative_error, st.s.rnorm);
}

TEST(NpbCg, CorruptedStateFailsVerification) {
  CgSolver cg(*cg_class('S'));
  State st = fresh(cg);
  // Into the last outer iteration, then one element of z goes wrong (as a
  // torn or stale restore would leave it). (A wrong r would not show: by then
  // r.r is ~1e-30, and the next beta swamps the error in p.)
  const std::int64_t at = cg.total_steps() - 12;
  run_steps(cg, st, at, Buffers::aliased, serial_loops());
  st.z[700] += 1e-3;
  run_steps(cg, st, cg.total_steps() - at, Buffers::aliased, serial_loops());
  const CgResult res = cg.verify(st.s);
  EXPECT_FALSE(res.verified) << "zeta " << res.zeta;
  EXPECT_GT(res.relative_error, kCgTolerance);

  // Stopping short of the class's iteration count fails too.
  State early = fresh(cg);
  run_steps(cg, early, cg.total_steps() - 25, Buffers::aliased, serial_loops());
  EXPECT_FALSE(cg.verify(early.s).verified);
}

TEST(NpbCg, SplitRunThroughCopiesIsBitIdentical) {
  CgSolver cg(*cg_class('S'));
  State whole = fresh(cg);
  run_steps(cg, whole, cg.total_steps(), Buffers::mixed, serial_loops());
  ASSERT_TRUE(cg.verify(whole.s).verified);

  // Mid outer iteration and on an outer-iteration boundary.
  for (std::int64_t half : {cg.total_steps() / 2, std::int64_t{7 * kCgIterations}}) {
    State first = fresh(cg);
    run_steps(cg, first, half, Buffers::mixed, serial_loops());
    EXPECT_EQ(CgSolver::steps_done(first.s), half);
    State resumed = first;             // what a restore hands back
    CgSolver rebuilt(*cg_class('S'));  // a new process rebuilds the matrix
    run_steps(rebuilt, resumed, cg.total_steps() - half, Buffers::mixed, serial_loops());
    EXPECT_TRUE(same_bits(resumed, whole)) << "split at step " << half;
  }
}

TEST(NpbCg, BufferLayoutsAndThreadCountsGiveTheSameBits) {
  CgSolver cg(*cg_class('S'));
  State reference = fresh(cg);
  run_steps(cg, reference, cg.total_steps(), Buffers::aliased, serial_loops());
  State dual = fresh(cg);
  run_steps(cg, dual, cg.total_steps(), Buffers::dual, serial_loops());
  EXPECT_TRUE(same_bits(dual, reference));
  apps::Team team(3);
  State threaded = fresh(cg);
  run_steps(cg, threaded, cg.total_steps(), Buffers::mixed, team_loops(team));
  EXPECT_TRUE(same_bits(threaded, reference));
}

}  // namespace
}  // namespace cairn::npb
