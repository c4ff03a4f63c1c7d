/* seed001.h — seed 001's DRAM-cache checkpoint API (its Table 1 and Listing 5) as aliases over cairn_ckpt_*. */
/*
 * Seed 001 (§3.2.4) checkpoints a DRAM working set into NVRAM with five
 * calls. A reader of the paper finds them here under the same names:
 *
 *   int vals[32];                                     // Listing 5
 *   ckpt_context* ctx = init_ckpt_context();
 *   reg_region(ctx, &vals[0], sizeof(int) * 32);
 *   vals[3] = 5;
 *   do_checkpoint(ctx);
 *
 * is the same program as, in Table 1's names,
 *
 *   ckpt_ctx* ctx = init_backup_context();
 *   register_region(ctx, &vals[0], sizeof(int) * 32);
 *   vals[3] = 5;
 *   do_backup(ctx);
 *
 * and after a crash a fresh process gets the data back with
 *
 *   ckpt_ctx* ctx = init_backup_context();
 *   register_region(ctx, &vals[0], sizeof(int) * 32);   // the same registrations, in the same order
 *   if (do_restore(ctx) == CAIRN_E_NO_VERSION) { ... first run: start from scratch ... }
 *
 * These names are common words, so they live in this header only, which
 * programs include on purpose; cairn/cairn.h does not declare them and the
 * library exports no such symbols (everything here is static inline).
 *
 * WHERE THE STATE GOES
 *
 * init_backup_context() makes a "dram-cache" context (the seed's strategy:
 * working set in DRAM, backup into two NVM slots and a version word) named
 * $CAIRN_BACKUP_NAME, else "backup", in the directory $CAIRN_POOL_DIR, else
 * cairn_default_pool_dir() (/dev/shm/cairn); the pool file is
 * <dir>/<name>.pool. $CAIRN_DEVICE picks an emulated device as everywhere.
 * For another strategy, directory or name, use cairn_ckpt_create() and pass
 * the context to the calls below: they accept any cairn_ckpt.
 *
 * DEVIATIONS FROM THE SEED, AND WHY
 *
 *   - The seed's calls return void; these return 0 or a negative CAIRN_E_*
 *     code with cairn_errormsg(), so an unchecked call reads as in the paper
 *     and a checked one can tell what went wrong. init_backup_context()
 *     returns NULL on failure.
 *   - Regions get names "region0", "region1", ... in registration order. The
 *     order and sizes are stored with every backup; restoring into a
 *     different layout is CAIRN_E_LAYOUT_MISMATCH, not corruption.
 *   - register_pointer(ctx, from, to): `from` is the address of a pointer that
 *     lives in a registered region, `to` its current target. cairn records
 *     `from` and, at each backup, wherever it points then; `to` is only
 *     checked (it must equal *from), so a pointer may be re-aimed later.
 *     Pointers are registered before the first do_backup / do_restore.
 *   - The seed's `ckpt_ctx* do_restore()` takes no arguments and returns a new
 *     context. It cannot know where this run's DRAM regions are, nor their
 *     layout, so here do_restore(ctx) restores into a context on which the
 *     run has repeated its register_region / register_pointer calls: it opens
 *     the storage if needed and copies the last backup into those regions,
 *     relocating pointers. It returns 0, or CAIRN_E_NO_VERSION if nothing was
 *     ever backed up, and the same context keeps serving do_backup.
 *   - do_backup opens the storage on its first call (the seed has no open);
 *     registration is closed from then on.
 *   - The seed has no call to free a context: use cairn_ckpt_delete(&ctx).
 */
#ifndef CAIRN_SEED001_H
#define CAIRN_SEED001_H

#include <stddef.h>
#include <stdlib.h>

#include "cairn/cairn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Table 1 calls it ckpt_ctx, Listing 5 ckpt_context: the same thing. */
typedef cairn_ckpt ckpt_ctx;
typedef cairn_ckpt ckpt_context;

/* A dram-cache context named $CAIRN_BACKUP_NAME (else "backup") in
 * $CAIRN_POOL_DIR (else the default pool directory); NULL on failure. */
static inline ckpt_ctx* init_backup_context(void) {
  const char* name = getenv("CAIRN_BACKUP_NAME");
  ckpt_ctx* ctx = NULL;
  if (cairn_ckpt_create("dram-cache", (name != NULL && *name != '\0') ? name : "backup", NULL, 0, CAIRN_CKPT_DEFAULTS,
                        &ctx) < 0)
    return NULL;
  return ctx;
}

/* Registers [dram_base, dram_base + size) of application memory. */
static inline int register_region(ckpt_ctx* ctx, void* dram_base, size_t size) {
  return cairn_ckpt_register_region(ctx, NULL, dram_base, size, NULL);
}

/* Registers the pointer stored at `from` (currently pointing to `to`). */
static inline int register_pointer(ckpt_ctx* ctx, void* from, const void* to) {
  return cairn_ckpt_register_pointer_to(ctx, (void**)from, to);
}

/* Copies the registered regions and pointers into NVM as a new version. */
static inline int do_backup(ckpt_ctx* ctx) {
  int rc = cairn_ckpt_is_open(ctx);
  if (rc == 0) rc = cairn_ckpt_open(ctx);
  if (rc < 0) return rc;
  return cairn_ckpt_commit(ctx, NULL);
}

/* Copies the last backup back into the registered regions (see above). */
static inline int do_restore(ckpt_ctx* ctx) {
  int rc = cairn_ckpt_is_open(ctx);
  if (rc == 0) rc = cairn_ckpt_open(ctx);
  if (rc < 0) return rc;
  return cairn_ckpt_restore(ctx, NULL);
}

/* Listing 5's spellings of the same calls. */
static inline ckpt_context* init_ckpt_context(void) { return init_backup_context(); }
static inline int reg_region(ckpt_context* ctx, void* dram_base, size_t size) {
  return register_region(ctx, dram_base, size);
}
static inline int do_checkpoint(ckpt_context* ctx) { return do_backup(ctx); }

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CAIRN_SEED001_H */
