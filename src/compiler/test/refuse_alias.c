// Refusal: the loop writes through a pointer the pass cannot tell apart from
// the marked array (a parameter: it may point into u's original buffer).
// RUN: not %cairncc -O2 -c %s -o /dev/null 2>&1 | FileCheck %s
// CHECK: refuse_alias.c:14:{{.*}}error: cairn-versioning: the access at {{.*}}refuse_alias.c:14 in the main loop goes through a parameter of the function the pass cannot tell apart from the marked arrays
#include <stdlib.h>

#include "cairn/versioned.h"

void run(double* out, long n, long iterations) {
  double* CAIRN_VERSIONED u = calloc(n, sizeof(double));
  for (long it = 0; it < iterations; ++it) {
    CAIRN_MAIN_LOOP();
    for (long i = 0; i < n; ++i) u[i] = u[i] * 0.5 + 1.0;
    for (long i = 0; i < n; ++i) out[i] = u[i];
  }
  free(u);
}
