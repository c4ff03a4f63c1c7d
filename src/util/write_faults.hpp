// write_faults.hpp — one SIGSEGV handler for every user of write-fault page
// tracking (internal): incremental commit (src/persist/copy_strategy.cpp)
// and the crash simulator's images (tests/crashsim/image.cpp).
//
// A tracker write-protects pages of a range it registered here; the first
// write to such a page faults, and the handler calls the tracker's function
// with the faulting address, in signal context. The function records the
// page, makes it writable again and returns true; the write is then retried.
// A fault no registered range claims goes to whatever handled SIGSEGV before
// (a sanitizer's reporter, or the default action: the process dies as it
// would have). Registration takes a lock; the handler never does.
#pragma once

#include <cstdint>

#include "cairn/error.hpp"

namespace cairn::util {

inline constexpr std::size_t kPageBytes = 4096;

// Async-signal-safe: no allocation, no locks.
using WriteFaultFn = bool (*)(void* ctx, std::uintptr_t addr);

// Routes write faults in [begin, end) to fn(ctx, addr) until unwatched.
// Returns a handle for unwatch_write_faults(). Errc::unsupported if the
// handler cannot be installed or too many ranges are watched at once.
Result<int> watch_write_faults(std::uintptr_t begin, std::uintptr_t end, WriteFaultFn fn, void* ctx);
// Stops routing; after it returns the handler no longer calls fn for it.
void unwatch_write_faults(int handle);

}  // namespace cairn::util
