// Special case II (seed 004, Fig. 10): u is updated by two loops with different
// coverage (1..n-2, then 0..n-1): non-uniform updates. The pass does not
// version u; it falls back to the copy (a plain region, copied at each
// commit): every access goes to cairn_auto_plain's buffer, none to a version.
// RUN: %cairncc -O2 -S -emit-llvm -Rpass=cairn-versioning %s -o - 2>%t.remarks | FileCheck %s
// RUN: FileCheck --check-prefix=REMARK %s < %t.remarks
// REMARK: remark: array 'u' (line [[#@LINE+10]]) persisted by copy at each commit: updated in more than one place of the iteration (special case II: non-uniform)
// REMARK: remark: array 'v' (line [[#@LINE+10]]) persisted by copy at each commit: its update does not run in every iteration (special case II: non-uniform)
// REMARK: remark: array 'w' (line [[#@LINE+10]]) persisted by copy at each commit: the pass cannot prove its update writes the same elements every iteration
#include <stdlib.h>

#include "cairn/versioned.h"

void observe(double);

void run(long n, long iterations, double e, double f) {
  double* CAIRN_VERSIONED u = calloc(n, sizeof(double));
  double* CAIRN_VERSIONED v = calloc(n, sizeof(double));
  double* CAIRN_VERSIONED w = calloc(n * n, sizeof(double));
  for (long it = 0; it < iterations; ++it) {
    CAIRN_MAIN_LOOP();
    for (long i = 1; i < n - 1; ++i) u[i] = u[i] + e;
    for (long i = 0; i < n; ++i) u[i] = u[i] + f;
    if (it % 3 == 0)  // updated in some iterations only
      for (long i = 0; i < n; ++i) v[i] = v[i] * f + u[i];
    for (long i = 0; i < n; ++i) w[(it % n) * n + i] = u[i];  // one band per iteration (sharpen's pattern)
  }
  observe(u[0] + v[0] + w[0]);
  free(w);
  free(u);
  free(v);
}
// CHECK-LABEL: define {{.*}} @run(
// CHECK: call ptr @cairn_versioned_array({{.*}}, i32 1)
// CHECK: call ptr @cairn_versioned_array({{.*}}, i32 1)
// CHECK: call ptr @cairn_versioned_array({{.*}}, i32 1)
// CHECK-NOT: cairn_auto_working
// CHECK-NOT: cairn_auto_consistent
// CHECK: call ptr @cairn_auto_plain(
// CHECK: call void @cairn_auto_commit(
