// The other refusals, one function each (-DCASE=n): an array whose size the
// pass cannot see, an array the loop never writes, a loop with a second exit
// (break), and a marked program compiled without optimisation.
// RUN: not %cairncc -O2 -DCASE=1 -c %s -o /dev/null 2>&1 | FileCheck --check-prefix=SIZE %s
// RUN: not %cairncc -O2 -DCASE=2 -c %s -o /dev/null 2>&1 | FileCheck --check-prefix=UNWRITTEN %s
// RUN: not %cairncc -O2 -DCASE=3 -c %s -o /dev/null 2>&1 | FileCheck --check-prefix=BREAK %s
// RUN: not %cairncc -O0 -DCASE=2 -c %s -o /dev/null 2>&1 | FileCheck --check-prefix=O0 %s
// SIZE: error: cairn-versioning: marked array 'u' ({{.*}}refuse_misc.c:21) is assigned a pointer that does not come from malloc, calloc, aligned_alloc or new[] here
// UNWRITTEN: error: cairn-versioning: marked array 'u' (line 23) is never written in the main loop
// BREAK: error: cairn-versioning: the main loop at {{.*}}refuse_misc.c:27 leaves from more than one place
// O0: error: cairn-versioning: marked arrays or main loop need optimisation (-O1 or more)
#include <stdlib.h>

#include "cairn/versioned.h"

double* get(long n);
void observe(double);

void run(long n, long iterations) {
#if CASE == 1
  double* CAIRN_VERSIONED u = get(n);
#else
  double* CAIRN_VERSIONED u = calloc(n, sizeof(double));
#endif
  double* v = calloc(n, sizeof(double));
  for (long it = 0; it < iterations; ++it) {
    CAIRN_MAIN_LOOP();
#if CASE == 2
    for (long i = 0; i < n; ++i) v[i] = u[i] * 0.5;
#else
    for (long i = 0; i < n; ++i) u[i] = u[i] * 0.5 + 1.0;
#endif
#if CASE == 3
    if (u[0] > 1.5) break;
#endif
  }
  observe(u[0] + v[0]);
  free(v);
}
