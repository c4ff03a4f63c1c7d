/* step8_mpi.c — tutorial step 8 (C, MPI): a multi-rank loop whose ranks agree on one version.
 *
 * The C twin of step8_mpi.cpp, through cairn/dist.h. A 1D heat rod split across the ranks, each rank
 * exchanging one boundary value with each neighbour per step. Every rank persists its part with a
 * cairn_dist context; each commit is collective, so after any failure every rank restores the SAME
 * global version, never a mix of steps. The changes for resilience, marked:
 *   (1) the rank's part is a dual region of a cairn_dist context (an in-place persist context per
 *       rank underneath);
 *   (2) cairn_dist_restore is collective: the global version, or CAIRN_E_NO_VERSION;
 *   (3) cairn_dist_commit is collective: when it returns, the step is durable on every rank.
 * Run under `cairn launch`, which relaunches the job with --resume at its global version when a rank
 * dies. To show it, the first launch kills rank 1 (SIGKILL) right after step 23's commit; the
 * relaunched job resumes there and checks its result against the same steps computed without cairn.
 *   cairn launch -n 2 -- build/release/examples/step8_mpi_c */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/dist.h"

enum { kCells = 4096 }; /* per rank */
static const long kSteps = 60, kCrashAfter = 23;

static void check(int rc, const char* what) {
  if (rc >= 0) return;
  fprintf(stderr, "step8_mpi_c: %s: %s: %s\n", what, cairn_strerror(rc), cairn_errormsg());
  MPI_Abort(MPI_COMM_WORLD, 2);
}
/* One explicit step of u_t = u_xx: `in` holds n cells between two ghosts (in[0], in[n + 1]), `out`
 * the n new cells. */
static void sweep(const double* in, double* out, int n) {
  for (int i = 1; i <= n; ++i) out[i - 1] = in[i] + 0.25 * (in[i - 1] - 2 * in[i] + in[i + 1]);
}
/* The initial rod: hot in its middle third. */
static double initial(long global_cell, long total) {
  return global_cell > total / 3 && global_cell < 2 * total / 3 ? 100 : 0;
}
/* Fills the ghosts u[0] and u[kCells + 1] from the neighbours (at the rod's ends a ghost copies its cell). */
static void exchange(double* u, int rank, int size) {
  const int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
  u[0] = u[1];
  u[kCells + 1] = u[kCells];
  MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[kCells + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(&u[kCells], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int resumed = argc > 1 && strcmp(argv[1], "--resume") == 0; /* added by cairn launch */
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  cairn_dist_options o;
  cairn_dist_options_init(&o);
  o.name = "step8_c";
  cairn_dist* d = NULL;
  cairn_dist_dual* u = NULL;
  check(cairn_dist_create(MPI_COMM_WORLD, &o, &d), "create");
  check(cairn_dist_dual_create(d, "u", kCells * sizeof(double), &u), "dual region u"); /* (1) */
  check(cairn_dist_open(d), "open");
  uint64_t g = 0;
  const int rc = cairn_dist_restore(d, &g); /* (2) */
  if (rc == CAIRN_E_NO_VERSION) {
    double* a = cairn_dist_dual_read(u);
    for (int i = 0; i < kCells; ++i) a[i] = initial((long)rank * kCells + i + 1, (long)size * kCells);
  } else {
    check(rc, "restore");
  }
  const long start = (long)g;
  /* The committed version (read) is never written: the cells and their ghosts are gathered in DRAM,
   * the new cells go to write. */
  double* cur = malloc((kCells + 2) * sizeof(double));
  for (long s = start; s < kSteps; ++s) {
    check(cairn_dist_begin(d), "begin");
    memcpy(&cur[1], cairn_dist_dual_read(u), kCells * sizeof(double));
    exchange(cur, rank, size);
    sweep(cur, cairn_dist_dual_write(u), kCells);
    check(cairn_dist_commit(d, NULL), "commit"); /* (3) */
    if (!resumed && rank == 1 && s + 1 == kCrashAfter) raise(SIGKILL);
  }
  free(cur);

  /* The same steps on the whole rod in one array, without cairn. */
  const int total = size * kCells;
  double* a = malloc((total + 2) * sizeof(double));
  double* b = malloc(total * sizeof(double));
  for (int i = 1; i <= total; ++i) a[i] = initial(i, total);
  for (long s = 0; s < kSteps; ++s) {
    a[0] = a[1];
    a[total + 1] = a[total];
    sweep(a, b, total);
    memcpy(&a[1], b, total * sizeof(double));
  }
  const int same = memcmp(&a[1 + rank * kCells], cairn_dist_dual_read(u), kCells * sizeof(double)) == 0;
  free(a);
  free(b);
  uint64_t version = 0;
  check(cairn_dist_version(d, &version), "version");
  check(cairn_dist_delete(&d), "delete"); /* the context is closed before MPI_Finalize */
  int all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0)
    printf("step8: %d ranks resumed at step %ld of %ld, global version %llu; rod %s the plain loop's\n", size, start,
           kSteps, (unsigned long long)version, all ? "equals" : "DIFFERS FROM");
  MPI_Finalize();
  return all ? 0 : 1;
}
