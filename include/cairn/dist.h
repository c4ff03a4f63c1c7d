/* cairn/dist.h — the MPI layer from C (and, through cairn_dist_create_f,
 * from Fortran): many ranks, one version. C++: cairn/dist.hpp, which this
 * wraps; read its design notes for the invariants.
 *
 * Every rank persists its own part with any persist strategy; the collective
 * commit makes version V global (the newest version every rank holds), and
 * after any failure every rank restores the SAME global version, never a mix
 * of steps. Serial programs include cairn/cairn.h only and never need mpi.h;
 * this header includes both, and its functions live in libcairn_dist
 * (pkg-config cairn-dist, CMake cairn::dist).
 *
 *   MPI_Init(&argc, &argv);
 *   cairn_dist_options o;
 *   cairn_dist_options_init(&o);          // strategy from $CAIRN_STRATEGY, else in-place
 *   o.name = "heat";
 *   cairn_dist* d = NULL;
 *   cairn_dist_dual* u = NULL;
 *   if (cairn_dist_create(MPI_COMM_WORLD, &o, &d) < 0) { ...cairn_errormsg()... }
 *   cairn_dist_dual_create(d, "u", n * sizeof(double), &u);
 *   cairn_dist_open(d);                                    // collective
 *   if (cairn_dist_restore(d, &v) == CAIRN_E_NO_VERSION) { // collective
 *     ...initial state into cairn_dist_dual_read(u)...
 *   }
 *   for (;;) {
 *     step(cairn_dist_dual_read(u), cairn_dist_dual_write(u));  // write all of write
 *     cairn_dist_commit(d, &v);           // collective: version v is global once it returns
 *   }
 *   cairn_dist_delete(&d);                // before MPI_Finalize
 *
 * Regions. A dual region has two versions: read is the newest global version
 * (never written), write receives the iteration being computed, every byte of
 * it; they alternate between the two lanes, so fetch both pointers every
 * iteration. A plain region is updated in place: cairn_dist_begin copies the
 * newest version into the lane being written (one copy per iteration: keep
 * large arrays in dual regions), and its data pointer is fetched after begin.
 * Both are the persistent memory itself: cairn provides them (no application
 * memory is adopted). Regions are registered before cairn_dist_open.
 *
 * Collectives. cairn_dist_open, cairn_dist_restore and cairn_dist_commit are
 * collective over the communicator: every rank calls them in the same order,
 * and each fails on every rank when it fails on one (the same code on every
 * rank; the message says which rank failed and why). A rank that dies makes
 * the others block until the launcher ends the job; `cairn launch` then
 * relaunches it with --resume and cairn_dist_restore gives the global
 * version.
 *
 * A fresh job must start on empty storage: an old job's versions would
 * outrank its own. cairn_dist_remove_storage removes a rank's (not
 * collective; before create on that rank).
 *
 * Errors, threads. As in cairn.h: 0 or a negative CAIRN_E_* code, with
 * cairn_errormsg() the calling thread's message and cairn_strerror(code) the
 * code's name. A context must not be used from two threads at once.
 */
#ifndef CAIRN_DIST_H
#define CAIRN_DIST_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "cairn/cairn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What survives the loss of a rank's storage (ARCHITECTURE.md's table). */
enum {
  CAIRN_DIST_LOCAL = 0,   /* the rank's own two lanes only */
  CAIRN_DIST_PARTNER = 1, /* plus a copy of each rank's global version on the next node */
  CAIRN_DIST_XOR = 2      /* plus XOR parity over a group of nodes (one lost node per group) */
};

/* The options of a context (C++: dist::Options). cairn_dist_options_init
 * fills the defaults; set the fields you need after it. Strings are copied
 * by create: they need to live only until it returns. */
typedef struct cairn_dist_options {
  const char* strategy; /* NULL or "": $CAIRN_STRATEGY, else "in-place" (undo-log is refused) */
  const char* name;     /* the job's base name (NULL: "state"); storage <dir>/<name>.n<P>.r<rank>.{a,b}* */
  const char* dir;      /* NULL or "": cairn_default_pool_dir(); "{numa}" in it: the rank's NUMA node */
  unsigned threads;     /* per rank, for copies and flushes; 0 = all hardware threads */
  unsigned flags;       /* an OR of CAIRN_CKPT_* (cairn.h), default CAIRN_CKPT_DEFAULTS */
  int redundancy;       /* CAIRN_DIST_LOCAL (default), CAIRN_DIST_PARTNER or CAIRN_DIST_XOR */
  int ranks_per_node;   /* > 0: simulated nodes of this many ranks (<dir>/node<k>); 0: the real nodes */
  int xor_group;        /* nodes per parity group (>= 2, default 4) */
  const char* pfs_dir;  /* NULL or "": no flush; else every pfs_every-th version is flushed there */
  uint64_t pfs_every;   /* with pfs_dir: 0 picks the library's default interval */
} cairn_dist_options;

typedef struct cairn_dist cairn_dist;
typedef struct cairn_dist_region cairn_dist_region; /* owned by its context */
typedef struct cairn_dist_dual cairn_dist_dual;     /* owned by its context */

/* Fills *options with the defaults. */
void cairn_dist_options_init(cairn_dist_options* options);

/* Creates a context on `comm` (collective: every rank of comm calls it). The
 * context keeps its own duplicate of comm. `options` may be NULL (defaults).
 * On failure *out is NULL. */
int cairn_dist_create(MPI_Comm comm, const cairn_dist_options* options, cairn_dist** out);
/* As create, with a Fortran communicator handle (an integer: MPI_COMM_WORLD
 * of `use mpi`, or comm%MPI_VAL of mpi_f08), converted with MPI_Comm_f2c. */
int cairn_dist_create_f(MPI_Fint comm, const cairn_dist_options* options, cairn_dist** out);

/* Closes the context and sets *ctx to NULL; *ctx == NULL is a no-op. Every
 * rank calls it before MPI_Finalize (it frees the context's communicators).
 * What was committed stays in storage. */
int cairn_dist_delete(cairn_dist** ctx);

/* Registration, before open. Names are 1 to 47 characters, unique within a
 * context; sizes > 0. On failure *out is NULL. */
int cairn_dist_region_create(cairn_dist* ctx, const char* name, size_t bytes, cairn_dist_region** out);
int cairn_dist_dual_create(cairn_dist* ctx, const char* name, size_t bytes, cairn_dist_dual** out);
/* A plain region's working memory (fetch it after cairn_dist_begin), a dual
 * region's read and write versions (fetch them every iteration). NULL before
 * open and for a NULL handle. */
void* cairn_dist_region_data(const cairn_dist_region* region);
void* cairn_dist_dual_read(const cairn_dist_dual* dual);
void* cairn_dist_dual_write(const cairn_dist_dual* dual);

/* Collective: attaches every rank's storage. Once only. */
int cairn_dist_open(cairn_dist* ctx);
/* Collective: every rank restores the same global version and stores its
 * number in *version (may be NULL; 0 on failure). CAIRN_E_NO_VERSION on every
 * rank when no version is global: a fresh start. A rank whose storage lacks
 * the global version is rebuilt from its partner copy, parity or flushed
 * versions where the options keep them, else every rank fails. */
int cairn_dist_restore(cairn_dist* ctx, uint64_t* version);
/* Starts the next iteration: plain regions carried over into the lane being
 * written. Optional for dual regions only: commit begins one itself. */
int cairn_dist_begin(cairn_dist* ctx);
/* Collective: local commit on every rank, then agreement; *version (may be
 * NULL) is the new global version. When it fails on any rank it fails on
 * every rank and the global version stays where it was. */
int cairn_dist_commit(cairn_dist* ctx, uint64_t* version);

/* The newest global version (0 before the first), this rank and the rank
 * count; *out unchanged on error. */
int cairn_dist_version(const cairn_dist* ctx, uint64_t* out);
int cairn_dist_rank(const cairn_dist* ctx, int* out);
int cairn_dist_size(const cairn_dist* ctx, int* out);

/* Removes everything a job stored for rank `rank` of `nranks` with these
 * options (lanes, the copies and parity it holds, its flushed versions). Not
 * collective; never while a context of that rank is open. */
int cairn_dist_remove_storage(const cairn_dist_options* options, int rank, int nranks);

#ifdef __cplusplus
}
#endif

#endif /* CAIRN_DIST_H */
