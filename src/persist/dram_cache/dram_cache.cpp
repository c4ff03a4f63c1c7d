// dram_cache.cpp — `dram-cache`: working set in DRAM, backup into NVM with
// ordinary cached stores plus a flush of every line, on one thread (seed 001
// §3.2.4's DRAM-cache API, and seed 004's "checkpoint_clflush"). The readable
// reference for the copy-based strategies.
#include <cstring>

#include "persist/copy_strategy.hpp"

namespace cairn::persist::detail {
namespace {

class DramCache final : public CopyStrategy {
 public:
  std::string name() const override { return "dram-cache"; }

 protected:
  void copy_out(pool::Pool& pool, std::byte* dst, const std::byte* src, std::size_t n) override {
    std::memcpy(dst, src, n);
    pool.flush(dst, n);
  }
};

}  // namespace

std::unique_ptr<Strategy> make_dram_cache() { return std::make_unique<DramCache>(); }

}  // namespace cairn::persist::detail
