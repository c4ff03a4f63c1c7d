// copy_strategy.hpp — the shared core of strategies that keep the working set
// in DRAM and copy it into two NVM slots at commit (dram-cache, nt-copy).
//
// Commit v: copy every region's latest buffer into the slot that does NOT hold
// the committed version, with its pointer table; make it durable; then store
// the version word naming that slot. The committed slot is never written, so a
// crash at any point leaves either version v-1 or v, whole.
// Restore: copy the committed slot back into the working buffers, relocate
// pointers. O(data): these are the baselines the NVM-resident strategies beat.
//
// Incremental commit (Options::incremental): only the pages written since the
// slot being overwritten was last written are copied. The slot a commit
// writes holds version v-2, so that is the union of the pages dirtied in the
// last two commit intervals, not just the last one. Writes are tracked per
// 4 KiB page by write protection, in one of two ways:
//  - kernel (Linux 6.7+, the default where it works): userfaultfd's
//    asynchronous write protection; the kernel resolves the first write to a
//    page itself and marks it, and the commit asks for the marked pages and
//    protects them again in one PAGEMAP_SCAN (util/kernel_write_tracking.hpp);
//  - faults (older kernels, or $CAIRN_WRITE_TRACKING=faults): the buffers are
//    made read-only, the first write to a page faults, a SIGSEGV handler
//    records the page and makes it writable again; each page costs a signal
//    and an mprotect that splits the mapping, and the next commit's
//    re-protection merges them again.
// Soft-dirty bits would avoid both, but kernels built without
// CONFIG_MEM_SOFT_DIRTY (common in VMs) never set them.
// A region's written runs are copied by one scattered copy over all threads
// (one fence per thread, not one per run). When at least kWholeShare of a region was
// written it is copied whole instead (one sequential copy), so an
// incremental commit never does more work than a full one. The choice
// depends only on what was written, never on timing.
// Qualify: cairn-owned buffers, and application memory whose base is page
// aligned (its partial last page is always copied). Anything else, the first
// two commits after open or restore, and an interval in which tracking had to
// stop (the kernel's limit on mappings was reached) fall back to full copies.
// Caveats while incremental is on: the kernel cannot write into protected
// pages on the application's behalf in the faults mode — read(2), recv(2)
// and the like into a region fail with EFAULT, so fill regions with
// user-space copies; and an application SIGSEGV handler installed later must
// chain to the previous one.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "persist/slot_store.hpp"
#include "persist/strategy.hpp"
#include "util/dram_buffer.hpp"

namespace cairn::persist::detail {

class PageTracker;  // write tracking of one DRAM buffer (copy_strategy.cpp)

class CopyStrategy : public Strategy {
 public:
  CopyStrategy();
  ~CopyStrategy() override;
  Result<void> open(Layout& layout, const Options& options) override;
  std::optional<std::uint64_t> committed() const override;
  Result<void> restore(Layout& layout) override;
  Result<void> commit(Layout& layout, std::uint64_t version) override;
  devices::Stats device_stats() const override;

 protected:
  // Copies the runs (offsets from dst and src) from DRAM into the NVM slot
  // and makes them durable: the one thing the copy strategies differ in.
  virtual void copy_out(pool::Pool& pool, std::byte* dst, const std::byte* src,
                        std::span<const pool::Pool::Run> runs) = 0;
  unsigned threads_ = 0;

 private:
  static constexpr std::uint64_t kUnknown = ~std::uint64_t{0};
  // An incremental commit copies a region whole once this share of it was
  // written (see above).
  static constexpr double kWholeShare = 0.75;
  void start_tracking(Layout& layout);
  // Copies entry i's latest buffer into slot k: whole, or only the pages
  // written since slot k was last written when that is known.
  void copy_entry(const Layout& layout, std::size_t i, int k);

  std::unique_ptr<SlotStore> store_;
  std::vector<util::DramBuffer> owned_;
  // Incremental commit. Declared after owned_: trackers release their
  // protection before the buffers are freed.
  bool incremental_ = false;
  std::vector<std::array<std::unique_ptr<PageTracker>, 2>> trackers_;  // per entry, per buffer
  // Commits and restores so far; slot k equals the working set as it was at
  // event slot_event_[k] (kUnknown: not known, copy it whole).
  std::uint64_t event_ = 0;
  std::uint64_t slot_event_[2] = {kUnknown, kUnknown};
  std::vector<int> slot_buffer_[2];  // per entry: the buffer (dual: 0/1) slot k was copied from
};

// Gives every region whose working set cairn provides its DRAM buffers (two
// for a dual region, one for a plain region the application did not adopt),
// kept in `owned`: the DRAM strategies' working set, and shadow's fallback.
Result<void> allocate_dram_working_set(Layout& layout, std::vector<util::DramBuffer>& owned);

}  // namespace cairn::persist::detail
