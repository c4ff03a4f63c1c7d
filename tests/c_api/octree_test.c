/* octree_test.c — the PM-octree C API (cairn_octree_*) and seed 000's names
 * (cairn/pm_octree.h) from C11: build, refine, coarsen, balance, persist, a
 * lost working version, restore, payload updates, following an application's
 * own tree, the root payload, find_leaf, stats, verify, keep_previous,
 * open-or-create on every kind of file, and the errors a caller can cause. */
#define _XOPEN_SOURCE 700
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cairn/pm_octree.h"
#include "check.h"

struct cell {
  double value;
  uint32_t level;
};

static void init_cell(const cairn_octant* o, void* data, const void* parent, void* user) {
  (void)user;
  struct cell* c = data;
  c->value = parent != NULL ? ((const struct cell*)parent)->value + 1.0 : 0.0;
  c->level = (uint32_t)o->level;
}

/* Refine the octants that touch the plane x = 0, down to level 4. */
static int near_x0(const cairn_octant* o, const void* data, void* user) {
  (void)data;
  (void)user;
  return o->x == 0;
}

static int coarsen_all(const cairn_octant* parent, const void* const* children, void* user) {
  (void)children;
  int* count = user;
  ++*count;
  return parent->level >= 2;
}

static void sum_leaves(const cairn_octant* o, const void* data, void* user) {
  const struct cell* c = data;
  double* sum = user;
  *sum += c->value * (double)(o->level + 1);
}

static int bump_level3(const cairn_octant* o, void* data, void* user) {
  (void)user;
  if (o->level != 3) return 0;
  ((struct cell*)data)->value += 100.0;
  return 1;
}

static void test_seed_names(void) {
  g_test = "seed_names";
  char path[700];
  snprintf(path, sizeof path, "%s/tree.pool", g_dir);
  cairn_octree_options o;
  cairn_octree_options_init(&o);
  o.data_size = sizeof(struct cell);
  o.pool_size = 32u << 20;
  CHECK(pm_restore(path, &o) == NULL); /* nothing there yet */
  /* The message says how to make an octree, not a plain pool. */
  CHECK(strstr(cairn_errormsg(), "pm_create") != NULL);
  CHECK(strstr(cairn_errormsg(), "pool create") == NULL);
  pmoctree* t = pm_create(path, &o);
  REQUIRE(t != NULL);
  REQUIRE_OK(cairn_octree_uniform(t, 2, init_cell, NULL));
  REQUIRE_OK(cairn_octree_refine(t, 1, 4, near_x0, init_cell, NULL));
  REQUIRE_OK(cairn_octree_balance(t, 0, init_cell, NULL));
  uint64_t leaves = 0, persisted = 0;
  REQUIRE_OK(cairn_octree_leaf_count(t, &leaves));
  CHECK(leaves > 64);
  REQUIRE_OK(pm_persistent(t));
  CHECK_EQ_U64(cairn_octree_version(t), 1);
  REQUIRE_OK(cairn_octree_checksum(t, &persisted));
  double before = 0;
  REQUIRE_OK(cairn_octree_visit_leaves(t, sum_leaves, &before));

  /* Work that is never persisted, then the "crash": the handle goes away. */
  int families = 0;
  REQUIRE_OK(cairn_octree_coarsen(t, 1, coarsen_all, NULL, &families));
  CHECK(families > 0);
  uint64_t fewer = 0;
  REQUIRE_OK(cairn_octree_leaf_count(t, &fewer));
  CHECK(fewer < leaves);
  REQUIRE_OK(cairn_octree_close(&t));
  CHECK(t == NULL);

  t = pm_restore(path, &o);
  REQUIRE(t != NULL);
  uint64_t sum = 0;
  REQUIRE_OK(cairn_octree_checksum(t, &sum));
  CHECK_EQ_U64(sum, persisted);
  double after = 0;
  REQUIRE_OK(cairn_octree_visit_leaves(t, sum_leaves, &after));
  CHECK(after == before);
  /* The cursor, 100 leaves at a time (its batches hold 256): the same sum,
   * as many leaves. */
  cairn_octree_leaves* cursor = NULL;
  REQUIRE_OK(cairn_octree_leaves_open(t, 0, &cursor));
  cairn_octant octs[100];
  void* datas[100];
  size_t got = 0;
  uint64_t seen = 0;
  double flat = 0;
  do {
    REQUIRE_OK(cairn_octree_leaves_next(cursor, octs, datas, 100, &got));
    for (size_t i = 0; i < got; ++i) sum_leaves(&octs[i], datas[i], &flat);
    seen += got;
  } while (got > 0);
  REQUIRE_OK(cairn_octree_leaves_close(&cursor));
  CHECK(cursor == NULL);
  CHECK(flat == after);
  CHECK_EQ_U64(seen, leaves);
  REQUIRE_OK(cairn_octree_update_leaves(t, bump_level3, NULL));
  REQUIRE_OK(cairn_octree_persist(t, &persisted));
  CHECK_EQ_U64(persisted, 2);
  /* Writable: every value + 1 in place, after the persist (copy-on-write). */
  double bumped = 0, expected = 0;
  REQUIRE_OK(cairn_octree_visit_leaves(t, sum_leaves, &expected));
  REQUIRE_OK(cairn_octree_leaves_open(t, 1, &cursor));
  do {
    REQUIRE_OK(cairn_octree_leaves_next(cursor, octs, datas, 100, &got));
    for (size_t i = 0; i < got; ++i) {
      ((struct cell*)datas[i])->value += 1.0;
      expected += (double)(octs[i].level + 1);
    }
  } while (got > 0);
  REQUIRE_OK(cairn_octree_leaves_close(&cursor));
  REQUIRE_OK(cairn_octree_visit_leaves(t, sum_leaves, &bumped));
  CHECK(bumped == expected);
  REQUIRE_OK(cairn_octree_persist(t, &persisted));
  CHECK_EQ_U64(persisted, 3);
  REQUIRE_OK(cairn_octree_gc(t));
  char vtu[700];
  snprintf(vtu, sizeof vtu, "%s/mesh.vtu", g_dir);
  REQUIRE_OK(cairn_octree_write_vtk(t, vtu));
  FILE* f = fopen(vtu, "r");
  CHECK(f != NULL);
  if (f != NULL) fclose(f);
  REQUIRE_OK(pm_delete(t));
  CHECK(pm_restore(path, &o) == NULL);
  CHECK(strstr(cairn_errormsg(), "tree.pool") != NULL);
}

/* An application's own quadtree for cairn_octree_follow: a node per octant. */
struct node {
  double value;
  struct node* kids; /* 4 children, or NULL: a leaf */
};

static int node_children(const cairn_octant* o, const void* handle, const void** out, void* user) {
  (void)o;
  (void)user;
  const struct node* n = handle;
  if (n->kids == NULL) return 0;
  for (int k = 0; k < 4; ++k) out[k] = &n->kids[k];
  return 1;
}

static int node_update(const cairn_octant* o, const void* handle, void* data, void* user) {
  (void)o;
  int* writes = user;
  const struct node* n = handle;
  struct cell* c = data;
  if (c->value == n->value) return 0;
  c->value = n->value;
  ++*writes;
  return 1;
}

static void node_init(const cairn_octant* o, void* data, const void* parent, void* user) {
  (void)o;
  (void)parent;
  (void)user;
  ((struct cell*)data)->value = -1; /* no application value: update writes it */
}

static void count_leaf(const cairn_octant* o, const void* data, void* user) {
  (void)o;
  double* sum = user;
  *sum += ((const struct cell*)data)->value;
}

static void test_follow(void) {
  g_test = "follow";
  char path[700];
  snprintf(path, sizeof path, "%s/follow.pool", g_dir);
  cairn_octree_options o;
  cairn_octree_options_init(&o);
  o.dims = 2;
  o.data_size = sizeof(struct cell);
  o.pool_size = 16u << 20;
  cairn_octree* t = NULL;
  REQUIRE_OK(cairn_octree_create(path, &o, &t));
  struct node grand[4] = {{10, NULL}, {11, NULL}, {12, NULL}, {13, NULL}};
  struct node kids[4] = {{1, NULL}, {2, grand}, {3, NULL}, {4, NULL}};
  struct node root = {0, kids};
  int writes = 0;
  REQUIRE_OK(cairn_octree_follow(t, &root, node_children, node_init, node_update, &writes));
  uint64_t leaves = 0;
  REQUIRE_OK(cairn_octree_leaf_count(t, &leaves));
  CHECK_EQ_U64(leaves, 7);
  CHECK(writes == 7);
  double sum = 0;
  REQUIRE_OK(cairn_octree_visit_leaves(t, count_leaf, &sum));
  CHECK(sum == 1 + 10 + 11 + 12 + 13 + 3 + 4);
  REQUIRE_OK(cairn_octree_persist(t, NULL));
  /* The application coarsens kid 1, refines kid 3 and changes one value. */
  kids[1].kids = NULL;
  kids[3].kids = grand;
  kids[0].value = 5;
  writes = 0;
  REQUIRE_OK(cairn_octree_follow(t, &root, node_children, node_init, node_update, &writes));
  REQUIRE_OK(cairn_octree_leaf_count(t, &leaves));
  CHECK_EQ_U64(leaves, 7);
  CHECK(writes == 6); /* kid 0, kid 1 (now a leaf) and the four new ones */
  sum = 0;
  REQUIRE_OK(cairn_octree_visit_leaves(t, count_leaf, &sum));
  CHECK(sum == 5 + 2 + 3 + 10 + 11 + 12 + 13);
  CHECK_ERR(cairn_octree_follow(t, &root, NULL, node_init, node_update, NULL), CAIRN_E_INVALID_ARGUMENT, "NULL");
  REQUIRE_OK(cairn_octree_delete(&t));
}

static void test_errors(void) {
  g_test = "errors";
  char path[700];
  snprintf(path, sizeof path, "%s/err.pool", g_dir);
  cairn_octree_options o;
  cairn_octree_options_init(&o);
  o.pool_size = 8u << 20;
  cairn_octree* t = NULL;
  o.dims = 5;
  CHECK_ERR(cairn_octree_create(path, &o, &t), CAIRN_E_INVALID_ARGUMENT, "dims");
  o.dims = 3;
  REQUIRE_OK(cairn_octree_create(path, &o, &t));
  cairn_octree* r = t; /* a failed open sets *out to NULL */
  CHECK_ERR(cairn_octree_restore(path, &o, &r), CAIRN_E_NO_VERSION, "never persisted");
  CHECK(r == NULL);
  REQUIRE_OK(cairn_octree_persist(t, NULL));
  REQUIRE_OK(cairn_octree_close(&t));
  o.data_size = 24;
  CHECK_ERR(cairn_octree_restore(path, &o, &t), CAIRN_E_LAYOUT_MISMATCH, "0-byte payloads");
  CHECK(t == NULL);
  CHECK_ERR(cairn_octree_uniform(NULL, 1, NULL, NULL), CAIRN_E_INVALID_ARGUMENT, "NULL");
  cairn_octree_leaves* no_cursor = NULL;
  CHECK_ERR(cairn_octree_leaves_open(NULL, 0, &no_cursor), CAIRN_E_INVALID_ARGUMENT, "NULL");
  CHECK(no_cursor == NULL);
  CHECK_ERR(cairn_octree_remove("/nonexistent/dir/x.pool"), CAIRN_E_NOT_FOUND, "x.pool");
  REQUIRE_OK(cairn_octree_remove(path));
}

/* ---- helpers for files: whole contents, a marker's place, one flipped bit ---- */

/* The file's bytes (malloc'd; *size its length), NULL if it cannot be read. */
static unsigned char* slurp(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* b = malloc(n > 0 ? (size_t)n : 1);
  if (b != NULL && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return b;
}

/* 1 if the file at `path` holds exactly `size` bytes equal to `bytes`. */
static int same_file(const char* path, const unsigned char* bytes, size_t size) {
  size_t n = 0;
  unsigned char* now = slurp(path, &n);
  const int same = now != NULL && n == size && memcmp(now, bytes, size) == 0;
  free(now);
  return same;
}

static void flip_bit(const char* path, uint64_t at, int bit) {
  FILE* f = fopen(path, "r+b");
  if (f == NULL) return;
  fseek(f, (long)at, SEEK_SET);
  const int c = fgetc(f);
  fseek(f, (long)at, SEEK_SET);
  fputc(c ^ (1 << bit), f);
  fclose(f);
}

static int exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* The 2D tree of the tests below: uniform to level 1, then the lower left
 * quadrant refined to level 2 (3 leaves of level 1, 4 of level 2). */
static int lower_left(const cairn_octant* o, const void* data, void* user) {
  (void)data;
  (void)user;
  return o->level == 1 && o->x == 0 && o->y == 0;
}

static int build_quadtree(cairn_octree* t) {
  int rc = cairn_octree_uniform(t, 1, init_cell, NULL);
  if (rc == 0) rc = cairn_octree_refine(t, 0, 2, lower_left, init_cell, NULL);
  return rc;
}

static void quadtree_options(cairn_octree_options* o) {
  cairn_octree_options_init(o);
  o->dims = 2;
  o->data_size = sizeof(struct cell);
  o->pool_size = 16u << 20;
  o->dram_budget = 0; /* every block in the pool */
}

enum { kLength = 1 << CAIRN_OCTREE_MAX_LEVEL };

/* The root payload holds what the program persists with the tree (a step
 * counter): committed by persist, back in another process and in a new
 * handle; a write that is not persisted is lost with the working version. */
static void test_root_payload(void) {
  g_test = "root_payload";
  char path[700];
  snprintf(path, sizeof path, "%s/root.pool", g_dir);
  cairn_octree_options o;
  quadtree_options(&o);
  cairn_octree* t = NULL;
  REQUIRE_OK(cairn_octree_create(path, &o, &t));
  uint64_t step = 99;
  REQUIRE_OK(cairn_octree_root_read(t, &step, sizeof step));
  CHECK_EQ_U64(step, 0); /* a new root's payload is zero */
  REQUIRE_OK(build_quadtree(t));
  step = 41;
  REQUIRE_OK(cairn_octree_root_write(t, &step, sizeof step));
  REQUIRE_OK(cairn_octree_persist(t, NULL));
  step = 42; /* written, never persisted */
  REQUIRE_OK(cairn_octree_root_write(t, &step, sizeof step));
  step = 0;
  REQUIRE_OK(cairn_octree_root_read(t, &step, sizeof step));
  CHECK_EQ_U64(step, 42);
  struct cell whole;
  CHECK_ERR(cairn_octree_root_read(t, &whole, sizeof whole + 1), CAIRN_E_INVALID_ARGUMENT, "data_size");
  CHECK_ERR(cairn_octree_root_write(t, &whole, sizeof whole + 1), CAIRN_E_INVALID_ARGUMENT, "data_size");
  CHECK_ERR(cairn_octree_root_read(NULL, &step, sizeof step), CAIRN_E_INVALID_ARGUMENT, "NULL");
  REQUIRE_OK(cairn_octree_close(&t));

  /* Another process restores the tree and finds the persisted counter. */
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    cairn_octree* c = NULL;
    uint64_t seen = 0;
    const int ok = cairn_octree_restore(path, &o, &c) == 0 && cairn_octree_root_read(c, &seen, sizeof seen) == 0;
    cairn_octree_close(&c);
    _exit(!ok ? 2 : seen == 41 ? 0 : 1);
  }
  int status = -1;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK_EQ_U64(WEXITSTATUS(status), 0);

  int error = 1;
  t = pm_restore_err(path, &o, &error);
  REQUIRE(t != NULL);
  CHECK(error == 0);
  step = 0;
  REQUIRE_OK(cairn_octree_root_read(t, &step, sizeof step));
  CHECK_EQ_U64(step, 41);
  uint64_t leaves = 0;
  REQUIRE_OK(cairn_octree_leaf_count(t, &leaves));
  CHECK_EQ_U64(leaves, 7);
  REQUIRE_OK(cairn_octree_delete(&t));
}

static void test_find_leaf_and_stats(void) {
  g_test = "find_leaf_and_stats";
  char path[700];
  snprintf(path, sizeof path, "%s/find.pool", g_dir);
  cairn_octree_options o;
  quadtree_options(&o);
  cairn_octree* t = NULL;
  REQUIRE_OK(cairn_octree_create(path, &o, &t));
  REQUIRE_OK(build_quadtree(t));
  struct {
    uint32_t x, y;
    cairn_octant leaf;
  } const cases[] = {
      {0, 0, {2, 0, 0, 0}},
      {kLength / 4 - 1, kLength / 4 - 1, {2, 0, 0, 0}},
      {kLength / 4, 0, {2, kLength / 4, 0, 0}},
      {kLength / 4 + 3, kLength / 2 - 1, {2, kLength / 4, kLength / 4, 0}},
      {kLength / 2, 0, {1, kLength / 2, 0, 0}},
      {kLength - 1, 5, {1, kLength / 2, 0, 0}},
      {7, kLength / 2 + 9, {1, 0, kLength / 2, 0}},
      {kLength - 1, kLength - 1, {1, kLength / 2, kLength / 2, 0}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    cairn_octant leaf = {-1, 0, 0, 0};
    const void* data = NULL;
    REQUIRE_OK(cairn_octree_find_leaf(t, cases[i].x, cases[i].y, 0, &leaf, &data));
    CHECK(leaf.level == cases[i].leaf.level);
    CHECK_EQ_U64(leaf.x, cases[i].leaf.x);
    CHECK_EQ_U64(leaf.y, cases[i].leaf.y);
    CHECK_EQ_U64(leaf.z, 0);
    REQUIRE(data != NULL);
    CHECK_EQ_U64(((const struct cell*)data)->level, cases[i].leaf.level); /* init_cell's mark */
  }
  cairn_octant leaf;
  REQUIRE_OK(cairn_octree_find_leaf(t, 1, 1, 0, &leaf, NULL)); /* data may be NULL */
  CHECK_ERR(cairn_octree_find_leaf(t, kLength, 0, 0, &leaf, NULL), CAIRN_E_INVALID_ARGUMENT, "outside the domain");
  CHECK_ERR(cairn_octree_find_leaf(t, 0, 0, 1, &leaf, NULL), CAIRN_E_INVALID_ARGUMENT, "z 0 in 2D");
  CHECK_ERR(cairn_octree_find_leaf(t, 0, 0, 0, NULL, NULL), CAIRN_E_INVALID_ARGUMENT, "NULL");

  /* Stats: 9 octants (the root, 4, 4), 7 leaves, 3 blocks (the root's, two
   * families), depth 2; all in the pool (no C0). */
  cairn_octree_stats st;
  memset(&st, 0xff, sizeof st);
  REQUIRE_OK(cairn_octree_stats_get(t, &st));
  uint64_t leaves = 0;
  REQUIRE_OK(cairn_octree_leaf_count(t, &leaves));
  CHECK_EQ_U64(st.leaves, leaves);
  CHECK_EQ_U64(st.leaves, 7);
  CHECK_EQ_U64(st.octants, 9);
  CHECK_EQ_U64(st.blocks, 3);
  CHECK_EQ_U64(st.depth, 2);
  CHECK(st.block_bytes > 0);
  CHECK_EQ_U64(st.version_bytes, 3 * st.block_bytes);
  CHECK_EQ_U64(st.dram_bytes, 0);
  CHECK_EQ_U64(st.committed_version, 0);
  CHECK_EQ_U64(st.previous_version, 0);
  CHECK_EQ_U64(st.shared_bytes, 0); /* nothing committed yet */
  REQUIRE_OK(cairn_octree_persist(t, NULL));
  REQUIRE_OK(cairn_octree_stats_get(t, &st));
  CHECK_EQ_U64(st.committed_version, 1);
  CHECK_EQ_U64(st.committed_version, cairn_octree_version(t));
  CHECK_EQ_U64(st.shared_bytes, 3 * st.block_bytes); /* every block is the committed one's */
  CHECK_EQ_U64(st.nvm_bytes, 3 * st.block_bytes);
  CHECK(st.chunk_blocks >= 3);
  CHECK_ERR(cairn_octree_stats_get(t, NULL), CAIRN_E_INVALID_ARGUMENT, "NULL");
  REQUIRE_OK(cairn_octree_verify(t));
  CHECK_ERR(cairn_octree_verify(NULL), CAIRN_E_INVALID_ARGUMENT, "NULL");
  REQUIRE_OK(cairn_octree_delete(&t));
}

/* A leaf's payload marked, persisted, then one bit of it flipped in the file:
 * restore reads the committed block lazily, verify finds the damage. */
static void test_verify_damage(void) {
  g_test = "verify_damage";
  char path[700];
  snprintf(path, sizeof path, "%s/verify.pool", g_dir);
  cairn_octree_options o;
  quadtree_options(&o);
  cairn_octree* t = NULL;
  REQUIRE_OK(cairn_octree_create(path, &o, &t));
  REQUIRE_OK(build_quadtree(t));
  const uint64_t marked[2] = {0x5EED000C0FFEE123ull, 0x0DDBA11CAFEF00Dull}; /* sizeof(struct cell) */
  cairn_octree_leaves* cursor = NULL;
  REQUIRE_OK(cairn_octree_leaves_open(t, 1, &cursor));
  cairn_octant octs[8];
  void* datas[8];
  size_t got = 0;
  REQUIRE_OK(cairn_octree_leaves_next(cursor, octs, datas, 8, &got));
  REQUIRE(got > 0);
  memcpy(datas[got - 1], &marked, sizeof marked); /* the last leaf of the first batch */
  REQUIRE_OK(cairn_octree_leaves_close(&cursor));
  REQUIRE_OK(cairn_octree_persist(t, NULL));
  REQUIRE_OK(cairn_octree_verify(t));
  REQUIRE_OK(cairn_octree_close(&t));

  t = pm_restore(path, &o);
  REQUIRE(t != NULL);
  REQUIRE_OK(cairn_octree_verify(t)); /* a good pool after restore */
  REQUIRE_OK(cairn_octree_close(&t));

  /* The marker is in the file once (one committed copy of the block). */
  size_t size = 0;
  unsigned char* bytes = slurp(path, &size);
  REQUIRE(bytes != NULL);
  size_t found = 0, at = 0;
  for (size_t i = 0; i + sizeof marked <= size; ++i)
    if (memcmp(bytes + i, &marked, sizeof marked) == 0) {
      ++found;
      at = i;
    }
  free(bytes);
  CHECK_EQ_U64(found, 1);
  REQUIRE(found == 1);
  flip_bit(path, at + 2, 3);

  int error = 0;
  t = pm_restore_err(path, &o, &error);
  REQUIRE(t != NULL); /* only the header, the record and the root block are read at restore */
  CHECK_ERR(cairn_octree_verify(t), CAIRN_E_CORRUPTED, "verify.pool");
  uint64_t sum = 0;
  CHECK_ERR(cairn_octree_checksum(t, &sum), CAIRN_E_CORRUPTED, "verify.pool");
  REQUIRE_OK(cairn_octree_close(&t));
  REQUIRE_OK(cairn_octree_remove(path));
}

/* keep_previous: version 1 stays intact after version 2 and can be restored. */
static void test_keep_previous(void) {
  g_test = "keep_previous";
  char path[700];
  snprintf(path, sizeof path, "%s/previous.pool", g_dir);
  cairn_octree_options o;
  quadtree_options(&o);
  CHECK(o.keep_previous == 0);
  CHECK_EQ_U64(o.version, 0);
  o.keep_previous = 1;
  cairn_octree* t = NULL;
  REQUIRE_OK(cairn_octree_create(path, &o, &t));
  REQUIRE_OK(build_quadtree(t));
  uint64_t one = 0, two = 0, step = 1;
  REQUIRE_OK(cairn_octree_root_write(t, &step, sizeof step));
  REQUIRE_OK(cairn_octree_persist(t, NULL));
  REQUIRE_OK(cairn_octree_checksum(t, &one));
  REQUIRE_OK(cairn_octree_uniform(t, 2, init_cell, NULL)); /* 16 leaves */
  step = 2;
  REQUIRE_OK(cairn_octree_root_write(t, &step, sizeof step));
  REQUIRE_OK(cairn_octree_persist(t, NULL));
  REQUIRE_OK(cairn_octree_checksum(t, &two));
  CHECK(one != two);
  cairn_octree_stats st;
  REQUIRE_OK(cairn_octree_stats_get(t, &st));
  CHECK_EQ_U64(st.committed_version, 2);
  CHECK_EQ_U64(st.previous_version, 1);
  uint64_t sum = 0;
  REQUIRE_OK(cairn_octree_previous_checksum(t, &sum));
  CHECK_EQ_U64(sum, one);
  REQUIRE_OK(cairn_octree_close(&t));
  uint64_t committed = 0, previous = 0;
  REQUIRE_OK(cairn_octree_versions(path, &o, &committed, &previous));
  CHECK_EQ_U64(committed, 2);
  CHECK_EQ_U64(previous, 1);

  o.version = 7; /* not held */
  CHECK_ERR(cairn_octree_restore(path, &o, &t), CAIRN_E_NO_VERSION, "not version 7");
  o.version = 1;
  REQUIRE_OK(cairn_octree_restore(path, &o, &t));
  CHECK_EQ_U64(cairn_octree_version(t), 1);
  REQUIRE_OK(cairn_octree_checksum(t, &sum));
  CHECK_EQ_U64(sum, one);
  REQUIRE_OK(cairn_octree_root_read(t, &step, sizeof step));
  CHECK_EQ_U64(step, 1);
  REQUIRE_OK(cairn_octree_verify(t));
  /* Version 1 is the committed one again, durably; none is kept before it. */
  CHECK_ERR(cairn_octree_previous_checksum(t, &sum), CAIRN_E_NO_VERSION, "keep_previous");
  REQUIRE_OK(cairn_octree_close(&t));
  REQUIRE_OK(cairn_octree_versions(path, &o, &committed, &previous));
  CHECK_EQ_U64(committed, 1);
  CHECK_EQ_U64(previous, 0);
  REQUIRE_OK(cairn_octree_remove(path));
}

/* cairn_octree_open_or_create on every kind of file it can meet. */
static void test_open_or_create(void) {
  g_test = "open_or_create";
  char path[700];
  snprintf(path, sizeof path, "%s/restart.pool", g_dir);
  cairn_octree_options o;
  quadtree_options(&o);
  cairn_octree* t = NULL;
  uint64_t version = 99, leaves = 0, step = 0;

  /* A missing file: created, version 0. */
  REQUIRE_OK(cairn_octree_open_or_create(path, &o, &t, &version));
  REQUIRE(t != NULL);
  CHECK_EQ_U64(version, 0);
  CHECK(exists(path));
  REQUIRE_OK(build_quadtree(t));
  REQUIRE_OK(cairn_octree_close(&t)); /* a crash before the first persist */

  /* Never persisted: removed and created again, version 0, one root leaf. */
  int error = 0;
  CHECK(pm_restore_err(path, &o, &error) == NULL);
  CHECK(error == CAIRN_E_NO_VERSION);
  CHECK(pm_create_err(path, &o, &error) == NULL);
  CHECK(error == CAIRN_E_ALREADY_EXISTS);
  CHECK_ERR(cairn_octree_versions(path, &o, NULL, NULL), CAIRN_E_NO_VERSION, "never persisted");
  version = 99;
  REQUIRE_OK(cairn_octree_open_or_create(path, &o, &t, &version));
  CHECK_EQ_U64(version, 0);
  REQUIRE_OK(cairn_octree_leaf_count(t, &leaves));
  CHECK_EQ_U64(leaves, 1);
  REQUIRE_OK(build_quadtree(t));
  step = 3;
  REQUIRE_OK(cairn_octree_root_write(t, &step, sizeof step));
  REQUIRE_OK(cairn_octree_persist(t, NULL));
  REQUIRE_OK(cairn_octree_persist(t, NULL));
  uint64_t persisted = 0;
  REQUIRE_OK(cairn_octree_checksum(t, &persisted));
  REQUIRE_OK(cairn_octree_close(&t));

  /* Persisted: restored at its version, with its root payload. */
  REQUIRE_OK(cairn_octree_open_or_create(path, &o, &t, NULL)); /* restored_version may be NULL */
  REQUIRE_OK(cairn_octree_close(&t));
  version = 0;
  REQUIRE_OK(cairn_octree_open_or_create(path, &o, &t, &version));
  CHECK_EQ_U64(version, 2);
  uint64_t sum = 0;
  REQUIRE_OK(cairn_octree_checksum(t, &sum));
  CHECK_EQ_U64(sum, persisted);
  step = 0;
  REQUIRE_OK(cairn_octree_root_read(t, &step, sizeof step));
  CHECK_EQ_U64(step, 3);
  REQUIRE_OK(cairn_octree_close(&t));

  size_t size = 0;
  unsigned char* good = slurp(path, &size);
  REQUIRE(good != NULL);

  /* Another layout, a version the tree does not hold: errors, the file untouched. */
  cairn_octree_options wrong = o;
  wrong.data_size = 24;
  CHECK_ERR(cairn_octree_open_or_create(path, &wrong, &t, &version), CAIRN_E_LAYOUT_MISMATCH, "restart.pool");
  CHECK(t == NULL);
  CHECK(same_file(path, good, size));
  wrong = o;
  wrong.dims = 3;
  CHECK_ERR(cairn_octree_open_or_create(path, &wrong, &t, &version), CAIRN_E_LAYOUT_MISMATCH, "2D tree");
  CHECK(same_file(path, good, size));
  wrong = o;
  wrong.version = 7;
  CHECK_ERR(cairn_octree_open_or_create(path, &wrong, &t, &version), CAIRN_E_NO_VERSION, "not version 7");
  CHECK(t == NULL);
  CHECK(same_file(path, good, size));
  CHECK(pm_restore_err(path, &wrong, &error) == NULL);
  CHECK(error == CAIRN_E_NO_VERSION);

  /* A damaged commit record: CAIRN_E_CORRUPTED, the file untouched. Root
   * slot 1 of the pool names the record. */
  cairn_pool* pool = NULL;
  REQUIRE_OK(cairn_pool_open(path, CAIRN_FLUSH_AUTO, NULL, &pool));
  uint64_t record = 0, record_version = 0;
  REQUIRE_OK(cairn_pool_root_get(pool, 1, &record, &record_version));
  REQUIRE_OK(cairn_pool_close(&pool));
  CHECK_EQ_U64(record_version, 2);
  REQUIRE(record != 0 && record + 24 < size);
  flip_bit(path, record + 16, 1);
  unsigned char* damaged = slurp(path, &size);
  REQUIRE(damaged != NULL);
  CHECK_ERR(cairn_octree_open_or_create(path, &o, &t, &version), CAIRN_E_CORRUPTED, "restart.pool");
  CHECK(t == NULL);
  CHECK(same_file(path, damaged, size));
  CHECK(pm_restore_err(path, &o, &error) == NULL);
  CHECK(error == CAIRN_E_CORRUPTED);
  free(damaged);
  free(good);

  /* A cairn pool that is not a PM-octree: refused, untouched. */
  char plain[700];
  snprintf(plain, sizeof plain, "%s/plain.pool", g_dir);
  REQUIRE_OK(cairn_pool_create(plain, 4u << 20, CAIRN_FLUSH_AUTO, NULL, &pool));
  REQUIRE_OK(cairn_pool_close(&pool));
  unsigned char* other = slurp(plain, &size);
  REQUIRE(other != NULL);
  CHECK_ERR(cairn_octree_open_or_create(plain, &o, &t, &version), CAIRN_E_FOREIGN_FILE, "not a PM-octree");
  CHECK(t == NULL);
  CHECK(same_file(plain, other, size));
  free(other);
  CHECK_ERR(cairn_octree_open_or_create(NULL, &o, &t, &version), CAIRN_E_INVALID_ARGUMENT, "NULL");
  CHECK(pm_create_err(path, &o, NULL) == NULL); /* error may be NULL */
  REQUIRE_OK(cairn_octree_remove(path));
}

int main(void) {
  make_scratch_dir("cairn-octree");
  test_seed_names();
  test_follow();
  test_errors();
  test_root_payload();
  test_find_leaf_and_stats();
  test_verify_damage();
  test_keep_previous();
  test_open_or_create();
  return finish("octree_test");
}
