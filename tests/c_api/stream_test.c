/* stream_test.c — the stream C API (cairn_stream_*) from C11: an unmodified
 * stdio writer and reader that change only their open call, the zero-copy
 * view, the prefix mapping, and the errors a caller can cause. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* A component written for files: only the open call is cairn's. */
static int write_fields(const char* name, int n) {
  FILE* f = cairn_stream_open(name, "w", 0);
  if (f == NULL) return -1;
  fprintf(f, "fields %d\n", n);
  for (int i = 0; i < n; ++i) fprintf(f, "%d %.6f\n", i, i * 0.5);
  return fclose(f) == 0 ? 0 : -1;
}

static int read_fields(const char* name, int* n_out, double* sum) {
  FILE* f = cairn_stream_open(name, "r", 0);
  if (f == NULL) return -1;
  int n = 0;
  if (fscanf(f, "fields %d", &n) != 1) return -2;
  *sum = 0;
  for (int i = 0; i < n; ++i) {
    int k;
    double x;
    if (fscanf(f, "%d %lf", &k, &x) != 2 || k != i) return -3;
    *sum += x;
  }
  *n_out = n;
  return fclose(f) == 0 ? 0 : -1;
}

static void test_every_scheme(void) {
  g_test = "every_scheme";
  char uri[700];
  const char* kinds[3] = {"file:%s/fields.txt", "mem:fields", "pmem:%s/c.pool#fields"};
  for (int k = 0; k < 3; ++k) {
    snprintf(uri, sizeof uri, kinds[k], g_dir);
    REQUIRE(write_fields(uri, 500) == 0);
    int n = 0;
    double sum = 0;
    CHECK(read_fields(uri, &n, &sum) == 0);
    CHECK(n == 500);
    CHECK(sum == 0.5 * 499 * 500 / 2);
    /* The view holds the same bytes the reader parsed. */
    FILE* f = cairn_stream_open(uri, "rb", 0);
    REQUIRE(f != NULL);
    const void* data = NULL;
    size_t len = 0;
    REQUIRE_OK(cairn_stream_view(f, &data, &len));
    CHECK(len > 500 * 6);
    CHECK(memcmp(data, "fields 500\n0 0.000000\n", 22) == 0);
    fseek(f, 0, SEEK_END);
    CHECK_EQ_U64(ftell(f), len);
    CHECK(fclose(f) == 0);
  }
}

static void test_prefix(void) {
  g_test = "prefix";
  char prefix[600];
  snprintf(prefix, sizeof prefix, "pmem:%s/prefixed.pool#", g_dir);
  setenv("CAIRN_STREAM_PREFIX", prefix, 1);
  REQUIRE(write_fields("solution-0.dat", 10) == 0);
  unsetenv("CAIRN_STREAM_PREFIX");
  char uri[700];
  snprintf(uri, sizeof uri, "%ssolution-0.dat", prefix);
  int n = 0;
  double sum = 0;
  CHECK(read_fields(uri, &n, &sum) == 0);
  CHECK(n == 10);
  REQUIRE_OK(cairn_stream_wait(uri, 0.1));
  REQUIRE_OK(cairn_stream_remove(uri));
  CHECK_ERR(cairn_stream_wait(uri, 0.05), CAIRN_E_NOT_FOUND, "does not exist");
  /* The message names the stream and says the writer has not created it. */
  CHECK(strstr(cairn_errormsg(), "solution-0.dat' does not exist") != NULL);
  CHECK(strstr(cairn_errormsg(), "has not created it yet") != NULL);
}

static void test_errors(void) {
  g_test = "errors";
  char uri[700];
  snprintf(uri, sizeof uri, "pmem:%s/c.pool#never", g_dir);
  errno = 0;
  CHECK(cairn_stream_open(uri, "r", 0) == NULL);
  CHECK(errno == ENOENT);
  CHECK(strstr(cairn_errormsg(), "never") != NULL);
  FILE* w = cairn_stream_open(uri, "w", 0);
  REQUIRE(w != NULL);
  errno = 0;
  CHECK(cairn_stream_open(uri, "r", 0) == NULL);
  CHECK(errno == ENODATA);
  CHECK(strstr(cairn_errormsg(), "never committed") != NULL);
  CHECK(cairn_stream_open(uri, "w", 0) == NULL);
  CHECK(errno == EBUSY);
  CHECK(fclose(w) == 0);
  CHECK(cairn_stream_open(uri, "a+", 0) == NULL);
  CHECK(errno == EINVAL);
  CHECK(strstr(cairn_errormsg(), "a+") != NULL);
  CHECK(cairn_stream_open("gopher:x", "r", 0) == NULL);
  CHECK(cairn_stream_open(NULL, "r", 0) == NULL);
  const void* d;
  size_t l;
  CHECK_ERR(cairn_stream_view(stdout, &d, &l), CAIRN_E_INVALID_ARGUMENT, "not opened by cairn_stream_open");
  CHECK_ERR(cairn_stream_view(NULL, &d, &l), CAIRN_E_INVALID_ARGUMENT, "NULL");

  /* A full pool: fwrite or fclose fails with ENOSPC, the old version stays. */
  char small[700];
  snprintf(small, sizeof small, "pmem:%s/small.pool#big", g_dir);
  setenv("CAIRN_STREAM_POOL_SIZE", "2M", 1);
  FILE* f = cairn_stream_open(small, "w", 0);
  REQUIRE(f != NULL);
  fputs("old", f);
  REQUIRE(fclose(f) == 0);
  f = cairn_stream_open(small, "w", 0);
  REQUIRE(f != NULL);
  static char chunk[1 << 20];
  memset(chunk, 'x', sizeof chunk);
  int failed = 0;
  for (int i = 0; i < 4 && !failed; ++i) failed = fwrite(chunk, 1, sizeof chunk, f) != sizeof chunk;
  errno = 0;
  CHECK(fclose(f) != 0);
  CHECK(errno == ENOSPC);
  CHECK(strstr(cairn_stream_errormsg(), "no room") != NULL);
  unsetenv("CAIRN_STREAM_POOL_SIZE");
  f = cairn_stream_open(small, "r", 0);
  REQUIRE(f != NULL);
  char buf[8] = {0};
  CHECK(fread(buf, 1, sizeof buf, f) == 3);
  CHECK(strcmp(buf, "old") == 0);
  fclose(f);
}

int main(void) {
  make_scratch_dir("cairn-stream");
  test_every_scheme();
  test_prefix();
  test_errors();
  return finish("stream_test");
}
