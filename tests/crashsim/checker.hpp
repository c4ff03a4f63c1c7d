// checker.hpp — checks one crash image: conditions 1-3 of the harness
// (internal to tests/crashsim; depth 2 is driven by the harness).
//   1. recovery yields exactly the last committed version, or the in-flight
//      one (only that one once its commit point was persisted), bit for bit;
//   2. the pool is sound: both header copies valid, the selector names a
//      valid root table (no fallback), the arena was rebuilt and holds
//      exactly the blocks the recovered version reaches (no leak; a block
//      reachable twice fails the rebuild); after further operations that
//      publish roots, both root tables are valid;
//   3. K further operations on the recovered pool commit, and a clean reopen
//      then recovers the model's last version.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cairn/extended/device.hpp"
#include "cairn/extended/pool.hpp"
#include "tests/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim {

// The device of the pools the checker opens over crash images: copies and
// fills write, flush and drain only count (the image is memory; whether the
// recovery's own writes are durable is what depth 2 explores).
class NullDevice final : public devices::Device {
 public:
  std::string name() const override { return "crashsim-null"; }
  Result<devices::Ops> bind(const devices::Mapping&) override;
  void* context() override { return &persists_; }
  // Flush, copy and fill calls since bind.
  std::uint64_t persists() const { return persists_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> persists_{0};
};

using Opener = std::function<Result<std::unique_ptr<pool::Pool>>()>;

struct CheckConfig {
  const Workload* workload = nullptr;
  unsigned extend_ops = 2;
};

struct CheckOutcome {
  bool ok = true;
  std::string reason;
  std::uint64_t recovered = 0;  // version number recovery gave
};

// `open` opens the crash image (a fresh Pool each call).
CheckOutcome check_state(const Opener& open, const CheckConfig& config, const Expect& expect, std::uint64_t rng_seed);

// Opener over an in-memory image with a NullDevice.
Opener image_opener(std::byte* image, std::size_t size, Durability durability);

// Compares a recovered version with what `expect` allows; empty if it matches.
std::string match_version(const Version& got, const Expect& expect);

}  // namespace cairn::testing::crashsim
