// dram_cache.cpp — `dram-cache`: working set in DRAM, backup into NVM with
// ordinary cached stores plus a flush of every line (seed 001 §3.2.4's
// DRAM-cache API, and seed 004's "checkpoint_clflush"). The seed's version
// copied on one thread, which it found destroyed scaling; here the copy is
// split over all threads like nt-copy's, so the two differ only in the
// stores (cached + write-back against non-temporal).

#include "persist/copy_strategy.hpp"

namespace cairn::persist::detail {
namespace {

class DramCache final : public CopyStrategy {
 public:
  std::string name() const override { return "dram-cache"; }

 protected:
  void copy_out(pool::Pool& pool, std::byte* dst, const std::byte* src,
                std::span<const pool::Pool::Run> runs) override {
    // Each worker fences its own lines; the version word's persist follows.
    pool.memcpy_persist_runs_mt(dst, src, runs, pool::Pool::Stores::cached_then_flushed, threads_,
                                pool::Pool::Drain::by_commit);  // publish drains
  }
};

}  // namespace

std::unique_ptr<Strategy> make_dram_cache() { return std::make_unique<DramCache>(); }

}  // namespace cairn::persist::detail
