/* step6_streams.c — two components coupled through memory instead of a file.
 *
 * The solver writes its solution with fprintf and the adapter reads it with
 * fscanf, as they would a file; only their open calls changed (fopen ->
 * cairn_stream_open). Where the bytes go is the coupling's choice, made once
 * in $CAIRN_STREAM_PREFIX: here a stream in a cairn pool, which another
 * process can read and which survives a crash of the writer (what fclose
 * committed is there, bit for bit). Run the program twice: the first run is
 * the solver, the second (another process) the adapter. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn/cairn.h"

static int solver(const char* name) {
  FILE* f = cairn_stream_open(name, "w", 0); /* was: fopen(name, "w") */
  if (f == NULL) {
    fprintf(stderr, "solver: %s\n", cairn_errormsg());
    return 1;
  }
  fprintf(f, "%d\n", 100);
  for (int i = 0; i < 100; ++i) fprintf(f, "%d %.17g\n", i, 0.01 * i * i);
  if (fclose(f) != 0) { /* fclose commits the stream */
    fprintf(stderr, "solver: nothing committed: %s\n", cairn_stream_errormsg());
    return 1;
  }
  printf("solver: wrote 100 values to %s\n", name);
  return 0;
}

static int adapter(const char* name) {
  FILE* f = cairn_stream_open(name, "r", 0); /* was: fopen(name, "r") */
  if (f == NULL) {
    fprintf(stderr, "adapter: %s\n", cairn_errormsg());
    return 1;
  }
  int n = 0;
  double sum = 0;
  if (fscanf(f, "%d", &n) != 1) return 1;
  for (int k = 0; k < n; ++k) {
    int i;
    double u;
    if (fscanf(f, "%d %lg", &i, &u) != 2) return 1;
    sum += u;
  }
  fclose(f);
  printf("adapter: read %d values from %s, sum %.2f (expected 3283.50)\n", n, name, sum);
  return sum > 3283.49 && sum < 3283.51 ? 0 : 1;
}

int main(void) {
  static char pool[4096], prefix[4200];
  mkdir(cairn_default_pool_dir(), 0700);
  snprintf(pool, sizeof pool, "%s/step6.pool", cairn_default_pool_dir());
  snprintf(prefix, sizeof prefix, "pmem:%s#", pool);
  setenv("CAIRN_STREAM_PREFIX", prefix, 0); /* a prefix set by the user wins */
  /* The first run finds no pool and solves; the second must find the solution. */
  return access(pool, F_OK) == 0 ? adapter("solution.dat") : solver("solution.dat");
}
