// mg_test.cpp — the NPB MG kernel: class S verifies against the official
// residual norm, a corrupted state fails verification, and the
// persistence-step form is exact: a run split through copies of its state,
// dual or aliased buffers, and any thread count give the same bits.
#include "apps/npb/mg.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "apps/common/app.hpp"

namespace cairn::npb {
namespace {

struct State {
  explicit State(std::size_t points) : u(points), r(points) {}
  std::vector<double> u, r;
  MgScalars s;
};

bool same_bits(const State& a, const State& b) {
  auto same = [](const std::vector<double>& x, const std::vector<double>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
  };
  return same(a.u, b.u) && same(a.r, b.r) && std::memcmp(&a.s, &b.s, sizeof(MgScalars)) == 0;
}

// aliased: in == out (plain regions); dual: two versions swapping roles, the
// one about to be written poisoned with NaN (DualRegion::write() holds the
// state of two steps ago).
enum class Buffers { aliased, dual };

void run_steps(MgSolver& mg, State& st, std::int64_t steps, Buffers mode, const LoopRunner& loops) {
  if (mode == Buffers::aliased) {
    for (std::int64_t i = 0; i < steps; ++i)
      mg.step(st.u.data(), st.r.data(), st.u.data(), st.r.data(), st.s, st.s, loops);
    return;
  }
  State other(mg.points());
  State* in = &st;
  State* out = &other;
  for (std::int64_t i = 0; i < steps; ++i) {
    std::fill(out->u.begin(), out->u.end(), std::numeric_limits<double>::quiet_NaN());
    std::fill(out->r.begin(), out->r.end(), std::numeric_limits<double>::quiet_NaN());
    out->s = MgScalars{-1, std::nan(""), std::nan("")};
    mg.step(in->u.data(), in->r.data(), out->u.data(), out->r.data(), in->s, out->s, loops);
    std::swap(in, out);
  }
  if (in != &st) st = *in;
}

State fresh(const MgSolver& mg) {
  State st(mg.points());
  mg.init(st.u.data(), st.r.data(), st.s, serial_loops());
  return st;
}

TEST(NpbMg, ClassSRightHandSideHasTenChargesOfEachSign) {
  MgSolver mg(*mg_class('S'));
  const int m = 34;
  int plus = 0, minus = 0, other = 0;
  for (int i3 = 1; i3 <= 32; ++i3)
    for (int i2 = 1; i2 <= 32; ++i2)
      for (int i1 = 1; i1 <= 32; ++i1) {
        const double v = mg.v()[(static_cast<std::size_t>(i3) * m + i2) * m + i1];
        plus += v == 1.0;
        minus += v == -1.0;
        other += v != 0.0 && v != 1.0 && v != -1.0;
      }
  EXPECT_EQ(plus, 10);
  EXPECT_EQ(minus, 10);
  EXPECT_EQ(other, 0);
}

TEST(NpbMg, ClassSVerifies) {
  MgSolver mg(*mg_class('S'));
  State st = fresh(mg);
  run_steps(mg, st, mg.total_steps(), Buffers::aliased, serial_loops());
  const MgResult res = mg.verify(st.s);
  EXPECT_EQ(res.reference, 0.5307707005734e-04);
  EXPECT_LE(std::fabs(res.rnm2 - 0.5307707005734e-04) / 0.5307707005734e-04, 1e-8) << "rnm2 " << res.rnm2;
  EXPECT_TRUE(res.verified);
  std::printf("class S L2 residual norm = %.13e (official 5.307707005734e-05, relative error %.2e)\n", res.rnm2,
              res.relative_error);
}

TEST(NpbMg, CorruptedStateFailsVerification) {
  MgSolver mg(*mg_class('S'));
  State st = fresh(mg);
  run_steps(mg, st, 2, Buffers::aliased, serial_loops());
  st.u[(static_cast<std::size_t>(17) * 34 + 9) * 34 + 5] += 1e-3;  // one interior point goes wrong
  run_steps(mg, st, mg.total_steps() - 2, Buffers::aliased, serial_loops());
  const MgResult res = mg.verify(st.s);
  EXPECT_FALSE(res.verified) << "rnm2 " << res.rnm2;
  EXPECT_GT(res.relative_error, kMgTolerance);

  State early = fresh(mg);
  run_steps(mg, early, mg.total_steps() - 1, Buffers::aliased, serial_loops());
  EXPECT_FALSE(mg.verify(early.s).verified);
}

TEST(NpbMg, SplitRunThroughCopiesIsBitIdentical) {
  MgSolver mg(*mg_class('S'));
  State whole = fresh(mg);
  run_steps(mg, whole, mg.total_steps(), Buffers::dual, serial_loops());
  ASSERT_TRUE(mg.verify(whole.s).verified);
  for (std::int64_t half : {std::int64_t{1}, mg.total_steps() / 2}) {
    State first = fresh(mg);
    run_steps(mg, first, half, Buffers::dual, serial_loops());
    State resumed = first;
    MgSolver rebuilt(*mg_class('S'));  // a new process regenerates v
    run_steps(rebuilt, resumed, mg.total_steps() - half, Buffers::dual, serial_loops());
    EXPECT_TRUE(same_bits(resumed, whole)) << "split after V-cycle " << half;
  }
}

TEST(NpbMg, BufferLayoutsAndThreadCountsGiveTheSameBits) {
  MgSolver mg(*mg_class('S'));
  State reference = fresh(mg);
  run_steps(mg, reference, mg.total_steps(), Buffers::aliased, serial_loops());
  State dual = fresh(mg);
  run_steps(mg, dual, mg.total_steps(), Buffers::dual, serial_loops());
  EXPECT_TRUE(same_bits(dual, reference));
  apps::Team team(3);
  const LoopRunner loops = [&team](std::size_t n, const LoopBody& body) { team.parallel_for(0, n, body); };
  State threaded = fresh(mg);
  mg.init(threaded.u.data(), threaded.r.data(), threaded.s, loops);
  run_steps(mg, threaded, mg.total_steps(), Buffers::dual, loops);
  EXPECT_TRUE(same_bits(threaded, reference));
}

}  // namespace
}  // namespace cairn::npb
