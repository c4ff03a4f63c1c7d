// real_device.cpp — the `real` device: libpmem's flush, drain and copy routines.
#include <libpmem.h>

#include <cerrno>
#include <cstring>

#include "cairn/extended/device.hpp"
#include "devices/line_math.hpp"

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
    if (m.mode == FlushMode::msync) {
      ops.flush = &flush_msync;
      ops.drain = &drain_msync;
      ops.copy_nodrain = &copy_msync;
      ops.fill_nodrain = &fill_msync;
    } else {
      ops.flush = &flush_cpu;
      ops.drain = &drain_cpu;
      ops.copy_nodrain = &copy_cpu;
      ops.fill_nodrain = &fill_cpu;
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
};

}  // namespace

std::unique_ptr<Device> make_real_device() { return std::make_unique<RealDevice>(); }

}  // namespace cairn::devices
