/* step2_resilient_loop.c — tutorial step 2 (C): make an existing loop resilient with the cairn_ckpt_* API.
 *
 * The C twin of step2_resilient_loop.cpp: the same heat sweep, the same four
 * changes (1) regions from cairn, (2) open, (3) restore if something was
 * committed, (4) commit every iteration. Every call returns 0 or a negative
 * CAIRN_E_* code, and cairn_errormsg() says what went wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/cairn.h"

#define N (1 << 16)
#define STEPS 200L

static void sweep(const double* in, double* out) {
  out[0] = in[0];
  out[N - 1] = in[N - 1];
  for (size_t i = 1; i + 1 < N; ++i) out[i] = in[i] + 0.25 * (in[i - 1] - 2 * in[i] + in[i + 1]);
}

static void initial(double* u) {
  for (size_t i = 0; i < N; ++i) u[i] = (i > N / 3 && i < 2 * N / 3) ? 100.0 : 0.0;
}

static int check(int rc, const char* what) {
  if (rc < 0) {
    fprintf(stderr, "step2_c: %s: %s\n", what, cairn_errormsg());
    exit(2);
  }
  return rc;
}

int main(void) {
  cairn_ckpt* ck = NULL;
  cairn_ckpt_dual* u = NULL;
  cairn_ckpt_region* done = NULL;
  uint64_t version = 0;
  check(cairn_ckpt_create(NULL, "step2_c", NULL, 0, CAIRN_CKPT_DEFAULTS, &ck), "create");
  check(cairn_ckpt_dual_create(ck, "u", N * sizeof(double), &u), "dual region u"); /* (1) */
  check(cairn_ckpt_region_create(ck, "steps_done", sizeof(long), &done), "region steps_done");
  check(cairn_ckpt_open(ck), "open");        /* (2) */
  int rc = cairn_ckpt_restore(ck, &version); /* (3) */
  if (rc == CAIRN_E_NO_VERSION) {
    initial(cairn_ckpt_dual_read(u));
    *(long*)cairn_ckpt_region_data(done) = 0;
  } else {
    check(rc, "restore");
  }
  const long start = *(long*)cairn_ckpt_region_data(done);
  for (long s = start; s < STEPS; ++s) {
    sweep(cairn_ckpt_dual_read(u), cairn_ckpt_dual_write(u));
    *(long*)cairn_ckpt_region_data(done) = s + 1;
    check(cairn_ckpt_commit(ck, &version), "commit"); /* (4) */
  }

  double* a = malloc(N * sizeof(double));
  double* b = malloc(N * sizeof(double));
  initial(a);
  for (long s = 0; s < STEPS; ++s) {
    sweep(a, b);
    double* t = a;
    a = b;
    b = t;
  }
  const int same = memcmp(a, cairn_ckpt_dual_read(u), N * sizeof(double)) == 0;
  printf("step2_c (%s): resumed at step %ld of %ld, version %llu; result %s the plain loop's\n",
         cairn_ckpt_strategy(ck), start, STEPS, (unsigned long long)version, same ? "equals" : "DIFFERS FROM");
  free(a);
  free(b);
  cairn_ckpt_delete(&ck);
  return same ? 0 : 1;
}
