/* heat_mpi.c — the 2D heat loop of heat.c on MPI ranks, resilient with cairn's MPI layer from C (cairn/dist.h).
 *
 *   cairn launch -n 2 -- build/release/examples/heat_mpi_c [steps] [--crash-after K]
 *
 * The same 128 x 128 grid as heat.c, its rows split across the ranks (each rank's rows plus one ghost
 * row from each neighbour per step); rank 0 prints the same checksum line as heat.c, equal to its
 * digit for digit: every cell is computed with the same operations in the same order, and the sum runs
 * through the ranks in row order. The resilience, marked:
 *   (1) each rank's rows are a dual region of a cairn_dist context: read is the newest global step,
 *       never written (ghosts gathered in DRAM), write receives the new step;
 *   (2) cairn_dist_restore is collective: every rank gets the same global step, or a fresh start;
 *   (3) cairn_dist_commit is collective: when it returns the step is durable on every rank.
 * Under `cairn launch` a dead rank ends the job and the launcher relaunches it with --resume; the job
 * continues at the global step. --crash-after K shows it: in the first launch rank 1 announces its
 * commit of step K and SIGKILLs itself. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/dist.h"

enum { N = 128 };

static void check(int rc, const char* what) {
  if (rc >= 0) return;
  fprintf(stderr, "heat_mpi_c: %s: %s: %s\n", what, cairn_strerror(rc), cairn_errormsg());
  MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  long steps = 200, crash_after = -1;
  int resumed = 0;
  for (int k = 1; k < argc; ++k) {
    if (strcmp(argv[k], "--resume") == 0)
      resumed = 1; /* added by cairn launch */
    else if (strcmp(argv[k], "--crash-after") == 0 && k + 1 < argc)
      crash_after = atol(argv[++k]);
    else
      steps = atol(argv[k]);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int j0 = rank * N / size, rows = (rank + 1) * N / size - j0; /* global rows j0 .. j0 + rows - 1 */
  const int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;

  cairn_dist_options o;
  cairn_dist_options_init(&o);
  o.name = "heat_mpi_c";
  cairn_dist* d = NULL;
  cairn_dist_dual* u = NULL;
  check(cairn_dist_create(MPI_COMM_WORLD, &o, &d), "create");
  check(cairn_dist_dual_create(d, "u", sizeof(double) * rows * N, &u), "dual region u"); /* (1) */
  check(cairn_dist_open(d), "open");
  uint64_t done = 0;
  const int rc = cairn_dist_restore(d, &done); /* (2) */
  if (rc == CAIRN_E_NO_VERSION) {
    double* a = cairn_dist_dual_read(u);
    for (int k = 0; k < rows * N; ++k) a[k] = j0 == 0 && k < N ? 1.0 : 0.0; /* a hot edge: row 0 */
  } else {
    check(rc, "restore");
  }

  const long start = (long)done;
  double* cur = malloc(sizeof(double) * (rows + 2) * N); /* my rows between two ghost rows */
  for (long s = start; s < steps; ++s) {
    memcpy(cur + N, cairn_dist_dual_read(u), sizeof(double) * rows * N);
    MPI_Sendrecv(cur + N, N, MPI_DOUBLE, up, 0, cur + (rows + 1) * N, N, MPI_DOUBLE, down, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(cur + rows * N, N, MPI_DOUBLE, down, 1, cur, N, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double* b = cairn_dist_dual_write(u);
    for (int r = 0; r < rows; ++r) {
      const int j = j0 + r;
      const double* a = cur + (r + 1) * N;
      for (int i = 0; i < N; ++i)
        b[r * N + i] = j == 0 || j == N - 1 || i == 0 || i == N - 1
                           ? a[i]
                           : a[i] + 0.2 * (a[i - 1] + a[i + 1] + a[i - N] + a[i + N] - 4 * a[i]);
    }
    check(cairn_dist_commit(d, NULL), "commit"); /* (3) */
    if (!resumed && rank == 1 && s + 1 == crash_after) {
      printf("heat_mpi_c: rank 1 committed step %ld and kills itself\n", s + 1);
      fflush(stdout);
      raise(SIGKILL);
    }
  }
  free(cur);

  /* The checksum: a running sum through the ranks in row order, as heat.c's loop adds the cells. */
  double sum = 0;
  if (rank > 0) MPI_Recv(&sum, 1, MPI_DOUBLE, rank - 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  const double* a = cairn_dist_dual_read(u);
  for (int k = 0; k < rows * N; ++k) sum += a[k];
  if (size > 1 && rank == size - 1)
    MPI_Send(&sum, 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
  else if (rank < size - 1)
    MPI_Send(&sum, 1, MPI_DOUBLE, rank + 1, 2, MPI_COMM_WORLD);
  if (size > 1 && rank == 0) MPI_Recv(&sum, 1, MPI_DOUBLE, size - 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (rank == 0) printf("heat_mpi_c: %d ranks, iterations %ld..%ld, checksum %.15e\n", size, start, steps, sum);
  check(cairn_dist_delete(&d), "delete"); /* before MPI_Finalize */
  MPI_Finalize();
  return 0;
}
