// strategy.hpp — what every persistence strategy implements, and the registry
// that finds one by name (internal; as libCEED backends register by name).
//
// Lifecycle, driven by Context:
//   open(layout)      once: give cairn-owned regions their memory (NVM or DRAM,
//                     where the strategy keeps its working set) and attach
//                     storage (pool file, checkpoint directory), creating it or
//                     finding what an earlier run committed.
//   committed()       the newest version in storage, if any.
//   restore(layout)   bring that version into the working buffers (dual
//                     regions: into read()) and relocate pointers.
//   begin(layout, v)  an iteration that will become version v starts.
//   commit(layout, v) make the latest buffers durable as version v. The commit
//                     point is one persisted aligned 8-byte store; when commit
//                     returns, v survives any crash.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/extended/device.hpp"
#include "cairn/persist.hpp"
#include "persist/layout.hpp"

namespace cairn::persist::detail {

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;

  virtual Result<void> open(Layout& layout, const Options& options) = 0;
  virtual std::optional<std::uint64_t> committed() const = 0;
  virtual Result<void> restore(Layout& layout) = 0;
  virtual Result<void> begin(Layout&, std::uint64_t /*version*/) { return {}; }
  virtual Result<void> commit(Layout& layout, std::uint64_t version) = 0;
  virtual void flush_async(Layout&) {}
  // Hands over layout.entries[entry] only (Context::flush_async(region)).
  virtual void flush_async_region(Layout&, std::size_t /*entry*/) {}
  virtual void flush_barrier() {}
  // Context::stream / stream_fence / streamed (the defaults: DRAM).
  virtual void stream(void* dst, const void* src, std::size_t len) { stream_copy(dst, src, len); }
  virtual void stream_fence() { persist::stream_fence(); }
  virtual void streamed_region(Layout&, std::size_t /*entry*/) {}

  // NVM traffic counters (device stats of the strategy's pool, or bytes
  // written to files) and bytes copied, for Context::stats().
  virtual devices::Stats device_stats() const { return {}; }
  std::uint64_t bytes_copied = 0;
  std::uint64_t incremental_bytes_saved = 0;
};

using Factory = std::function<std::unique_ptr<Strategy>()>;

// Where a strategy keeps the working set the application computes on. DRAM
// strategies may adopt application memory (Context::register_region()).
enum class WorkingSet { dram, nvm };

// What restore() costs: switching to the committed version (O(1)), reading a
// log, or copying the whole state back (the file and DRAM-cache baselines).
enum class RestoreCost { constant, log, copy };

// How the crash harness (tests/crashsim) explores the strategy:
//   pool          it runs on a cairn pool the harness lends it
//                 (Options::borrowed_pool), so every flush, drain and copy
//                 goes through the simulator device; the harness builds one
//                 workload per CrashVariant, named strategy.NAME[.SUFFIX],
//                 and the CI crash suite gives each its share;
//   libpmemobj    its own pool format; tests/crashsim/workloads/undo_log.cpp
//                 runs it with libpmemobj's persist calls interposed;
//   files         it writes files; the file-system crash explorer
//                 (tests/crashsim/fs_*.cpp) runs it.
enum class CrashHarness { pool, libpmemobj, files };

struct CrashVariant {
  std::string suffix;  // "" for the plain workload
  std::string what;    // one line for `cairn-crashsim list`
  bool async_flush = false;
  bool incremental = false;
  bool eadr_share = false;  // also a share under the eADR model in CI
  bool streamed = false;    // the dual region is written by Context::stream
};

// What `cairn bench strategies` needs to hold a row to the right goal.
struct BenchTraits {
  bool copy_based = false;      // commit copies the whole state into the pool
  bool dual = false;            // the benchmark's state is a DualRegion
  std::size_t file_factor = 2;  // storage it needs, in state sizes
  std::size_t dram_factor = 1;  // DRAM it needs besides the pool, in state sizes
  std::string note;             // the caveat printed with its rows
};

// One record per strategy: everything the rest of cairn (the conformance
// suite, the crash harness and its CI shares, the apps' restart tests, the
// benchmarks, storage clean-up) knows about it. Adding a strategy is one
// folder under src/persist/ plus one record in registry.cpp.
struct Registration {
  std::string name;
  std::string summary;
  Factory make;
  WorkingSet working_set = WorkingSet::nvm;
  RestoreCost restore_cost = RestoreCost::constant;
  bool incremental = false;  // honours Options::incremental (copies only pages written since the last commit)
  bool hdf5 = false;         // writes Options::hdf5's HDF5 file per version; the others refuse the option
  // The files it creates in Options::dir, as patterns after Options::name
  // ("*" matches any run of characters): ".pool" names <dir>/<name>.pool.
  std::vector<std::string> storage;
  CrashHarness crash = CrashHarness::pool;
  std::vector<CrashVariant> crash_variants;  // for CrashHarness::pool
  BenchTraits bench;
};

// Options::dir, or the default pool directory when it is empty.
std::string storage_dir(const Options& options);
// storage_dir(), created if missing; a typed error saying what to set if not.
Result<std::string> make_storage_dir(const Options& options);

// All built-in strategies, in a fixed order.
const std::vector<Registration>& registry();
// The record of `name`, or null.
const Registration* find_registration(const std::string& name);
// Errc::invalid_argument naming the known strategies if `name` is unknown;
// Errc::internal if its factory returns nothing.
Result<std::unique_ptr<Strategy>> make_strategy(const std::string& name);

}  // namespace cairn::persist::detail
