/* heat.c — the 2D heat loop made resilient from C: the field is persistent memory (cairn.h).
 *
 *   build/release/examples/heat_c [steps]   # run twice: the second run resumes what the first committed
 *
 * The same problem as heat.f90, heat.cpp and heat.py: a 128 x 128 grid, one hot edge (row 0), fixed
 * edges, explicit steps; the program prints the sum of the field after `steps` (default 200) steps.
 * The field is a cairn dual region: read is the last committed step, the loop writes all of write,
 * and cairn_ckpt_commit makes it durable and swaps the two. The committed version counts the steps.
 * Kill the program at any moment: the next run restores the last committed step bit for bit and ends
 * with the same checksum as an uninterrupted run. $CAIRN_STRATEGY picks the strategy, $CAIRN_POOL_DIR
 * the directory. heat_mpi.c is the same loop on 2 ranks. */
#include <stdio.h>
#include <stdlib.h>

#include "cairn/cairn.h"

enum { N = 128 };

static void check(int rc, const char* what) {
  if (rc >= 0) return;
  fprintf(stderr, "heat_c: %s: %s: %s\n", what, cairn_strerror(rc), cairn_errormsg());
  exit(2);
}

int main(int argc, char** argv) {
  const long steps = argc > 1 ? atol(argv[1]) : 200;
  cairn_ckpt* ck = NULL;
  cairn_ckpt_dual* u = NULL;
  check(cairn_ckpt_create(NULL, "heat_c", NULL, 0, CAIRN_CKPT_DEFAULTS, &ck), "create");
  check(cairn_ckpt_dual_create(ck, "u", sizeof(double) * N * N, &u), "dual region u");
  check(cairn_ckpt_open(ck), "open");
  uint64_t done = 0;
  int rc = cairn_ckpt_restore(ck, &done);
  if (rc == CAIRN_E_NO_VERSION) { /* nothing committed yet: the initial state */
    double* a = cairn_ckpt_dual_read(u);
    for (int k = 0; k < N * N; ++k) a[k] = k < N ? 1.0 : 0.0; /* a hot edge */
  } else {
    check(rc, "restore");
  }

  const long start = (long)done;
  for (long s = start; s < steps; ++s) {
    const double* a = cairn_ckpt_dual_read(u);
    double* b = cairn_ckpt_dual_write(u);
    /* u[j][i] = u[j * N + i]; the same operations, in the same order, as the Fortran loop. */
    for (int k = 0; k < N * N; ++k) b[k] = a[k];
    for (int j = 1; j < N - 1; ++j)
      for (int i = 1; i < N - 1; ++i) {
        const int k = j * N + i;
        b[k] = a[k] + 0.2 * (a[k - 1] + a[k + 1] + a[k - N] + a[k + N] - 4 * a[k]);
      }
    check(cairn_ckpt_commit(ck, NULL), "commit"); /* durable from here */
  }

  const double* a = cairn_ckpt_dual_read(u);
  double sum = 0;
  for (int k = 0; k < N * N; ++k) sum += a[k];
  printf("heat_c: iterations %ld..%ld, checksum %.15e\n", start, steps, sum);
  check(cairn_ckpt_delete(&ck), "delete");
  return 0;
}
