// cairn/extended/device.hpp — what sits behind a pool's persistence primitives.
//
// A pool never calls libpmem directly on its hot path. When it maps its file it
// asks its Device to bind() to the mapping and gets back a table of plain
// function pointers (Ops) plus a context; flush, drain and the copy routines are
// then one indirect call with no branches on mode or device (as libpmem2 picks
// its flush functions once per mapping).
//
// Devices:
//   real      libpmem as it is: clwb/clflushopt + sfence where the mapping is
//             (treated as) byte-addressable persistent memory, msync otherwise.
//   emulated  the real primitives plus injected delay and a bandwidth cap taken
//             from a named Profile (see profile.hpp): an NVM emulator in the
//             manner of seed 000 §5.1 (spin on the time-stamp counter).
//   crashsim  (tests/crashsim) keeps a durable image that only flushed and
//             fenced data reaches, to simulate power failures.
//   fault     the real device, except that chosen flush, drain or copy calls
//             fail as a failed msync does (EIO recorded, nothing written
//             back): tests of the paths that must refuse to commit.
//
// Durability model of the real device (ARCHITECTURE.md has the long form):
//   FlushMode::cpu    cache-line flush + fence. Durable against power loss on a
//                     DAX mapping of real NVM (ADR); on tmpfs the same
//                     instructions keep the cost model but the data only
//                     survives process crashes, not power loss.
//   FlushMode::pagecache  for a file on a page-cache file system (ext4, XFS,
//                     btrfs on an SSD): flush(range) only records the enclosing
//                     4 KiB pages; drain writes back every page recorded since
//                     the last drain, of every thread, in as few calls as the
//                     ranges allow (one msync for one contiguous range, else
//                     sync_file_range to start each merged range and one
//                     fdatasync for the file) and returns when they are on the
//                     media. Durable against power loss once drain returns, as
//                     a flush + fence is on NVM; what a strategy flushes and
//                     then fences is what reaches the disk, in that order.
//   FlushMode::msync  flush(range) is msync over the enclosing pages, one call
//                     per range, drain a no-op: the page-cache path as libpmem
//                     has it (kept for comparison; pagecache is the default).
//   FlushMode::none   flush and drain do nothing: stores to the shared mapping
//                     survive a crash of the process (the page cache outlives
//                     it), not a power loss or a kernel crash. For pools whose
//                     only job is to outlive the process (tmpfs, or a disk file
//                     whose power-loss copy is taken elsewhere).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cairn/error.hpp"

namespace cairn::devices {

// How flushes reach durability. automatic picks cpu for DAX (pmem_is_pmem) and
// tmpfs mappings and pagecache for other file systems;
// CAIRN_FLUSH=cpu|pagecache|msync|none overrides it.
enum class FlushMode : std::uint8_t { automatic = 0, cpu = 1, msync = 2, pagecache = 3, none = 4 };

// True for the modes whose write-back goes through the page cache in whole
// pages: a page dirtied without need (a write fault that populates it) costs
// a page of write-back at the next commit.
constexpr bool writes_back_pages(FlushMode m) { return m == FlushMode::msync || m == FlushMode::pagecache; }

const char* flush_mode_name(FlushMode mode) noexcept;
Result<FlushMode> parse_flush_mode(const std::string& text);

// Named program points the crash simulator treats as crash points; other
// devices ignore them.
enum class Marker : std::uint32_t {
  commit_begin = 1,
  commit_point = 2,
  root_publish = 3,
  recovery_begin = 4,
  recovery_end = 5,
  user = 100,
};

// The mapping a device is bound to.
struct Mapping {
  std::byte* base = nullptr;
  std::size_t size = 0;
  bool is_pmem = false;             // libpmem's verdict on the mapping
  FlushMode mode = FlushMode::cpu;  // resolved, never automatic
  // The mapped file, open for as long as the mapping (pagecache mode writes
  // back with sync_file_range + fdatasync on it); -1 if there is none, and
  // pagecache mode then writes back with one msync per merged range.
  int fd = -1;
};

// The hot-path function table. Every function takes the device context first.
struct Ops {
  void (*flush)(void* ctx, const void* addr, std::size_t len) = nullptr;
  void (*drain)(void* ctx) = nullptr;
  // Copy / fill into the mapping with non-temporal stores where that pays
  // (large sizes), flushing what went through the cache; no final fence.
  void (*copy_nodrain)(void* ctx, void* dst, const void* src, std::size_t len) = nullptr;
  void (*fill_nodrain)(void* ctx, void* dst, int c, std::size_t len) = nullptr;
  // copy_nodrain that also returns the CRC-32C of the bytes copied, extending
  // `crc`, computed in the same pass over them (optional: where null, the
  // pool copies and then checksums).
  std::uint32_t (*copy_crc_nodrain)(void* ctx, void* dst, const void* src, std::size_t len,
                                    std::uint32_t crc) = nullptr;
};

// Snapshot of a device's counters.
struct Stats {
  std::uint64_t flush_calls = 0;
  std::uint64_t lines_flushed = 0;  // cache lines written back by flush()
  std::uint64_t bytes_flushed = 0;  // lines_flushed * 64
  std::uint64_t nt_bytes = 0;       // bytes written with non-temporal stores
  std::uint64_t copied_bytes = 0;   // all bytes written by copy/fill
  std::uint64_t drains = 0;
  std::uint64_t msyncs = 0;             // write-back system calls: msync, sync_file_range, fdatasync
  std::uint64_t synced_bytes = 0;       // bytes of the pages those calls were asked to write back
  std::uint64_t injected_delay_ns = 0;  // emulated device only
  // Bytes that reached NVM: flushed lines plus non-temporal bytes.
  std::uint64_t nvm_bytes_written() const { return bytes_flushed + nt_bytes; }
};

// Counters shared by all devices, updated once per call (not per line) and
// kept per thread: a thread adds to its own slot with a plain load and store.
// A locked add (what an atomic fetch_add is on x86) waits until every earlier
// store of the calling thread, non-temporal stores and clwb write-backs
// included, has reached memory: counting after a copy made each call wait
// for its own data (jacobi, a row streamed per call: +9-11 % against the
// same copies uncounted). Threads beyond kSlots alive at once share a last
// slot with locked adds. reset() is for moments without device calls.
class Counters {
 public:
  enum Field : unsigned {
    flush_calls,
    lines_flushed,
    nt_bytes,
    copied_bytes,
    drains,
    msyncs,
    synced_bytes,
    injected_delay_ns
  };
  static constexpr unsigned kFields = injected_delay_ns + 1;
  static constexpr unsigned kSlots = 32;

  void add(Field f, std::uint64_t v) noexcept;
  Stats snapshot() const;
  void reset();

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> v[kFields] = {};
  };
  Slot slots_[kSlots + 1];
};

class Device {
 public:
  virtual ~Device() = default;
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual std::string name() const = 0;

  // Binds to a pool's mapping; returns the function table the pool will call
  // with context(). Called once per open pool; a device serves one pool.
  virtual Result<Ops> bind(const Mapping& mapping) = 0;
  virtual void* context() = 0;
  // Called before the mapping goes away.
  virtual void unbind() {}

  // Crash points for the crash simulator; no-op elsewhere.
  virtual void marker(Marker, const char* /*label*/) {}
  // Charges the cost of reading `bytes` from NVM (emulated device); library
  // routines that read persistent data in bulk (restore) call it.
  virtual void read_charge(std::size_t /*bytes*/, bool /*sequential*/) {}

  Stats stats() const { return state_->counters_.snapshot(); }
  void reset_stats() { state_->counters_.reset(); }
  Counters& counters() { return state_->counters_; }

  // errno of the first failed flush (msync) since bind, 0 if none. A pool
  // whose device failed a flush is poisoned: it refuses further publishes.
  int io_errno() const { return state_->io_errno_.load(std::memory_order_acquire); }
  void record_io_error(int err) {
    int expected = 0;
    state_->io_errno_.compare_exchange_strong(expected, err, std::memory_order_acq_rel);
  }

 protected:
  // A device that wraps another (the emulated device calls the real one's
  // Ops) reports the wrapped device's counters and I/O error, because those
  // are what the wrapped primitives update. `inner` must outlive this device.
  void share_state_with(Device& inner) { state_ = inner.state_; }

  Counters counters_;
  std::atomic<int> io_errno_{0};

 private:
  Device* state_ = this;  // whose counters_ / io_errno_ the accessors use
};

// libpmem as it is.
std::unique_ptr<Device> make_real_device();

// libpmem plus injected delay and bandwidth caps from a profile spec
// (profile.hpp describes the names and the numeric form).
Result<std::unique_ptr<Device>> make_emulated_device(const std::string& profile_spec);

// Builds a device from a spec: "real", "emulated:PROFILE", "fault:PLAN" (see
// make_fault_device) or a profile spec accepted by parse_profile() (e.g.
// "optane-dcpmm" or "write_ns=150,read_ns=100,write_gbps=2.3"). An empty spec
// reads $CAIRN_DEVICE, then $CAIRN_DEVICE_PROFILE (which selects the emulated
// device with that profile), and falls back to "real".
Result<std::unique_ptr<Device>> make_device(const std::string& spec);

// ---- fault injection (tests of the failure paths) ----
//
// The fault device wraps the real device (its counters and I/O error are the
// real device's, as with the emulated device) and makes chosen calls fail the
// way a failed msync (EIO, or ENOSPC on a sparse file) does: the call records
// EIO with record_io_error() and writes nothing back. A failing copy or fill
// still stores its bytes into the mapping, as the CPU would, but does not
// write them back. On tmpfs the bytes are of course still visible to the next
// process: what the device injects is the error, which every commit must see.
//
// Spec "fault:KEY=N,KEY=N,...", keys in any order:
//   flush=N   the Nth flush call (1-based, counted from the device's creation,
//             i.e. from bind) and every later one fail: a device that went bad
//   drain=N   the same for drain calls
//   copy=N    the same for copy_nodrain and fill_nodrain calls (one count)
//   once      only the Nth call of each armed kind fails, later ones succeed
//             (a transient error; the recorded errno stays, as with msync)
// N = 0, or a key left out, means never. "fault" or "fault:" alone behaves as
// the real device. Example: CAIRN_DEVICE=fault:flush=40 makes the 40th flush
// of each pool fail.
struct FaultPlan {
  std::uint64_t flush = 0, drain = 0, copy = 0;  // Nth call of that kind; 0: never
  bool once = false;
};
struct FaultCounts {
  std::uint64_t flush = 0, drain = 0, copy = 0;  // calls since the device was made
  std::uint64_t failed = 0;                      // calls made to fail
};

// The plan and call counts of a fault device, shared by the device and the
// test that made it: arm() re-arms the device while its pool is open, so a
// test can commit some versions cleanly and then make the next commit's
// write-backs fail without knowing how many calls opening and committing
// took. Thread-safe: persist_mt's workers flush concurrently.
class FaultInjector {
 public:
  explicit FaultInjector(const FaultPlan& plan = {}) { arm(plan); }
  // Each N of `plan` counts from now (flush = 1: the next flush call fails).
  void arm(const FaultPlan& plan);
  FaultCounts counts() const;
  // The device counts one call of a kind; true if the call must fail.
  bool next_flush() { return next(flush_, flush_at_); }
  bool next_drain() { return next(drain_, drain_at_); }
  bool next_copy() { return next(copy_, copy_at_); }

 private:
  bool next(std::atomic<std::uint64_t>& count, const std::atomic<std::uint64_t>& at);
  std::atomic<std::uint64_t> flush_{0}, drain_{0}, copy_{0}, failed_{0};
  // Absolute call numbers from which (or, once, at which) calls fail; 0: never.
  std::atomic<std::uint64_t> flush_at_{0}, drain_at_{0}, copy_at_{0};
  std::atomic<bool> once_{false};
};

// A fault device from a spec ("fault:flush=N,..."), or driven by `injector`.
Result<std::unique_ptr<Device>> make_fault_device(const std::string& spec);
std::unique_ptr<Device> make_fault_device(std::shared_ptr<FaultInjector> injector);

}  // namespace cairn::devices
