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

#include "cairn/device.hpp"
#include "cairn/persist.hpp"
#include "persist/layout.hpp"

namespace cairn::persist::detail {

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // True if the working set lives in DRAM (so register_region() is allowed).
  virtual bool working_set_in_dram() const = 0;

  virtual Result<void> open(Layout& layout, const Options& options) = 0;
  virtual std::optional<std::uint64_t> committed() const = 0;
  virtual Result<void> restore(Layout& layout) = 0;
  virtual Result<void> begin(Layout&, std::uint64_t /*version*/) { return {}; }
  virtual Result<void> commit(Layout& layout, std::uint64_t version) = 0;
  virtual void flush_async(Layout&) {}
  // Hands over layout.entries[entry] only (Context::flush_async(region)).
  virtual void flush_async_region(Layout&, std::size_t /*entry*/) {}
  virtual void flush_barrier() {}

  // NVM traffic counters (device stats of the strategy's pool, or bytes
  // written to files) and bytes copied, for Context::stats().
  virtual devices::Stats device_stats() const { return {}; }
  std::uint64_t bytes_copied = 0;
  std::uint64_t incremental_bytes_saved = 0;
};

using Factory = std::function<std::unique_ptr<Strategy>()>;

struct Registration {
  std::string name;
  std::string summary;
  Factory make;
};

// All built-in strategies, in a fixed order.
const std::vector<Registration>& registry();
Result<std::unique_ptr<Strategy>> make_strategy(const std::string& name);

// Factories, one per strategy folder.
std::unique_ptr<Strategy> make_undo_log();
std::unique_ptr<Strategy> make_shadow();
std::unique_ptr<Strategy> make_file();
std::unique_ptr<Strategy> make_dram_cache();
std::unique_ptr<Strategy> make_nt_copy();
std::unique_ptr<Strategy> make_in_place();

}  // namespace cairn::persist::detail
