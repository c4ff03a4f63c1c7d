// thread_pool.hpp — a small persistent worker pool for splitting large
// flushes and copies over threads (internal).
#pragma once

#include <cstddef>
#include <functional>

namespace cairn::pool::detail {

// Number of workers used when a caller asks for 0 threads: the hardware
// concurrency, or $CAIRN_THREADS.
unsigned default_threads();

// Splits [0, len) into up to `threads` chunks aligned to 4 KiB and runs
// fn(offset, length) on each, the calling thread taking the first chunk.
// Returns when all chunks are done. Workers are created once and reused.
void parallel_ranges(std::size_t len, unsigned threads, const std::function<void(std::size_t, std::size_t)>& fn);

}  // namespace cairn::pool::detail
