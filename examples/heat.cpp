// heat.cpp — the 2D heat loop made resilient from C++: the field is persistent memory (cairn/persist.hpp).
//
//   build/release/examples/heat_cpp [steps]   # run twice: the second run resumes what the first committed
//
// The same problem as heat.c, heat.f90 and heat.py: a 128 x 128 grid, one hot edge (row 0), fixed
// edges, explicit steps; it prints the sum of the field after `steps` (default 200) steps. The field
// is a dual region: read() is the last committed step, the loop writes all of write(), and commit()
// makes it durable and swaps the two. The committed version counts the steps. Kill the program at any
// moment: the next run restores the last committed step bit for bit and ends with the same checksum.
// $CAIRN_STRATEGY picks the strategy, $CAIRN_POOL_DIR the directory.
#include <cstdio>
#include <cstdlib>

#include "cairn/persist.hpp"

constexpr int N = 128;

int main(int argc, char** argv) {
  const long steps = argc > 1 ? std::atol(argv[1]) : 200;
  auto ctx = cairn::persist::Context::create({.name = "heat_cpp"}).value();  // value(): throws on error
  auto* u = ctx->dual_region("u", sizeof(double) * N * N).value();
  ctx->open().value();
  long start = 0;
  if (auto v = ctx->restore(); v.ok()) {
    start = static_cast<long>(v.value());
  } else if (v.error().code == cairn::Errc::no_version) {  // nothing committed yet: the initial state
    double* a = u->read<double>();
    for (int k = 0; k < N * N; ++k) a[k] = k < N ? 1.0 : 0.0;  // a hot edge
  } else {
    v.value();  // throws with the message
  }

  for (long s = start; s < steps; ++s) {
    const double* a = u->read<double>();
    double* b = u->write<double>();
    // u[j][i] = u[j * N + i]; the same operations, in the same order, as the Fortran loop.
    for (int k = 0; k < N * N; ++k) b[k] = a[k];
    for (int j = 1; j < N - 1; ++j)
      for (int i = 1; i < N - 1; ++i) {
        const int k = j * N + i;
        b[k] = a[k] + 0.2 * (a[k - 1] + a[k + 1] + a[k - N] + a[k + N] - 4 * a[k]);
      }
    ctx->commit().value();  // durable from here
  }

  const double* a = u->read<double>();
  double sum = 0;
  for (int k = 0; k < N * N; ++k) sum += a[k];
  std::printf("heat_cpp: iterations %ld..%ld, checksum %.15e\n", start, steps, sum);
  return 0;
}
