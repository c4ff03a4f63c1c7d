// testing.hpp — seams of the pmem: stream store for the tests (internal): the
// device a pool is mapped with, and forgetting this process's mappings.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cairn/extended/device.hpp"
#include "stream/directory.hpp"

namespace cairn::stream::detail {

// Every pool a pmem: stream maps from now on is opened with the device `make`
// returns (for example a fault device driven by the test's FaultInjector);
// an empty function restores $CAIRN_DEVICE.
void set_device_factory(std::function<std::unique_ptr<devices::Device>()> make);

// Drops this process's cached pool mappings: the next stream opened maps its
// pool again, as a new process would. Open streams keep their own mapping.
void forget_pools();

// The next attempt to take a pool lock fails as fcntl would with `err`.
void fail_next_pool_lock(int err);

// The liveness and pin answers a Store gives its Directory, through `fd`, a
// description of the pool file (stream.cpp): a writer is alive while an OFD
// lock on its entry's liveness byte is held through another description, an
// extent is unpinned when a write lock on its first byte can be taken. The
// crash harness (tests/crashsim/workloads/streams.cpp) drives a Directory on
// a simulator pool with these hooks over a lock file standing in for the pool
// file, its writers and readers taking the locks below.
Hooks ofd_hooks(int fd);
// A writer's liveness lock on `byte`, through a new description `open`
// returns (as PmemWriter takes it): that fd, or -1 with errno set.
// release_liveness closes it: the lock goes, as when the writer's process dies.
int hold_liveness(const std::function<int()>& open, std::uint64_t byte);
void release_liveness(int fd);
// A reader's pin of the extent at `offset` through its own description `fd`
// (an OFD read lock on the extent's first byte, as PmemReader takes it);
// 0, or -1 with errno set. Closing fd releases it.
int pin_extent(int fd, std::uint64_t offset);

// Called before each read of a file being staged (stage_in, stage_out of a
// file) with its path and the offset about to be read, and once more at its
// size, before the check that it did not change; empty: none.
void set_stage_read_hook(std::function<void(const std::string& path, std::uint64_t offset)> hook);

}  // namespace cairn::stream::detail
