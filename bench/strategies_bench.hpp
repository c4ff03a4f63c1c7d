// strategies_bench.hpp — every persistence strategy side by side on one state (internal), behind
// `cairn bench strategies` and bench/strategies_bench.
//
// For each device profile (default `dram` and `optane-dcpmm`) and each
// strategy, one state of `size` bytes (one region; a DualRegion for in-place,
// whose point is the two alternating versions) goes through:
//   full commits      R iterations that write the whole state, then commit
//                     (timed: begin() + commit(), the state writes are not),
//                     after two untimed ones (first touch of state and slots);
//   rollbacks         R iterations that write the whole state, then restore()
//                     in the same Context (a process that abandons an
//                     iteration, as seed 001's SIGBUS handler does);
//   restarts          R times: a fresh Context on the same storage, open()
//                     (timed apart), restore() (timed) and a check of sampled
//                     bytes against the last committed version;
//   partial commits   a fresh Context with Options::incremental, then R
//                     iterations that write every Nth 4 KiB page (partial_pct
//                     of the pages) and commit; after two untimed commits, as
//                     incremental tracking needs two intervals. For the
//                     strategies with an incremental commit, the same
//                     iterations first without it (full copies, writes not
//                     tracked): the same run's baseline for both the commit
//                     and the application's writes, which pay the tracking.
// Every figure is the median of R. Alongside, per profile, the baseline the
// copy strategies are held to: non-temporal copy into a pool of the same size
// under the same profile (Pool::memcpy_persist on one thread and
// memcpy_persist_mt on all), with plain memcpy into that pool as reference,
// measured before and after the profile's strategies.
//
// Goals (issue text): shadow and in-place restore in <= 1 ms whatever the
// size; copy-based commits (shadow, dram-cache, nt-copy: the whole state is
// copied into the pool) reach >= 80 % of the best non-temporal copy
// bandwidth; every strategy's commit time against undo-log (libpmemobj).
// A strategy that cannot run (not enough space, an error) gets a row saying
// why, never no row.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::bench {

struct StrategiesBenchOptions {
  std::string dir;                                               // storage; empty: pool::default_pool_dir()
  std::size_t size = std::size_t{1} << 30;                       // bytes of state
  unsigned threads = 0;                                          // Options::threads; 0: all hardware threads
  int repeats = 5;                                               // R; medians are reported
  unsigned partial_pct = 10;                                     // pages written by a partial update, percent
  std::vector<std::string> strategies;                           // empty: every registered strategy
  std::vector<std::string> profiles = {"dram", "optane-dcpmm"};  // device specs
};

// The copy bandwidths of one profile, bytes/s. Measured R times before and R
// times after the profile's strategies (a shared machine has slow phases);
// each figure is the better of the two medians.
struct CopyBaseline {
  std::string profile;
  double memcpy_1 = 0, memcpy_n = 0;             // plain memcpy into the pool (reference, not durable)
  double nt_1 = 0, nt_n = 0;                     // memcpy_persist, memcpy_persist_mt
  double best_nt = 0;                            // max(nt_1, nt_n): what copy-based commits are held to
  double best_nt_before = 0, best_nt_after = 0;  // the same from each measurement alone
  std::string best_nt_what;
};

// Goal verdicts: not applicable to this row, met, not met.
enum class Goal { none, met, missed };

struct StrategyRow {
  std::string profile, strategy;
  std::string status = "ok";  // "ok", "skipped" (not attempted) or "failed" (an error while measuring)
  std::string reason;         // why skipped / failed
  std::string note;           // caveats of this row (e.g. not charged by the emulated device)
  bool copy_based = false;    // held to the 80 % bandwidth goal
  bool restore_goal = false;  // held to the 1 ms restore goal
  bool incremental = false;   // has an incremental commit: held to "never slower than full"
  // Medians, seconds.
  double commit_s = 0, partial_commit_s = 0, restore_s = 0, rollback_s = 0, open_s = 0;
  std::vector<double> commit_samples, partial_samples, restore_samples, rollback_samples, open_samples;
  // Partial iterations (incremental strategies): commit without incremental,
  // and the application's partial writes with and without tracking.
  double partial_full_commit_s = 0, partial_write_s = 0, partial_write_untracked_s = 0;
  std::vector<double> partial_full_samples, partial_write_samples, partial_write_untracked_samples;
  // Per commit, bytes (averages over the measured commits).
  double nvm_per_commit = 0, nvm_per_partial = 0, saved_per_partial = 0;
  double syncs_per_commit = 0, synced_per_commit = 0;  // write-back system calls and their bytes (page cache)
  double commit_bw = 0;                                // state bytes / commit_s
  double pct_of_nt = 0;        // 100 * commit_bw / best non-temporal copy bandwidth of the profile
  double vs_undo_log = 0;      // undo-log commit_s / commit_s (how many times faster); 0: no undo-log row
  double vs_undo_partial = 0;  // the same for partial commits
  bool verified = false;       // every restart restore gave back the committed bytes
  Goal goal_restore = Goal::none, goal_bw = Goal::none, goal_incremental = Goal::none;
};

struct StrategiesReport {
  std::string cpu_model, date, pool_dir;
  unsigned nproc = 0, threads = 0;
  int repeats = 0;
  unsigned partial_pct = 0, partial_stride = 0;
  std::size_t size = 0;
  double load_before = -1, load_after = -1;
  double elapsed_s = 0;
  std::vector<CopyBaseline> baselines;
  std::vector<StrategyRow> rows;
  const CopyBaseline* baseline(const std::string& profile) const;
};

// Runs the benchmark; progress lines go to `log` if not null. Errors: bad
// options (unknown strategy or profile, zero size) and an unusable directory.
// A strategy that fails is a row with status "failed", not an error.
Result<StrategiesReport> run_strategies_bench(const StrategiesBenchOptions& options, std::ostream* log = nullptr);

// The table as Markdown, with the baselines, goal verdicts and notes.
void print_strategies_report(const StrategiesReport& report, std::ostream& out);

// The same data as JSON (one object per row, one row per line).
Result<void> write_strategies_json(const StrategiesReport& report, const std::string& path);

}  // namespace cairn::bench
