// step2_resilient_loop.cpp — tutorial step 2 (C++): make an existing loop resilient with persist::Context.
//
// The loop below is an ordinary explicit heat-diffusion sweep. Making it
// resilient takes four changes, marked (1)-(4):
//   (1) ask cairn for the state instead of allocating it: a dual region holds
//       two versions of the field (read one, write the other), a plain region
//       the iteration counter;
//   (2) open() attaches the storage (a pool in $CAIRN_POOL_DIR);
//   (3) if an earlier run committed, restore() brings its last version back;
//   (4) commit() at the end of every iteration makes it durable: after any
//       crash, the next run resumes from exactly that iteration.
// The strategy is $CAIRN_STRATEGY, else in-place (step 4 compares them).
//
// Run it twice: the second run finds the finished state and computes nothing.
//   build/release/examples/step2_resilient_loop
#include <cstdio>
#include <cstring>
#include <vector>

#include "cairn/persist.hpp"

constexpr std::size_t kN = 1 << 16;
constexpr long kSteps = 200;

// One sweep: out = in smoothed, with fixed ends.
void sweep(const double* in, double* out) {
  out[0] = in[0];
  out[kN - 1] = in[kN - 1];
  for (std::size_t i = 1; i + 1 < kN; ++i) out[i] = in[i] + 0.25 * (in[i - 1] - 2 * in[i] + in[i + 1]);
}

void initial(double* u) {
  for (std::size_t i = 0; i < kN; ++i) u[i] = (i > kN / 3 && i < 2 * kN / 3) ? 100.0 : 0.0;
}

int main() {
  using cairn::persist::Context;
  auto ctx = Context::create({.name = "step2"}).value();
  auto* u = ctx->dual_region("u", kN * sizeof(double)).value();  // (1)
  auto* done = ctx->region("steps_done", sizeof(long)).value();
  ctx->open().value();  // (2)
  if (ctx->committed_version()) {
    ctx->restore().value();  // (3)
  } else {
    initial(u->read<double>());
    *done->as<long>() = 0;
  }
  const long start = *done->as<long>();
  for (long s = start; s < kSteps; ++s) {
    sweep(u->read<double>(), u->write<double>());
    *done->as<long>() = s + 1;
    ctx->commit().value();  // (4) durable; u's read and write versions swap
  }

  // The same loop without cairn gives the same bits.
  std::vector<double> a(kN), b(kN);
  initial(a.data());
  for (long s = 0; s < kSteps; ++s) {
    sweep(a.data(), b.data());
    a.swap(b);
  }
  const bool same = std::memcmp(a.data(), u->read<double>(), kN * sizeof(double)) == 0;
  std::printf("step2 (%s): resumed at step %ld of %ld, version %llu; result %s the plain loop's\n",
              ctx->strategy().c_str(), start, kSteps, static_cast<unsigned long long>(ctx->version()),
              same ? "equals" : "DIFFERS FROM");
  return same ? 0 : 1;
}
