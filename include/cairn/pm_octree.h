/* pm_octree.h — seed 000's PM-octree interface (its Table 1) as aliases over cairn_octree_*. */
/*
 * Seed 000 gives a simulation four calls:
 *
 *   pmoctree* pm_create(octree* tree)      create a new PM-octree; return V_i
 *   void pm_persistent(pmoctree* tree)     create a persistent version
 *   pmoctree* pm_restore(void)             restore; return V_i
 *   void pm_delete(pmoctree* tree)         delete all octants in NVBM and DRAM
 *
 * A reader of the paper finds them here. Differences, and why: the seed's
 * pm_create takes an in-core octree to convert and its pm_restore has no
 * arguments (one tree per process, at a place the library knows); here a tree
 * lives in a pool file that the caller names, with its dimension and payload
 * size, and is built with cairn_octree_uniform/refine/... after pm_create.
 * pm_persistent returns an error code instead of void, because a persist can
 * fail (a full pool); pm_create and pm_restore return NULL on failure with
 * cairn_errormsg() set (pm_restore: CAIRN_E_NO_VERSION if nothing was ever
 * persisted, then create instead).
 *
 *   cairn_octree_options o;
 *   cairn_octree_options_init(&o);
 *   o.data_size = sizeof(struct cell);
 *   pmoctree* t = pm_restore("/dev/shm/run.pool", &o);
 *   if (t == NULL) { t = pm_create("/dev/shm/run.pool", &o); ... build the mesh ... }
 *   for (;;) { ... refine, coarsen, solve on the leaves ...; pm_persistent(t); }
 *   pm_delete(t);   // the run is over: the pool file goes
 *
 * These names are common words, so they live in this header only, which a
 * program includes on purpose; cairn/cairn.h does not declare them and the
 * library exports no such symbols (everything here is static inline).
 */
#ifndef CAIRN_PM_OCTREE_H
#define CAIRN_PM_OCTREE_H

#include <stdlib.h>
#include <string.h>

#include "cairn/cairn.h"

typedef cairn_octree pmoctree;

static inline pmoctree* pm_create(const char* path, const cairn_octree_options* options) {
  cairn_octree* t = NULL;
  return cairn_octree_create(path, options, &t) == 0 ? t : NULL;
}

static inline int pm_persistent(pmoctree* tree) { return cairn_octree_persist(tree, NULL); }

static inline pmoctree* pm_restore(const char* path, const cairn_octree_options* options) {
  cairn_octree* t = NULL;
  return cairn_octree_restore(path, options, &t) == 0 ? t : NULL;
}

/* Deletes every octant of both versions: the pool file, then the handle. */
static inline int pm_delete(pmoctree* tree) { return cairn_octree_delete(&tree); }

#endif /* CAIRN_PM_OCTREE_H */
