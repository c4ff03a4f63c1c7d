// copy_strategy.hpp — the shared core of strategies that keep the working set
// in DRAM and copy it into two NVM slots at commit (dram-cache, nt-copy).
//
// Commit v: copy every region's latest buffer into the slot that does NOT hold
// the committed version, with its pointer table; make it durable; then store
// the version word naming that slot. The committed slot is never written, so a
// crash at any point leaves either version v-1 or v, whole.
// Restore: copy the committed slot back into the working buffers, relocate
// pointers. O(data): these are the baselines the NVM-resident strategies beat.
#pragma once

#include <memory>
#include <vector>

#include "persist/slot_store.hpp"
#include "persist/strategy.hpp"

namespace cairn::persist::detail {

class CopyStrategy : public Strategy {
 public:
  bool working_set_in_dram() const override { return true; }
  Result<void> open(Layout& layout, const Options& options) override;
  std::optional<std::uint64_t> committed() const override;
  Result<void> restore(Layout& layout) override;
  Result<void> commit(Layout& layout, std::uint64_t version) override;
  devices::Stats device_stats() const override;

 protected:
  // Copies n bytes from DRAM into the NVM slot and flushes them (no final
  // fence): the one thing the copy strategies differ in.
  virtual void copy_out(pool::Pool& pool, std::byte* dst, const std::byte* src, std::size_t n) = 0;
  unsigned threads_ = 0;

 private:
  std::unique_ptr<SlotStore> store_;
  std::vector<std::unique_ptr<std::byte[], void (*)(std::byte*)>> owned_;
};

// Page-aligned DRAM for cairn-owned regions.
std::byte* alloc_dram(std::size_t bytes);
void free_dram(std::byte* p);

}  // namespace cairn::persist::detail
