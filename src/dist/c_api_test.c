/* c_api_test.c — the C API of the MPI layer (cairn/dist.h) from C, at 2 ranks under mpirun:
 *   1. bad arguments: typed codes and messages naming the problem;
 *   2. a round trip: 5 collective commits, the context closed, a new one restores version 5 bit for bit;
 *   3. the agreed version: rank 1's storage is put back to what it held at version 4 (as if its commit
 *      of 5 never became durable), and both ranks then restore version 4, rank 0 too, with 4's data.
 * Storage in $CAIRN_POOL_DIR (run_in_temp_pool_dir.sh). Exit 0 when every check passes on every rank. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/dist.h"

enum { kCells = 3000 };
static int g_rank = 0;
static int g_failures = 0;

#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) {                                             \
      fprintf(stderr, "rank %d: line %d: ", g_rank, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                            \
      fprintf(stderr, "\n");                                   \
      ++g_failures;                                            \
    }                                                          \
  } while (0)
#define OK(call) CHECK((call) == 0, "%s failed: %s", #call, cairn_errormsg())

/* The state of step s on this rank. */
static double value(int rank, int i, uint64_t s) { return rank * 1e6 + i + 0.5 * (double)s; }

/* Returns rc and checks it equals `want` and that the message contains `needle`. */
static void expect_error(int rc, int want, const char* needle, const char* what) {
  CHECK(rc == want, "%s: code %d (%s), expected %d (%s)", what, rc, cairn_strerror(rc), want, cairn_strerror(want));
  CHECK(strstr(cairn_errormsg(), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, cairn_errormsg(), needle);
}

static void bad_arguments(const char* dir) {
  cairn_dist_options o;
  cairn_dist_options_init(&o);
  o.dir = dir;
  cairn_dist* d = (cairn_dist*)1;
  expect_error(cairn_dist_create(MPI_COMM_WORLD, &o, NULL), CAIRN_E_INVALID_ARGUMENT, "out", "NULL out");
  expect_error(cairn_dist_create(MPI_COMM_NULL, &o, &d), CAIRN_E_INVALID_ARGUMENT, "MPI_COMM_NULL", "null comm");
  CHECK(d == NULL, "a failed create leaves *out NULL");
  o.redundancy = 7;
  expect_error(cairn_dist_create(MPI_COMM_WORLD, &o, &d), CAIRN_E_INVALID_ARGUMENT, "redundancy", "redundancy 7");
  o.redundancy = CAIRN_DIST_LOCAL;
  o.flags = 1u << 20;
  expect_error(cairn_dist_create(MPI_COMM_WORLD, &o, &d), CAIRN_E_INVALID_ARGUMENT, "flags", "unknown flag");
  o.flags = CAIRN_CKPT_DEFAULTS;
  o.xor_group = 1;
  expect_error(cairn_dist_create(MPI_COMM_WORLD, &o, &d), CAIRN_E_INVALID_ARGUMENT, "xor_group", "xor group 1");
  o.xor_group = 4;
  o.strategy = "no-such-strategy";
  CHECK(cairn_dist_create(MPI_COMM_WORLD, &o, &d) < 0 && d == NULL, "an unknown strategy is refused");
  CHECK(strstr(cairn_errormsg(), "no-such-strategy") != NULL, "message \"%s\" names the strategy", cairn_errormsg());
  expect_error(cairn_dist_open(NULL), CAIRN_E_INVALID_ARGUMENT, "NULL", "open(NULL)");
  expect_error(cairn_dist_commit(NULL, NULL), CAIRN_E_INVALID_ARGUMENT, "NULL", "commit(NULL)");
  uint64_t v = 99;
  expect_error(cairn_dist_restore(NULL, &v), CAIRN_E_INVALID_ARGUMENT, "NULL", "restore(NULL)");
  CHECK(v == 0, "a failed restore sets *version to 0");
  expect_error(cairn_dist_remove_storage(&o, 2, 2), CAIRN_E_INVALID_ARGUMENT, "rank 2 of 2", "remove rank 2 of 2");
  CHECK(cairn_dist_delete(NULL) == 0, "delete(NULL) is a no-op");
  CHECK(cairn_dist_region_data(NULL) == NULL && cairn_dist_dual_read(NULL) == NULL, "NULL handles give NULL");

  /* Order of calls on a real context: restore and commit need open, registration comes before it,
   * open once, names unique. */
  o.strategy = NULL;
  o.name = "errors";
  OK(cairn_dist_create(MPI_COMM_WORLD, &o, &d));
  cairn_dist_dual* u = NULL;
  expect_error(cairn_dist_restore(d, &v), CAIRN_E_NOT_READY, "open", "restore before open");
  expect_error(cairn_dist_commit(d, &v), CAIRN_E_NOT_READY, "open", "commit before open");
  expect_error(cairn_dist_dual_create(d, "u", 64, NULL), CAIRN_E_INVALID_ARGUMENT, "out", "dual with NULL out");
  OK(cairn_dist_dual_create(d, "u", 64, &u));
  CHECK(cairn_dist_dual_create(d, "u", 64, &u) == CAIRN_E_INVALID_ARGUMENT && u == NULL, "a second \"u\": %s",
        cairn_errormsg());
  OK(cairn_dist_open(d));
  expect_error(cairn_dist_open(d), CAIRN_E_INVALID_ARGUMENT, "open already", "open twice");
  cairn_dist_region* r = NULL;
  expect_error(cairn_dist_region_create(d, "late", 8, &r), CAIRN_E_NOT_READY, "before cairn_dist_open",
               "region after open");
  expect_error(cairn_dist_restore(d, &v), CAIRN_E_NO_VERSION, "", "restore of nothing");
  OK(cairn_dist_delete(&d));
  CHECK(d == NULL, "delete nulls the handle");
}

/* One context over "rt": u (dual, kCells doubles) and step (plain, one int64). */
struct job {
  cairn_dist* d;
  cairn_dist_dual* u;
  cairn_dist_region* step;
};
static int job_open(struct job* j, const char* dir) {
  cairn_dist_options o;
  cairn_dist_options_init(&o);
  o.dir = dir;
  o.name = "rt";
  memset(j, 0, sizeof *j);
  if (cairn_dist_create(MPI_COMM_WORLD, &o, &j->d) < 0) return -1;
  if (cairn_dist_dual_create(j->d, "u", kCells * sizeof(double), &j->u) < 0) return -1;
  if (cairn_dist_region_create(j->d, "step", sizeof(int64_t), &j->step) < 0) return -1;
  return cairn_dist_open(j->d);
}
/* Commits steps from+1 .. to. */
static void job_run(struct job* j, uint64_t from, uint64_t to) {
  for (uint64_t s = from + 1; s <= to; ++s) {
    OK(cairn_dist_begin(j->d));
    double* w = cairn_dist_dual_write(j->u);
    for (int i = 0; i < kCells; ++i) w[i] = value(g_rank, i, s);
    *(int64_t*)cairn_dist_region_data(j->step) = (int64_t)s;
    uint64_t v = 0;
    OK(cairn_dist_commit(j->d, &v));
    CHECK(v == s, "commit of step %llu gave version %llu", (unsigned long long)s, (unsigned long long)v);
  }
}
static void job_check(struct job* j, uint64_t s) {
  const double* a = cairn_dist_dual_read(j->u);
  int bad = 0;
  for (int i = 0; i < kCells; ++i) bad += a[i] != value(g_rank, i, s);
  CHECK(bad == 0, "%d cells differ from step %llu's", bad, (unsigned long long)s);
  CHECK(*(int64_t*)cairn_dist_region_data(j->step) == (int64_t)s, "step region holds %lld, expected %llu",
        (long long)*(int64_t*)cairn_dist_region_data(j->step), (unsigned long long)s);
  uint64_t v = 0;
  OK(cairn_dist_version(j->d, &v));
  CHECK(v == s, "version %llu, expected %llu", (unsigned long long)v, (unsigned long long)s);
}

/* Copies every file of dir whose name starts with prefix into (to_saved) or back from dir/saved. */
static void copy_files(const char* dir, const char* prefix, int to_saved) {
  char saved[4096], from[8192], to[8192];
  snprintf(saved, sizeof saved, "%s/saved", dir);
  mkdir(saved, 0755);
  DIR* dd = opendir(to_saved ? dir : saved);
  CHECK(dd != NULL, "cannot list %s", to_saved ? dir : saved);
  if (dd == NULL) return;
  int copied = 0;
  for (struct dirent* e; (e = readdir(dd)) != NULL;) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    snprintf(from, sizeof from, "%s/%s", to_saved ? dir : saved, e->d_name);
    snprintf(to, sizeof to, "%s/%s", to_saved ? saved : dir, e->d_name);
    FILE* in = fopen(from, "rb");
    FILE* out = fopen(to, "wb");
    CHECK(in && out, "cannot copy %s to %s", from, to);
    if (in && out) {
      char buf[1 << 16];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, in)) > 0) CHECK(fwrite(buf, 1, n, out) == n, "short write to %s", to);
      ++copied;
    }
    if (in) fclose(in);
    if (out) fclose(out);
  }
  closedir(dd);
  CHECK(copied > 0, "no file %s* in %s", prefix, to_saved ? dir : saved);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* base = getenv("CAIRN_POOL_DIR");
  if (size != 2 || base == NULL) {
    if (g_rank == 0) fprintf(stderr, "usage: CAIRN_POOL_DIR=DIR mpirun -n 2 %s\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  mkdir(base, 0755);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/rank%d", base, g_rank); /* each rank its own directory, as on real nodes */
  mkdir(dir, 0755);

  bad_arguments(dir);

  struct job j;
  OK(job_open(&j, dir));
  uint64_t v = 1;
  CHECK(cairn_dist_restore(j.d, &v) == CAIRN_E_NO_VERSION && v == 0, "a fresh job has no version: %s",
        cairn_errormsg());
  int rank = -1, ranks = 0;
  OK(cairn_dist_rank(j.d, &rank));
  OK(cairn_dist_size(j.d, &ranks));
  CHECK(rank == g_rank && ranks == 2, "rank %d of %d", rank, ranks);
  job_run(&j, 0, 4);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 1) copy_files(dir, "rt.n2.r1.", 1); /* rank 1's storage as it was at version 4 */
  MPI_Barrier(MPI_COMM_WORLD);
  job_run(&j, 4, 5);
  job_check(&j, 5);
  OK(cairn_dist_delete(&j.d));

  /* Round trip: a new context restores version 5, every byte. */
  OK(job_open(&j, dir));
  OK(cairn_dist_restore(j.d, &v));
  CHECK(v == 5, "restored version %llu, expected 5", (unsigned long long)v);
  job_check(&j, 5);
  OK(cairn_dist_delete(&j.d));

  /* Rank 1 loses its commit of 5: both ranks restore the agreed version 4, and continue from it. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 1) copy_files(dir, "rt.n2.r1.", 0);
  MPI_Barrier(MPI_COMM_WORLD);
  OK(job_open(&j, dir));
  OK(cairn_dist_restore(j.d, &v));
  CHECK(v == 4, "restored version %llu, expected the agreed 4", (unsigned long long)v);
  job_check(&j, 4);
  job_run(&j, 4, 6);
  job_check(&j, 6);
  OK(cairn_dist_delete(&j.d));

  cairn_dist_options o;
  cairn_dist_options_init(&o);
  o.dir = dir;
  o.name = "rt";
  OK(cairn_dist_remove_storage(&o, g_rank, 2));

  int all = 0;
  MPI_Allreduce(&g_failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("dist C API: %s (%d failed checks)\n", all == 0 ? "all checks passed" : "FAILED", all);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
