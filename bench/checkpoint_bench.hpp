// checkpoint_bench.hpp — seed 001's Fluidanimate experiments (§4.1-§4.4) on cairn's sph app, behind
// `cairn bench checkpoint` (internal).
//
// Four parts, measured in one run, each the median of --repeats runs
// (repetitions interleaved across the variants of a part, so a slow phase of
// a shared machine hits them alike). Every run is an in-process
// apps::run_simulation of a fresh sph::SphApp persisting at every iteration,
// with its storage in a scratch directory under /dev/shm.
//
//   table4     seed 001 Table 4. Per strategy (undo-log, shadow, file,
//              dram-cache, nt-copy, in-place): checkpoint time per commit
//              (commit seconds / commits; for the list layout this includes
//              walking the lists into the field), restore time (--resume
//              runs, 3 per commit run, of a fresh SphApp and Context in the
//              storage of a run that committed every iteration: the median
//              Report::restore_seconds, i.e. Context::restore() plus the
//              app's after_restore(); attaching the storage is reported
//              apart), and computation time per iteration, against the
//              native (baseline) computation time per iteration. Goal
//              (issue 5): restore from in-place and from shadow >= 100x
//              faster than from file.
//   layouts    Figs. 8-9: the list, array and blocked layouts with the file
//              strategy (the seed's filesystem API) and with nt-copy: save and
//              restore time per checkpoint, bytes saved, effective bandwidth,
//              and the ratios between the layouts.
//   threads    Fig. 10: throughput in particle updates per second
//              (particles x iterations / loop time, loop = compute + commit)
//              at 1, 2, 4 and 8 threads for native and each strategy; thread
//              counts above the machine's hardware threads are marked
//              oversubscribed. In the JSON, "fig10" is an object in the shape
//              `bench/plot.py threads` reads (title, unit, rows of threads,
//              variant, throughput, oversubscribed).
//   heartbeat  §4.4: T_timeout = T_hm + T_i + T_r + T_w (eq. 1) with T_hm = 0,
//              T_i = T_w = the baseline iteration time, T_r = T_i / 5; per
//              strategy whether T_checkpoint + T_restart + T_compute <
//              T_timeout (eq. 2), and the smallest resiliency interval r in
//              1..100 with T_checkpoint + T_restart + r T_compute <
//              r T_timeout (eq. 3: the timeout scales with r, and a restart
//              recomputes up to r iterations). Uses the table4 measurements.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace cairn::bench {

struct CheckpointOptions {
  std::string size = "simsmall";                         // sph --size
  std::string layout = "blocked";                        // Table 4's layout (list, array, blocked)
  unsigned threads = 2;                                  // Table 4's and the layouts' app threads
  std::vector<std::string> strategies;                   // empty: all six of Table 4
  int repeats = 3;                                       // runs per cell; medians are reported
  std::optional<std::uint64_t> iterations;               // frames per run; default kCheckpointIterations
  std::string profile;                                   // device profile; "" (or real, none) = the real device
  std::vector<std::string> parts;                        // empty: table4, layouts, threads, heartbeat
  std::vector<unsigned> scaling_threads = {1, 2, 4, 8};  // Fig. 10
  std::string dir;                                       // scratch base; "" = /dev/shm
};

// Frames per run by default: 20 frames of simsmall at 2 threads are ~2 s, so
// the whole experiment (about 150 runs) stays under 10 minutes on a loaded
// 2-core machine.
inline constexpr std::uint64_t kCheckpointIterations = 20;

// The strategies of Table 4 in row order.
const std::vector<std::string>& checkpoint_strategies();

// One variant measured with a commit run and (strategies only) a restore run.
struct CheckpointRow {
  std::string layout, variant;  // variant "native" or a strategy
  unsigned threads = 0;
  std::uint64_t iterations = 0, commits = 0, state_bytes = 0;
  double checkpoint_s = 0;  // per commit (median)
  double restore_s = 0;     // restore_seconds of a resume run (median)
  double open_s = 0;        // attaching the storage in a resume run (median)
  double compute_s = 0;     // compute seconds per iteration (median)
  double loop_s = 0;        // (compute + commit) / iterations (median)
  double nvm_bytes_per_commit = 0;
  // Every good repetition behind the checkpoint and restore medians, in the order they ran.
  std::vector<double> checkpoint_samples_s, restore_samples_s;
  std::string describe;
  int runs = 0, good_runs = 0;  // good: ran, verified, checksums equal (and the resumed state equal)
  std::vector<std::string> failures;
};

struct CheckpointScaling {
  unsigned threads = 0;
  std::string variant;
  double throughput = 0;  // particle updates per second (median of the runs)
  double loop_s = 0;      // per iteration
  bool oversubscribed = false;
  int runs = 0, good_runs = 0;
  std::vector<std::string> failures;
};

struct CheckpointHeartbeat {
  std::string variant;
  double t_checkpoint = 0, t_restart = 0, t_compute = 0, sum = 0;
  bool fits = false;
  int interval = 0;  // smallest r in 1..100 that fits eq. 3; 0: none
};

struct CheckpointReport {
  std::string cpu_model, date, dir, size, layout, profile;
  unsigned nproc = 0, threads = 0;
  int repeats = 0;
  std::uint64_t iterations = 0, particles = 0;
  double load_before = -1, load_after = -1, elapsed_s = 0;
  std::vector<std::string> parts, strategies;

  // table4: native first, then the strategies.
  std::vector<CheckpointRow> table4;
  double baseline_s = 0;  // native compute per iteration (T_i)
  struct Goal {
    std::string variant;  // in-place, shadow
    double ratio = 0;     // file restore / variant restore
    double ratio_with_open = 0;
    bool measured = false, met = false;
  };
  std::vector<Goal> goals;

  // layouts: list, array, blocked x file, nt-copy.
  std::vector<CheckpointRow> layouts;

  std::vector<CheckpointScaling> scaling;

  double t_timeout = 0;
  std::vector<CheckpointHeartbeat> heartbeat;

  int failed_runs = 0;
};

Result<CheckpointReport> run_checkpoint_bench(const CheckpointOptions& options, std::ostream* log);
void print_checkpoint_report(const CheckpointReport& report, std::ostream& out);
Result<void> write_checkpoint_json(const CheckpointReport& report, const std::string& path);

// Registers `checkpoint` under `bench` (cmd_bench.cpp's conventions: progress on
// stderr unless --quiet, the table on stdout, --json FILE; exit status 0
// measured, 1 some run failed, 2 bad option or nothing measured).
void add_checkpoint_command(CLI::App& bench);

}  // namespace cairn::bench
