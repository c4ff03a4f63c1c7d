/* ckpt_test.c — the checkpoint C API (cairn_ckpt_*, seed001.h) from plain C11: every built strategy, errors, seed
 * names. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/cairn.h"
#include "cairn/seed001.h"
#include "check.h"

/* ---- data patterns: every word depends on the version and its index ---- */

static uint64_t word(uint64_t version, size_t i) { return version * 0x9E3779B97F4A7C15ull + i; }

static void fill(void* p, size_t bytes, uint64_t version) {
  uint64_t* w = (uint64_t*)p;
  for (size_t i = 0; i < bytes / 8; ++i) w[i] = word(version, i);
}

/* 1 if [p, p + bytes) holds fill(version) for words [from, to). */
static int matches_range(const void* p, size_t from, size_t to, uint64_t version) {
  const uint64_t* w = (const uint64_t*)p;
  for (size_t i = from; i < to; ++i)
    if (w[i] != word(version, i)) return 0;
  return 1;
}

/* ---- every strategy: regions, a dual region, pointers, versions, restore in a new context ---- */

enum { NCELLS = 257, NHEADS = 4, DUAL_BYTES = 64 * 1024, USER_BYTES = 3 * 4096 };

struct cell {
  struct cell* next;
  uint64_t value;
  double x;
};

/* Memory the application owns (DRAM working-set strategies adopt it). */
struct user_block {
  struct cell* first; /* points into cairn-provided memory */
  uint64_t words[USER_BYTES / 8 - 1];
};

/* Version v links cell i to cell (i + step(v)) % NCELLS, the last one to NULL. */
static size_t step(uint64_t v) { return (size_t)(v * 7 % (NCELLS - 1)) + 1; }

struct setup {
  cairn_ckpt* ck;
  cairn_ckpt_region* cells;
  cairn_ckpt_region* heads;
  cairn_ckpt_dual* dual;
  struct user_block* user; /* NULL if the strategy refuses application memory */
};

/* The same registrations in every run: the layout must match for a restore.
 * Returns CAIRN_OK, CAIRN_E_UNSUPPORTED (skip), or another failure code. */
static int set_up(const char* strategy, const char* name, struct user_block* user, int with_user, struct setup* s) {
  memset(s, 0, sizeof *s);
  int rc = cairn_ckpt_create(strategy, name, g_dir, 2, CAIRN_CKPT_DEFAULTS, &s->ck);
  if (rc < 0) return rc;
  CHECK(strcmp(cairn_ckpt_strategy(s->ck), strategy) == 0);
  if (with_user) {
    /* Its pointer is registered before open: the memory exists already. */
    user->first = NULL;
    if ((rc = cairn_ckpt_register_region(s->ck, NULL, user, sizeof *user, NULL)) < 0) return rc;
    if ((rc = cairn_ckpt_register_pointer_to(s->ck, (void**)&user->first, NULL)) < 0) return rc;
    s->user = user;
  }
  if ((rc = cairn_ckpt_region_create(s->ck, "cells", NCELLS * sizeof(struct cell), &s->cells)) < 0) return rc;
  if ((rc = cairn_ckpt_region_create(s->ck, "heads", NHEADS * sizeof(struct cell*), &s->heads)) < 0) return rc;
  if ((rc = cairn_ckpt_dual_create(s->ck, "u", DUAL_BYTES, &s->dual)) < 0) return rc;
  CHECK(cairn_ckpt_region_data(s->cells) == NULL); /* cairn gives memory at open */
  CHECK_EQ_U64(cairn_ckpt_region_bytes(s->cells), NCELLS * sizeof(struct cell));
  CHECK_EQ_U64(cairn_ckpt_dual_bytes(s->dual), DUAL_BYTES);
  CHECK(cairn_ckpt_is_open(s->ck) == 0);
  if ((rc = cairn_ckpt_open(s->ck)) < 0) return rc;
  CHECK(cairn_ckpt_is_open(s->ck) == 1);
  struct cell* c = (struct cell*)cairn_ckpt_region_data(s->cells);
  struct cell** h = (struct cell**)cairn_ckpt_region_data(s->heads);
  if (c == NULL || h == NULL) return CAIRN_E_INTERNAL;
  for (int i = 0; i < NCELLS; ++i)
    if ((rc = cairn_ckpt_register_pointer(s->ck, (void**)&c[i].next)) < 0) return rc;
  for (int i = 0; i < NHEADS; ++i)
    if ((rc = cairn_ckpt_register_pointer(s->ck, (void**)&h[i])) < 0) return rc;
  return CAIRN_OK;
}

/* Writes version v into every region; v == 3 updates only the first half of
 * the dual region and carries the second half over from version 2. */
static void write_version(struct setup* s, uint64_t v) {
  struct cell* c = (struct cell*)cairn_ckpt_region_data(s->cells);
  struct cell** h = (struct cell**)cairn_ckpt_region_data(s->heads);
  for (size_t i = 0; i < NCELLS; ++i) {
    c[i].value = word(v, i);
    c[i].x = (double)v + (double)i / 8.0;
    c[i].next = i + 1 == NCELLS ? NULL : &c[(i + step(v)) % NCELLS];
  }
  h[0] = &c[v % NCELLS];
  h[1] = NULL;
  h[2] = &c[NCELLS - 1];
  h[3] = &c[0];
  void* w = cairn_ckpt_dual_write(s->dual);
  if (v == 3) {
    fill(w, DUAL_BYTES / 2, v);
    CHECK(cairn_ckpt_dual_carry_over(s->dual, DUAL_BYTES / 2, DUAL_BYTES) == CAIRN_OK); /* clipped */
  } else if (v == 2) { /* a streaming kernel: the version leaves a buffer by non-temporal stores */
    unsigned char* next = malloc(DUAL_BYTES);
    REQUIRE(next != NULL);
    fill(next, DUAL_BYTES, v);
    REQUIRE_OK(cairn_ckpt_stream(s->ck, w, next, DUAL_BYTES));
    REQUIRE_OK(cairn_ckpt_stream_fence(s->ck));
    REQUIRE_OK(cairn_ckpt_streamed_dual(s->ck, s->dual));
    free(next);
  } else {
    fill(w, DUAL_BYTES, v);
  }
  if (s->user != NULL) {
    fill(s->user->words, sizeof s->user->words, v);
    s->user->first = &c[(size_t)v * 11 % NCELLS];
  }
}

/* Checks that the latest state is version v, pointers aimed into this run's memory. */
static void check_version(struct setup* s, uint64_t v) {
  const struct cell* c = (const struct cell*)cairn_ckpt_region_data(s->cells);
  struct cell* const* h = (struct cell* const*)cairn_ckpt_region_data(s->heads);
  int values = 1, links = 1;
  for (size_t i = 0; i < NCELLS; ++i) {
    values &= c[i].value == word(v, i) && c[i].x == (double)v + (double)i / 8.0;
    links &= c[i].next == (i + 1 == NCELLS ? NULL : &c[(i + step(v)) % NCELLS]);
  }
  CHECK(values);
  CHECK(links);
  CHECK(h[0] == &c[v % NCELLS]);
  CHECK(h[1] == NULL);
  CHECK(h[2] == &c[NCELLS - 1]);
  CHECK(h[3] == &c[0]);
  const void* r = cairn_ckpt_dual_read(s->dual);
  if (v == 3) {
    CHECK(matches_range(r, 0, DUAL_BYTES / 16, 3));
    CHECK(matches_range(r, DUAL_BYTES / 16, DUAL_BYTES / 8, 2));
  } else {
    CHECK(matches_range(r, 0, DUAL_BYTES / 8, v));
  }
  if (s->user != NULL) {
    CHECK(matches_range(s->user->words, 0, sizeof s->user->words / 8, v));
    CHECK(s->user->first == &c[(size_t)v * 11 % NCELLS]);
  }
}

/* The body of round_trip; returns early on a failed REQUIRE, leaving cleanup to the caller. */
static void round_trip_steps(const char* strategy, struct user_block* user1, struct user_block* user2,
                             struct setup* s) {
  /* Which strategies adopt application memory: try it once. */
  cairn_ckpt* probe = NULL;
  int rc = cairn_ckpt_create(strategy, "probe", g_dir, 2, CAIRN_CKPT_DEFAULTS, &probe);
  if (rc == CAIRN_E_UNSUPPORTED) {
    printf("ckpt_test: strategy '%s' skipped: %s\n", strategy, cairn_errormsg());
    return;
  }
  REQUIRE_OK(rc);
  const int with_user = cairn_ckpt_register_region(probe, "user", user1, sizeof *user1, NULL) == CAIRN_OK;
  if (!with_user) CHECK(strstr(cairn_errormsg(), "NVM") != NULL);
  REQUIRE_OK(cairn_ckpt_delete(&probe));
  CHECK(probe == NULL);

  char name[64];
  snprintf(name, sizeof name, "rt-%s", strategy);
  rc = set_up(strategy, name, user1, with_user, s);
  if (rc == CAIRN_E_UNSUPPORTED) {
    printf("ckpt_test: strategy '%s' skipped at open: %s\n", strategy, cairn_errormsg());
    return;
  }
  REQUIRE_OK(rc);

  uint64_t v = 99;
  int has = 7;
  REQUIRE_OK(cairn_ckpt_committed_version(s->ck, &v, &has));
  CHECK(has == 0);
  CHECK_EQ_U64(v, 0);
  CHECK_ERR(cairn_ckpt_restore(s->ck, &v), CAIRN_E_NO_VERSION, "nothing has been committed");
  CHECK_EQ_U64(v, 0);

  for (uint64_t k = 1; k <= 3; ++k) {
    REQUIRE_OK(cairn_ckpt_begin(s->ck));
    write_version(s, k);
    if (k == 2) { /* seed 004: hand over early, region by region or all at once ... */
      REQUIRE_OK(cairn_ckpt_flush_async_dual(s->ck, s->dual));
      REQUIRE_OK(cairn_ckpt_flush_async_region(s->ck, s->cells));
    } else {
      REQUIRE_OK(cairn_ckpt_flush_async(s->ck));
    }
    REQUIRE_OK(cairn_ckpt_commit(s->ck, &v)); /* ... commit waits for it */
    CHECK_EQ_U64(v, k);
    check_version(s, k); /* the written dual version is read next */
  }
  REQUIRE_OK(cairn_ckpt_flush_barrier(s->ck));
  cairn_ckpt_stats st;
  REQUIRE_OK(cairn_ckpt_stats_get(s->ck, &st));
  CHECK_EQ_U64(st.commits, 3);
  CHECK_EQ_U64(st.restores, 0);
  CHECK_EQ_U64(st.version, 3);
  CHECK(st.total_commit_ns >= st.last_commit_ns);
  REQUIRE_OK(cairn_ckpt_committed_version(s->ck, &v, &has));
  CHECK(has == 1);
  CHECK_EQ_U64(v, 3);

  /* Work after the last commit must not come back. */
  REQUIRE_OK(cairn_ckpt_begin(s->ck));
  write_version(s, 4);
  REQUIRE_OK(cairn_ckpt_delete(&s->ck));
  CHECK(s->ck == NULL);

  /* A new context, as after a crash: other memory, same registrations. */
  REQUIRE_OK(set_up(strategy, name, user2, with_user, s));
  REQUIRE_OK(cairn_ckpt_committed_version(s->ck, &v, &has));
  CHECK(has == 1);
  CHECK_EQ_U64(v, 3);
  REQUIRE_OK(cairn_ckpt_restore(s->ck, &v));
  CHECK_EQ_U64(v, 3);
  check_version(s, 3);
  REQUIRE_OK(cairn_ckpt_stats_get(s->ck, &st));
  CHECK_EQ_U64(st.restores, 1);
  CHECK_EQ_U64(st.version, 3);

  /* Versions continue after the restore. */
  REQUIRE_OK(cairn_ckpt_begin(s->ck));
  write_version(s, 4);
  REQUIRE_OK(cairn_ckpt_commit(s->ck, &v));
  CHECK_EQ_U64(v, 4);
  check_version(s, 4);
  printf("ckpt_test: strategy '%s' round trip done (%s application memory)\n", strategy,
         with_user ? "with" : "without");
}

static void round_trip(const char* strategy) {
  g_test = strategy;
  const int failures_before = g_failures;
  struct user_block* user1 = (struct user_block*)calloc(1, sizeof *user1);
  struct user_block* user2 = (struct user_block*)calloc(1, sizeof *user2);
  struct setup s;
  memset(&s, 0, sizeof s);
  if (user1 != NULL && user2 != NULL) round_trip_steps(strategy, user1, user2, &s);
  CHECK(user1 != NULL && user2 != NULL);
  cairn_ckpt_delete(&s.ck);
  free(user1);
  free(user2);
  if (g_failures != failures_before) printf("ckpt_test: strategy '%s' FAILED\n", strategy);
}

static void test_every_strategy(void) {
  g_test = "strategy_list";
  const size_t n = cairn_ckpt_strategy_count();
  CHECK(n >= 6);
  int dram_cache = 0, nt_copy = 0;
  for (size_t i = 0; i < n; ++i) {
    const char* name = cairn_ckpt_strategy_name(i);
    CHECK(name != NULL && *name != '\0');
    if (name == NULL) continue;
    dram_cache |= strcmp(name, "dram-cache") == 0;
    nt_copy |= strcmp(name, "nt-copy") == 0;
  }
  CHECK(dram_cache && nt_copy);
  CHECK(cairn_ckpt_strategy_name(n) == NULL);
  CHECK(strstr(cairn_errormsg(), "past the last strategy") != NULL);
  for (size_t i = 0; i < n; ++i) {
    const char* name = cairn_ckpt_strategy_name(i);
    if (name != NULL) round_trip(name);
  }
}

/* ---- errors ---- */

static void test_null_arguments(void) {
  g_test = "null_arguments";
  cairn_ckpt* ck = NULL;
  cairn_ckpt_region* r = NULL;
  cairn_ckpt_dual* d = NULL;
  cairn_ckpt_stats st;
  uint64_t v = 0;
  int has = 0;
  void* p = NULL;
  char buf[64];
  CHECK_ERR(cairn_ckpt_create("dram-cache", "n", g_dir, 0, 0, NULL), CAIRN_E_INVALID_ARGUMENT, "out (cairn_ckpt**)");
  CHECK_ERR(cairn_ckpt_create_from_config(NULL, &ck), CAIRN_E_INVALID_ARGUMENT, "config_path is NULL");
  CHECK_ERR(cairn_ckpt_create_from_config("x.conf", NULL), CAIRN_E_INVALID_ARGUMENT, "out (cairn_ckpt**)");
  CHECK_ERR(cairn_ckpt_delete(NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_delete");
  REQUIRE_OK(cairn_ckpt_delete(&ck)); /* deleting NULL is a no-op */
  CHECK(cairn_ckpt_strategy(NULL) == NULL);
  CHECK(strstr(cairn_errormsg(), "cairn_ckpt_strategy") != NULL);
  CHECK_ERR(cairn_ckpt_region_create(NULL, "a", 8, &r), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_region_create");
  CHECK_ERR(cairn_ckpt_register_region(NULL, "a", buf, 8, &r), CAIRN_E_INVALID_ARGUMENT, "context (cairn_ckpt*)");
  CHECK_ERR(cairn_ckpt_dual_create(NULL, "a", 8, &d), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_dual_create");
  CHECK_ERR(cairn_ckpt_register_pointer(NULL, &p), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_register_pointer");
  CHECK_ERR(cairn_ckpt_register_pointer_to(NULL, &p, NULL), CAIRN_E_INVALID_ARGUMENT, "is NULL");
  CHECK_ERR(cairn_ckpt_open(NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_open");
  CHECK_ERR(cairn_ckpt_is_open(NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_is_open");
  CHECK_ERR(cairn_ckpt_committed_version(NULL, &v, &has), CAIRN_E_INVALID_ARGUMENT, "is NULL");
  CHECK_ERR(cairn_ckpt_restore(NULL, &v), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_restore");
  CHECK_ERR(cairn_ckpt_begin(NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_begin");
  CHECK_ERR(cairn_ckpt_commit(NULL, &v), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_commit");
  CHECK_ERR(cairn_ckpt_flush_async(NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_flush_async");
  CHECK_ERR(cairn_ckpt_flush_barrier(NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_flush_barrier");
  CHECK_ERR(cairn_ckpt_flush_async_region(NULL, r), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_flush_async_region");
  CHECK_ERR(cairn_ckpt_flush_async_dual(NULL, d), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_flush_async_dual");
  CHECK_ERR(cairn_ckpt_stream(NULL, d, d, 8), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_stream");
  CHECK_ERR(cairn_ckpt_stream_fence(NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_stream_fence");
  CHECK_ERR(cairn_ckpt_streamed_dual(NULL, d), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_streamed_dual");
  CHECK_ERR(cairn_ckpt_stats_get(NULL, &st), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_stats_get");
  CHECK(cairn_ckpt_region_data(NULL) == NULL);
  CHECK(strstr(cairn_errormsg(), "region handle is NULL") != NULL);
  CHECK_EQ_U64(cairn_ckpt_region_bytes(NULL), 0);
  CHECK(cairn_ckpt_dual_read(NULL) == NULL);
  CHECK(cairn_ckpt_dual_write(NULL) == NULL);
  CHECK(strstr(cairn_errormsg(), "cairn_ckpt_dual_write") != NULL);
  CHECK_EQ_U64(cairn_ckpt_dual_bytes(NULL), 0);
  CHECK_ERR(cairn_ckpt_dual_carry_over(NULL, 0, 8), CAIRN_E_INVALID_ARGUMENT, "dual region handle is NULL");

  /* NULL arguments on a valid context. */
  REQUIRE_OK(cairn_ckpt_create("dram-cache", "nulls", g_dir, 1, CAIRN_CKPT_DEFAULTS, &ck));
  CHECK_ERR(cairn_ckpt_region_create(ck, "a", 8, NULL), CAIRN_E_INVALID_ARGUMENT, "out (cairn_ckpt_region**)");
  CHECK_ERR(cairn_ckpt_dual_create(ck, "a", 8, NULL), CAIRN_E_INVALID_ARGUMENT, "out (cairn_ckpt_dual**)");
  CHECK_ERR(cairn_ckpt_register_region(ck, "a", NULL, 8, &r), CAIRN_E_INVALID_ARGUMENT, "base is NULL");
  CHECK(r == NULL);
  CHECK_ERR(cairn_ckpt_register_pointer(ck, NULL), CAIRN_E_INVALID_ARGUMENT, "from");
  CHECK_ERR(cairn_ckpt_register_pointer_to(ck, NULL, buf), CAIRN_E_INVALID_ARGUMENT, "from");
  CHECK_ERR(cairn_ckpt_stats_get(ck, NULL), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_stats*");
  CHECK_ERR(cairn_ckpt_flush_async_region(ck, NULL), CAIRN_E_INVALID_ARGUMENT, "region handle is NULL");
  CHECK_ERR(cairn_ckpt_flush_async_dual(ck, NULL), CAIRN_E_INVALID_ARGUMENT, "dual region handle is NULL");
  CHECK_ERR(cairn_ckpt_streamed_dual(ck, NULL), CAIRN_E_INVALID_ARGUMENT, "dual region handle is NULL");
  CHECK_ERR(cairn_ckpt_stream(ck, NULL, NULL, 8), CAIRN_E_INVALID_ARGUMENT, "dst or src is NULL");
  REQUIRE_OK(cairn_ckpt_dual_create(ck, "d", 4096, &d));
  CHECK_ERR(cairn_ckpt_dual_carry_over(d, 0, 8), CAIRN_E_NOT_READY, "before cairn_ckpt_open");
  REQUIRE_OK(cairn_ckpt_open(ck));
  CHECK_ERR(cairn_ckpt_committed_version(ck, &v, NULL), CAIRN_E_INVALID_ARGUMENT, "has_version is NULL");
  REQUIRE_OK(cairn_ckpt_committed_version(ck, NULL, &has)); /* version is optional */
  CHECK(has == 0);
  REQUIRE_OK(cairn_ckpt_commit(ck, NULL)); /* so is the commit's version */
  REQUIRE_OK(cairn_ckpt_restore(ck, NULL));
  REQUIRE_OK(cairn_ckpt_delete(&ck));
}

static void test_usage_errors(void) {
  g_test = "usage_errors";
  cairn_ckpt* ck = (cairn_ckpt*)&g_checks; /* garbage: a failed create must set it to NULL */
  cairn_ckpt_region* r = NULL;
  uint64_t v = 0;
  int has = 0;

  CHECK_ERR(cairn_ckpt_create("no-such-strategy", "x", g_dir, 0, 0, &ck), CAIRN_E_INVALID_ARGUMENT,
            "unknown persistence strategy 'no-such-strategy'");
  CHECK(ck == NULL);
  CHECK(strstr(cairn_errormsg(), "dram-cache") != NULL); /* the message lists the known names */
  CHECK_ERR(cairn_ckpt_create("dram-cache", "x", g_dir, 0, 1u << 7, &ck), CAIRN_E_INVALID_ARGUMENT, "unknown bits");
  CHECK_ERR(cairn_ckpt_create("dram-cache", "a/b", g_dir, 0, 0, &ck), CAIRN_E_INVALID_ARGUMENT, "a/b");
  CHECK_ERR(cairn_ckpt_create("dram-cache", "", g_dir, 0, 0, &ck), CAIRN_E_INVALID_ARGUMENT, "non-empty");

  /* Strategies listed but not built answer CAIRN_E_UNSUPPORTED with a message. */
  for (size_t i = 0; i < cairn_ckpt_strategy_count(); ++i) {
    int rc = cairn_ckpt_create(cairn_ckpt_strategy_name(i), "x", g_dir, 0, 0, &ck);
    if (rc == CAIRN_E_UNSUPPORTED) CHECK(strstr(cairn_errormsg(), cairn_ckpt_strategy_name(i)) != NULL);
    CHECK(rc == CAIRN_OK || rc == CAIRN_E_UNSUPPORTED);
    cairn_ckpt_delete(&ck);
  }

  /* NULL strategy: $CAIRN_STRATEGY decides. */
  setenv("CAIRN_STRATEGY", "nt-copy", 1);
  REQUIRE_OK(cairn_ckpt_create(NULL, NULL, g_dir, 0, CAIRN_CKPT_INCREMENTAL, &ck));
  unsetenv("CAIRN_STRATEGY");
  CHECK(strcmp(cairn_ckpt_strategy(ck), "nt-copy") == 0);
  REQUIRE_OK(cairn_ckpt_delete(&ck));

  REQUIRE_OK(cairn_ckpt_create("dram-cache", "usage", g_dir, 0, CAIRN_CKPT_DEFAULTS, &ck));
  CHECK_ERR(cairn_ckpt_region_create(ck, "zero", 0, &r), CAIRN_E_INVALID_ARGUMENT, "zero size");
  CHECK(r == NULL);
  CHECK_ERR(cairn_ckpt_region_create(ck, "a-name-that-is-far-too-long-for-a-region-descriptor", 8, &r),
            CAIRN_E_INVALID_ARGUMENT, "must have 1 to 47 characters");
  cairn_ckpt_region* a = NULL;
  REQUIRE_OK(cairn_ckpt_region_create(ck, "a", 4096, &a));
  CHECK_ERR(cairn_ckpt_region_create(ck, "a", 4096, &r), CAIRN_E_INVALID_ARGUMENT, "registered twice");
  /* A default name that is taken: "region1" is the second registration's default. */
  cairn_ckpt_region* taken = NULL;
  REQUIRE_OK(cairn_ckpt_region_create(ck, "region2", 64, &taken));
  CHECK_ERR(cairn_ckpt_region_create(ck, NULL, 64, &taken), CAIRN_E_INVALID_ARGUMENT, "'region2' is registered twice");
  static void* user_words[8192 / sizeof(void*)];
  char* user = (char*)user_words;
  REQUIRE_OK(cairn_ckpt_register_region(ck, "user", user, 4096, NULL));
  CHECK_ERR(cairn_ckpt_register_region(ck, "user2", user + 100, 4096, NULL), CAIRN_E_INVALID_ARGUMENT,
            "overlaps region 'user'");
  void* outside = NULL;
  CHECK_ERR(cairn_ckpt_register_pointer(ck, &outside), CAIRN_E_INVALID_ARGUMENT, "not inside any registered region");
  void** in_user = (void**)user;
  *in_user = user + 64;
  CHECK_ERR(cairn_ckpt_register_pointer_to(ck, in_user, user + 8), CAIRN_E_INVALID_ARGUMENT, "swapped");
  REQUIRE_OK(cairn_ckpt_register_pointer_to(ck, in_user, user + 64));
  CHECK_ERR(cairn_ckpt_register_pointer(ck, in_user), CAIRN_E_INVALID_ARGUMENT, "registered twice");

  /* Versions need open. */
  CHECK_ERR(cairn_ckpt_commit(ck, &v), CAIRN_E_NOT_READY, "before open");
  CHECK_ERR(cairn_ckpt_restore(ck, &v), CAIRN_E_NOT_READY, "before open");
  CHECK_ERR(cairn_ckpt_begin(ck), CAIRN_E_NOT_READY, "before open");
  CHECK_ERR(cairn_ckpt_committed_version(ck, &v, &has), CAIRN_E_NOT_READY, "cairn_ckpt_open first");
  REQUIRE_OK(cairn_ckpt_flush_async(ck)); /* no-ops before open */
  REQUIRE_OK(cairn_ckpt_flush_barrier(ck));
  REQUIRE_OK(cairn_ckpt_open(ck));
  CHECK_ERR(cairn_ckpt_open(ck), CAIRN_E_INVALID_ARGUMENT, "twice");
  CHECK_ERR(cairn_ckpt_region_create(ck, "late", 64, &r), CAIRN_E_INVALID_ARGUMENT, "after open");
  CHECK_ERR(cairn_ckpt_restore(ck, &v), CAIRN_E_NO_VERSION, "start from scratch");

  /* A pointer aimed outside every region cannot be committed. */
  static char stray[16];
  *in_user = stray;
  CHECK_ERR(cairn_ckpt_commit(ck, &v), CAIRN_E_INVALID_ARGUMENT, "cairn_ckpt_commit");
  *in_user = (char*)cairn_ckpt_region_data(a) + 100;
  REQUIRE_OK(cairn_ckpt_commit(ck, &v));
  CHECK_EQ_U64(v, 1);
  /* Pointers are fixed from the first commit on. */
  CHECK_ERR(cairn_ckpt_register_pointer(ck, (void**)(user + 8)), CAIRN_E_INVALID_ARGUMENT, "before the first commit");
  REQUIRE_OK(cairn_ckpt_delete(&ck));
}

static void test_layout_mismatch(void) {
  g_test = "layout_mismatch";
  cairn_ckpt* ck = NULL;
  cairn_ckpt_region* a = NULL;
  uint64_t v = 0;
  REQUIRE_OK(cairn_ckpt_create("dram-cache", "layout", g_dir, 0, CAIRN_CKPT_DEFAULTS, &ck));
  REQUIRE_OK(cairn_ckpt_region_create(ck, "a", 4096, &a));
  REQUIRE_OK(cairn_ckpt_open(ck));
  fill(cairn_ckpt_region_data(a), 4096, 1);
  REQUIRE_OK(cairn_ckpt_commit(ck, &v));
  REQUIRE_OK(cairn_ckpt_delete(&ck));

  /* The same name with another size: a typed error, and the stored version is never overwritten. */
  REQUIRE_OK(cairn_ckpt_create("dram-cache", "layout", g_dir, 0, CAIRN_CKPT_DEFAULTS, &ck));
  REQUIRE_OK(cairn_ckpt_region_create(ck, "a", 8192, &a));
  int rc = cairn_ckpt_open(ck);
  if (rc == CAIRN_OK) {
    CHECK_ERR(cairn_ckpt_restore(ck, &v), CAIRN_E_LAYOUT_MISMATCH, "8192");
    CHECK(strstr(cairn_errormsg(), "cairn_ckpt_restore") != NULL);
    CHECK_ERR(cairn_ckpt_commit(ck, &v), CAIRN_E_LAYOUT_MISMATCH, "cairn_ckpt_commit");
  } else {
    CHECK_EQ_U64(rc, CAIRN_E_LAYOUT_MISMATCH);
  }
  REQUIRE_OK(cairn_ckpt_delete(&ck));

  /* The original layout still restores. */
  REQUIRE_OK(cairn_ckpt_create("dram-cache", "layout", g_dir, 0, CAIRN_CKPT_DEFAULTS, &ck));
  REQUIRE_OK(cairn_ckpt_region_create(ck, "a", 4096, &a));
  REQUIRE_OK(cairn_ckpt_open(ck));
  REQUIRE_OK(cairn_ckpt_restore(ck, &v));
  CHECK_EQ_U64(v, 1);
  CHECK(matches_range(cairn_ckpt_region_data(a), 0, 4096 / 8, 1));
  REQUIRE_OK(cairn_ckpt_delete(&ck));
}

static void test_config_file(void) {
  g_test = "config_file";
  char path[600];
  snprintf(path, sizeof path, "%s/ckpt.conf", g_dir);
  FILE* f = fopen(path, "w");
  REQUIRE(f != NULL);
  fprintf(f, "# cairn checkpoint options\nstrategy = nt-copy\nname = fromconf\ndir = %s\nthreads = 2\n", g_dir);
  fprintf(f, "incremental = false   # copy everything\n");
  fclose(f);
  cairn_ckpt* ck = NULL;
  cairn_ckpt_region* a = NULL;
  uint64_t v = 0;
  REQUIRE_OK(cairn_ckpt_create_from_config(path, &ck));
  CHECK(strcmp(cairn_ckpt_strategy(ck), "nt-copy") == 0);
  REQUIRE_OK(cairn_ckpt_region_create(ck, "a", 8192, &a));
  REQUIRE_OK(cairn_ckpt_open(ck));
  fill(cairn_ckpt_region_data(a), 8192, 5);
  REQUIRE_OK(cairn_ckpt_commit(ck, &v));
  REQUIRE_OK(cairn_ckpt_delete(&ck));
  char pool[700];
  struct stat st;
  snprintf(pool, sizeof pool, "%s/fromconf.pool", g_dir);
  CHECK(stat(pool, &st) == 0); /* name and dir came from the file */

  f = fopen(path, "w");
  REQUIRE(f != NULL);
  fprintf(f, "strategy = nt-copy\ncolour = blue\n");
  fclose(f);
  CHECK_ERR(cairn_ckpt_create_from_config(path, &ck), CAIRN_E_INVALID_ARGUMENT, "unknown key 'colour'");
  CHECK(ck == NULL);
  snprintf(path, sizeof path, "%s/missing.conf", g_dir);
  CHECK_ERR(cairn_ckpt_create_from_config(path, &ck), CAIRN_E_NOT_FOUND, "missing.conf");
}

/* ---- seed 001's names (cairn/seed001.h) ---- */

/* Listing 5 as printed, then the restore a fresh process would do. */
static void test_seed_listing5(void) {
  g_test = "seed_listing5";
  setenv("CAIRN_POOL_DIR", g_dir, 1);
  setenv("CAIRN_BACKUP_NAME", "listing5", 1);
  {
    static int vals[32];
    ckpt_context* ctx = init_ckpt_context();
    REQUIRE(ctx != NULL);
    CHECK(strcmp(cairn_ckpt_strategy(ctx), "dram-cache") == 0);
    reg_region(ctx, &vals[0], sizeof(int) * 32);
    vals[3] = 5;
    CHECK(do_checkpoint(ctx) == CAIRN_OK);
    cairn_ckpt_delete(&ctx);
  }
  char pool[700];
  struct stat st;
  snprintf(pool, sizeof pool, "%s/listing5.pool", g_dir);
  CHECK(stat(pool, &st) == 0); /* named by $CAIRN_BACKUP_NAME in $CAIRN_POOL_DIR */
  {
    int* vals = (int*)calloc(32, sizeof(int));
    REQUIRE(vals != NULL);
    ckpt_context* ctx = init_ckpt_context();
    REQUIRE(ctx != NULL);
    CHECK(reg_region(ctx, &vals[0], sizeof(int) * 32) == CAIRN_OK);
    CHECK(do_restore(ctx) == CAIRN_OK);
    CHECK(vals[3] == 5);
    CHECK(vals[2] == 0 && vals[4] == 0);
    cairn_ckpt_delete(&ctx);
    free(vals);
  }
  unsetenv("CAIRN_BACKUP_NAME");
  unsetenv("CAIRN_POOL_DIR");
}

/* Table 1: a DRAM linked list with a root pointer, backed up, restored into other memory. */
struct seed_node {
  struct seed_node* next;
  int value;
};
struct seed_roots {
  struct seed_node* head;
  int count;
};

static void test_seed_table1(void) {
  g_test = "seed_table1";
  enum { N = 10 };
  setenv("CAIRN_POOL_DIR", g_dir, 1);
  setenv("CAIRN_BACKUP_NAME", "table1", 1);
  {
    ckpt_ctx* ctx = init_backup_context();
    REQUIRE(ctx != NULL);
    struct seed_node* nodes = (struct seed_node*)calloc(N, sizeof *nodes);
    struct seed_roots* roots = (struct seed_roots*)calloc(1, sizeof *roots);
    REQUIRE(nodes != NULL && roots != NULL);
    CHECK(register_region(ctx, nodes, N * sizeof *nodes) == CAIRN_OK);
    CHECK(register_region(ctx, roots, sizeof *roots) == CAIRN_OK);
    for (int i = 0; i < N; ++i) {
      nodes[i].value = i * i;
      nodes[i].next = i == 0 ? NULL : &nodes[i - 1]; /* N-1 -> ... -> 0 */
    }
    roots->head = &nodes[N - 1];
    roots->count = N;
    for (int i = 0; i < N; ++i) CHECK(register_pointer(ctx, &nodes[i].next, nodes[i].next) == CAIRN_OK);
    CHECK(register_pointer(ctx, &roots->head, &nodes[N - 1]) == CAIRN_OK);
    CHECK(register_pointer(ctx, &roots->head, &nodes[0]) == CAIRN_E_INVALID_ARGUMENT); /* not its target */
    CHECK(do_restore(ctx) == CAIRN_E_NO_VERSION); /* first run: nothing backed up yet, nothing touched */
    CHECK(roots->head == &nodes[N - 1] && roots->count == N);
    CHECK(do_backup(ctx) == CAIRN_OK);
    roots->count = -1; /* after the backup: lost */
    cairn_ckpt_delete(&ctx);
    free(nodes);
    free(roots);
  }
  {
    struct seed_node* hog = (struct seed_node*)calloc(N, sizeof *hog); /* keeps the old address busy */
    struct seed_node* nodes = (struct seed_node*)calloc(N, sizeof *nodes);
    struct seed_roots* roots = (struct seed_roots*)calloc(1, sizeof *roots);
    REQUIRE(hog != NULL && nodes != NULL && roots != NULL);
    ckpt_ctx* ctx = init_backup_context();
    REQUIRE(ctx != NULL);
    CHECK(register_region(ctx, nodes, N * sizeof *nodes) == CAIRN_OK);
    CHECK(register_region(ctx, roots, sizeof *roots) == CAIRN_OK);
    for (int i = 0; i < N; ++i) CHECK(register_pointer(ctx, &nodes[i].next, NULL) == CAIRN_OK);
    CHECK(register_pointer(ctx, &roots->head, NULL) == CAIRN_OK);
    CHECK(do_restore(ctx) == CAIRN_OK);
    CHECK(roots->count == N);
    CHECK(roots->head == &nodes[N - 1]);
    int seen = 0;
    for (const struct seed_node* p = roots->head; p != NULL && seen <= N; p = p->next) {
      CHECK(p >= nodes && p < nodes + N);
      CHECK(p->value == (N - 1 - seen) * (N - 1 - seen));
      ++seen;
    }
    CHECK(seen == N);
    /* The same context keeps backing up. */
    roots->count = N + 1;
    CHECK(do_backup(ctx) == CAIRN_OK);
    uint64_t v = 0;
    int has = 0;
    CHECK(cairn_ckpt_committed_version(ctx, &v, &has) == CAIRN_OK && has == 1 && v == 2);
    cairn_ckpt_delete(&ctx);
    free(hog);
    free(nodes);
    free(roots);
  }
  unsetenv("CAIRN_BACKUP_NAME");
  unsetenv("CAIRN_POOL_DIR");
}

static void test_strerror(void) {
  g_test = "strerror";
  CHECK(strncmp(cairn_strerror(CAIRN_E_LAYOUT_MISMATCH), "layout_mismatch", 15) == 0);
  CHECK(strncmp(cairn_strerror(CAIRN_E_NO_VERSION), "no_version", 10) == 0);
  CHECK(strncmp(cairn_strerror(CAIRN_E_UNSUPPORTED), "unsupported", 11) == 0);
  CHECK(CAIRN_E_LAYOUT_MISMATCH == -16 && CAIRN_E_NO_VERSION == -17 && CAIRN_E_UNSUPPORTED == -18);
}

static void test_hdf5_flag(void) {
  g_test = "hdf5_flag";
  cairn_ckpt* ck = NULL;
  cairn_ckpt_region* a = NULL;
  uint64_t v = 0;
  CHECK_ERR(cairn_ckpt_create("nt-copy", "h5", g_dir, 0, CAIRN_CKPT_HDF5, &ck), CAIRN_E_INVALID_ARGUMENT,
            "'file' strategy only");
  REQUIRE_OK(cairn_ckpt_create("file", "h5", g_dir, 0, CAIRN_CKPT_HDF5, &ck));
  REQUIRE_OK(cairn_ckpt_region_create(ck, "a", 4096, &a));
  REQUIRE_OK(cairn_ckpt_open(ck));
  fill(cairn_ckpt_region_data(a), 4096, 3);
  REQUIRE_OK(cairn_ckpt_commit(ck, &v));
  CHECK_EQ_U64(v, 1);
  char path[600];
  snprintf(path, sizeof path, "%s/h5.1.h5", g_dir);
  struct stat st;
  CHECK(stat(path, &st) == 0 && st.st_size > 4096); /* the region's 4096 bytes and HDF5's own metadata */
  REQUIRE_OK(cairn_ckpt_delete(&ck));
}

int main(void) {
  make_scratch_dir("cairn-ckpt");
  test_every_strategy();
  test_null_arguments();
  test_usage_errors();
  test_layout_mismatch();
  test_config_file();
  test_seed_listing5();
  test_seed_table1();
  test_strerror();
  test_hdf5_flag();
  return finish("ckpt_test");
}
