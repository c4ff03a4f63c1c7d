/* check.h — the C API tests' assertion kit and scratch directory (C11):
 * checks count failures and go on, REQUIRE* leave the test function, and
 * finish() prints the tally and gives main's exit status. */
#ifndef CAIRN_TESTS_C_API_CHECK_H
#define CAIRN_TESTS_C_API_CHECK_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/cairn.h"

static int g_failures = 0;
static int g_checks = 0;
static const char* g_test = "";

#define CHECK(cond)                                                                         \
  do {                                                                                      \
    ++g_checks;                                                                             \
    if (!(cond)) {                                                                          \
      ++g_failures;                                                                         \
      fprintf(stderr, "%s:%d: [%s] CHECK failed: %s\n", __FILE__, __LINE__, g_test, #cond); \
    }                                                                                       \
  } while (0)

#define CHECK_EQ_U64(a, b)                                                                                          \
  do {                                                                                                              \
    unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b);                                \
    ++g_checks;                                                                                                     \
    if (va_ != vb_) {                                                                                               \
      ++g_failures;                                                                                                 \
      fprintf(stderr, "%s:%d: [%s] %s == %s failed: %llu != %llu\n", __FILE__, __LINE__, g_test, #a, #b, va_, vb_); \
    }                                                                                                               \
  } while (0)

/* The call must return `code` and cairn_errormsg() must contain `needle`. */
#define CHECK_ERR(call, code, needle)                                                                                 \
  do {                                                                                                                \
    int rc_ = (call);                                                                                                 \
    const char* msg_ = cairn_errormsg();                                                                              \
    ++g_checks;                                                                                                       \
    if (rc_ != (code)) {                                                                                              \
      ++g_failures;                                                                                                   \
      fprintf(stderr, "%s:%d: [%s] %s returned %d (%s), expected %s = %d; message: %s\n", __FILE__, __LINE__, g_test, \
              #call, rc_, cairn_strerror(rc_), #code, (code), msg_);                                                  \
    } else if (strstr(msg_, (needle)) == NULL) {                                                                      \
      ++g_failures;                                                                                                   \
      fprintf(stderr, "%s:%d: [%s] message of %s lacks \"%s\": %s\n", __FILE__, __LINE__, g_test, #call, (needle),    \
              msg_);                                                                                                  \
    }                                                                                                                 \
  } while (0)

/* Stops the current test function if a call that must succeed fails. */
#define REQUIRE_OK(call)                                                                                            \
  do {                                                                                                              \
    int rc_ = (call);                                                                                               \
    ++g_checks;                                                                                                     \
    if (rc_ != CAIRN_OK) {                                                                                          \
      ++g_failures;                                                                                                 \
      fprintf(stderr, "%s:%d: [%s] %s failed: %d: %s\n", __FILE__, __LINE__, g_test, #call, rc_, cairn_errormsg()); \
      return;                                                                                                       \
    }                                                                                                               \
  } while (0)

#define REQUIRE(cond)                                                                         \
  do {                                                                                        \
    ++g_checks;                                                                               \
    if (!(cond)) {                                                                            \
      ++g_failures;                                                                           \
      fprintf(stderr, "%s:%d: [%s] REQUIRE failed: %s\n", __FILE__, __LINE__, g_test, #cond); \
      return;                                                                                 \
    }                                                                                         \
  } while (0)

/* ---- scratch directory: $CAIRN_TEST_DIR, else /dev/shm, else /tmp ---- */

static char g_dir[512];

static inline void make_scratch_dir(const char* prefix) {
  const char* root = getenv("CAIRN_TEST_DIR");
  struct stat st;
  if (root == NULL) root = stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp";
  snprintf(g_dir, sizeof g_dir, "%s/%s-XXXXXX", root, prefix);
  if (mkdtemp(g_dir) == NULL) {
    perror("mkdtemp");
    exit(2);
  }
  chmod(g_dir, 0755); /* tests may run a child as nobody */
}

static inline int remove_entry(const char* path, const struct stat* st, int flag, struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Removes the scratch directory and returns main's exit status. */
static inline int finish(const char* test) {
  nftw(g_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (g_failures != 0) {
    fprintf(stderr, "%s: %d of %d checks FAILED\n", test, g_failures, g_checks);
    return 1;
  }
  printf("%s: all %d checks passed\n", test, g_checks);
  return 0;
}

#endif
