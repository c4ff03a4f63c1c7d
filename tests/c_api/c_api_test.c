/* c_api_test.c — the C API exercised from plain C11: pools, roots, arena, primitives, stats, every error. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cairn/cairn.h"
#include "check.h"

static const char* path_of(const char* name) {
  static char buf[4][600];
  static int next = 0;
  char* p = buf[next++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
  return p;
}

static int write_at(const char* path, long off, const void* data, size_t n) {
  int fd = open(path, O_WRONLY);
  if (fd < 0) return -1;
  ssize_t w = pwrite(fd, data, n, (off_t)off);
  close(fd);
  return w == (ssize_t)n ? 0 : -1;
}

static int exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ---- tests ---- */

static void test_create_open_close(void) {
  g_test = "create_open_close";
  const char* path = path_of("basic.pool");
  cairn_pool* pool = NULL;
  REQUIRE_OK(cairn_pool_create(path, 4u << 20, CAIRN_FLUSH_AUTO, NULL, &pool));
  CHECK(pool != NULL);
  CHECK(cairn_pool_base(pool) != NULL);
  CHECK_EQ_U64(cairn_pool_size(pool), 4u << 20);
  CHECK(strcmp(cairn_pool_path(pool), path) == 0);
  CHECK(cairn_pool_is_pmem(pool) == 0 || cairn_pool_is_pmem(pool) == 1);
  /* The scratch directory is on tmpfs unless CAIRN_TEST_DIR says otherwise. */
  if (getenv("CAIRN_TEST_DIR") == NULL && getenv("CAIRN_FLUSH") == NULL)
    CHECK(cairn_pool_flush_mode(pool) == CAIRN_FLUSH_CPU);
  uint64_t bs = 0, count = 0, used = 7;
  REQUIRE_OK(cairn_pool_arena_info(pool, &bs, &count, &used));
  CHECK_EQ_U64(bs, CAIRN_DEFAULT_BLOCK_SIZE);
  CHECK_EQ_U64(count, ((4u << 20) - 65536) / CAIRN_DEFAULT_BLOCK_SIZE);
  CHECK_EQ_U64(used, 0);
  uint64_t gen = 0;
  REQUIRE_OK(cairn_pool_root_generation(pool, &gen));
  CHECK_EQ_U64(gen, 1);
  REQUIRE_OK(cairn_pool_close(&pool));
  CHECK(pool == NULL);
  REQUIRE_OK(cairn_pool_close(&pool)); /* closing NULL is a no-op */

  REQUIRE_OK(cairn_pool_open(path, CAIRN_FLUSH_MSYNC, "real", &pool));
  CHECK(cairn_pool_flush_mode(pool) == CAIRN_FLUSH_MSYNC);
  CHECK_EQ_U64(cairn_pool_size(pool), 4u << 20);
  REQUIRE_OK(cairn_pool_close(&pool));
  CHECK(pool == NULL);
}

/* Roots and the data they reach survive close + reopen; the arena is rebuilt. */
static void test_roots_survive_reopen(void) {
  g_test = "roots_survive_reopen";
  const char* path = path_of("roots.pool");
  cairn_pool* pool = NULL;
  enum { N = 3000 };
  uint64_t off_a = 0, off_b = 0, off_lost = 0;
  REQUIRE_OK(cairn_pool_create(path, 4u << 20, CAIRN_FLUSH_AUTO, NULL, &pool));
  REQUIRE_OK(cairn_pool_alloc(pool, N * sizeof(uint64_t), &off_a));
  REQUIRE_OK(cairn_pool_alloc(pool, 100, &off_b));
  REQUIRE_OK(cairn_pool_alloc(pool, 100, &off_lost)); /* never published: reclaimed by the rebuild */
  CHECK(off_a >= 65536);
  CHECK_EQ_U64(off_b, off_a + 6 * CAIRN_DEFAULT_BLOCK_SIZE); /* 24000 bytes round up to 6 blocks */
  uint64_t* a = (uint64_t*)cairn_pool_ptr(pool, off_a);
  CHECK(a != NULL);
  if (a == NULL) return;
  for (int i = 0; i < N; ++i) a[i] = (uint64_t)i * 2654435761u;
  REQUIRE_OK(cairn_pool_persist(pool, a, N * sizeof(uint64_t)));
  char* b = (char*)cairn_pool_ptr(pool, off_b);
  const char text[] = "persisted from C";
  REQUIRE_OK(cairn_pool_memcpy_persist(pool, b, text, sizeof text));
  CHECK_EQ_U64(cairn_pool_offset_of(pool, b), off_b);
  REQUIRE_OK(cairn_pool_root_publish(pool, 0, off_a, 41));
  REQUIRE_OK(cairn_pool_root_publish(pool, 0, off_a, 42));
  REQUIRE_OK(cairn_pool_root_publish(pool, 7, off_b, 9));
  uint64_t gen = 0;
  REQUIRE_OK(cairn_pool_root_generation(pool, &gen));
  CHECK_EQ_U64(gen, 4);
  REQUIRE_OK(cairn_pool_close(&pool));

  REQUIRE_OK(cairn_pool_open(path, CAIRN_FLUSH_AUTO, NULL, &pool));
  uint64_t off = 0, ver = 0;
  REQUIRE_OK(cairn_pool_root_get(pool, 0, &off, &ver));
  CHECK_EQ_U64(off, off_a);
  CHECK_EQ_U64(ver, 42);
  REQUIRE_OK(cairn_pool_root_get(pool, 7, &off, &ver));
  CHECK_EQ_U64(off, off_b);
  CHECK_EQ_U64(ver, 9);
  REQUIRE_OK(cairn_pool_root_get(pool, 3, &off, NULL));
  CHECK_EQ_U64(off, 0);
  REQUIRE_OK(cairn_pool_root_generation(pool, &gen));
  CHECK_EQ_U64(gen, 4);
  a = (uint64_t*)cairn_pool_ptr(pool, off_a);
  int same = 1;
  for (int i = 0; i < N; ++i) same &= a[i] == (uint64_t)i * 2654435761u;
  CHECK(same);
  CHECK(strcmp((const char*)cairn_pool_ptr(pool, off_b), text) == 0);

  /* The arena is not ready until rebuilt from the roots. */
  uint64_t x = 1;
  CHECK_ERR(cairn_pool_alloc(pool, 64, &x), CAIRN_E_NOT_READY, "rebuild");
  CHECK_EQ_U64(x, 0);
  CHECK_ERR(cairn_pool_rebuild_mark(pool, off_a, 8), CAIRN_E_NOT_READY, "cairn_pool_rebuild_begin");
  REQUIRE_OK(cairn_pool_rebuild_begin(pool));
  REQUIRE_OK(cairn_pool_rebuild_mark(pool, off_a, N * sizeof(uint64_t)));
  CHECK_ERR(cairn_pool_rebuild_mark(pool, off_a + CAIRN_DEFAULT_BLOCK_SIZE, 8), CAIRN_E_CORRUPTED, "twice");
  REQUIRE_OK(cairn_pool_rebuild_mark(pool, off_b, 100));
  REQUIRE_OK(cairn_pool_rebuild_finish(pool));
  uint64_t used = 0;
  REQUIRE_OK(cairn_pool_arena_info(pool, NULL, NULL, &used));
  CHECK_EQ_U64(used, 6 + 1);
  REQUIRE_OK(cairn_pool_alloc(pool, 100, &x));
  CHECK_EQ_U64(x, off_lost); /* the unpublished extent came back */
  REQUIRE_OK(cairn_pool_free(pool, x, 100));
  REQUIRE_OK(cairn_pool_arena_info(pool, NULL, NULL, &used));
  CHECK_EQ_U64(used, 7);
  REQUIRE_OK(cairn_pool_arena_reset(pool));
  REQUIRE_OK(cairn_pool_arena_info(pool, NULL, NULL, &used));
  CHECK_EQ_U64(used, 0);

  /* Emptying a slot. */
  REQUIRE_OK(cairn_pool_root_publish(pool, 7, 0, 0));
  REQUIRE_OK(cairn_pool_root_get(pool, 7, &off, &ver));
  CHECK_EQ_U64(off, 0);
  REQUIRE_OK(cairn_pool_close(&pool));
}

static void test_primitives_and_stats(void) {
  g_test = "primitives_and_stats";
  cairn_pool* pool = NULL;
  REQUIRE_OK(cairn_pool_create(path_of("prim.pool"), 8u << 20, CAIRN_FLUSH_CPU, NULL, &pool));
  const size_t big = 2u << 20; /* above the multi-threaded threshold */
  uint64_t off = 0;
  REQUIRE_OK(cairn_pool_alloc(pool, big, &off));
  unsigned char* dst = (unsigned char*)cairn_pool_ptr(pool, off);
  unsigned char* src = (unsigned char*)malloc(big);
  CHECK(src != NULL);
  if (src == NULL) return;
  for (size_t i = 0; i < big; ++i) src[i] = (unsigned char)(i * 7 + 3);

  cairn_stats s;
  REQUIRE_OK(cairn_pool_stats_reset(pool));
  REQUIRE_OK(cairn_pool_stats(pool, &s));
  CHECK_EQ_U64(s.flush_calls, 0);
  CHECK_EQ_U64(s.drains, 0);

  /* persist of 100 bytes starting 10 bytes into a line spans 2 lines. */
  memset(dst, 1, 200);
  REQUIRE_OK(cairn_pool_persist(pool, dst + 10, 100));
  REQUIRE_OK(cairn_pool_stats(pool, &s));
  CHECK_EQ_U64(s.flush_calls, 1);
  CHECK_EQ_U64(s.lines_flushed, 2);
  CHECK_EQ_U64(s.bytes_flushed, 128);
  CHECK_EQ_U64(s.drains, 1);

  REQUIRE_OK(cairn_pool_flush(pool, dst, 64));
  REQUIRE_OK(cairn_pool_drain(pool));
  REQUIRE_OK(cairn_pool_stats(pool, &s));
  CHECK_EQ_U64(s.flush_calls, 2);
  CHECK_EQ_U64(s.lines_flushed, 3);
  CHECK_EQ_U64(s.drains, 2);

  /* A 4 KiB copy goes through non-temporal stores. */
  REQUIRE_OK(cairn_pool_stats_reset(pool));
  REQUIRE_OK(cairn_pool_memcpy_persist(pool, dst, src, 4096));
  CHECK(memcmp(dst, src, 4096) == 0);
  REQUIRE_OK(cairn_pool_stats(pool, &s));
  CHECK_EQ_U64(s.nt_bytes, 4096);
  CHECK_EQ_U64(s.copied_bytes, 4096);
  CHECK_EQ_U64(s.drains, 1);
  CHECK_EQ_U64(s.nvm_bytes_written, s.bytes_flushed + s.nt_bytes);

  REQUIRE_OK(cairn_pool_memcpy_nodrain(pool, dst + 8192, src, 4096));
  REQUIRE_OK(cairn_pool_drain(pool));
  CHECK(memcmp(dst + 8192, src, 4096) == 0);
  REQUIRE_OK(cairn_pool_memset_persist(pool, dst, 0xab, 100));
  CHECK(dst[0] == 0xab && dst[99] == 0xab && dst[100] == src[100]);
  REQUIRE_OK(cairn_pool_memset_nodrain(pool, dst + 100, 0xcd, 28));
  REQUIRE_OK(cairn_pool_drain(pool));
  CHECK(dst[100] == 0xcd && dst[127] == 0xcd);
  REQUIRE_OK(cairn_pool_stats(pool, &s));
  CHECK_EQ_U64(s.copied_bytes, 4096 + 4096 + 100 + 28);

  /* Multi-threaded variants. */
  REQUIRE_OK(cairn_pool_stats_reset(pool));
  REQUIRE_OK(cairn_pool_memcpy_persist_mt(pool, dst, src, big, 2));
  CHECK(memcmp(dst, src, big) == 0);
  REQUIRE_OK(cairn_pool_stats(pool, &s));
  CHECK_EQ_U64(s.copied_bytes, big);
  REQUIRE_OK(cairn_pool_stats_reset(pool));
  REQUIRE_OK(cairn_pool_persist_mt(pool, dst, big, 2));
  REQUIRE_OK(cairn_pool_stats(pool, &s));
  CHECK_EQ_U64(s.lines_flushed, big / 64);
  CHECK(s.drains >= 2); /* each worker fences its own part */

  /* roots_published counts publishes since open and survives a stats reset. */
  REQUIRE_OK(cairn_pool_root_publish(pool, 1, off, 1));
  REQUIRE_OK(cairn_pool_root_publish(pool, 1, off, 2));
  REQUIRE_OK(cairn_pool_stats_reset(pool));
  REQUIRE_OK(cairn_pool_stats(pool, &s));
  CHECK_EQ_U64(s.roots_published, 2);

  /* Zero-length operations are no-ops. */
  REQUIRE_OK(cairn_pool_persist(pool, NULL, 0));
  REQUIRE_OK(cairn_pool_memcpy_persist(pool, dst, NULL, 0));
  free(src);
  REQUIRE_OK(cairn_pool_close(&pool));
}

static void test_msync_mode_counts_msyncs(void) {
  g_test = "msync_mode";
  cairn_pool* pool = NULL;
  REQUIRE_OK(cairn_pool_create(path_of("msync.pool"), 2u << 20, CAIRN_FLUSH_MSYNC, "real", &pool));
  CHECK(cairn_pool_flush_mode(pool) == CAIRN_FLUSH_MSYNC);
  uint64_t off = 0;
  REQUIRE_OK(cairn_pool_alloc(pool, 64, &off));
  REQUIRE_OK(cairn_pool_stats_reset(pool));
  REQUIRE_OK(cairn_pool_memset_persist(pool, cairn_pool_ptr(pool, off), 1, 64));
  cairn_stats s;
  REQUIRE_OK(cairn_pool_stats(pool, &s));
  CHECK(s.msyncs >= 1);
  REQUIRE_OK(cairn_pool_close(&pool));
}

/* A failed write-back (the fault device fails the first flush from its
 * creation, as a failed msync would) is reported by the primitive itself and
 * by every later one, and publishing over it is refused. */
static void test_failed_write_back_is_reported(void) {
  g_test = "failed_write_back";
  cairn_pool* pool = NULL;
  REQUIRE_OK(cairn_pool_create(path_of("fault.pool"), 2u << 20, CAIRN_FLUSH_CPU, "fault:flush=1", &pool));
  uint64_t off = 0;
  REQUIRE_OK(cairn_pool_alloc(pool, 64, &off));
  char* p = (char*)cairn_pool_ptr(pool, off);
  memset(p, 7, 64);
  CHECK(cairn_pool_persist(pool, p, 64) == CAIRN_E_IO);
  CHECK(strstr(cairn_errormsg(), "write-back") != NULL);
  CHECK(strstr(cairn_errormsg(), "fault.pool") != NULL);
  CHECK(cairn_pool_drain(pool) == CAIRN_E_IO);
  CHECK(cairn_pool_memcpy_persist(pool, p, "x", 1) == CAIRN_E_IO);
  CHECK(cairn_pool_root_publish(pool, 0, off, 1) == CAIRN_E_POISONED);
  REQUIRE_OK(cairn_pool_close(&pool));
}

/* Every open/create error reachable from C: the code and a message naming the file. */
static void test_file_errors(void) {
  g_test = "file_errors";
  cairn_pool* pool = (cairn_pool*)&g_checks; /* garbage: a failed call must set it to NULL */

  const char* missing = path_of("missing.pool");
  CHECK_ERR(cairn_pool_open(missing, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_NOT_FOUND, missing);
  CHECK(pool == NULL);
  CHECK(strstr(cairn_errormsg(), "cairn_pool_open") != NULL);

  CHECK_ERR(cairn_pool_open(g_dir, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_IS_DIRECTORY, g_dir);
  CHECK_ERR(cairn_pool_create(g_dir, 2u << 20, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_IS_DIRECTORY, g_dir);

  const char* small = path_of("small.pool");
  CHECK_ERR(cairn_pool_create(small, 4096, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_TOO_SMALL, small);
  CHECK(!exists(small));

  /* A foreign file of pool size, and an empty one. */
  const char* foreign = path_of("foreign.bin");
  {
    FILE* f = fopen(foreign, "wb");
    CHECK(f != NULL);
    if (f == NULL) return;
    for (int i = 0; i < (2 << 20); ++i) fputc('x', f);
    fclose(f);
  }
  CHECK_ERR(cairn_pool_open(foreign, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_FOREIGN_FILE, foreign);
  const char* empty = path_of("empty.bin");
  fclose(fopen(empty, "wb"));
  CHECK_ERR(cairn_pool_open(empty, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_FOREIGN_FILE, empty);

  /* Create refuses to overwrite, and leaves the file as it was. */
  CHECK_ERR(cairn_pool_create(foreign, 2u << 20, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_ALREADY_EXISTS, foreign);
  {
    FILE* f = fopen(foreign, "rb");
    CHECK(f != NULL && fgetc(f) == 'x');
    if (f) fclose(f);
  }

  /* Truncated: a real pool cut short, then cut to less than a header. */
  const char* cut = path_of("cut.pool");
  REQUIRE_OK(cairn_pool_create(cut, 4u << 20, CAIRN_FLUSH_AUTO, NULL, &pool));
  REQUIRE_OK(cairn_pool_close(&pool));
  CHECK(truncate(cut, 2 << 20) == 0);
  CHECK_ERR(cairn_pool_open(cut, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_TRUNCATED, cut);
  CHECK(truncate(cut, 100) == 0);
  CHECK_ERR(cairn_pool_open(cut, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_TRUNCATED, cut);

  /* Both header copies damaged: corrupted; one damaged copy still opens. */
  const char* bad = path_of("bad.pool");
  REQUIRE_OK(cairn_pool_create(bad, 2u << 20, CAIRN_FLUSH_AUTO, NULL, &pool));
  REQUIRE_OK(cairn_pool_close(&pool));
  const uint64_t junk = 0x5eed;
  CHECK(write_at(bad, 40, &junk, sizeof junk) == 0);
  REQUIRE_OK(cairn_pool_open(bad, CAIRN_FLUSH_AUTO, NULL, &pool));
  REQUIRE_OK(cairn_pool_close(&pool));
  CHECK(write_at(bad, 4096 + 40, &junk, sizeof junk) == 0);
  CHECK_ERR(cairn_pool_open(bad, CAIRN_FLUSH_AUTO, NULL, &pool), CAIRN_E_CORRUPTED, bad);
  CHECK(pool == NULL);

  /* An unknown device. */
  CHECK(cairn_pool_create(path_of("dev.pool"), 2u << 20, CAIRN_FLUSH_AUTO, "no-such-device", &pool) < 0);
  CHECK(pool == NULL);
  CHECK(!exists(path_of("dev.pool")));
}

/* Root bypasses file modes, so the child drops to nobody to make it real. */
static void test_permission_denied(void) {
  g_test = "permission_denied";
  const char* path = path_of("private.pool");
  cairn_pool* pool = NULL;
  REQUIRE_OK(cairn_pool_create(path, 2u << 20, CAIRN_FLUSH_AUTO, NULL, &pool));
  REQUIRE_OK(cairn_pool_close(&pool));
  CHECK(chmod(path, 0600) == 0);
  if (geteuid() != 0) CHECK(chmod(path, 0400) == 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && setuid(65534) != 0) _exit(3);
    cairn_pool* p = NULL;
    int rc = cairn_pool_open(path, CAIRN_FLUSH_AUTO, NULL, &p);
    if (rc != CAIRN_E_PERMISSION_DENIED) _exit(1);
    if (strstr(cairn_errormsg(), path) == NULL) _exit(2);
    _exit(p == NULL ? 0 : 4);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ_U64(WEXITSTATUS(st), 0);
}

/* A file size limit makes the reservation fail as a full device would. */
static void test_device_full(void) {
  g_test = "device_full";
  const char* path = path_of("full.pool");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {1u << 20, 1u << 20};
    setrlimit(RLIMIT_FSIZE, &lim);
    cairn_pool* p = NULL;
    int rc = cairn_pool_create(path, 8u << 20, CAIRN_FLUSH_AUTO, NULL, &p);
    if (rc != CAIRN_E_DEVICE_FULL) _exit(1);
    if (strstr(cairn_errormsg(), path) == NULL) _exit(2);
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ_U64(WEXITSTATUS(st), 0);
  CHECK(!exists(path));
}

static void test_arena_and_root_errors(void) {
  g_test = "arena_and_root_errors";
  cairn_pool* pool = NULL;
  REQUIRE_OK(cairn_pool_create(path_of("arena.pool"), 1u << 20, CAIRN_FLUSH_AUTO, NULL, &pool));
  uint64_t off = 0;
  CHECK_ERR(cairn_pool_alloc(pool, 2u << 20, &off), CAIRN_E_OUT_OF_SPACE, "larger pool");
  CHECK_ERR(cairn_pool_alloc(pool, 0, &off), CAIRN_E_INVALID_ARGUMENT, "0 bytes");
  REQUIRE_OK(cairn_pool_alloc(pool, 64, &off));
  CHECK_ERR(cairn_pool_root_publish(pool, CAIRN_ROOT_SLOTS, off, 1), CAIRN_E_INVALID_ARGUMENT, "slot 16");
  CHECK_ERR(cairn_pool_root_publish(pool, 0, 17, 1), CAIRN_E_INVALID_ARGUMENT, "arena");
  CHECK_ERR(cairn_pool_root_get(pool, 99, &off, NULL), CAIRN_E_INVALID_ARGUMENT, "slot 99");
  CHECK_ERR(cairn_pool_free(pool, 17, 64), CAIRN_E_INVALID_ARGUMENT, "not an extent");
  CHECK_ERR(cairn_pool_rebuild_finish(pool), CAIRN_E_NOT_READY, "no rebuild");
  REQUIRE_OK(cairn_pool_rebuild_begin(pool));
  CHECK_ERR(cairn_pool_rebuild_mark(pool, 1u << 30, 64), CAIRN_E_CORRUPTED, "rebuild");
  REQUIRE_OK(cairn_pool_rebuild_finish(pool));

  /* Ranges outside the pool are refused, not dereferenced. */
  char outside[64];
  memset(outside, 0, sizeof outside);
  char* base = (char*)cairn_pool_base(pool);
  const uint64_t size = cairn_pool_size(pool);
  CHECK_ERR(cairn_pool_persist(pool, outside, sizeof outside), CAIRN_E_INVALID_ARGUMENT, "inside the pool");
  CHECK_ERR(cairn_pool_flush(pool, base + size - 8, 64), CAIRN_E_INVALID_ARGUMENT, "inside the pool");
  CHECK_ERR(cairn_pool_memcpy_persist(pool, outside, base, 8), CAIRN_E_INVALID_ARGUMENT, "dst");
  CHECK_ERR(cairn_pool_memset_persist(pool, outside, 0, 8), CAIRN_E_INVALID_ARGUMENT, "dst");
  CHECK_ERR(cairn_pool_persist_mt(pool, outside, 8, 2), CAIRN_E_INVALID_ARGUMENT, "inside the pool");
  CHECK(cairn_pool_ptr(pool, size) == NULL);
  CHECK(strstr(cairn_errormsg(), "outside the pool") != NULL);
  CHECK(cairn_pool_ptr(pool, 0) == NULL);
  CHECK_EQ_U64(cairn_pool_offset_of(pool, outside), 0);
  REQUIRE_OK(cairn_pool_close(&pool));
}

/* NULL handles and arguments: CAIRN_E_INVALID_ARGUMENT and a message, never a crash. */
static void test_null_arguments(void) {
  g_test = "null_arguments";
  cairn_pool* pool = NULL;
  uint64_t u = 0;
  cairn_stats s;
  char buf[16];
  CHECK_ERR(cairn_pool_create(NULL, 2u << 20, 0, NULL, &pool), CAIRN_E_INVALID_ARGUMENT, "path is NULL");
  CHECK_ERR(cairn_pool_create(path_of("x.pool"), 2u << 20, 0, NULL, NULL), CAIRN_E_INVALID_ARGUMENT, "out");
  CHECK_ERR(cairn_pool_create(path_of("x.pool"), 2u << 20, 99, NULL, &pool), CAIRN_E_INVALID_ARGUMENT, "flush mode");
  CHECK(!exists(path_of("x.pool")));
  CHECK_ERR(cairn_pool_open(NULL, 0, NULL, &pool), CAIRN_E_INVALID_ARGUMENT, "path is NULL");
  CHECK_ERR(cairn_pool_open(path_of("x.pool"), 0, NULL, NULL), CAIRN_E_INVALID_ARGUMENT, "out");
  CHECK_ERR(cairn_pool_close(NULL), CAIRN_E_INVALID_ARGUMENT, "NULL");
  CHECK(cairn_pool_base(NULL) == NULL);
  CHECK(strstr(cairn_errormsg(), "cairn_pool_base") != NULL);
  CHECK_EQ_U64(cairn_pool_size(NULL), 0);
  CHECK(cairn_pool_path(NULL) == NULL);
  CHECK(cairn_pool_ptr(NULL, 65536) == NULL);
  CHECK_EQ_U64(cairn_pool_offset_of(NULL, buf), 0);
  CHECK_ERR(cairn_pool_is_pmem(NULL), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_flush_mode(NULL), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_root_get(NULL, 0, &u, &u), CAIRN_E_INVALID_ARGUMENT, "cairn_pool_root_get");
  CHECK_ERR(cairn_pool_root_publish(NULL, 0, 65536, 1), CAIRN_E_INVALID_ARGUMENT, "cairn_pool_root_publish");
  CHECK_ERR(cairn_pool_root_generation(NULL, &u), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_alloc(NULL, 64, &u), CAIRN_E_INVALID_ARGUMENT, "cairn_pool_alloc");
  CHECK_ERR(cairn_pool_free(NULL, 65536, 64), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_rebuild_begin(NULL), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_rebuild_mark(NULL, 65536, 64), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_rebuild_finish(NULL), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_arena_reset(NULL), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_arena_info(NULL, &u, &u, &u), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_flush(NULL, buf, 8), CAIRN_E_INVALID_ARGUMENT, "cairn_pool_flush");
  CHECK_ERR(cairn_pool_drain(NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_pool_drain");
  CHECK_ERR(cairn_pool_persist(NULL, buf, 8), CAIRN_E_INVALID_ARGUMENT, "cairn_pool_persist");
  CHECK_ERR(cairn_pool_memcpy_persist(NULL, buf, buf, 8), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_memcpy_nodrain(NULL, buf, buf, 8), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_memset_persist(NULL, buf, 0, 8), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_memset_nodrain(NULL, buf, 0, 8), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_persist_mt(NULL, buf, 8, 0), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_memcpy_persist_mt(NULL, buf, buf, 8, 0), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_stats(NULL, &s), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");
  CHECK_ERR(cairn_pool_stats_reset(NULL), CAIRN_E_INVALID_ARGUMENT, "pool handle is NULL");

  /* NULL arguments on a valid handle. */
  REQUIRE_OK(cairn_pool_create(path_of("nulls.pool"), 2u << 20, CAIRN_FLUSH_AUTO, NULL, &pool));
  void* inside = cairn_pool_ptr(pool, 65536);
  CHECK_ERR(cairn_pool_alloc(pool, 64, NULL), CAIRN_E_INVALID_ARGUMENT, "offset is NULL");
  CHECK_ERR(cairn_pool_root_generation(pool, NULL), CAIRN_E_INVALID_ARGUMENT, "generation is NULL");
  CHECK_ERR(cairn_pool_stats(pool, NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_stats");
  CHECK_ERR(cairn_pool_persist(pool, NULL, 8), CAIRN_E_INVALID_ARGUMENT, "addr is NULL");
  CHECK_ERR(cairn_pool_flush(pool, NULL, 8), CAIRN_E_INVALID_ARGUMENT, "addr is NULL");
  CHECK_ERR(cairn_pool_memcpy_persist(pool, NULL, buf, 8), CAIRN_E_INVALID_ARGUMENT, "dst is NULL");
  CHECK_ERR(cairn_pool_memcpy_persist(pool, inside, NULL, 8), CAIRN_E_INVALID_ARGUMENT, "src is NULL");
  CHECK_ERR(cairn_pool_memcpy_nodrain(pool, inside, NULL, 8), CAIRN_E_INVALID_ARGUMENT, "src is NULL");
  CHECK_ERR(cairn_pool_memcpy_persist_mt(pool, inside, NULL, 8, 2), CAIRN_E_INVALID_ARGUMENT, "src is NULL");
  CHECK_ERR(cairn_pool_memset_nodrain(pool, NULL, 0, 8), CAIRN_E_INVALID_ARGUMENT, "dst is NULL");
  /* Output pointers of root_get and arena_info are optional. */
  REQUIRE_OK(cairn_pool_root_get(pool, 0, NULL, NULL));
  REQUIRE_OK(cairn_pool_arena_info(pool, NULL, NULL, NULL));
  REQUIRE_OK(cairn_pool_close(&pool));
}

static void test_strerror_and_default_dir(void) {
  g_test = "strerror";
  CHECK(strncmp(cairn_strerror(CAIRN_E_NOT_FOUND), "not_found", 9) == 0);
  CHECK(strncmp(cairn_strerror(CAIRN_E_CORRUPTED), "corrupted", 9) == 0);
  CHECK(strcmp(cairn_strerror(CAIRN_OK), "ok") == 0);
  CHECK(cairn_strerror(12345) != NULL);
  CHECK(cairn_errormsg() != NULL);
  CHECK(CAIRN_E_NOT_FOUND == -2 && CAIRN_E_ALREADY_EXISTS == -12 && CAIRN_E_UNSUPPORTED == -18);
  const char* dir = cairn_default_pool_dir();
  const char* env = getenv("CAIRN_POOL_DIR");
  CHECK(dir != NULL && strcmp(dir, (env && *env) ? env : "/dev/shm/cairn") == 0);
}

int main(void) {
  make_scratch_dir("cairn-c-api");
  test_create_open_close();
  test_roots_survive_reopen();
  test_primitives_and_stats();
  test_msync_mode_counts_msyncs();
  test_failed_write_back_is_reported();
  test_file_errors();
  test_permission_denied();
  test_device_full();
  test_arena_and_root_errors();
  test_null_arguments();
  test_strerror_and_default_dir();
  return finish("c_api_test");
}
