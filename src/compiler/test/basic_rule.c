// The basic rule through clang -O2 (the plugin in its place in the pipeline):
// a Jacobi sweep reads u into a scratch array, then copies it back. Reads of u
// (the sweep, before the update) use the consistent version, the copy-back
// (after inlining and loop idiom recognition, one memcpy) writes the working one.
// RUN: %cairncc -O2 -S -emit-llvm -Rpass=cairn-versioning %s -o - 2>%t.remarks | FileCheck %s
// RUN: FileCheck --check-prefix=REMARK %s < %t.remarks
// REMARK: basic_rule.c:[[#@LINE+12]]:{{.*}} remark: array 'u' (line [[#@LINE+12]]) versioned in place by the basic rule: {{[1-9][0-9]*}} reads of the consistent version, 0 reads and 1 writes of the working version
#include <stdlib.h>

#include "cairn/versioned.h"

static void sweep(double* out, const double* in, long n) {
  out[0] = in[0];
  out[n - 1] = in[n - 1];
  for (long i = 1; i < n - 1; ++i) out[i] = 0.5 * (in[i - 1] + in[i + 1]);
}

double run(long n, long iterations) {
  double* CAIRN_VERSIONED u = malloc(n * sizeof(double));
  double* tmp = malloc(n * sizeof(double));
  for (long i = 0; i < n; ++i) u[i] = (double)i;
  for (long it = 0; it < iterations; ++it) {
    CAIRN_MAIN_LOOP();
    sweep(tmp, u, n);
    for (long i = 0; i < n; ++i) u[i] = tmp[i];
  }
  double r = u[n / 2];
  free(u);
  free(tmp);
  return r;
}
// CHECK-LABEL: define {{.*}} @run(
// CHECK: call ptr @cairn_versioned_array(ptr {{.*}}, i64 {{.*}}, ptr {{.*}}@cairn.name, i32 [[#]], i32 0)
// CHECK: call i64 @cairn_auto_enter(i64 0, i64 {{.*}}, i64 1)
// CHECK: call void @cairn_auto_exit()
// CHECK: [[C:%.*]] = {{.*}}call ptr @cairn_auto_consistent(
// CHECK: [[W:%.*]] = {{.*}}call ptr @cairn_auto_working(
// CHECK: call void @cairn_auto_stream_copy(ptr {{.*}}, ptr {{.*}}[[W]], ptr
// CHECK-DAG: call void @cairn_auto_commit(i64
// CHECK-NOT: call void @cairn_main_loop_mark
