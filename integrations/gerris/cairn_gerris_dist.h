/* cairn_gerris_dist.h — the module's C entry into cairn::dist (cairn_gerris_dist.cpp): one agreed step. */
#ifndef CAIRN_GERRIS_DIST_H
#define CAIRN_GERRIS_DIST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What each rank commits with a step: the step, the lane of its pools that
 * holds it and that lane's PM-octree version (dist_version: set on restore,
 * the agreed version). */
typedef struct {
  uint64_t step;
  uint64_t lane;
  uint64_t octree_version;
  uint64_t dist_version;
} cp_dist_record;

/* Collective (MPI_COMM_WORLD, after MPI_Init). Opens this rank's agreement
 * storage in `dir` (fresh: removed first); on return `restored` is the
 * record of the version every rank agreed on last (all zero: none), `rank`
 * and `ranks` the run's, `storage_dir` the rank's node directory (dist's
 * placement: "{numa}" resolved, a simulated node's directory). 0, or -1 with
 * a message in err. */
int cp_dist_open(const char* dir, const char* name, int resume, cp_dist_record* restored, int* rank, int* ranks,
                 char* storage_dir, size_t storage_len, char* err, size_t errlen);
/* Collective: commits `record` (its step must be durable in this rank's
 * pools) and returns the new agreed version in *version. */
int cp_dist_commit(const cp_dist_record* record, uint64_t* version, char* err, size_t errlen);
uint64_t cp_dist_version(void);
/* Ends the whole run (MPI_Abort) where MPI is running: a process that stops
 * alone would leave the others waiting in a collective (and its exit in
 * MPI_Finalize's fence). */
void cp_dist_abort(int code);
void cp_dist_close(void);

#ifdef __cplusplus
}
#endif

#endif
