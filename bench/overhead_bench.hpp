// overhead_bench.hpp — seed 004 Fig. 12 on this machine, behind `cairn bench overhead` (internal).
//
// The seed's figure: the run time of NPB benchmarks persisting their target
// arrays (Table 2) at EVERY iteration, normalised to the native run, for
//   native                      no persistence (the baseline)
//   checkpoint, nt-copy         the seed's "preliminary design 2": a copy of
//                               the state with non-temporal stores (nt-copy)
//   in-place, no flushing       two versions, nothing written back
//                               (Options::flush = false: measurement only)
//   in-place, flushing          written back at commit on the compute threads
//                               (Options::async_flush = false)
//   in-place, helper thread     written back by the helper thread as soon as a
//                               step is done with each array (the default)
// plus, for the goal, libpmemobj undo-log transactions (undo-log) on
// the same app and size. Every run is an in-process apps::run_simulation with
// a fresh pool in a scratch directory under /dev/shm; its time per iteration
// is (compute + commit seconds) / iterations, i.e. the loop without setup.
//
// Goals (issues 5, 11): in-place (default options) overhead <= 2 % median and
// <= 5 % max across the apps; undo-log overhead / in-place overhead >= 10 per
// app where in-place's overhead is above the native runs' own spread.
// Both are evaluated per device profile and thread count.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench/app_runner.hpp"
#include "cairn/error.hpp"

namespace cairn::bench {

struct OverheadOptions {
  std::vector<std::string> apps;                               // empty: npb-cg, npb-mg, jacobi (and sph if built)
  std::vector<std::string> variants;                           // empty: all; native is always measured
  std::vector<std::string> profiles = {"dram", "quartz-1/8"};  // device profiles of the pools
  std::vector<unsigned> threads = {1};                         // app threads (the helper is extra)
  std::string npb_class;                                       // overrides the class of npb-cg and npb-mg
  std::string sizes;                                           // "APP=SIZE[:ITERATIONS],..." overrides
  int repeats = 3;
  std::string dir;  // scratch base; "" = /dev/shm
};

// The variants of the figure, in column order (native first).
const std::vector<Variant>& overhead_variants();

struct OverheadGoals {
  std::string profile;
  unsigned threads = 0;
  bool complete = false;  // every app has a native and an in-place median
  double in_place_median_pct = 0, in_place_max_pct = 0;
  bool median_met = false, max_met = false;
  struct Ratio {
    std::string app;
    double in_place_pct = 0, undo_pct = 0, ratio = 0;
    // The native runs' own spread, 100 * (max - min) / median of their
    // per-iteration times: an in-place overhead at or below it is noise.
    double noise_pct = 0;
    bool measured = false, met = false;
    bool within_noise = false;  // in-place <= noise_pct: the ratio goal does not apply
  };
  std::vector<Ratio> ratios;
};

struct OverheadReport {
  std::string cpu_model, date, dir;
  unsigned nproc = 0;
  int repeats = 0;
  double load_before = -1, load_after = -1, elapsed_s = 0;
  std::vector<std::string> apps, variants, profiles;
  std::vector<unsigned> threads;
  std::vector<MatrixRow> rows;
  std::vector<OverheadGoals> goals;
  int failed_runs = 0;
};

Result<OverheadReport> run_overhead_bench(const OverheadOptions& options, std::ostream* log);
void print_overhead_report(const OverheadReport& report, std::ostream& out);
Result<void> write_overhead_json(const OverheadReport& report, const std::string& path);

}  // namespace cairn::bench
