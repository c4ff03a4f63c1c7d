// cairn/persist.hpp — register the state a simulation must not lose, commit a
// version whenever you like (every iteration, ideally), restore the last
// committed version after a crash. One interface, several strategies.
//
//   auto ctx = cairn::persist::Context::create({.strategy = "in-place"}).value();
//   auto* u = ctx->dual_region("u", n * sizeof(double)).value();   // two versions
//   auto* p = ctx->region("particles", bytes).value();               // one working copy
//   ctx->open().value();                                             // storage attached, memory given
//   ctx->register_pointer(&p->as<Cell>()->head).value();             // relocated on restore
//   if (ctx->committed_version()) ctx->restore().value();            // resume
//   for (;;) {
//     step(u->read<double>(), u->write<double>(), p->data());
//     ctx->commit().value();            // durable and consistent; u's roles switch
//   }
//
// value() on a failed result throws cairn::BadResultAccess with the error's
// message; check ok() and error() where a failure is not fatal. The
// examples/step*.cpp programs are this tutorial, step by step.
//
// Strategies (chosen by name, $CAIRN_STRATEGY, or a config file):
//   undo-log    libpmemobj transactions over a working set in NVM (seed 001 §3.2.1)
//   shadow      two versions in NVM, copy-on-write working view (seed 001 §3.2.2)
//   file        checkpoint files: write, fsync, rename (seed 001 §3.2.3)
//   dram-cache  working set in DRAM, backup into two NVM slots (seed 001 §3.2.4)
//   nt-copy     as dram-cache with multi-threaded non-temporal copies (seed 004 §3.2)
//   in-place    two versions whose roles alternate; commit flushes the written
//               one, asynchronously on a helper thread (seed 004 §4)
//
// Guarantee (every strategy, proven with the crash simulator and real kills):
// after any crash, restore() yields exactly the last version whose commit()
// returned, or the one in flight if its commit point became durable — bit for
// bit, never a mix. The commit point is always one aligned 8-byte store.
//
// Pointers between regions: register the address of each pointer that lives
// inside a region (`from`); at commit its current target is recorded as
// (region, offset), and restore rewrites it for wherever the regions now live.
// The registration layout (names, sizes, kinds, pointer slots) is stored with
// each version; restoring into a different layout is Errc::layout_mismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::persist {

struct Options {
  // "" reads $CAIRN_STRATEGY, then falls back to "in-place".
  std::string strategy;
  // Names the storage: <dir>/<name>.pool (NVM strategies) or <dir>/<name>.*.ckpt (file).
  std::string name = "state";
  // "" means pool::default_pool_dir().
  std::string dir;
  // Device spec for the pool ("" → $CAIRN_DEVICE → real); see device.hpp.
  std::string device;
  // Threads for copies and flushes; 0 = all hardware threads.
  unsigned threads = 0;
  // in-place: flush on a helper thread (flush_async / flush_barrier); a
  // hand-over of 256 KiB or less is flushed at once by the calling thread,
  // where it costs less than waking the helper.
  bool async_flush = true;
  // in-place: false skips writing back the dual regions' new version (plain
  // regions are still copied). For measurement only (seed 004 Fig. 12's
  // "in-place without flushing"): versions survive a killed process, whose
  // page cache lives on, but NOT a power loss.
  bool flush = true;
  // Copy-based strategies: copy only pages written since the last commit
  // (tracked per 4 KiB page by the kernel on Linux 6.7+, else by write
  // faults; $CAIRN_WRITE_TRACKING=faults forces the latter). A region of
  // which three quarters or more were written is copied whole.
  bool incremental = false;
  // file: also write each version as <dir>/<name>.<version>.h5, one uint8
  // dataset per region named after it (h5dump, h5py and ParaView read it).
  // Restore reads the checkpoint, not this file. Other strategies refuse it.
  bool hdf5 = false;
  // Pool-based strategies (shadow, dram-cache, nt-copy, in-place, undo-log):
  // a CRC-32C of every 64 KiB of every region, written with each version and
  // checked where a restored version is first read, so that bytes damaged on
  // the media are a typed error (Errc::corrupted), never a different state.
  // In-place and shadow check in the background after restore (which stays
  // O(1)) and the next commit waits for it; undo-log checks in restore(). false skips both (measurement: the cost of
  // the checksums, `cairn bench strategies`); versions committed so are not checked.
  bool checksums = true;
};

// Reads "key = value" lines (strategy, name, dir, device, threads,
// async_flush, flush, incremental, hdf5) into Options; unknown keys are errors.
Result<Options> load_options(const std::string& config_path);

// Names of the registered strategies, in registry order.
std::vector<std::string> strategy_names();

// Removes the storage of the state `options.name` in `options.dir` (default
// pool directory if empty): the files that strategy `options.strategy`
// creates, or that any strategy creates if it is empty. Returns the paths
// removed. Never call it on a state a Context has open.
Result<std::vector<std::string>> remove_storage(const Options& options);

struct Stats {
  std::uint64_t commits = 0;
  std::uint64_t restores = 0;
  double last_commit_seconds = 0, total_commit_seconds = 0;
  double last_restore_seconds = 0;
  std::uint64_t bytes_copied = 0;       // by commits and restores
  std::uint64_t nvm_bytes_written = 0;  // flushed lines + non-temporal bytes
  std::uint64_t nvm_lines_written = 0;
  // Write-back system calls (msync, sync_file_range, fdatasync, fsync) and
  // the bytes they were asked to write back: on a page-cache file system,
  // what a commit costs (0 on NVM and tmpfs, where flushes are instructions).
  std::uint64_t sync_calls = 0;
  std::uint64_t synced_bytes = 0;
  std::uint64_t incremental_bytes_saved = 0;
};

// Non-temporal copy of len bytes into DRAM (or any memory no Context
// persists), with no fence: what Context::stream does outside a pool. For
// native runs that want the same kernel as their persistent counterpart.
void stream_copy(void* dst, const void* src, std::size_t len);
// The calling thread's store fence (sfence) after stream_copy.
void stream_fence();

// A region with one working copy. Its memory exists from open() on (data()
// is null before) and stays where it is until the Context is destroyed.
class Region {
 public:
  const std::string& name() const { return name_; }
  std::size_t bytes() const { return bytes_; }
  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  // The region as an array of T (bytes() / sizeof(T) elements), after open():
  //   auto* r = ctx->region("u", n * sizeof(double)).value();
  //   ctx->open().value();
  //   std::span<double> u = r->span<double>();
  template <class T>
  std::span<T> span() const {
    return {as<T>(), bytes_ / sizeof(T)};
  }

 private:
  friend class Context;
  friend struct detail_access;
  std::string name_;
  std::size_t bytes_ = 0;
  void* data_ = nullptr;
  bool user_memory = false;  // registered with register_region()
};

// A region with two versions whose roles alternate every iteration (seed 004
// §4.1): in iteration i the application reads read() and writes write(). After
// commit the written version is the consistent one and is read next.
class DualRegion {
 public:
  const std::string& name() const { return name_; }
  std::size_t bytes() const { return bytes_; }
  void* read() const { return buf_[read_]; }
  void* write() const { return buf_[1 - read_]; }
  template <class T>
  T* read() const {
    return static_cast<T*>(read());
  }
  template <class T>
  T* write() const {
    return static_cast<T*>(write());
  }
  // Copies [offset, offset+len) from the read to the write version: elements
  // this iteration does not update (seed 004's non-uniform updates). Data that
  // is updated non-uniformly throughout is better kept in a plain region(),
  // which in-place persists by non-temporal copy (the seed's fallback).
  void carry_over(std::size_t offset, std::size_t len);

 private:
  friend class Context;
  friend struct detail_access;
  std::string name_;
  std::size_t bytes_ = 0;
  void* buf_[2] = {nullptr, nullptr};
  int read_ = 0;  // index of the version holding the latest state
};

class Context;
namespace detail {
class Strategy;
struct Layout;
struct InternalOptions;
// cairn's own harnesses only (src/persist/layout.hpp).
Result<std::unique_ptr<Context>> create_context(Options options, const InternalOptions& internal);
}  // namespace detail

class Context {
 public:
  static Result<std::unique_ptr<Context>> create(Options options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // ---- registration (before open) ----
  // A region whose memory cairn provides where the strategy keeps its working
  // set (NVM or DRAM). Works with every strategy.
  Result<Region*> region(const std::string& name, std::size_t bytes);
  // A region in memory the application owns (DRAM). Only for strategies whose
  // working set is in DRAM (file, dram-cache, nt-copy); others refuse.
  Result<Region*> register_region(const std::string& name, void* base, std::size_t bytes);
  Result<DualRegion*> dual_region(const std::string& name, std::size_t bytes);
  // `from` is the address of a pointer that lives inside a registered region.
  Result<void> register_pointer(void** from);
  template <class T>
  Result<void> register_pointer(T** from) {
    return register_pointer(reinterpret_cast<void**>(from));
  }

  // Attaches storage (creates or opens the pool or checkpoint directory).
  Result<void> open();

  // ---- versions ----
  // The last committed version in storage, if any.
  std::optional<std::uint64_t> committed_version() const;
  // Brings back the last committed version; Errc::no_version if none.
  Result<std::uint64_t> restore();
  // Starts an iteration (undo-log: the transaction opens and snapshots the
  // regions). commit() calls it if the iteration did not. The roles of dual
  // regions do not change here: commit() switches them, so that after it
  // read() is the version just committed.
  Result<void> begin();
  // Makes the state durable and consistent; returns the new version number.
  Result<std::uint64_t> commit();

  // in-place: hand the written versions to the helper thread now (seed 004's
  // flush_async) and wait for it (flush_barrier). commit() calls both.
  // These are seed 004 §4.2's flush_async() and flush_barrier(); its
  // flush_init() is open() with Options::async_flush, which starts the helper
  // thread and its FIFO queue. After handing a region over, do not write it
  // again before commit() (its flush or copy may already be done).
  void flush_async();
  // Hands over one region only, as soon as this iteration is done writing it
  // (the seed's proactive flushing: the flush overlaps the rest of the work).
  void flush_async(const DualRegion& region);
  void flush_async(const Region& region);
  void flush_barrier();

  // ---- streaming writes (nothing left to write back at commit) ----
  // Copies len bytes from src to dst, a range of a dual region's write()
  // version, with non-temporal stores: under in-place the bytes go to the
  // pool's memory without passing through the cache (libpmem's non-temporal
  // copy through the pool's device), so commit has nothing to write back for
  // them and a memory-bound kernel loses no bandwidth to a later flush. A
  // kernel computes a row (or any piece) into a small buffer and streams it
  // out. Any thread may stream, disjoint ranges at once; no fence is issued.
  // Other strategies, and destinations outside the pool, get the same
  // non-temporal copy into their memory (stream_copy).
  void stream(void* dst, const void* src, std::size_t len);
  // The calling thread's fence after its last stream() of an iteration: a
  // fence orders only its own thread's stores, so every thread that streamed
  // calls it before the commit.
  void stream_fence();
  // Instead of flush_async(region): this iteration wrote ALL of
  // region.write() through stream() and every thread that did has called
  // stream_fence(), so in-place writes nothing back for it at commit. Bytes
  // of write() stored otherwise would not be durable: a contract the commit
  // cannot check. Other strategies: no effect.
  void streamed(const DualRegion& region);

  const Stats& stats() const { return stats_; }
  const std::string& strategy() const;
  std::uint64_t version() const { return version_; }

 private:
  Context();
  friend Result<std::unique_ptr<Context>> detail::create_context(Options, const detail::InternalOptions&);
  Options options_;
  std::unique_ptr<detail::Layout> layout_;
  std::unique_ptr<detail::Strategy> strategy_;
  Stats stats_;
  std::uint64_t version_ = 0;
  bool opened_ = false;
  bool in_iteration_ = false;
};

}  // namespace cairn::persist
