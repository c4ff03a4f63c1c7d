/* step5_pointers.c — tutorial step 5 (C): pointers between regions.
 *
 * The C twin of step5_pointers.cpp's first half (the blocked array is a C++
 * template): nodes in one region, threaded into lists whose heads live in
 * another. Every pointer that lives inside a region is registered with
 * cairn_ckpt_register_pointer after open (the regions have memory from open
 * on); at each commit its target is recorded as (region, offset) and restore
 * rewrites it for wherever the regions now live. The first run builds and
 * commits the lists; a second run restores and walks them. Run it twice.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cairn/cairn.h"

#define NODES 2000
#define LISTS 8

struct node {
  double value;
  struct node* next;
};

static void check(int rc, const char* what) {
  if (rc < 0) {
    fprintf(stderr, "step5_c: %s: %s\n", what, cairn_errormsg());
    exit(2);
  }
}

int main(void) {
  cairn_ckpt* ck = NULL;
  cairn_ckpt_region* nodes_r = NULL;
  cairn_ckpt_region* heads_r = NULL;
  check(cairn_ckpt_create(NULL, "step5_c", NULL, 0, CAIRN_CKPT_DEFAULTS, &ck), "create");
  check(cairn_ckpt_region_create(ck, "nodes", NODES * sizeof(struct node), &nodes_r), "region nodes");
  check(cairn_ckpt_region_create(ck, "heads", LISTS * sizeof(struct node*), &heads_r), "region heads");
  check(cairn_ckpt_open(ck), "open");
  struct node* nodes = cairn_ckpt_region_data(nodes_r);
  struct node** heads = cairn_ckpt_region_data(heads_r);
  for (size_t i = 0; i < NODES; ++i) check(cairn_ckpt_register_pointer(ck, (void**)&nodes[i].next), "pointer");
  for (size_t l = 0; l < LISTS; ++l) check(cairn_ckpt_register_pointer(ck, (void**)&heads[l]), "pointer");

  int rc = cairn_ckpt_restore(ck, NULL);
  const int resumed = rc == 0;
  if (rc == CAIRN_E_NO_VERSION) {
    for (size_t i = 0; i < NODES; ++i) {
      nodes[i].value = (double)i;
      nodes[i].next = heads[i % LISTS];
      heads[i % LISTS] = &nodes[i];
    }
    check(cairn_ckpt_commit(ck, NULL), "commit");
  } else {
    check(rc, "restore");
    heads = cairn_ckpt_region_data(heads_r); /* a restore may move regions */
  }

  size_t count = 0;
  double sum = 0;
  for (size_t l = 0; l < LISTS; ++l)
    for (const struct node* n = heads[l]; n != NULL && count <= NODES; n = n->next, ++count) sum += n->value;
  const int ok = count == NODES && sum == (NODES - 1) * NODES / 2.0;
  printf("step5_c: %s %d nodes; walked %zu, sum %.0f (%s)\n", resumed ? "restored" : "built", NODES, count, sum,
         ok ? "correct" : "WRONG");
  cairn_ckpt_delete(&ck);
  return ok ? 0 : 1;
}
