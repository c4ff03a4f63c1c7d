/* jacobi_auto.c — the jacobi app's stream-function kernel (seed 003, EPCC's
 * Jacobi iterations for Laplace's equation, apps/jacobi/stream_function.cpp)
 * written the plain way, as upstream writes it: the new grid into a scratch
 * array, then copied back. The only cairn in it: the two marks of
 * cairn/versioned.h. Compiled by cairn-cc, the versioning pass turns it into
 * an in-place versioned, resumable program (psi: reads in the stencil use the
 * consistent version, the copy-back writes the working one, every iteration
 * commits). Same problem, same initial state, same arithmetic (in the same
 * order) as the hand-written in-place jacobi, hence the same bits.
 *
 * Sample runs (main.cpp):
 *   jacobi-auto --size 256 --iterations 200
 *   jacobi-auto --size 256 --iterations 200 --progress     (a line per iteration; kill it)
 *   CAIRN_RESUME=1 jacobi-auto --size 256 --iterations 200  (continues after the last commit)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/versioned.h"

/* Grid values as in stream_function.cpp: psi* = x^2 - y^2 plus three modes. */
static double mode_factor(size_t n, size_t p, size_t i) {
  const double h = 1.0 / (double)(n + 1);
  const size_t k = (p * i) % (2 * (n + 1));
  return sin(M_PI * (double)k * h);
}

static void initialize(double* psi, size_t n) {
  const size_t w = n + 2;
  const double h = 1.0 / (double)(n + 1);
  const size_t p[3] = {1, 3, n}, q[3] = {1, 2, n};
  const double amplitude[3] = {0.5, 0.25, 0.125};
  for (size_t r = 0; r < w; ++r)
    for (size_t c = 0; c < w; ++c) {
      const double x = (double)c * h, y = (double)r * h;
      double v = x * x - y * y;
      if (r > 0 && r <= n && c > 0 && c <= n)
        for (size_t k = 0; k < 3; ++k) v += amplitude[k] * mode_factor(n, p[k], c) * mode_factor(n, q[k], r);
      psi[r * w + c] = v;
    }
}

/* Runs `iterations` Jacobi iterations on an n x n interior grid and leaves
 * the final grid in `result` ((n+2)^2 doubles). */
void jacobi_auto_run(size_t n, long iterations, int progress, double* result) {
  const size_t w = n + 2;
  double* CAIRN_VERSIONED psi = malloc(w * w * sizeof(double));
  double* tmp = malloc(w * w * sizeof(double));
  if (!psi || !tmp) {
    fprintf(stderr, "jacobi-auto: out of memory\n");
    exit(2);
  }
  initialize(psi, n);

  for (long it = 0; it < iterations; ++it) {
    CAIRN_MAIN_LOOP();
    for (size_t r = 0; r < w; ++r)
      for (size_t c = 0; c < w; ++c) {
        if (r == 0 || r == n + 1 || c == 0 || c == n + 1)
          tmp[r * w + c] = psi[r * w + c];
        else
          tmp[r * w + c] =
              0.25 * (psi[(r - 1) * w + c] + psi[(r + 1) * w + c] + psi[r * w + c - 1] + psi[r * w + c + 1]);
      }
    for (size_t i = 0; i < w * w; ++i) psi[i] = tmp[i];
    if (progress) {
      printf("iteration %ld\n", it);
      fflush(stdout);
    }
  }

  memcpy(result, psi, w * w * sizeof(double));
  free(tmp);
  free(psi);
}
