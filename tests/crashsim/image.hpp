// image.hpp — memory images for the crash simulator and write tracking of a
// mapping without intercepting stores (internal to tests/crashsim).
//
// Stores to a pool are plain CPU stores; the simulator does not see them. To
// find the words that differ between the working mapping and the durable image
// without comparing the whole mapping at every crash point, a WriteTracker
// write-protects the mapping and learns, from the first write fault on each
// page, which pages the program writes. A learned page stays writable (no more
// faults), so a workload that keeps writing the same pages pays one fault per
// page in total, and a crash point compares only the learned pages. When many
// pages have been learned, pages that are clean again are write-protected anew
// (forget_clean) so the set tracks the working set.
//
// An Image is a memfd mapped twice: `view` is what a pool maps (and what may be
// tracked), `alias` is the harness's own window on the same bytes. The harness
// builds and restores crash images through the alias, so its own writes never
// fault and never count as the program's writes. A forked child can remap the
// view privately (copy-on-write) and leave the parent's bytes untouched.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::testing::crashsim {

inline constexpr std::size_t kPage = 4096;

class WriteTracker {
 public:
  // Tracks [base, base + size); base must be page aligned. Nothing is
  // protected until start().
  WriteTracker(std::byte* base, std::size_t size);
  ~WriteTracker();
  WriteTracker(const WriteTracker&) = delete;
  WriteTracker& operator=(const WriteTracker&) = delete;

  // Write-protects every page not yet learned and starts learning.
  Result<void> start();
  // Makes the whole range writable again and stops learning.
  void stop();
  bool started() const { return started_; }

  std::size_t pages() const { return pages_; }
  // Pages learned so far (written since start, or still writable from an
  // earlier round), in the order they were first written.
  std::size_t learned_count() const { return learned_n_.load(std::memory_order_acquire); }
  std::uint32_t learned(std::size_t i) const { return learned_[i]; }
  // Forgets learned pages for which `clean(page)` is true: they are
  // write-protected again. Call when no other thread writes the range.
  template <class Clean>
  void forget_clean(Clean&& clean);

  // Learns `page` as if the program had written it (it stays writable): for
  // pages written through another mapping of the same bytes.
  void learn(std::uint32_t page);

  // Called by the fault handler (async-signal-safe).
  bool on_fault(std::uintptr_t addr);

 private:
  void protect(std::uint32_t first, std::uint32_t count, bool writable);
  std::byte* base_;
  std::size_t size_, pages_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> bits_;  // 1 = learned (writable)
  std::unique_ptr<std::uint32_t[]> learned_;
  std::atomic<std::size_t> learned_n_{0};
  bool started_ = false;
  int slot_ = -1;
};

// A memfd-backed byte image with a pool-facing view and a harness alias.
class Image {
 public:
  static Result<std::unique_ptr<Image>> create(std::size_t size, const char* name = "cairn-crashsim");
  ~Image();
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;

  std::size_t size() const { return size_; }
  std::byte* view() const { return view_; }
  std::byte* alias() const { return alias_; }
  int fd() const { return fd_; }

  // Write tracking of the view (see WriteTracker).
  WriteTracker& tracker() { return *tracker_; }

  // In a forked child: replaces the view by a private copy-on-write mapping
  // of the same bytes, so the child's writes stay in the child.
  Result<void> privatize_view();

 private:
  Image() = default;
  std::size_t size_ = 0;
  int fd_ = -1;
  std::byte* view_ = nullptr;
  std::byte* alias_ = nullptr;
  std::unique_ptr<WriteTracker> tracker_;
};

template <class Clean>
void WriteTracker::forget_clean(Clean&& clean) {
  const std::size_t n = learned_count();
  std::size_t keep = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t p = learned_[i];
    if (clean(p)) {
      bits_[p / 64].fetch_and(~(std::uint64_t{1} << (p % 64)), std::memory_order_relaxed);
      protect(p, 1, false);
    } else {
      learned_[keep++] = p;
    }
  }
  learned_n_.store(keep, std::memory_order_release);
}

}  // namespace cairn::testing::crashsim
