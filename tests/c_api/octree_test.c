/* octree_test.c — the PM-octree C API (cairn_octree_*) and seed 000's names
 * (cairn/pm_octree.h) from C11: build, refine, coarsen, balance, persist, a
 * lost working version, restore, payload updates, following an application's
 * own tree, and the errors a caller can cause. */
#define _XOPEN_SOURCE 700
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

int main(void) {
  make_scratch_dir("cairn-octree");
  test_seed_names();
  test_follow();
  test_errors();
  return finish("octree_test");
}
