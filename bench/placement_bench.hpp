// placement_bench.hpp — seed 003's Jacobi and sharpening runs on this machine, behind `cairn bench placement`
// (internal).
//
// Seed 003 (EPCC, Optane DCPMM) timed the 2D stream-function Jacobi kernel
// with its arrays in DRAM and in B-APM, without and with persistence (7.95 s
// DRAM; 9.64 s B-APM; 10.67 s B-APM persisting), and the image-sharpening
// stencil with its read-only input in DRAM or in B-APM (56.2 s vs 54.0 s).
// Here the same two kernels (the jacobi app's stream and sharpen kernels) run
// in-process through apps::run_simulation:
//   native             every array in DRAM, no persistence (the baseline)
//   pool, no persist   in-place with Options::flush = false: the dual arrays
//                      live in the pool, nothing is written back
//   in-place           the same arrays, written back every iteration (helper thread)
//   nt-copy            DRAM arrays copied into the pool every iteration
//   shadow             a copy-on-write view of the pool: reads (the sharpen
//                      kernel's read-only input) come from the pool's pages
//   undo-log           libpmemobj transactions on arrays that live in the pool
// persisting at every iteration, under each device profile (default dram and
// optane-dcpmm). Time per iteration and the ratio to native are reported.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench/app_runner.hpp"
#include "cairn/error.hpp"

namespace cairn::bench {

struct PlacementOptions {
  std::vector<std::string> variants;                             // empty: all; native is always measured
  std::vector<std::string> profiles = {"dram", "optane-dcpmm"};  // device profiles of the pools
  unsigned threads = 0;                                          // 0: all hardware threads
  std::string sizes;  // "jacobi=SIZE[:ITERATIONS],jacobi-sharpen=SIZE[:BANDS]" overrides
  int repeats = 3;
  std::string dir;
};

const std::vector<Variant>& placement_variants();

struct PlacementReport {
  std::string cpu_model, date, dir;
  unsigned nproc = 0, threads = 0;
  int repeats = 0;
  double load_before = -1, load_after = -1, elapsed_s = 0;
  std::vector<std::string> apps, variants, profiles;
  std::vector<MatrixRow> rows;
  int failed_runs = 0;
};

Result<PlacementReport> run_placement_bench(const PlacementOptions& options, std::ostream* log);
void print_placement_report(const PlacementReport& report, std::ostream& out);
Result<void> write_placement_json(const PlacementReport& report, const std::string& path);

}  // namespace cairn::bench
