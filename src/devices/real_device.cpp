// real_device.cpp — the `real` device: libpmem's flush, drain and copy routines.
#include <fcntl.h>
#include <libpmem.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "cairn/extended/device.hpp"
#include "devices/line_math.hpp"
#include "util/crc32c.hpp"
#include "util/io.hpp"

namespace cairn::devices {
namespace {

// Copies at least this large use non-temporal stores; smaller ones go through
// the cache and are flushed (a non-temporal store of a few lines costs more
// than it saves).
constexpr std::size_t kNtThreshold = 256;

// libpmem is not built with ThreadSanitizer, so TSan does not see the memory
// its flushes read and its copies read and write; these tell it, so that a
// flush of a range another thread is writing is reported as the race it is.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_read_range(const void* addr, unsigned long size);
extern "C" void __tsan_write_range(void* addr, unsigned long size);
void tsan_reads(const void* addr, std::size_t len) { __tsan_read_range(addr, len); }
void tsan_writes(void* addr, std::size_t len) { __tsan_write_range(addr, len); }
#else
void tsan_reads(const void*, std::size_t) {}
void tsan_writes(void*, std::size_t) {}
#endif

class RealDevice final : public Device {
 public:
  std::string name() const override { return "real"; }
  void* context() override { return this; }

  Result<Ops> bind(const Mapping& m) override {
    Ops ops;
    base_ = reinterpret_cast<std::uintptr_t>(m.base);
    size_ = m.size;
    fd_ = m.fd;
    if (m.mode == FlushMode::msync) {
      ops.flush = &flush_msync;
      ops.drain = &drain_msync;
      ops.copy_nodrain = &copy_msync;
      ops.fill_nodrain = &fill_msync;
    } else if (m.mode == FlushMode::pagecache) {
      ops.flush = &flush_pagecache;
      ops.drain = &drain_pagecache;
      ops.copy_nodrain = &copy_pagecache;
      ops.fill_nodrain = &fill_pagecache;
    } else if (m.mode == FlushMode::none) {
      ops.flush = &flush_none;
      ops.drain = &drain_none;
      ops.copy_nodrain = &copy_none;
      ops.fill_nodrain = &fill_none;
    } else {
      ops.flush = &flush_cpu;
      ops.drain = &drain_cpu;
      ops.copy_nodrain = &copy_cpu;
      ops.fill_nodrain = &fill_cpu;
      ops.copy_crc_nodrain = &copy_crc_cpu;
    }
    return ops;
  }

 private:
  static RealDevice& self(void* ctx) { return *static_cast<RealDevice*>(ctx); }

  static void flush_cpu(void* ctx, const void* addr, std::size_t len) {
    auto& d = self(ctx);
    tsan_reads(addr, len);
    pmem_flush(addr, len);
    d.counters_.add(d.counters_.flush_calls, 1);
    d.counters_.add(d.counters_.lines_flushed, lines_spanned(addr, len));
  }
  static void drain_cpu(void* ctx) {
    auto& d = self(ctx);
    pmem_drain();
    d.counters_.add(d.counters_.drains, 1);
  }
  static void copy_cpu(void* ctx, void* dst, const void* src, std::size_t len) {
    auto& d = self(ctx);
    tsan_reads(src, len);
    tsan_writes(dst, len);
    if (len >= kNtThreshold) {
      pmem_memcpy(dst, src, len, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
      d.counters_.add(d.counters_.nt_bytes, len);
    } else {
      pmem_memcpy(dst, src, len, PMEM_F_MEM_TEMPORAL | PMEM_F_MEM_NODRAIN);
      d.counters_.add(d.counters_.lines_flushed, lines_spanned(dst, len));
    }
    d.counters_.add(d.counters_.copied_bytes, len);
  }
  // The copy fused with its checksum where the CPU can (util::crc32c_copy_nt):
  // non-temporal stores for the destination's whole lines, the partial lines
  // at its ends stored through the cache and flushed here.
  static std::uint32_t copy_crc_cpu(void* ctx, void* dst, const void* src, std::size_t len, std::uint32_t crc) {
    if (len < kNtThreshold || !util::crc32c_copy_streams(len)) {
      copy_cpu(ctx, dst, src, len);
      return util::crc32c(crc, src, len);
    }
    auto& d = self(ctx);
    tsan_reads(src, len);
    tsan_writes(dst, len);
    crc = util::crc32c_copy_nt(dst, src, len, crc);
    auto* const begin = static_cast<std::byte*>(dst);
    auto* const end = begin + len;
    auto* const first_line = begin + (64 - reinterpret_cast<std::uintptr_t>(begin) % 64) % 64;
    auto* const last_line = end - reinterpret_cast<std::uintptr_t>(end) % 64;
    if (first_line > begin) pmem_flush(begin, static_cast<std::size_t>(first_line - begin));
    if (end > last_line) pmem_flush(last_line, static_cast<std::size_t>(end - last_line));
    d.counters_.add(d.counters_.nt_bytes, static_cast<std::size_t>(last_line - first_line));
    d.counters_.add(d.counters_.lines_flushed, (first_line > begin ? 1 : 0) + (end > last_line ? 1 : 0));
    d.counters_.add(d.counters_.copied_bytes, len);
    return crc;
  }
  static void fill_cpu(void* ctx, void* dst, int c, std::size_t len) {
    auto& d = self(ctx);
    tsan_writes(dst, len);
    if (len >= kNtThreshold) {
      pmem_memset(dst, c, len, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
      d.counters_.add(d.counters_.nt_bytes, len);
    } else {
      pmem_memset(dst, c, len, PMEM_F_MEM_TEMPORAL | PMEM_F_MEM_NODRAIN);
      d.counters_.add(d.counters_.lines_flushed, lines_spanned(dst, len));
    }
    d.counters_.add(d.counters_.copied_bytes, len);
  }

  // Non-DAX file: msync writes back whole pages and is durable when it
  // returns, so drain has nothing left to do.
  static void flush_msync(void* ctx, const void* addr, std::size_t len) {
    auto& d = self(ctx);
    tsan_reads(addr, len);
    if (pmem_msync(addr, len) != 0) d.record_io_error(errno ? errno : EIO);
    d.counters_.add(d.counters_.flush_calls, 1);
    d.counters_.add(d.counters_.msyncs, 1);
    d.counters_.add(d.counters_.lines_flushed, lines_spanned(addr, len));
  }
  static void drain_msync(void* ctx) { self(ctx).counters_.add(self(ctx).counters_.drains, 1); }
  static void copy_msync(void* ctx, void* dst, const void* src, std::size_t len) {
    std::memcpy(dst, src, len);
    self(ctx).counters_.add(self(ctx).counters_.copied_bytes, len);
    flush_msync(ctx, dst, len);
  }
  static void fill_msync(void* ctx, void* dst, int c, std::size_t len) {
    std::memset(dst, c, len);
    self(ctx).counters_.add(self(ctx).counters_.copied_bytes, len);
    flush_msync(ctx, dst, len);
  }

  // Page-cache file system: a flush only records its pages; drain writes
  // them back. The list is shared by all threads (a drain writes back what
  // every thread recorded, which is more than a fence promises, never less),
  // and writeback_mu_ is held while a drain writes back, so a drain that
  // starts while another one's write-back is in flight returns only after
  // it: whatever a thread flushed before its drain is on the media when the
  // drain returns, even if another thread's drain took it off the list.
  struct PageRange {
    std::uintptr_t first, end;  // page-aligned addresses, end exclusive
  };
  static constexpr std::uintptr_t kPage = 4096;

  void record_pages(const void* addr, std::size_t len) {
    if (len == 0) return;
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const PageRange r{a & ~(kPage - 1), (a + len + kPage - 1) & ~(kPage - 1)};
    std::lock_guard lock(pending_mu_);
    // Most flushes continue or repeat the last one (a row after a row, a
    // commit word flushed twice): extend it instead of adding a range.
    if (!pending_.empty()) {
      PageRange& last = pending_.back();
      if (r.first <= last.end && r.end >= last.first) {
        last.first = std::min(last.first, r.first);
        last.end = std::max(last.end, r.end);
        return;
      }
    }
    pending_.push_back(r);
  }

  static void flush_pagecache(void* ctx, const void* addr, std::size_t len) {
    auto& d = self(ctx);
    tsan_reads(addr, len);
    d.record_pages(addr, len);
    d.counters_.add(d.counters_.flush_calls, 1);
    d.counters_.add(d.counters_.lines_flushed, lines_spanned(addr, len));
  }
  // Large copies go into the page cache with pwrite, not through the
  // mapping: a page written back since its last store is write-protected,
  // and storing into it through the mapping takes a fault per page (64 MiB:
  // 16384 faults); pwrite fills the same page-cache pages without them, and
  // the mapping sees the bytes at once (MAP_SHARED).
  static constexpr std::size_t kPwriteMin = 256 * 1024;
  static void copy_pagecache(void* ctx, void* dst, const void* src, std::size_t len) {
    auto& d = self(ctx);
    tsan_reads(src, len);
    tsan_writes(dst, len);
    const auto at = reinterpret_cast<std::uintptr_t>(dst);
    if (len < kPwriteMin || d.fd_ < 0 || at < d.base_ || at + len > d.base_ + d.size_ ||
        util::pwrite_full(d.fd_, src, len, at - d.base_) != 0)
      std::memcpy(dst, src, len);  // small, no descriptor, or pwrite refused: through the mapping
    d.counters_.add(d.counters_.copied_bytes, len);
    flush_pagecache(ctx, dst, len);
  }
  static void fill_pagecache(void* ctx, void* dst, int c, std::size_t len) {
    tsan_writes(dst, len);
    std::memset(dst, c, len);
    self(ctx).counters_.add(self(ctx).counters_.copied_bytes, len);
    flush_pagecache(ctx, dst, len);
  }
  static void drain_pagecache(void* ctx) {
    auto& d = self(ctx);
    d.counters_.add(d.counters_.drains, 1);
    std::lock_guard writing(d.writeback_mu_);
    std::vector<PageRange> ranges;
    {
      std::lock_guard lock(d.pending_mu_);
      ranges.swap(d.pending_);
    }
    if (ranges.empty()) return;
    std::sort(ranges.begin(), ranges.end(), [](const PageRange& a, const PageRange& b) { return a.first < b.first; });
    std::size_t n = 0;  // merge overlapping and adjacent ranges in place
    for (const PageRange& r : ranges) {
      if (n > 0 && r.first <= ranges[n - 1].end)
        ranges[n - 1].end = std::max(ranges[n - 1].end, r.end);
      else
        ranges[n++] = r;
    }
    ranges.resize(n);
    std::uint64_t bytes = 0;
    for (const PageRange& r : ranges) bytes += r.end - r.first;
    d.counters_.add(d.counters_.synced_bytes, bytes);
    int err = 0;
    if (n == 1 || d.fd_ < 0) {
      // One range: msync writes it back and waits (and flushes the disk's
      // cache) in one call. Without a descriptor, one call per range.
      for (const PageRange& r : ranges) {
        if (::msync(reinterpret_cast<void*>(r.first), r.end - r.first, MS_SYNC) != 0 && err == 0) err = errno;
        d.counters_.add(d.counters_.msyncs, 1);
      }
    } else {
      // Several ranges: start the write-back of each (no waiting, no cache
      // flush), then one fdatasync waits for all of them and flushes the
      // disk's cache once. fdatasync also writes back pages of the file that
      // were dirtied but not flushed: earlier than needed, never wrong.
      for (const PageRange& r : ranges) {
        const auto off = static_cast<off64_t>(r.first - d.base_);
        if (::sync_file_range(d.fd_, off, static_cast<off64_t>(r.end - r.first), SYNC_FILE_RANGE_WRITE) != 0 &&
            err == 0)
          err = errno;
      }
      if (::fdatasync(d.fd_) != 0 && err == 0) err = errno;
      d.counters_.add(d.counters_.msyncs, n + 1);
    }
    if (err != 0) d.record_io_error(err);
  }

  // Process-crash protection only: the stores are in the page cache.
  static void flush_none(void* ctx, const void*, std::size_t) {
    self(ctx).counters_.add(self(ctx).counters_.flush_calls, 1);
  }
  static void drain_none(void* ctx) { self(ctx).counters_.add(self(ctx).counters_.drains, 1); }
  static void copy_none(void* ctx, void* dst, const void* src, std::size_t len) {
    tsan_reads(src, len);
    std::memcpy(dst, src, len);
    self(ctx).counters_.add(self(ctx).counters_.copied_bytes, len);
  }
  static void fill_none(void* ctx, void* dst, int c, std::size_t len) {
    std::memset(dst, c, len);
    self(ctx).counters_.add(self(ctx).counters_.copied_bytes, len);
  }

  std::uintptr_t base_ = 0;
  std::size_t size_ = 0;
  int fd_ = -1;
  std::mutex pending_mu_;
  std::vector<PageRange> pending_;
  std::mutex writeback_mu_;
};

}  // namespace

std::unique_ptr<Device> make_real_device() { return std::make_unique<RealDevice>(); }

}  // namespace cairn::devices
