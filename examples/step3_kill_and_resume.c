/* step3_kill_and_resume.c — tutorial step 3 (C): kill the loop with SIGKILL, resume, get the same answer.
 *
 * The C twin of step3_kill_and_resume.cpp: a child runs the loop and is
 * killed halfway through writing iteration 137; the parent restores the last
 * committed version (iteration 136), finishes, and compares with an
 * uninterrupted run, bit for bit.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cairn/cairn.h"

#define N (1 << 16)
#define STEPS 300L
#define KILL_AT 137L

static void sweep(const double* in, double* out, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    out[i] = (i == 0 || i + 1 == N) ? in[i] : in[i] + 0.25 * (in[i - 1] - 2 * in[i] + in[i + 1]);
}

static void check(int rc, const char* what) {
  if (rc < 0) {
    fprintf(stderr, "step3_c: %s: %s\n", what, cairn_errormsg());
    exit(2);
  }
}

/* Runs the loop on the stored state, killing itself in iteration kill_at
 * unless it is 0; copies the final field to result; returns the first
 * iteration it ran. */
static long run(double* result, long kill_at) {
  cairn_ckpt* ck = NULL;
  cairn_ckpt_dual* u = NULL;
  cairn_ckpt_region* done = NULL;
  check(cairn_ckpt_create(NULL, "step3_c", NULL, 0, CAIRN_CKPT_DEFAULTS, &ck), "create");
  check(cairn_ckpt_dual_create(ck, "u", N * sizeof(double), &u), "dual region u");
  check(cairn_ckpt_region_create(ck, "steps_done", sizeof(long), &done), "region steps_done");
  check(cairn_ckpt_open(ck), "open");
  int rc = cairn_ckpt_restore(ck, NULL);
  if (rc == CAIRN_E_NO_VERSION) {
    double* u0 = cairn_ckpt_dual_read(u);
    for (size_t i = 0; i < N; ++i) u0[i] = (double)(i % 97);
    *(long*)cairn_ckpt_region_data(done) = 0;
  } else {
    check(rc, "restore");
  }
  const long start = *(long*)cairn_ckpt_region_data(done);
  for (long s = start; s < STEPS; ++s) {
    sweep(cairn_ckpt_dual_read(u), cairn_ckpt_dual_write(u), 0, N / 2);
    if (s + 1 == kill_at) raise(SIGKILL); /* half of the new version written */
    sweep(cairn_ckpt_dual_read(u), cairn_ckpt_dual_write(u), N / 2, N);
    *(long*)cairn_ckpt_region_data(done) = s + 1;
    check(cairn_ckpt_commit(ck, NULL), "commit");
  }
  if (result != NULL) memcpy(result, cairn_ckpt_dual_read(u), N * sizeof(double));
  cairn_ckpt_delete(&ck);
  return start;
}

int main(void) {
  const pid_t child = fork();
  if (child == 0) {
    run(NULL, KILL_AT);
    _exit(0); /* not reached */
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    fprintf(stderr, "step3_c: the child was not killed (status %d)\n", status);
    return 1;
  }
  double* resumed = malloc(N * sizeof(double));
  const long from = run(resumed, 0);

  double* a = malloc(N * sizeof(double));
  double* b = malloc(N * sizeof(double));
  for (size_t i = 0; i < N; ++i) a[i] = (double)(i % 97);
  for (long s = 0; s < STEPS; ++s) {
    sweep(a, b, 0, N);
    double* t = a;
    a = b;
    b = t;
  }
  const int same = memcmp(a, resumed, N * sizeof(double)) == 0;
  printf("step3_c: child killed in iteration %ld; resumed after iteration %ld; result %s the uninterrupted run's\n",
         KILL_AT, from, same ? "equals" : "DIFFERS FROM");
  free(a);
  free(b);
  free(resumed);
  return same && from == KILL_AT - 1 ? 0 : 1;
}
