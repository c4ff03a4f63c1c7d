// step8_mpi.cpp — tutorial step 8 (C++, MPI): a multi-rank loop whose ranks agree on one version.
//
// A 1D heat rod split across the ranks, each rank exchanging one boundary
// value with each neighbour per step. Every rank persists its part with
// cairn::dist::Context; each commit is collective, so after any failure every
// rank restores the SAME global version, never a mix of steps. The changes for
// resilience, marked:
//   (1) the rank's part is a dual region of a dist::Context (an in-place
//       persist::Context per rank underneath);
//   (2) restore() is collective: the global version, or no_version;
//   (3) commit() is collective: when it returns, the step is durable on every
//       rank.
// Run under `cairn launch`, which relaunches the job with --resume at its
// global version when a rank dies. To show it, the first launch kills rank 1
// (SIGKILL) right after step 23's commit; the relaunched job resumes there
// and checks its result against the same steps computed without cairn.
//   cairn launch -n 2 -- build/release/examples/step8_mpi
#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cairn/dist.hpp"

constexpr int kCells = 4096;  // per rank
constexpr long kSteps = 60;
constexpr long kCrashAfter = 23;

// One explicit step of u_t = u_xx: `in` holds n cells between two ghosts
// (in[0], in[n + 1]), `out` the n new cells.
void sweep(const double* in, double* out, int n) {
  for (int i = 1; i <= n; ++i) out[i - 1] = in[i] + 0.25 * (in[i - 1] - 2 * in[i] + in[i + 1]);
}
// The initial rod: hot in its middle third.
double initial(long global_cell, long total) {
  return global_cell > total / 3 && global_cell < 2 * total / 3 ? 100 : 0;
}
// Fills the ghosts u[0] and u[kCells + 1] from the neighbours (at the rod's
// ends a ghost copies its cell).
void exchange(double* u, int rank, int size) {
  const int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
  u[0] = u[1];
  u[kCells + 1] = u[kCells];
  MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[kCells + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(&u[kCells], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const bool resumed = argc > 1 && std::strcmp(argv[1], "--resume") == 0;  // added by cairn launch
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bool same = false;
  long start = 0;
  unsigned long long version = 0;
  {
    cairn::dist::Options o;
    o.persist.name = "step8";
    auto ctx = cairn::dist::Context::create(MPI_COMM_WORLD, o).value();
    auto* u = ctx->dual_region("u", kCells * sizeof(double)).value();  // (1)
    ctx->open().value();
    if (auto g = ctx->restore(); g.ok()) {  // (2)
      start = static_cast<long>(g.value());
    } else {
      for (int i = 0; i < kCells; ++i)
        u->read<double>()[i] = initial(static_cast<long>(rank) * kCells + i + 1, size * kCells);
    }
    // The committed version (read()) is never written: the cells and their
    // ghosts are gathered in DRAM, the new cells go to write().
    std::vector<double> cur(kCells + 2);
    for (long s = start; s < kSteps; ++s) {
      ctx->begin().value();
      std::memcpy(&cur[1], u->read<double>(), kCells * sizeof(double));
      exchange(cur.data(), rank, size);
      sweep(cur.data(), u->write<double>(), kCells);
      ctx->commit().value();  // (3)
      if (!resumed && rank == 1 && s + 1 == kCrashAfter) std::raise(SIGKILL);
    }

    // The same steps on the whole rod in one array, without cairn.
    const int total = size * kCells;
    std::vector<double> a(total + 2), b(total);
    for (int i = 1; i <= total; ++i) a[i] = initial(i, total);
    for (long s = 0; s < kSteps; ++s) {
      a[0] = a[1];
      a[total + 1] = a[total];
      sweep(a.data(), b.data(), total);
      std::memcpy(&a[1], b.data(), total * sizeof(double));
    }
    same = std::memcmp(&a[1 + rank * kCells], u->read<double>(), kCells * sizeof(double)) == 0;
    version = ctx->version();
  }  // the Context is closed before MPI_Finalize
  const bool all = cairn::dist::all_ok(MPI_COMM_WORLD, same);
  if (rank == 0)
    std::printf("step8: %d ranks resumed at step %ld of %ld, global version %llu; rod %s the plain loop's\n", size,
                start, kSteps, version, all ? "equals" : "DIFFERS FROM");
  MPI_Finalize();
  return all ? 0 : 1;
}
