// nt_copy.cpp — `nt-copy`: seed 004's optimised checkpoint. The DRAM working
// set is copied into NVM with non-temporal stores (no cache flush needed),
// split over all threads: seed 001 found single-threaded persistence destroys
// scaling.
#include "persist/copy_strategy.hpp"

namespace cairn::persist::detail {
namespace {

class NtCopy final : public CopyStrategy {
 public:
  std::string name() const override { return "nt-copy"; }

 protected:
  void copy_out(pool::Pool& pool, std::byte* dst, const std::byte* src,
                std::span<const pool::Pool::Run> runs) override {
    // Each worker fences its own stores; the version word's persist follows.
    pool.memcpy_persist_runs_mt(dst, src, runs, pool::Pool::Stores::non_temporal, threads_,
                                pool::Pool::Drain::by_commit);  // publish drains
  }
};

}  // namespace

std::unique_ptr<Strategy> make_nt_copy() { return std::make_unique<NtCopy>(); }

}  // namespace cairn::persist::detail
