// Refusal: a value other than the counter (the running sum) is carried from
// one iteration to the next in a variable; a resumed run would lose it.
// RUN: not %cairncc -O2 -c %s -o /dev/null 2>&1 | FileCheck %s
// CHECK: error: cairn-versioning: the main loop at {{.*}}refuse_carried.c:13 carries a value other than its counter from one iteration to the next in a variable
#include <stdlib.h>

#include "cairn/versioned.h"

double run(long n, long iterations) {
  double* CAIRN_VERSIONED u = calloc(n, sizeof(double));
  double sum = 0;
  for (long it = 0; it < iterations; ++it) {
    CAIRN_MAIN_LOOP();
    for (long i = 0; i < n; ++i) u[i] = u[i] * 0.5 + 1.0;
    sum += u[0];
  }
  free(u);
  return sum;
}
