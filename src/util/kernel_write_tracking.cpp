// kernel_write_tracking.cpp — userfaultfd asynchronous write protection and
// PAGEMAP_SCAN (see the header).
#include "util/kernel_write_tracking.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "util/write_faults.hpp"

namespace cairn::util {
namespace {

// Linux 6.7's user API; the C library's headers here may predate it. These
// values are the kernel's ABI and never change.
constexpr std::uint64_t kFeatureWpUnpopulated = 1ull << 13;  // UFFD_FEATURE_WP_UNPOPULATED
constexpr std::uint64_t kFeatureWpAsync = 1ull << 15;        // UFFD_FEATURE_WP_ASYNC
constexpr std::uint64_t kScanWpMatching = 1ull << 0;         // PM_SCAN_WP_MATCHING
constexpr std::uint64_t kScanCheckWpAsync = 1ull << 1;       // PM_SCAN_CHECK_WPASYNC
constexpr std::uint64_t kPageIsWritten = 1ull << 1;          // PAGE_IS_WRITTEN
constexpr int kUserModeOnly = 1;                             // UFFD_USER_MODE_ONLY

struct PageRegion {  // struct page_region
  std::uint64_t start, end, categories;
};
struct ScanArg {  // struct pm_scan_arg
  std::uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
      category_anyof_mask, return_mask;
};
constexpr unsigned long kPagemapScan = _IOWR('f', 16, ScanArg);  // PAGEMAP_SCAN

// This process's userfaultfd and pagemap file, made again after a fork.
struct Kernel {
  std::mutex mu;
  long pid = 0;
  int uffd = -1, pagemap = -1;
  bool supported = true;

  // Both descriptors for the calling process, or false.
  bool ready() {
    std::lock_guard lock(mu);
    const long me = ::getpid();
    if (pid == me) return uffd >= 0;
    // First use, or a child of the process that made them: they belong to
    // the parent's address space (closing them here does not affect it).
    if (uffd >= 0) ::close(uffd);
    if (pagemap >= 0) ::close(pagemap);
    uffd = pagemap = -1;
    pid = me;
    if (!supported) return false;
    uffd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | kUserModeOnly));
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = kFeatureWpAsync | kFeatureWpUnpopulated;
    if (uffd >= 0 && ::ioctl(uffd, UFFDIO_API, &api) == 0) pagemap = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (uffd < 0 || pagemap < 0) {
      // Too old a kernel, or userfaultfd not allowed: the faults it is.
      if (uffd >= 0) ::close(uffd);
      uffd = -1;
      supported = false;
      return false;
    }
    return true;
  }
};

Kernel& kernel() {
  static Kernel k;
  return k;
}

}  // namespace

bool kernel_write_tracking_wanted() {
  const char* v = std::getenv("CAIRN_WRITE_TRACKING");
  return v == nullptr || std::strcmp(v, "faults") != 0;
}

std::unique_ptr<KernelWriteTracker> KernelWriteTracker::start(std::byte* base, std::size_t pages) {
  if (pages == 0 || reinterpret_cast<std::uintptr_t>(base) % kPageBytes != 0) return nullptr;
  std::unique_ptr<KernelWriteTracker> t(new KernelWriteTracker(base, pages));
  if (!t->attach()) return nullptr;
  return t;
}

bool KernelWriteTracker::attach() {
  if (!kernel().ready()) return false;
  owner_ = ::getpid();
  const int fd = kernel().uffd;
  uffdio_register reg{};
  reg.range.start = reinterpret_cast<std::uintptr_t>(base_);
  reg.range.len = pages_ * kPageBytes;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  if (::ioctl(fd, UFFDIO_REGISTER, &reg) != 0) return false;  // memory the kernel cannot protect so
  uffdio_writeprotect wp{};
  wp.range = reg.range;
  wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
  if (::ioctl(fd, UFFDIO_WRITEPROTECT, &wp) != 0) {
    uffdio_range r = reg.range;
    ::ioctl(fd, UFFDIO_UNREGISTER, &r);
    return false;
  }
  return true;
}

KernelWriteTracker::~KernelWriteTracker() {
  if (owner_ != ::getpid() || !kernel().ready()) return;
  // Unregistering drops the protection: the memory is ordinary again.
  uffdio_range r{reinterpret_cast<std::uintptr_t>(base_), pages_ * kPageBytes};
  ::ioctl(kernel().uffd, UFFDIO_UNREGISTER, &r);
}

bool KernelWriteTracker::collect(const std::function<void(std::size_t, std::size_t)>& fn) {
  if (owner_ != ::getpid()) {
    // A forked child: its copy of the range is not registered anywhere.
    attach();
    return false;
  }
  const auto begin = reinterpret_cast<std::uintptr_t>(base_);
  const std::uintptr_t end = begin + pages_ * kPageBytes;
  std::array<PageRegion, 512> regions;
  ScanArg a{};
  a.size = sizeof a;
  a.flags = kScanWpMatching | kScanCheckWpAsync;
  a.start = begin;
  a.end = end;
  a.vec = reinterpret_cast<std::uintptr_t>(regions.data());
  a.vec_len = regions.size();
  a.category_mask = kPageIsWritten;
  a.return_mask = kPageIsWritten;
  for (;;) {
    const long n = ::ioctl(kernel().pagemap, kPagemapScan, &a);
    if (n < 0) {
      // Protect everything again so the next interval is known.
      uffdio_writeprotect wp{};
      wp.range = {begin, end - begin};
      wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
      ::ioctl(kernel().uffd, UFFDIO_WRITEPROTECT, &wp);
      return false;
    }
    for (long i = 0; i < n; ++i) fn((regions[i].start - begin) / kPageBytes, (regions[i].end - begin) / kPageBytes);
    if (a.walk_end >= end) return true;
    a.start = a.walk_end;  // the vector was full: go on from where the walk stopped
  }
}

}  // namespace cairn::util
