// stream_bench.hpp — STREAM copy/scale/add/triad on DRAM and on pool memory (internal), behind `cairn bench stream`.
//
// Seed 003 ran STREAM (McCalpin's four kernels, OpenMP) with its arrays in
// DRAM and in Optane DCPMM mapped with pmem_map_file, and persisted the
// written array after each kernel (pmem_persist). This is cairn's own
// implementation of the same measurement:
//   kernels      copy c = a; scale b = s c; add c = a + b; triad a = b + s c
//                on double arrays of N elements, each at least 4x the
//                last-level cache (STREAM's rule), split statically over the
//                threads (every thread always works on the same part).
//                Bytes counted as STREAM does: 2 x 8N for copy and scale,
//                3 x 8N for add and triad.
//   memory       DRAM (anonymous pages) — the baseline — and a cairn pool in
//                the default pool directory with each device profile.
//   persistence  none (ordinary stores into the pool); flush: ordinary stores,
//                then every thread writes back the lines of its part of the
//                written array and fences (pool.flush + drain, i.e.
//                pmem_persist); nt: the kernel computes 16 KiB tiles in cache
//                and stores them with the device's non-temporal copy
//                (pool.memcpy_nodrain), then fences.
// Every kernel is timed separately; after one untimed pass, `repeats` passes
// are timed and the median (and the best, STREAM's figure) is reported, with
// the ratio to DRAM. The arrays are checked against STREAM's expected values
// after every configuration.
//
// The emulated device charges flushes and non-temporal stores (its write
// bandwidth and latency), not ordinary loads and stores: "pool, no
// persistence" runs at DRAM speed under every profile here (tmpfs pages).
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::bench {

struct StreamBenchOptions {
  std::size_t array_bytes = 0;  // per array; 0: 4x the last-level cache (at least 64 MiB)
  unsigned threads = 0;         // 0: all hardware threads
  int repeats = 3;
  std::vector<std::string> profiles = {"dram", "optane-dcpmm", "quartz-1/8"};
  std::string dir;  // pool directory; "" = pool::default_pool_dir()
};

struct StreamRow {
  std::string memory;       // "DRAM" or "pool"
  std::string profile;      // "" for DRAM
  std::string persistence;  // "none", "flush", "nt"
  // Per kernel (copy, scale, add, triad): GB/s (1e9 bytes/s).
  double median_gbps[4] = {0, 0, 0, 0};
  double best_gbps[4] = {0, 0, 0, 0};
  double vs_dram[4] = {0, 0, 0, 0};  // median / DRAM's median
  std::vector<double> samples_gbps[4];
  bool valid = false;  // the arrays held STREAM's expected values
  std::string error;   // the pool could not be created, or the check failed
};

struct StreamReport {
  std::string cpu_model, date, dir;
  unsigned nproc = 0, threads = 0;
  int repeats = 0;
  std::size_t llc_bytes = 0, array_bytes = 0, elements = 0;
  double load_before = -1, load_after = -1, elapsed_s = 0;
  std::vector<StreamRow> rows;  // DRAM first
  std::vector<std::string> profile_notes;
  int failed = 0;      // rows with an error
  bool tmpfs = false;  // the pool directory is on tmpfs (DRAM pages)
};

// The largest cache the kernel reports for cpu0 (bytes), 0 if unknown.
std::size_t last_level_cache_bytes();

Result<StreamReport> run_stream_bench(const StreamBenchOptions& options, std::ostream* log = nullptr);
void print_stream_report(const StreamReport& report, std::ostream& out);
Result<void> write_stream_json(const StreamReport& report, const std::string& path);

}  // namespace cairn::bench
