/* step1_pool.c — tutorial step 1 (C): create a pool, allocate, write, persist, publish a root, reopen. */
/*
 * The same program as step1_pool.cpp, written against the C API in
 * <cairn/cairn.h> (also the route for Fortran through ISO_C_BINDING).
 *
 * Every call returns 0 or a negative CAIRN_E_* code; cairn_errormsg() then
 * says what went wrong, naming the file. The one rule:
 *
 *     make the data durable first, then publish the root that points to it.
 *
 * Run it:  build/release/examples/step1_pool_c
 * The pool goes to $CAIRN_POOL_DIR (default /dev/shm/cairn).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn/cairn.h"

/* What we keep in the pool: no pointers, only plain data (and offsets, if it
 * referred to other persistent data). */
struct greeting {
  char text[64];
  uint64_t squares[100];
};

/* Creates `dir` and its parents if they are missing. */
static int make_dirs(const char* dir) {
  char buf[4096];
  if (strlen(dir) >= sizeof buf) return -1;
  strcpy(buf, dir);
  for (char* p = buf + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int fail(const char* what) {
  fprintf(stderr, "step1_c: %s: %s\n", what, cairn_errormsg());
  return 1;
}

int main(void) {
  /* 1. Where the pool lives. cairn never overwrites a file, so a pool left by
   *    an earlier run of this step is removed first. */
  const char* dir = cairn_default_pool_dir();
  char path[4200];
  if (make_dirs(dir) != 0) {
    fprintf(stderr, "step1_c: cannot create %s: %s\n", dir, strerror(errno));
    return 1;
  }
  snprintf(path, sizeof path, "%s/step1_c.pool", dir);
  unlink(path);

  /* 2. Create an 8 MiB pool; the flush mode is chosen from the file system. */
  cairn_pool* pool = NULL;
  if (cairn_pool_create(path, 8u << 20, CAIRN_FLUSH_AUTO, NULL, &pool) < 0) return fail("create");
  printf("created %s: %llu bytes, is_pmem=%d\n", path, (unsigned long long)cairn_pool_size(pool),
         cairn_pool_is_pmem(pool));

  /* 3. Allocate an extent in the arena: we get an offset, and turn it into a
   *    pointer that is valid while this handle is open. */
  uint64_t offset = 0;
  if (cairn_pool_alloc(pool, sizeof(struct greeting), &offset) < 0) return fail("alloc");
  struct greeting* g = cairn_pool_ptr(pool, offset);

  /* 4. Write with ordinary stores; not durable yet. */
  snprintf(g->text, sizeof g->text, "hello from step 1, in C");
  for (uint64_t i = 0; i < 100; ++i) g->squares[i] = i * i;

  /* 5. Persist: flush the cache lines and wait for them. */
  if (cairn_pool_persist(pool, g, sizeof *g) < 0) return fail("persist");

  /* 6. Publish root slot 0 as version 1: the commit point. */
  if (cairn_pool_root_publish(pool, 0, offset, 1) < 0) return fail("publish");
  printf("published root 0 -> offset %llu, version 1\n", (unsigned long long)offset);

  /* 7. Close. The handle is set to NULL; pointers into the pool are dead. */
  cairn_pool_close(&pool);

  /* 8. Reopen, as a restarted program would, and find the data from the root. */
  if (cairn_pool_open(path, CAIRN_FLUSH_AUTO, NULL, &pool) < 0) return fail("open");
  uint64_t root = 0, version = 0;
  if (cairn_pool_root_get(pool, 0, &root, &version) < 0) return fail("root_get");
  g = cairn_pool_ptr(pool, root);
  if (g == NULL) return fail("root offset");
  printf("reopened: root 0 -> offset %llu, version %llu, text \"%s\", squares[99] = %llu\n", (unsigned long long)root,
         (unsigned long long)version, g->text, (unsigned long long)g->squares[99]);

  /* 9. Rebuild the arena from what the roots reach (allocation state is not
   *    stored in the pool); everything else becomes free. */
  uint64_t used = 0;
  if (cairn_pool_rebuild_begin(pool) < 0 || cairn_pool_rebuild_mark(pool, root, sizeof(struct greeting)) < 0 ||
      cairn_pool_rebuild_finish(pool) < 0)
    return fail("rebuild");
  cairn_pool_arena_info(pool, NULL, NULL, &used);
  printf("arena rebuilt: %llu block(s) in use\n", (unsigned long long)used);

  int ok = root == offset && version == 1 && strcmp(g->text, "hello from step 1, in C") == 0;
  for (uint64_t i = 0; i < 100; ++i) ok = ok && g->squares[i] == i * i;
  cairn_pool_close(&pool);
  printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
