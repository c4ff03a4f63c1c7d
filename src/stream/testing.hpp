// testing.hpp — seams of the pmem: stream store for the tests (internal): the
// device a pool is mapped with, and forgetting this process's mappings.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cairn/extended/device.hpp"

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

// Called before each read of a file being staged (stage_in, stage_out of a
// file) with its path and the offset about to be read, and once more at its
// size, before the check that it did not change; empty: none.
void set_stage_read_hook(std::function<void(const std::string& path, std::uint64_t offset)> hook);

}  // namespace cairn::stream::detail
