/* step7_octree.c — tutorial step 7 (C): an adaptive mesh persisted at every step, resumed after a crash.
 *
 * The C++ step's mesh (a quadtree following the edge of a moving disc) with
 * seed 000's calls from cairn/pm_octree.h (pm_create, pm_persistent,
 * pm_delete). The changes for resilience, marked:
 *   (1) cairn_octree_open_or_create brings back the last persisted version;
 *       a missing pool, or one whose first persist never happened (a crash
 *       before it), means a fresh tree; anything else (a damaged pool, a
 *       pool of another program) is an error, and the pool is left alone;
 *   (2) the step counter lives in the root octant's payload, so it is
 *       persisted with the mesh;
 *   (3) pm_persistent at the end of every step.
 * At the end the same steps run in a second tree from scratch: a resumed run
 * must give the same checksum as an uninterrupted one.
 *
 * Run it twice: the second run finds the finished mesh and computes nothing.
 * `--crash-after N` kills the process (SIGKILL) right after step N's persist:
 * the next run resumes at step N.
 *   build/release/examples/step7_octree_c --crash-after 17; build/release/examples/step7_octree_c */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/pm_octree.h"

enum { kMaxLevel = 7, kSteps = 40 };

/* A leaf's payload is its distance to the edge; the root's is the number of
 * steps done (the root is never a leaf here: far_from_edge never holds for it). */
struct cell {
  int64_t steps_done; /* root: steps persisted so far; leaves: 0 */
  double distance;    /* leaves: centre to the disc's edge; root: unused */
};

/* Edges and corners are in units of the finest octant: the root's edge is 2^CAIRN_OCTREE_MAX_LEVEL. */
static double size_of(const cairn_octant* o) { return 1.0 / (double)(1u << o->level); }
static double centre(uint32_t at, const cairn_octant* o) {
  return at / (double)(1u << CAIRN_OCTREE_MAX_LEVEL) + 0.5 * size_of(o);
}
/* Signed distance of the octant's centre to the edge of the disc at `step`. */
static double distance(const cairn_octant* o, long step) {
  const double cx = 0.2 + 0.6 * (double)step / kSteps, cy = 0.5, r = 0.2;
  return hypot(centre(o->x, o) - cx, centre(o->y, o) - cy) - r;
}

static int near_edge(const cairn_octant* o, const void* data, void* user) {
  (void)data;
  return fabs(distance(o, *(const long*)user)) < size_of(o);
}
static void init(const cairn_octant* o, void* data, const void* parent, void* user) {
  (void)o, (void)parent, (void)user;
  memset(data, 0, sizeof(struct cell));
}
static int far_from_edge(const cairn_octant* parent, const void* const* children, void* user) {
  (void)children;
  return fabs(distance(parent, *(const long*)user)) > 2 * size_of(parent);
}
static void merge(const cairn_octant* parent, void* data, const void* const* children, void* user) {
  (void)parent, (void)children, (void)user;
  memset(data, 0, sizeof(struct cell));
}
static int fill(const cairn_octant* leaf, void* data, void* user) {
  ((struct cell*)data)->distance = distance(leaf, *(const long*)user);
  return 1;
}

/* One step of the mesh: adapt to the edge at `step`, fill the leaves, count the step. */
static int advance(cairn_octree* t, long step) {
  const int64_t done = step + 1;
  int rc = cairn_octree_refine(t, 1, kMaxLevel, near_edge, init, &step);
  if (rc == 0) rc = cairn_octree_coarsen(t, 0, far_from_edge, merge, &step);
  if (rc == 0) rc = cairn_octree_balance(t, 0, init, &step);
  if (rc == 0) rc = cairn_octree_update_leaves(t, fill, &step);
  if (rc == 0) rc = cairn_octree_root_write(t, &done, sizeof done); /* (2) */
  return rc;
}

static int fail(const char* what) {
  fprintf(stderr, "step7: %s: %s\n", what, cairn_errormsg());
  return 1;
}

int main(int argc, char** argv) {
  const long crash_after = argc == 3 && strcmp(argv[1], "--crash-after") == 0 ? atol(argv[2]) : -1;
  const char* dir = getenv("CAIRN_POOL_DIR");
  if (dir == NULL) dir = "/dev/shm/cairn";
  mkdir(dir, 0755);
  char path[4096], again[4096];
  snprintf(path, sizeof path, "%s/step7_c.pool", dir);
  snprintf(again, sizeof again, "%s/step7_c-uninterrupted.pool", dir);
  cairn_octree_options o;
  cairn_octree_options_init(&o);
  o.dims = 2;
  o.data_size = sizeof(struct cell);
  o.pool_size = 64u << 20;

  pmoctree* t = NULL;
  if (cairn_octree_open_or_create(path, &o, &t, NULL) != 0) return fail(path); /* (1) */
  int64_t done = 0;
  if (cairn_octree_root_read(t, &done, sizeof done) != 0) return fail(path); /* (2) */
  const long start = (long)done;
  for (long s = start; s < kSteps; ++s) {
    if (advance(t, s) != 0) return fail("a step");
    if (pm_persistent(t) != 0) return fail("persist"); /* (3) */
    if (s + 1 == crash_after) raise(SIGKILL);
  }

  /* The same steps in a tree that never stopped give the same bits. */
  cairn_octree_remove(again);
  pmoctree* u = pm_create(again, &o);
  if (u == NULL) return fail(again);
  for (long s = 0; s < kSteps; ++s)
    if (advance(u, s) != 0) return fail("a step of the uninterrupted run");
  uint64_t a = 0, b = 0, leaves = 0;
  if (cairn_octree_checksum(t, &a) != 0 || cairn_octree_checksum(u, &b) != 0 ||
      cairn_octree_leaf_count(t, &leaves) != 0)
    return fail("checksum");
  printf("step7 (C): resumed at step %ld of %d, version %llu, %llu leaves; mesh %s the uninterrupted run's\n", start,
         kSteps, (unsigned long long)cairn_octree_version(t), (unsigned long long)leaves,
         a == b ? "equals" : "DIFFERS FROM");
  pm_delete(u);
  cairn_octree_close(&t);
  return a == b ? 0 : 1;
}
