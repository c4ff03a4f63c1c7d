/* cairn.h — the C API of cairn: persistent pools, roots, arena and persistence primitives. */
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
 *     killed but not a power failure or reboot. On other file systems the
 *     pool uses msync (CAIRN_FLUSH_MSYNC), which writes back whole 4 KiB
 *     pages: durable against power loss, but far costlier per flush. Point
 *     $CAIRN_POOL_DIR at a DAX mount for the real thing.
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
 * the only struct, cairn_stats, holds nothing but uint64_t fields.
 */
#ifndef CAIRN_CAIRN_H
#define CAIRN_CAIRN_H

#include <stddef.h>
#include <stdint.h>

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
  CAIRN_E_LAYOUT_MISMATCH = -16,
  CAIRN_E_NO_VERSION = -17,
  CAIRN_E_UNSUPPORTED = -18, /* the platform or build lacks a feature (e.g. a device) */
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
 * tmpfs mappings and MSYNC for other file systems; $CAIRN_FLUSH=cpu|msync
 * overrides AUTO. */
enum { CAIRN_FLUSH_AUTO = 0, CAIRN_FLUSH_CPU = 1, CAIRN_FLUSH_MSYNC = 2 };

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
/* The resolved flush mode (CAIRN_FLUSH_CPU or CAIRN_FLUSH_MSYNC), negative on error. */
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
  uint64_t msyncs;
  uint64_t injected_delay_ns; /* emulated devices only */
  uint64_t nvm_bytes_written; /* bytes_flushed + nt_bytes */
  uint64_t roots_published;
} cairn_stats;

int cairn_pool_stats(const cairn_pool* pool, cairn_stats* out);
/* Zeroes the device counters (roots_published is kept). */
int cairn_pool_stats_reset(cairn_pool* pool);

/* ---- misc ---- */

/* The directory pools go to by default: $CAIRN_POOL_DIR, else /dev/shm/cairn.
 * The string stays valid until the next call on this thread. */
const char* cairn_default_pool_dir(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CAIRN_CAIRN_H */
