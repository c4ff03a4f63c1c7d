// sanitizers.hpp — what a test must know about the sanitizer it runs under.
#pragma once

// Supervised compute processes (dist::supervise) are forked from a rank
// process that already runs threads (MPI's progress thread, cairn's workers),
// and then start threads of their own. ThreadSanitizer refuses that ("starting
// new threads after multi-threaded fork is not supported": its
// die_after_fork), so these tests skip under it, with the reason, until the
// MPI in-job recovery changes how supervised processes start. The
// address-sanitizer and release builds run them.
#if defined(__SANITIZE_THREAD__)
#define CAIRN_SKIP_SUPERVISED_UNDER_TSAN()                                                                  \
  GTEST_SKIP() << "ThreadSanitizer cannot start threads in a compute process forked from a multi-threaded " \
                  "rank process (its die_after_fork); the address-sanitizer and release builds run this test"
#else
#define CAIRN_SKIP_SUPERVISED_UNDER_TSAN() static_cast<void>(0)
#endif
