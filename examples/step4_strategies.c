/* step4_strategies.c — tutorial step 4 (C): switch strategies without touching the code, and compare them.
 *
 * The C twin of step4_strategies.cpp. cairn_ckpt_create(NULL, ...) takes the
 * strategy from $CAIRN_STRATEGY; without the variable the program runs the
 * same loop under every strategy cairn_ckpt_strategy_name() lists, printing
 * the commit cost of each and checking that each restores the last version
 * exactly. `cairn bench strategies` is the real comparison.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cairn/cairn.h"

#define N (1 << 20) /* 8 MiB of doubles */
#define STEPS 20

static void check(int rc, const char* what) {
  if (rc < 0) {
    fprintf(stderr, "step4_c: %s: %s\n", what, cairn_errormsg());
    exit(2);
  }
}

static cairn_ckpt* make(const char* strategy, cairn_ckpt_dual** u) {
  char name[64];
  snprintf(name, sizeof name, "step4_c-%s", strategy ? strategy : "env");
  cairn_ckpt* ck = NULL;
  check(cairn_ckpt_create(strategy, name, NULL, 0, CAIRN_CKPT_DEFAULTS, &ck), "create");
  check(cairn_ckpt_dual_create(ck, "u", N * sizeof(double), u), "dual region u");
  check(cairn_ckpt_open(ck), "open");
  return ck;
}

static int run(const char* strategy) {
  cairn_ckpt_dual* u = NULL;
  cairn_ckpt* ck = make(strategy, &u);
  for (int s = 1; s <= STEPS; ++s) {
    const double* in = cairn_ckpt_dual_read(u);
    double* out = cairn_ckpt_dual_write(u);
    for (size_t i = 0; i < N; ++i) out[i] = 0.5 * in[i] + s;
    check(cairn_ckpt_commit(ck, NULL), "commit");
  }
  cairn_ckpt_stats st;
  check(cairn_ckpt_stats_get(ck, &st), "stats");
  cairn_ckpt_delete(&ck);

  ck = make(strategy, &u);
  uint64_t v = 0;
  check(cairn_ckpt_restore(ck, &v), "restore");
  double expect = 0;
  for (int s = 1; s <= STEPS; ++s) expect = 0.5 * expect + s;
  int ok = v == STEPS;
  const double* got = cairn_ckpt_dual_read(u);
  for (size_t i = 0; ok && i < N; ++i) ok = got[i] == expect;
  printf("%-11s commit %8.3f ms   version %llu %s\n", cairn_ckpt_strategy(ck), st.total_commit_ns / 1e6 / STEPS,
         (unsigned long long)v, ok ? "restored exactly" : "WRONG");
  cairn_ckpt_delete(&ck);
  return ok;
}

int main(void) {
  const char* env = getenv("CAIRN_STRATEGY");
  if (env != NULL && *env != '\0') return run(NULL) ? 0 : 1;
  int ok = 1;
  for (size_t i = 0; i < cairn_ckpt_strategy_count(); ++i) ok = run(cairn_ckpt_strategy_name(i)) && ok;
  return ok ? 0 : 1;
}
