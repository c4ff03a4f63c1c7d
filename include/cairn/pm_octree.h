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
 * cairn_errormsg() set, and pm_create_err and pm_restore_err do the same and
 * also store the CAIRN_E_* code in *error (which may be NULL; 0 on success).
 * pm_restore fails with CAIRN_E_NOT_FOUND if there is no file and
 * CAIRN_E_NO_VERSION if it was never persisted (a crash before the first
 * pm_persistent); pm_create refuses an existing file (CAIRN_E_ALREADY_EXISTS).
 * Restart code wants neither distinction: cairn_octree_open_or_create
 * (cairn/cairn.h) restores if there is a persisted version and creates the
 * tree afresh if not, returning every other error (a damaged pool, another
 * layout) without touching the file.
 *
 *   cairn_octree_options o;
 *   cairn_octree_options_init(&o);
 *   o.data_size = sizeof(struct cell);
 *   pmoctree* t = NULL;
 *   uint64_t version = 0;
 *   if (cairn_octree_open_or_create("/dev/shm/run.pool", &o, &t, &version) < 0) {
 *     fprintf(stderr, "%s\n", cairn_errormsg());   // damaged, or not this program's tree
 *     return 1;
 *   }
 *   if (version == 0) { ... build the mesh ... }
 *   for (;;) { ... refine, coarsen, solve on the leaves ...; pm_persistent(t); }
 *   pm_delete(t);   // the run is over: the pool file goes
 *
 * A step counter or the simulation time belongs in the root octant's
 * payload (cairn_octree_root_read / cairn_octree_root_write): pm_persistent
 * commits it with the mesh, so a restored tree says where to resume.
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

/* pm_create; on failure NULL, *error (if not NULL) the CAIRN_E_* code. */
static inline pmoctree* pm_create_err(const char* path, const cairn_octree_options* options, int* error) {
  cairn_octree* t = NULL;
  const int rc = cairn_octree_create(path, options, &t);
  if (error != NULL) *error = rc;
  return rc == 0 ? t : NULL;
}

static inline pmoctree* pm_create(const char* path, const cairn_octree_options* options) {
  return pm_create_err(path, options, NULL);
}

static inline int pm_persistent(pmoctree* tree) { return cairn_octree_persist(tree, NULL); }

/* pm_restore; on failure NULL, *error (if not NULL) the CAIRN_E_* code. */
static inline pmoctree* pm_restore_err(const char* path, const cairn_octree_options* options, int* error) {
  cairn_octree* t = NULL;
  const int rc = cairn_octree_restore(path, options, &t);
  if (error != NULL) *error = rc;
  return rc == 0 ? t : NULL;
}

static inline pmoctree* pm_restore(const char* path, const cairn_octree_options* options) {
  return pm_restore_err(path, options, NULL);
}

/* Deletes every octant of both versions: the pool file, then the handle. */
static inline int pm_delete(pmoctree* tree) { return cairn_octree_delete(&tree); }

#endif /* CAIRN_PM_OCTREE_H */
