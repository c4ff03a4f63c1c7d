// device_bench.hpp — the device benchmark behind `cairn device bench` and bench/device_bench (internal).
//
// Two tables, both measured in one run so the ratios compare like with like:
//  1. primitives of the real device on a pool (tmpfs by default): memcpy into
//     the pool as the baseline, non-temporal copy + drain, persist, flush
//     latency per line, drain cost, single- and multi-threaded; ratios to
//     memcpy with the same thread count, the best copy bandwidth seen and
//     whether the multi-threaded non-temporal copy reaches 80 % of it;
//  2. emulation fidelity: for each profile, the extra latency per flushed
//     line, per drain and per random read line, and the write and read
//     bandwidth the emulated device achieves, against what the profile asks.
// Every figure is the median of `reps` repetitions.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::bench {

struct DeviceBenchOptions {
  std::string dir;                    // where the scratch pools go; empty: pool::default_pool_dir()
  std::size_t size = 64u << 20;       // bytes per copy / persist buffer
  unsigned threads = 0;               // threads of the multi-threaded rows; 0: all hardware threads
  int reps = 5;                       // repetitions; the median is reported
  std::vector<std::string> profiles;  // fidelity rows; empty: every named profile plus a numeric one
  bool primitives = true;             // run table 1
  bool fidelity = true;               // run table 2
};

struct PrimitiveRow {
  std::string operation;
  unsigned threads = 1;
  double value = 0;  // median
  std::string unit;  // "GB/s", "ns/line", "ns"
  double ratio = 0;  // bandwidth / memcpy bandwidth, or time / time to memcpy the same bytes; 0: none
};

struct FidelityRow {
  std::string profile;
  std::string metric;  // e.g. "flush extra ns/line", "write GB/s, 2 threads"
  double requested = 0;
  double achieved = 0;  // median
  // (achieved - requested) / requested in percent.
  double error_pct() const { return requested != 0 ? 100.0 * (achieved - requested) / requested : 0; }
};

struct DeviceBenchReport {
  std::string cpu_model, date, pool_dir, flush_mode;
  unsigned nproc = 0, threads = 0;
  int reps = 0;
  std::size_t size = 0;
  bool is_pmem = false;
  double dram_copy_bw = 0;  // measured_dram_copy_bandwidth(), bytes/s
  std::vector<PrimitiveRow> primitives;
  double best_copy_bw = 0;  // bytes/s: max over memcpy and nt copy, 1 and N threads
  std::string best_copy_what;
  double nt_mt_bw = 0;  // multi-threaded non-temporal copy, bytes/s
  std::vector<FidelityRow> fidelity;
  // Timed samples; those re-run because the process lacked the CPU (shared
  // machine); those still disturbed after every retry.
  int samples = 0, samples_retried = 0, samples_disturbed = 0;
  // True when every fidelity row is within +-10 %.
  bool fidelity_ok() const;
};

// Runs the benchmark; progress lines go to `log` if not null.
Result<DeviceBenchReport> run_device_bench(const DeviceBenchOptions& options, std::ostream* log = nullptr);

// Prints both tables as Markdown (readable on a terminal, pasteable into RESULTS.md).
void print_device_report(const DeviceBenchReport& report, std::ostream& out);

// Writes the report as JSON.
Result<void> write_device_report_json(const DeviceBenchReport& report, const std::string& path);

}  // namespace cairn::bench
