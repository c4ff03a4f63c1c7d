// thread_pool.hpp — splitting work over threads (internal): a small
// persistent worker pool for large flushes and copies, and a parallel for
// on threads of its own.
#pragma once

#include <cstddef>
#include <functional>

namespace cairn::util {

// Number of workers used when a caller asks for 0 threads: the hardware
// concurrency, or $CAIRN_THREADS.
unsigned default_threads();

// Splits [0, len) into up to `threads` chunks aligned to 4 KiB and runs
// fn(offset, length) on each, the calling thread taking the first chunk.
// Returns when all chunks are done. Workers are created once and reused.
void parallel_ranges(std::size_t len, unsigned threads, const std::function<void(std::size_t, std::size_t)>& fn);

// Runs fn(i) for every i in [0, n) on up to `threads` threads (0: default),
// joined before returning. Threads of its own rather than the persistent
// workers: a process that forks after using it leaves no worker state to its
// child (the file strategy's restore, which forked tests and apps follow).
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn);

}  // namespace cairn::util
