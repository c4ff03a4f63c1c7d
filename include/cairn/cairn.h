/* cairn.h — the C API of cairn: persistent pools, roots, arena, persistence primitives and checkpoints. */
/*
 * THE MODEL
 *
 * A pool is one file mapped into the address space with libpmem. On a DAX
 * file system backed by persistent memory the mapping *is* the durable
 * medium: ordinary stores reach it once their cache lines are flushed and
 * fenced. Everywhere else (tmpfs, an ordinary file system) the same programming
 * model holds and only the durability guarantee changes (see CAVEATS).
 *
 * A pool holds:
 *   - a header (magic, layout version, uuid, size, creation time, geometry),
 *     written twice with checksums at create time and never again;
 *   - a table of CAIRN_ROOT_SLOTS root slots, each an offset and a version
 *     number chosen by the caller. The table is kept twice; publishing fills
 *     the inactive copy, persists it, then flips one aligned 8-byte selector
 *     word. That single store is the commit point: after a crash the pool opens
 *     with either the old roots or the new ones, never a mix;
 *   - an arena of fixed-size blocks from which cairn_pool_alloc() hands out
 *     extents.
 *
 * Persistent data refers to other persistent data by *offset* from the pool
 * base, never by pointer: the pool maps at a different address on every open.
 * cairn_pool_ptr() and cairn_pool_offset_of() convert.
 *
 * The one rule of durability: make what a root points to durable (persist,
 * memcpy_persist, ...) *before* publishing the root. Publishing persists only
 * the root table and the selector.
 *
 *   cairn_pool* pool = NULL;
 *   if (cairn_pool_create(path, 64 << 20, CAIRN_FLUSH_AUTO, NULL, &pool) < 0) {
 *     fprintf(stderr, "%s\n", cairn_errormsg());
 *     return 1;
 *   }
 *   uint64_t off;
 *   cairn_pool_alloc(pool, n * sizeof(double), &off);
 *   double* x = cairn_pool_ptr(pool, off);
 *   ... fill x ...
 *   cairn_pool_persist(pool, x, n * sizeof(double));
 *   cairn_pool_root_publish(pool, 0, off, 1);   // commit point
 *   cairn_pool_close(&pool);                    // pool is now NULL
 *
 * THE ARENA IS NOT LOGGED
 *
 * Which blocks are allocated is kept in DRAM only. After cairn_pool_open()
 * the arena refuses to allocate (CAIRN_E_NOT_READY) until its owner either
 * rebuilds it from what the roots reach (cairn_pool_rebuild_begin, one
 * cairn_pool_rebuild_mark per reachable extent, cairn_pool_rebuild_finish) or
 * declares that nothing is kept (cairn_pool_arena_reset). An extent that was
 * allocated but never made reachable from a root is therefore reclaimed by the
 * next rebuild: crash-safe allocation without an allocation log. A freshly
 * created pool's arena is ready and empty.
 *
 * ERRORS
 *
 * Every function that can fail returns 0 on success or a negative CAIRN_E_*
 * code (the negation of cairn::Errc in the C++ API), and records a message in
 * per-thread storage, read with cairn_errormsg(). Messages name the file, say
 * what is wrong and what to do. The message is only meaningful right after a
 * call returned a negative code; successful calls do not clear it. No C++
 * exception ever crosses this interface, and no function aborts on bad input:
 * NULL handles and arguments, ranges outside the pool and out-of-range slots
 * return CAIRN_E_INVALID_ARGUMENT. A failed open never writes to the file; a
 * failed create leaves nothing behind and never overwrites an existing file.
 *
 * CAVEATS
 *
 *   - Durability depends on where the file lives. On a DAX mount of real
 *     persistent memory a persisted range survives power loss. On tmpfs
 *     (the default directory, /dev/shm/cairn) it survives the process being
 *     killed but not a power failure or reboot. On other file systems (ext4,
 *     XFS on an SSD) the pool writes back through the page cache
 *     (CAIRN_FLUSH_PAGECACHE): a flush records whole 4 KiB pages and the
 *     next drain writes them back with as few system calls as the ranges
 *     allow; durable against power loss once the drain returns.
 *     CAIRN_FLUSH_NONE skips every write-back: the pool then survives a
 *     process crash only.
 *   - Pointers into the pool (cairn_pool_base, cairn_pool_ptr) die with the
 *     handle. Never store them in the pool.
 *   - A failed persist (an msync error) poisons the pool: every later publish
 *     fails with CAIRN_E_POISONED. Close and reopen to get back the last
 *     committed roots.
 *   - Threads: the persistence primitives, cairn_pool_alloc / cairn_pool_free
 *     and cairn_pool_root_publish may be called concurrently on one handle.
 *     Close, the rebuild calls and cairn_pool_arena_reset must not run
 *     concurrently with anything else on that handle.
 *   - One process should open a pool at a time; cairn does not lock the file.
 *
 * FORTRAN
 *
 * Everything here is reachable through ISO_C_BINDING: handles are opaque
 * pointers (type(c_ptr)), sizes and offsets are uint64_t or size_t
 * (integer(c_int64_t) / integer(c_size_t)), strings are NUL-terminated, and
 * the only structs, cairn_stats and cairn_ckpt_stats, hold nothing but
 * uint64_t fields.
 */
#ifndef CAIRN_CAIRN_H
#define CAIRN_CAIRN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes (negated cairn::Errc) ---- */
enum {
  CAIRN_OK = 0,
  CAIRN_E_INVALID_ARGUMENT = -1,  /* a bad option, parameter or NULL argument */
  CAIRN_E_NOT_FOUND = -2,         /* the file does not exist */
  CAIRN_E_PERMISSION_DENIED = -3, /* the file cannot be opened with the needed access */
  CAIRN_E_IS_DIRECTORY = -4,      /* the path names a directory */
  CAIRN_E_TOO_SMALL = -5,         /* requested pool size below the minimum */
  CAIRN_E_TRUNCATED = -6,         /* the file is shorter than its header says */
  CAIRN_E_FOREIGN_FILE = -7,      /* bad magic: not a cairn pool */
  CAIRN_E_WRONG_VERSION = -8,     /* another on-media layout version */
  CAIRN_E_CORRUPTED = -9,         /* checksums fail on both copies */
  CAIRN_E_OUT_OF_SPACE = -10,     /* the arena cannot satisfy an allocation */
  CAIRN_E_DEVICE_FULL = -11,      /* the file system ran out of space */
  CAIRN_E_ALREADY_EXISTS = -12,   /* create refuses to overwrite a file */
  CAIRN_E_IO = -13,               /* any other system call failure */
  CAIRN_E_POISONED = -14,         /* an earlier persist failed */
  CAIRN_E_NOT_READY = -15,        /* e.g. alloc before the arena was rebuilt */
  CAIRN_E_LAYOUT_MISMATCH = -16,  /* stored state has another registration layout (names, sizes, pointers) */
  CAIRN_E_NO_VERSION = -17,       /* restore with nothing committed yet */
  CAIRN_E_UNSUPPORTED = -18,      /* the platform or build lacks a feature (a device, a strategy not built) */
  CAIRN_E_BUSY = -19,             /* another live writer holds it (a stream being written) */
  /* C API only: */
  CAIRN_E_NO_MEMORY = -100, /* the library ran out of DRAM */
  CAIRN_E_INTERNAL = -101   /* an unexpected internal failure (a bug: please report it) */
};

/* A short, static description of an error code ("not_found: ..."). Never NULL. */
const char* cairn_strerror(int code);

/* The message of the last failed call on this thread. Never NULL; "" if none.
 * Valid until the next failing call on this thread. */
const char* cairn_errormsg(void);

/* ---- pools ---- */

/* Flush modes (the `flags` of create and open). AUTO picks CPU for DAX and
 * tmpfs mappings and PAGECACHE for other file systems;
 * $CAIRN_FLUSH=cpu|pagecache|msync|none overrides AUTO. MSYNC is one msync
 * per flush (libpmem's own fallback); NONE survives process crashes only. */
enum {
  CAIRN_FLUSH_AUTO = 0,
  CAIRN_FLUSH_CPU = 1,
  CAIRN_FLUSH_MSYNC = 2,
  CAIRN_FLUSH_PAGECACHE = 3,
  CAIRN_FLUSH_NONE = 4
};

enum {
  CAIRN_ROOT_SLOTS = 16,          /* root slots per pool */
  CAIRN_MIN_POOL_SIZE = 1 << 20,  /* bytes */
  CAIRN_DEFAULT_BLOCK_SIZE = 4096 /* arena block size of pools made by cairn_pool_create */
};

typedef struct cairn_pool cairn_pool;

/* Creates a pool file of `size` bytes at `path` (refuses to overwrite
 * anything) and opens it in *out. `flags` is a CAIRN_FLUSH_* mode. `device`
 * names the device behind the primitives ("real", an emulation profile, ...);
 * NULL or "" takes $CAIRN_DEVICE, else "real". On failure *out is NULL. */
int cairn_pool_create(const char* path, uint64_t size, unsigned flags, const char* device, cairn_pool** out);

/* Opens an existing pool. The arena must be rebuilt or reset before
 * cairn_pool_alloc (see THE ARENA IS NOT LOGGED). On failure *out is NULL. */
int cairn_pool_open(const char* path, unsigned flags, const char* device, cairn_pool** out);

/* Unmaps and frees the pool and sets *pool to NULL. *pool == NULL is a no-op.
 * Everything persisted stays; nothing is flushed implicitly. */
int cairn_pool_close(cairn_pool** pool);

/* The mapping's base address and size in bytes; NULL / 0 for a NULL pool. */
void* cairn_pool_base(const cairn_pool* pool);
uint64_t cairn_pool_size(const cairn_pool* pool);
/* The pool's path; NULL for a NULL pool. */
const char* cairn_pool_path(const cairn_pool* pool);
/* 1 if libpmem reports the mapping as real persistent memory, 0 if not,
 * negative on error. */
int cairn_pool_is_pmem(const cairn_pool* pool);
/* The resolved flush mode (never CAIRN_FLUSH_AUTO), negative on error. */
int cairn_pool_flush_mode(const cairn_pool* pool);

/* Offset <-> address. cairn_pool_ptr returns NULL (and records a message) for
 * offset 0 or an offset outside the pool; cairn_pool_offset_of returns 0 for
 * an address outside the pool. */
void* cairn_pool_ptr(const cairn_pool* pool, uint64_t offset);
uint64_t cairn_pool_offset_of(const cairn_pool* pool, const void* addr);

/* ---- roots ---- */

/* Reads root `slot` (0 <= slot < CAIRN_ROOT_SLOTS). An empty slot reads as
 * offset 0, version 0. Either output pointer may be NULL if not wanted. */
int cairn_pool_root_get(const cairn_pool* pool, unsigned slot, uint64_t* offset, uint64_t* version);

/* Makes `offset` (0 to empty the slot, else a place in the arena whose
 * contents the caller has already persisted) the root in `slot`, tagged with
 * `version`. One atomic commit point. */
int cairn_pool_root_publish(cairn_pool* pool, unsigned slot, uint64_t offset, uint64_t version);

/* The live root table's generation: +1 per publish since create. */
int cairn_pool_root_generation(const cairn_pool* pool, uint64_t* generation);

/* ---- arena ---- */

/* Allocates `bytes` rounded up to whole blocks and stores the extent's offset
 * in *offset. The contents are whatever was there before. */
int cairn_pool_alloc(cairn_pool* pool, uint64_t bytes, uint64_t* offset);
/* Returns an extent (offset and size as allocated) to the arena. */
int cairn_pool_free(cairn_pool* pool, uint64_t offset, uint64_t bytes);

/* Rebuilding after open: begin, mark every extent the committed roots reach
 * (an extent marked twice or lying outside the arena is CAIRN_E_CORRUPTED),
 * then finish to install the marked set; everything else becomes free. A
 * second begin discards an unfinished rebuild. */
int cairn_pool_rebuild_begin(cairn_pool* pool);
int cairn_pool_rebuild_mark(cairn_pool* pool, uint64_t offset, uint64_t bytes);
int cairn_pool_rebuild_finish(cairn_pool* pool);
/* Declares every block free (for an owner with nothing to keep). */
int cairn_pool_arena_reset(cairn_pool* pool);

/* The arena's geometry and use. Any output pointer may be NULL. */
int cairn_pool_arena_info(const cairn_pool* pool, uint64_t* block_size, uint64_t* block_count, uint64_t* blocks_in_use);

/* ---- persistence primitives ----
 * Every range must lie inside the pool (else CAIRN_E_INVALID_ARGUMENT).
 * flush writes cache lines back without waiting; drain waits for every flush
 * and non-temporal store of this thread; persist is flush + drain. The
 * memcpy / memset variants use non-temporal stores for large sizes. The _mt
 * variants split ranges of 1 MiB and more over up to `threads` threads
 * (0: all hardware threads). */
int cairn_pool_flush(cairn_pool* pool, const void* addr, size_t len);
int cairn_pool_drain(cairn_pool* pool);
int cairn_pool_persist(cairn_pool* pool, const void* addr, size_t len);
int cairn_pool_memcpy_persist(cairn_pool* pool, void* dst, const void* src, size_t len);
int cairn_pool_memcpy_nodrain(cairn_pool* pool, void* dst, const void* src, size_t len);
int cairn_pool_memset_persist(cairn_pool* pool, void* dst, int c, size_t len);
int cairn_pool_memset_nodrain(cairn_pool* pool, void* dst, int c, size_t len);
int cairn_pool_persist_mt(cairn_pool* pool, const void* addr, size_t len, unsigned threads);
int cairn_pool_memcpy_persist_mt(cairn_pool* pool, void* dst, const void* src, size_t len, unsigned threads);

/* ---- statistics ---- */

/* Counters of the pool's device since open (or the last reset). */
typedef struct cairn_stats {
  uint64_t flush_calls;
  uint64_t lines_flushed; /* cache lines written back by flushes */
  uint64_t bytes_flushed; /* lines_flushed * 64 */
  uint64_t nt_bytes;      /* bytes written with non-temporal stores */
  uint64_t copied_bytes;  /* all bytes written by memcpy / memset primitives */
  uint64_t drains;
  uint64_t msyncs;            /* write-back system calls (msync, sync_file_range, fdatasync) */
  uint64_t injected_delay_ns; /* emulated devices only */
  uint64_t nvm_bytes_written; /* bytes_flushed + nt_bytes */
  uint64_t roots_published;
} cairn_stats;

int cairn_pool_stats(const cairn_pool* pool, cairn_stats* out);
/* Zeroes the device counters (roots_published is kept). */
int cairn_pool_stats_reset(cairn_pool* pool);

/* ---- checkpoints: the persistence layer (C++: cairn/persist.hpp) ----
 *
 * A checkpoint context (cairn_ckpt) keeps the state a simulation must not
 * lose: it registers named regions, then commits a version whenever the
 * application likes (every iteration, ideally) and, after a crash, restores
 * the last committed version bit for bit. Several strategies sit behind the
 * one interface and are chosen by name (cairn_ckpt_strategy_name lists them;
 * one that is not built in this library fails with CAIRN_E_UNSUPPORTED):
 *
 *   cairn_ckpt* ck = NULL;
 *   cairn_ckpt_region* cells = NULL;
 *   cairn_ckpt_dual* u = NULL;
 *   if (cairn_ckpt_create("nt-copy", "heat", NULL, 0, CAIRN_CKPT_DEFAULTS, &ck) < 0) { ...cairn_errormsg()... }
 *   cairn_ckpt_region_create(ck, "cells", ncell * sizeof(struct cell), &cells);  // memory from cairn
 *   cairn_ckpt_dual_create(ck, "u", n * sizeof(double), &u);              // two versions
 *   cairn_ckpt_open(ck);                                                    // memory exists from here
 *   struct cell* c = cairn_ckpt_region_data(cells);
 *   for (i = 0; i < ncell; ++i) cairn_ckpt_register_pointer(ck, (void**)&c[i].next);
 *   if (cairn_ckpt_restore(ck, &v) == CAIRN_E_NO_VERSION) { ...initial state... }
 *   c = cairn_ckpt_region_data(cells);      // a restore may move a region
 *   for (;;) {
 *     cairn_ckpt_begin(ck);                 // optional: commit begins one itself
 *     step(cairn_ckpt_dual_read(u), cairn_ckpt_dual_write(u), c);
 *     cairn_ckpt_commit(ck, &v);            // durable from here; u's read and write swap
 *   }
 *   cairn_ckpt_delete(&ck);                 // ck is now NULL
 *
 * Order of calls. Regions are registered before cairn_ckpt_open, which
 * attaches storage (<dir>/<name>.pool, or checkpoint files for "file") and
 * gives cairn-provided regions their memory. A region's address is read with
 * cairn_ckpt_region_data (NULL before open); it stays valid until the next
 * restore. Pointers that live inside regions are registered with
 * cairn_ckpt_register_pointer before the first commit or restore (pointers
 * inside cairn-provided regions therefore between open and that call); at
 * each commit their targets are recorded as (region, offset), and restore
 * rewrites them for wherever the regions now live.
 *
 * Layout. The registration layout (region names, sizes and kinds, pointer
 * locations) is stored with every version. Restoring into a different layout
 * fails with CAIRN_E_LAYOUT_MISMATCH, and such a context refuses to commit
 * over the stored state: never silent corruption.
 *
 * Application memory. cairn_ckpt_register_region adopts memory the
 * application owns; only strategies whose working set is in DRAM (file,
 * dram-cache, nt-copy) accept it, the others answer CAIRN_E_INVALID_ARGUMENT
 * and want cairn_ckpt_region_create instead.
 *
 * Seed 001's DRAM-cache names (init_backup_context, register_region,
 * register_pointer, do_backup, do_restore) are in cairn/seed001.h, kept out
 * of this header so that they do not claim common names in every program.
 *
 * Errors, threads. As everywhere in this header: negative CAIRN_E_* codes and
 * cairn_errormsg(). A context must not be used from two threads at once.
 */

typedef struct cairn_ckpt cairn_ckpt;
typedef struct cairn_ckpt_region cairn_ckpt_region; /* owned by its context */
typedef struct cairn_ckpt_dual cairn_ckpt_dual;     /* owned by its context */

/* The `flags` of cairn_ckpt_create (C++: Options). */
enum {
  CAIRN_CKPT_ASYNC_FLUSH = 1 << 0,  /* in-place: flush on a helper thread (seed 004's flush_async) */
  CAIRN_CKPT_INCREMENTAL = 1 << 1,  /* copy-based strategies: copy only pages written since the last commit */
  CAIRN_CKPT_HDF5 = 1 << 2,         /* file: also write <name>.<version>.h5, a dataset per region */
  CAIRN_CKPT_NO_CHECKSUMS = 1 << 3, /* pool strategies: no payload checksums (measurement only) */
  CAIRN_CKPT_DEFAULTS = CAIRN_CKPT_ASYNC_FLUSH
};

/* Creates a context. `strategy`: a name from cairn_ckpt_strategy_name(), or
 * NULL / "" for $CAIRN_STRATEGY, else "in-place". `name` names the storage
 * (NULL: "state"; no '/'). `dir`: NULL or "" for cairn_default_pool_dir().
 * `threads` for copies and flushes, 0 = all hardware threads. `flags`: an OR
 * of CAIRN_CKPT_*. The device comes from $CAIRN_DEVICE (else "real"). Nothing
 * is opened or created on disk yet. On failure *out is NULL. */
int cairn_ckpt_create(const char* strategy, const char* name, const char* dir, unsigned threads, unsigned flags,
                      cairn_ckpt** out);

/* As create, with the options read from a "key = value" file (keys: strategy,
 * name, dir, device, threads, async_flush, incremental, hdf5, checksums; '#' comments).
 * Unknown keys are CAIRN_E_INVALID_ARGUMENT; a missing file CAIRN_E_NOT_FOUND. */
int cairn_ckpt_create_from_config(const char* config_path, cairn_ckpt** out);

/* Frees the context, its region handles and (for cairn-provided regions) their
 * memory, and sets *ckpt to NULL. *ckpt == NULL is a no-op. What was committed
 * stays in storage; work since the last commit is not saved. */
int cairn_ckpt_delete(cairn_ckpt** ckpt);

/* The strategy's name (resolved from the environment if create got NULL);
 * NULL for a NULL context. Valid while the context lives. */
const char* cairn_ckpt_strategy(const cairn_ckpt* ckpt);

/* The strategies this library knows, in registry order: index 0 ..
 * cairn_ckpt_strategy_count() - 1; NULL past the end. Static strings. A listed
 * strategy may still be unbuilt: create reports CAIRN_E_UNSUPPORTED. */
size_t cairn_ckpt_strategy_count(void);
const char* cairn_ckpt_strategy_name(size_t index);

/* ---- registration (before cairn_ckpt_open) ----
 * Names are 1 to 47 characters and unique within a context; NULL picks
 * "region<k>", k counting the regions registered so far. Sizes are > 0.
 * `out` may be NULL where noted. */

/* A region whose memory cairn provides where the strategy keeps its working
 * set (DRAM or NVM). Works with every strategy. */
int cairn_ckpt_region_create(cairn_ckpt* ckpt, const char* name, size_t bytes, cairn_ckpt_region** out);
/* A region in memory the application owns ([base, base + bytes), not
 * overlapping another such region). DRAM working-set strategies only.
 * `out` may be NULL. */
int cairn_ckpt_register_region(cairn_ckpt* ckpt, const char* name, void* base, size_t bytes, cairn_ckpt_region** out);
/* The region's memory (NULL before open for cairn-provided regions, and for a
 * NULL handle); it stays at that address until the handle is deleted. And
 * its size. */
void* cairn_ckpt_region_data(const cairn_ckpt_region* region);
size_t cairn_ckpt_region_bytes(const cairn_ckpt_region* region);

/* A region with two versions whose roles alternate every iteration (seed 004
 * §4.1): between begin and commit the application reads cairn_ckpt_dual_read
 * and writes cairn_ckpt_dual_write; after commit the written version is the
 * consistent one and is read next. Both addresses are valid until the next
 * commit or restore (they swap; fetch them again each iteration). */
int cairn_ckpt_dual_create(cairn_ckpt* ckpt, const char* name, size_t bytes, cairn_ckpt_dual** out);
void* cairn_ckpt_dual_read(const cairn_ckpt_dual* dual);
void* cairn_ckpt_dual_write(const cairn_ckpt_dual* dual);
size_t cairn_ckpt_dual_bytes(const cairn_ckpt_dual* dual);
/* Copies [offset, offset + len) from the read to the write version: the
 * elements this iteration does not update (seed 004's non-uniform updates).
 * The range is clipped to the region. */
int cairn_ckpt_dual_carry_over(cairn_ckpt_dual* dual, size_t offset, size_t len);

/* `from` is the address of a pointer that lives inside a registered region;
 * its target must lie in a registered region (or be NULL) at every commit.
 * In C, pass the address of a typed pointer as (void**)&node->next. */
int cairn_ckpt_register_pointer(cairn_ckpt* ckpt, void** from);
/* As register_pointer, after checking that *from currently equals `to`
 * (seed 001's register_pointer(ctx, from, to); catches swapped arguments). */
int cairn_ckpt_register_pointer_to(cairn_ckpt* ckpt, void** from, const void* to);

/* ---- storage and versions ---- */

/* Attaches storage: opens what an earlier run committed, or creates it sized
 * for the registered layout. Once only. */
int cairn_ckpt_open(cairn_ckpt* ckpt);
/* 1 after a successful open, 0 before, negative for a NULL context. */
int cairn_ckpt_is_open(const cairn_ckpt* ckpt);

/* The last committed version in storage: *has_version = 1 and *version set,
 * or *has_version = 0 and *version = 0 when nothing is committed. Needs open
 * (else CAIRN_E_NOT_READY). `version` may be NULL. */
int cairn_ckpt_committed_version(const cairn_ckpt* ckpt, uint64_t* version, int* has_version);

/* Brings back the last committed version (pointers relocated) and stores its
 * number in *version (may be NULL; 0 on failure). CAIRN_E_NO_VERSION when
 * nothing has been committed: start from scratch. Region addresses may change. */
int cairn_ckpt_restore(cairn_ckpt* ckpt, uint64_t* version);

/* Starts an iteration (undo-log: the transaction opens). Optional: commit
 * begins one itself if none is open. Dual regions switch roles at commit. */
int cairn_ckpt_begin(cairn_ckpt* ckpt);

/* Makes the state durable and consistent as a new version, whose number goes
 * to *version (may be NULL; 0 on failure). When this returns 0 the version
 * survives any crash. */
int cairn_ckpt_commit(cairn_ckpt* ckpt, uint64_t* version);

/* Seed 004 §4.2: hand this iteration's written data to the flushing helper
 * thread now (in-place with CAIRN_CKPT_ASYNC_FLUSH; a no-op elsewhere), and
 * wait for it. commit calls both; calling them early overlaps the flush with
 * computation. Do not write the handed-over data again before commit. Before
 * open both are no-ops. */
int cairn_ckpt_flush_async(cairn_ckpt* ckpt);
int cairn_ckpt_flush_barrier(cairn_ckpt* ckpt);
/* Hands over one region only, as soon as this iteration is done writing it
 * (the seed's proactive flushing). A handle of another context is ignored. */
int cairn_ckpt_flush_async_region(cairn_ckpt* ckpt, const cairn_ckpt_region* region);
int cairn_ckpt_flush_async_dual(cairn_ckpt* ckpt, const cairn_ckpt_dual* dual);

/* Streaming writes (C++: Context::stream, stream_fence, streamed): copies len
 * bytes from src to dst, inside a dual region's write version, with
 * non-temporal stores and no fence; any thread, disjoint ranges at once.
 * Every thread that streamed calls cairn_ckpt_stream_fence before the
 * commit. cairn_ckpt_streamed_dual then declares that ALL of the region's
 * write version was written so this iteration: in-place writes nothing back
 * for it (bytes stored otherwise would not be durable). Other strategies
 * copy the same way and ignore the declaration. */
int cairn_ckpt_stream(cairn_ckpt* ckpt, void* dst, const void* src, size_t len);
int cairn_ckpt_stream_fence(cairn_ckpt* ckpt);
int cairn_ckpt_streamed_dual(cairn_ckpt* ckpt, const cairn_ckpt_dual* dual);

/* Counters of this context (C++: persist::Stats), times in nanoseconds. */
typedef struct cairn_ckpt_stats {
  uint64_t commits; /* by this context (not counting earlier runs) */
  uint64_t restores;
  uint64_t version; /* the context's current version: last committed or restored, 0 if none */
  uint64_t last_commit_ns;
  uint64_t total_commit_ns;
  uint64_t last_restore_ns;
  uint64_t bytes_copied;      /* by commits and restores */
  uint64_t nvm_bytes_written; /* flushed lines + non-temporal bytes */
  uint64_t nvm_lines_written;
  uint64_t incremental_bytes_saved; /* CAIRN_CKPT_INCREMENTAL: bytes not copied */
} cairn_ckpt_stats;

int cairn_ckpt_stats_get(const cairn_ckpt* ckpt, cairn_ckpt_stats* out);

/* ---- streams: files, process memory or a pool behind one FILE* (seed 002) ----
 *
 * A component that exchanges data with another through files changes only
 * its open call: fopen(name, "w") becomes cairn_stream_open(name, "w", 0),
 * and fprintf, fwrite, fread, fscanf, fseek, ftell and fclose work unchanged
 * on the FILE* it returns. The URI says where the bytes live:
 *
 *   file:PATH       an ordinary file
 *   mem:NAME        memory of this process (what open_memstream gives)
 *   pmem:POOL#NAME  a stream in the cairn pool file POOL, shared with every
 *                   process on the machine. fclose of a writer commits: the
 *                   bytes are made durable, then one 8-byte commit word names
 *                   them. A reader (of any process, before or after any
 *                   crash) sees the last committed bytes, never a mix; a
 *                   stream never committed is CAIRN_E_NO_VERSION.
 *
 * A name without a scheme is prefixed with $CAIRN_STREAM_PREFIX (e.g.
 * "pmem:/dev/shm/run.pool#"), else opened as file:NAME. `mode` is "r" or "w"
 * (a "b" is accepted and ignored). `size_hint` reserves bytes for a writer
 * (0: the length of the stream's last version, at least 64 KiB; the buffer
 * doubles when full). A pmem: writer creates POOL if it does not
 * exist, of $CAIRN_STREAM_POOL_SIZE bytes (default 256 MiB; suffixes K, M, G),
 * its space reserved as streams use it (a full device: ENOSPC at a write).
 *
 * cairn_stream_open returns NULL on failure, with cairn_errormsg() set and
 * errno set. A failed fwrite or fclose (a full pool: ENOSPC; EIO) commits
 * nothing; cairn_stream_errormsg() then says what happened. A pmem: fclose
 * fails with EIO, committing nothing, when any write-back of the pool failed
 * (the previous version stays). Each pmem: version carries a CRC-32C of its
 * bytes: a reader of a damaged version gets NULL (CAIRN_E_CORRUPTED), never
 * different bytes. */
FILE* cairn_stream_open(const char* uri, const char* mode, size_t size_hint);
/* A reader's bytes in place, without a copy; valid until fclose. */
int cairn_stream_view(FILE* stream, const void** data, size_t* length);
/* Waits until `uri` has a committed version (or, for file:, exists), up to
 * timeout_seconds: CAIRN_E_NO_VERSION or CAIRN_E_NOT_FOUND on time-out. */
int cairn_stream_wait(const char* uri, double timeout_seconds);
/* Removes a stream (pmem: its entry; old versions stay until their readers close). */
int cairn_stream_remove(const char* uri);
/* This thread's last stream failure, including those inside fwrite and fclose. */
const char* cairn_stream_errormsg(void);

/* ---- PM-octree: an adaptive octree in DRAM and a pool (seed 000) ----
 *
 * The working version of the tree lives in DRAM and in the pool at once; the
 * last persisted version lives entirely in the pool and restarts the
 * program. cairn_octree_persist makes the working version the persistent one
 * (cost: the octants changed since the last persist); cairn_octree_restore
 * returns the last persisted version at once. Octants carry `data_size`
 * bytes of payload; callbacks get pointers to it. Every call returns 0 or a
 * negative CAIRN_E_* code with cairn_errormsg() set. Restart code is one
 * call, cairn_octree_open_or_create; what the program must resume with (a
 * step counter) goes in the root payload (cairn_octree_root_write) and is
 * persisted with the tree. The seed's own names (pm_create, pm_persistent,
 * pm_restore, pm_delete) are in cairn/pm_octree.h.
 * C++: cairn/octree.hpp (the primary interface; its header explains the
 * design). */
typedef struct cairn_octree cairn_octree;

typedef struct cairn_octant {
  int level;        /* 0 (the root) to CAIRN_OCTREE_MAX_LEVEL */
  uint32_t x, y, z; /* lower corner, in units of the finest octant */
} cairn_octant;
#define CAIRN_OCTREE_MAX_LEVEL 19

typedef struct cairn_octree_options {
  int dims;                /* 3 (octree) or 2 (quadtree) */
  uint32_t data_size;      /* payload bytes per octant */
  uint64_t pool_size;      /* create: bytes of the pool file */
  uint64_t dram_budget;    /* bytes of DRAM for hot subtrees (C0); 0: none */
  uint64_t threshold_dram; /* also merge C0 into the pool below this much free system memory */
  double threshold_nvbm;   /* collect garbage below this free fraction of the pool */
  int reserve_as_used;     /* create: 1 reserves the pool's space as the tree grows, 0 all at creation */
  /* create: 1 also keeps the version committed before the last one intact
   * (stored in the tree), so a restore can go back one version; costs the
   * blocks that version alone holds. */
  int keep_previous;
  /* restore: the version to restore, 0 the last committed one. In a tree
   * that keeps the previous version, that one may be asked for: it becomes
   * the committed version again, durably, and the newer one is discarded. */
  uint64_t version;
} cairn_octree_options;

/* Defaults: 3D, no payload, 1 GiB pool reserved as used, 256 MiB of C0, 512 MiB threshold, 10 %,
 * no previous version kept, restore the last committed version. */
void cairn_octree_options_init(cairn_octree_options* options);

/* A new pool file at `path` (refused if it exists) with one root octant. */
int cairn_octree_create(const char* path, const cairn_octree_options* options, cairn_octree** out);
/* The last persisted version in `path`; dims and data_size must match
 * (CAIRN_E_LAYOUT_MISMATCH); never persisted: CAIRN_E_NO_VERSION. */
int cairn_octree_restore(const char* path, const cairn_octree_options* options, cairn_octree** out);
/* Restart code in one call: the last persisted version in `path` if there
 * is one (*restored_version, which may be NULL, gets its number); a new tree
 * if the file does not exist, or exists but was never persisted (a crash
 * before the first persist: the file is removed and created again), with
 * *restored_version 0. Every other failure (a damaged pool, another dims or
 * data_size, a file that is not a PM-octree) is returned and the file is
 * left as it was: never re-created over durable data. */
int cairn_octree_open_or_create(const char* path, const cairn_octree_options* options, cairn_octree** out,
                                uint64_t* restored_version);
/* The versions the tree in `path` can restore, without restoring it:
 * *committed the last persisted one, *previous the one kept before it
 * (keep_previous; 0: none). Either may be NULL. Never persisted:
 * CAIRN_E_NO_VERSION. */
int cairn_octree_versions(const char* path, const cairn_octree_options* options, uint64_t* committed,
                          uint64_t* previous);
/* Makes the working version persistent; *version (may be NULL) gets its number. */
int cairn_octree_persist(cairn_octree* tree, uint64_t* version);
/* Frees the handle (the pool file stays); sets *tree to NULL. */
int cairn_octree_close(cairn_octree** tree);
/* Removes the pool file: every octant of both versions. */
int cairn_octree_remove(const char* path);
/* pm_delete: removes the pool file of an open tree, then frees the handle. */
int cairn_octree_delete(cairn_octree** tree);

/* Callbacks; `user` is passed through. Return non-zero for "yes" / "changed". */
typedef int (*cairn_octree_refine_fn)(const cairn_octant* octant, const void* data, void* user);
typedef void (*cairn_octree_init_fn)(const cairn_octant* octant, void* data, const void* parent, void* user);
/* The 2^dims children of `parent`, in Morton order. */
typedef int (*cairn_octree_coarsen_fn)(const cairn_octant* parent, const void* const* children, void* user);
typedef void (*cairn_octree_merge_fn)(const cairn_octant* parent, void* data, const void* const* children, void* user);
typedef void (*cairn_octree_visit_fn)(const cairn_octant* leaf, const void* data, void* user);
/* `data` is a copy; return non-zero if you changed it (only then is it stored). */
typedef int (*cairn_octree_update_fn)(const cairn_octant* leaf, void* data, void* user);

int cairn_octree_uniform(cairn_octree* tree, int level, cairn_octree_init_fn init, void* user);
int cairn_octree_refine(cairn_octree* tree, int recursive, int max_level, cairn_octree_refine_fn refine,
                        cairn_octree_init_fn init, void* user);
int cairn_octree_coarsen(cairn_octree* tree, int recursive, cairn_octree_coarsen_fn coarsen,
                         cairn_octree_merge_fn merge, void* user);
/* 2:1 balance across faces (full = 0) or faces, edges and corners (full = 1). */
int cairn_octree_balance(cairn_octree* tree, int full, cairn_octree_init_fn init, void* user);
/* Follows a tree the application keeps itself in one traversal (refine,
 * coarsen and update_leaves together; see Octree::follow): `root` is the
 * application's handle of its root octant; `children` fills `out` with the
 * handles of an octant's 2^dims children (bit 0 x, bit 1 y, bit 2 z) and
 * returns non-zero, or returns 0 if the octant is a leaf there; `update`
 * writes the leaf's payload from its handle into the copy `data` and
 * returns non-zero if it changed it. */
typedef int (*cairn_octree_children_fn)(const cairn_octant* octant, const void* handle, const void** out, void* user);
typedef int (*cairn_octree_follow_update_fn)(const cairn_octant* leaf, const void* handle, void* data, void* user);
int cairn_octree_follow(cairn_octree* tree, const void* root, cairn_octree_children_fn children,
                        cairn_octree_init_fn init, cairn_octree_follow_update_fn update, void* user);
int cairn_octree_visit_leaves(const cairn_octree* tree, cairn_octree_visit_fn visit, void* user);
int cairn_octree_update_leaves(cairn_octree* tree, cairn_octree_update_fn update, void* user);
/* Leaves without a callback (Octree::leaves and Octree::write_leaves): a
 * cursor that fills the caller's arrays with up to `capacity` leaves per
 * call, in Morton order (*count is 0 only at the end; a call may return
 * fewer). With `writable`, the payloads may be written in place: a block the
 * committed version shares is copied once as the cursor enters it, and
 * every block handed out counts as changed. The pointers of a call are valid
 * until the next call; the cursor is invalid once the tree changes
 * otherwise. A damaged block ends it with CAIRN_E_CORRUPTED. */
typedef struct cairn_octree_leaves cairn_octree_leaves;
int cairn_octree_leaves_open(cairn_octree* tree, int writable, cairn_octree_leaves** out);
int cairn_octree_leaves_next(cairn_octree_leaves* cursor, cairn_octant* octants, void** data, size_t capacity,
                             size_t* count);
/* Frees the cursor and sets *cursor to NULL. */
int cairn_octree_leaves_close(cairn_octree_leaves** cursor);
int cairn_octree_checksum(const cairn_octree* tree, uint64_t* out);
/* The same of the version kept before the committed one (keep_previous),
 * read without making it current; CAIRN_E_NO_VERSION if none is kept. */
int cairn_octree_previous_checksum(const cairn_octree* tree, uint64_t* out);
int cairn_octree_leaf_count(const cairn_octree* tree, uint64_t* out);
/* The root octant's payload (Octree::root_data / update_root): internal once
 * the tree is refined, so free for what the program must persist with the
 * tree (a step counter, the simulation time); persist commits it with
 * everything else. Read copies its first `size` bytes to `out`; write
 * replaces them (copy-on-write, like any payload change). `size` above
 * data_size: CAIRN_E_INVALID_ARGUMENT. */
int cairn_octree_root_read(const cairn_octree* tree, void* out, size_t size);
int cairn_octree_root_write(cairn_octree* tree, const void* data, size_t size);
/* The leaf containing the point (x, y, z), in units of the finest octant (z
 * is 0 in 2D): its octant in *leaf and, if `data` is not NULL, a pointer to
 * its payload, valid until the tree changes. A point outside the domain:
 * CAIRN_E_INVALID_ARGUMENT. */
int cairn_octree_find_leaf(const cairn_octree* tree, uint32_t x, uint32_t y, uint32_t z, cairn_octant* leaf,
                           const void** data);
/* Memory accounting (Octree::stats): V(i) is the working version, V(i-1)
 * the committed one. */
typedef struct cairn_octree_stats {
  uint64_t leaves, octants;   /* of V(i) */
  uint64_t blocks;            /* blocks of V(i): the root's and one per family */
  uint64_t dram_bytes;        /* V(i)'s blocks in DRAM (C0) */
  uint64_t nvm_bytes;         /* pool blocks reachable from V(i) or V(i-1) */
  uint64_t shared_bytes;      /* V(i)'s blocks that hold committed contents */
  uint64_t version_bytes;     /* V(i) alone: what one version costs */
  uint64_t block_bytes;       /* size of one family block */
  uint64_t pool_free_bytes;   /* free pool space (after the last collection) */
  uint64_t free_blocks;       /* blocks of chunks known free */
  uint64_t chunk_blocks;      /* blocks the chunks hold in all */
  uint64_t committed_version; /* as cairn_octree_version */
  uint64_t previous_version;  /* the version kept before it (keep_previous), 0: none */
  uint64_t previous_blocks;   /* pool blocks only that version reaches */
  uint64_t depth;             /* finest leaf level */
  uint64_t c0_regions;
  uint64_t merges;          /* C0 regions merged into the pool for lack of DRAM */
  uint64_t nvm_store_lines; /* cache lines stored into pool blocks since create/restore */
  uint64_t gc_runs;
} cairn_octree_stats;
int cairn_octree_stats_get(const cairn_octree* tree, cairn_octree_stats* out);
/* Checks the whole stored structure (every block any version reaches passes
 * its checks and lies in a chunk, none is on the free list, ...):
 * CAIRN_E_CORRUPTED names the first problem. */
int cairn_octree_verify(const cairn_octree* tree);
/* The committed version's number (0: never persisted). */
uint64_t cairn_octree_version(const cairn_octree* tree);
int cairn_octree_gc(cairn_octree* tree);
/* The leaf mesh as a VTK .vtu file (ASCII), with each leaf's level. */
int cairn_octree_write_vtk(const cairn_octree* tree, const char* path);

/* ---- misc ---- */

/* The directory pools go to by default: $CAIRN_POOL_DIR, else /dev/shm/cairn.
 * The string stays valid until the next call on this thread. */
const char* cairn_default_pool_dir(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CAIRN_CAIRN_H */
