// Refusal: the marked pointer is passed to a function the pass cannot see
// into, inside the main loop. Its accesses there could not be redirected to
// the right version, so the pass stops with an error naming the line and the array.
// RUN: not %cairncc -O2 -c %s -o /dev/null 2>&1 | FileCheck %s
// CHECK: refuse_escape.c:17:{{.*}}error: cairn-versioning: marked array 'u' (line 13) escapes to a call of 'smooth' at {{.*}}refuse_escape.c:17: inside the main loop the pass cannot redirect the callee's accesses
#include <stdlib.h>

#include "cairn/versioned.h"

void smooth(double* u, long n);  // defined elsewhere

void run(long n, long iterations) {
  double* CAIRN_VERSIONED u = calloc(n, sizeof(double));
  for (long it = 0; it < iterations; ++it) {
    CAIRN_MAIN_LOOP();
    for (long i = 0; i < n; ++i) u[i] += 1.0;
    smooth(u, n);
  }
  free(u);
}
