// kernel_write_tracking.hpp — which pages of a range were written, asked of
// the kernel (internal): userfaultfd's asynchronous write protection plus the
// PAGEMAP_SCAN ioctl of /proc/self/pagemap (Linux 6.7 and later).
//
// The range is registered for write protection in asynchronous mode: the
// first write to a protected page is resolved by the kernel itself (no signal,
// no handler, no split mapping) and the page is marked written. collect()
// reports the written pages and protects them again in one walk of the page
// table, so the cost per commit is proportional to the pages written, not to
// the range. The incremental commit's fallback, write faults caught by a
// SIGSEGV handler (util/write_faults.hpp), pays a signal and an mprotect per
// page and splits the mapping at every written page.
//
// Forks: a userfaultfd belongs to the address space that created it. A child
// that goes on using a tracker gets a userfaultfd of its own on its next
// collect(), which then reports "unknown" once (copy everything).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace cairn::util {

class KernelWriteTracker {
 public:
  // Tracks the pages of [base, base + pages * 4 KiB) (base page aligned);
  // nullptr if this kernel or this memory cannot (the caller falls back).
  // Writes from then on are recorded; earlier ones are not.
  static std::unique_ptr<KernelWriteTracker> start(std::byte* base, std::size_t pages);
  ~KernelWriteTracker();
  KernelWriteTracker(const KernelWriteTracker&) = delete;
  KernelWriteTracker& operator=(const KernelWriteTracker&) = delete;

  // Calls fn(first, end) for each run of pages [first, end) written since
  // the last collect() and protects them again. False if the kernel could
  // not say for some pages (after a fork, or a failed ioctl): treat every
  // page as written this time.
  bool collect(const std::function<void(std::size_t, std::size_t)>& fn);

 private:
  KernelWriteTracker(std::byte* base, std::size_t pages) : base_(base), pages_(pages) {}
  bool attach();  // registers the range with this process's userfaultfd and protects it all

  std::byte* base_;
  std::size_t pages_;
  long owner_ = 0;  // the process whose userfaultfd the range is registered with
};

// "kernel" (default) or "faults": $CAIRN_WRITE_TRACKING, for comparing the two.
bool kernel_write_tracking_wanted();

}  // namespace cairn::util
