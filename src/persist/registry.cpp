// registry.cpp — the built-in strategies by name: one record each, the only
// list of strategies in cairn. Everything that enumerates strategies (the
// conformance suite, the crash harness and its CI shares, the apps' restart
// tests, the benchmarks, storage clean-up, the C API) reads it.
#include <fnmatch.h>

#include <filesystem>

#include "cairn/extended/pool.hpp"
#include "persist/strategy.hpp"

namespace cairn::persist::detail {

// Factories, one per strategy folder.
std::unique_ptr<Strategy> make_undo_log();
std::unique_ptr<Strategy> make_shadow();
std::unique_ptr<Strategy> make_file();
std::unique_ptr<Strategy> make_dram_cache();
std::unique_ptr<Strategy> make_nt_copy();
std::unique_ptr<Strategy> make_in_place();

namespace {

// The two-slot pool of the pool-based strategies, and create's temporary file.
const std::vector<std::string> kSlotPool = {".pool", ".pool.tmp-*"};

}  // namespace

const std::vector<Registration>& registry() {
  static const std::vector<Registration> all = {
      {.name = "undo-log",
       .summary = "libpmemobj undo-log transactions, working set in NVM (seed 001 §3.2.1)",
       .make = make_undo_log,
       .working_set = WorkingSet::nvm,
       .restore_cost = RestoreCost::log,
       .storage = {".obj"},
       .crash = CrashHarness::libpmemobj,
       .bench = {.file_factor = 3,
                 .dram_factor = 0,
                 .note = "libpmemobj flushes by itself: not charged by the emulated device; NVM bytes are cairn's "
                         "estimate; commit includes the next iteration's snapshot (pmemobj_tx_add_range)"}},
      {.name = "shadow",
       .summary = "two versions in NVM, copy-on-write working view, O(1) restore (seed 001 §3.2.2)",
       .make = make_shadow,
       .working_set = WorkingSet::nvm,
       .restore_cost = RestoreCost::constant,
       .storage = kSlotPool,
       .crash_variants = {{.what = "shadow: two NVM versions, commit copies the working view (DRAM fallback view)"}},
       .bench = {.copy_based = true,
                 .note = "copy-on-write view: commit is one copy (the view already shows the new slot)"}},
      {.name = "file",
       .summary = "checkpoint files: write, fsync, atomic rename (seed 001 §3.2.3)",
       .make = make_file,
       .working_set = WorkingSet::dram,
       .restore_cost = RestoreCost::copy,
       .hdf5 = true,
       .storage = {".*.ckpt", ".*.ckpt.tmp", ".*.h5", ".*.h5.tmp"},
       .crash = CrashHarness::files,
       .bench = {.file_factor = 3,
                 .note = "checkpoint files (pwrite, fsync, rename): not charged by the emulated device"}},
      {.name = "dram-cache",
       .summary = "working set in DRAM, backup into two NVM slots (seed 001 §3.2.4)",
       .make = make_dram_cache,
       .working_set = WorkingSet::dram,
       .restore_cost = RestoreCost::copy,
       .incremental = true,
       .storage = kSlotPool,
       .crash_variants = {{.what = "dram-cache: DRAM working set copied into two NVM slots, version word"}},
       .bench = {.copy_based = true, .note = "cached-store copy + write-back of every line, on all threads"}},
      {.name = "nt-copy",
       .summary = "DRAM working set, multi-threaded non-temporal copies into NVM (seed 004 §3.2)",
       .make = make_nt_copy,
       .working_set = WorkingSet::dram,
       .restore_cost = RestoreCost::copy,
       .incremental = true,
       .storage = kSlotPool,
       .crash_variants = {{.what = "nt-copy: as dram-cache with non-temporal copies"},
                          {.suffix = "incremental",
                           .what = "nt-copy with incremental commit (only pages written since the last commit)",
                           .incremental = true}},
       .bench = {.copy_based = true}},
      {.name = "in-place",
       .summary = "in-place versioning with asynchronous flushing (seed 004 §4)",
       .make = make_in_place,
       .working_set = WorkingSet::nvm,
       .restore_cost = RestoreCost::constant,
       .storage = kSlotPool,
       .crash_variants = {{.what = "in-place: dual regions written in their NVM slots, flushed at commit",
                           .eadr_share = true},
                          {.suffix = "async",
                           .what = "in-place with the helper thread flushing (flush_async / barrier)",
                           .async_flush = true},
                          {.suffix = "streamed",
                           .what = "in-place with the dual region written by non-temporal stores (stream, "
                                   "stream_fence, streamed): nothing written back for it at commit",
                           .streamed = true}},
       .bench = {.dual = true,
                 .dram_factor = 0,
                 .note = "DualRegion: commit flushes the written version, nothing is copied"}},
  };
  return all;
}

const Registration* find_registration(const std::string& name) {
  for (const auto& r : registry())
    if (r.name == name) return &r;
  return nullptr;
}

Result<std::unique_ptr<Strategy>> make_strategy(const std::string& name) {
  if (const Registration* r = find_registration(name)) {
    auto s = r->make ? r->make() : nullptr;
    if (!s) return make_error(Errc::unsupported, "strategy '" + name + "' is registered but its factory built nothing");
    return s;
  }
  std::string known;
  for (const auto& r : registry()) known += (known.empty() ? "" : ", ") + r.name;
  return make_error(Errc::invalid_argument, "unknown persistence strategy '" + name + "'; choose one of: " + known);
}

}  // namespace cairn::persist::detail

namespace cairn::persist {

std::string detail::storage_dir(const Options& options) {
  return options.dir.empty() ? pool::default_pool_dir() : options.dir;
}

Result<std::string> detail::make_storage_dir(const Options& options) {
  const std::string dir = storage_dir(options);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error(Errc::io_error, "cannot create the pool directory " + dir + ": " + ec.message() +
                                          "; set CAIRN_POOL_DIR or Options::dir to a writable directory");
  return dir;
}

Result<std::vector<std::string>> remove_storage(const Options& options) {
  if (options.name.empty() || options.name.find('/') != std::string::npos)
    return make_error(Errc::invalid_argument,
                      "remove_storage: the state name '" + options.name + "' must be non-empty and contain no '/'");
  std::vector<const detail::Registration*> which;
  if (options.strategy.empty()) {
    for (const auto& r : detail::registry()) which.push_back(&r);
  } else if (const auto* r = detail::find_registration(options.strategy)) {
    which.push_back(r);
  } else {
    return detail::make_strategy(options.strategy).error();
  }
  const std::string dir = detail::storage_dir(options);
  std::vector<std::string> removed;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (file.rfind(options.name, 0) != 0) continue;
    const std::string rest = file.substr(options.name.size());
    bool match = false;
    for (const auto* r : which)
      for (const auto& pattern : r->storage) match = match || ::fnmatch(pattern.c_str(), rest.c_str(), 0) == 0;
    if (!match) continue;
    std::error_code rm;
    std::filesystem::remove(it->path(), rm);
    if (rm) return make_error(Errc::io_error, "cannot remove " + it->path().string() + ": " + rm.message());
    removed.push_back(it->path().string());
  }
  if (ec && ec != std::errc::no_such_file_or_directory)
    return make_error(Errc::io_error, "cannot list " + dir + ": " + ec.message());
  return removed;
}

}  // namespace cairn::persist
