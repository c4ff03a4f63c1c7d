// dist_bench.hpp — `cairn bench dist`: layer 6 (cairn::dist) measured with real mpirun jobs of
// apps/jacobi-mpi, issue 16 §6 (internal).
//
// Three experiments, each selectable, each with its baseline measured in the same run and interleaved
// with it over --repeats rounds (medians reported):
//   overhead  per rank count and redundancy level, the loop time per iteration of one job with nothing
//             persisted (jacobi-mpi --commit none), with local commits only (each rank commits its own
//             lanes, no agreement: --commit local) and with the collective commit; the collective's
//             cost set against the local one's (goal: at most 5 % added at 4 ranks). A level other than
//             local is passed as --redundancy LEVEL --ranks-per-node K (rank counts with fewer than
//             two such nodes get the row "n/a").
//   recovery  a `cairn launch` job whose rank is SIGKILLed (kind kill) or SIGSTOPped (kind hang) by the
//             bench once every rank has beaten a chosen version: from the fault to the launcher's
//             report that the relaunched job has restored the global version (its output is read as
//             it is printed, each line stamped on arrival), for in-place against the file strategy (a
//             relaunch from file checkpoints, the SCR/FTI-style baseline); for a hang, also the
//             heartbeat's detection latency against the launcher's T_timeout. Ranks are found by the
//             run's unique storage directory in /proc/PID/cmdline, their beats through the
//             $CAIRN_HEARTBEAT_DIR in their environment.
//   timeout   seed 001 Figs. 11-12: per strategy T_checkpoint (commit per iteration), T_restart (the
//             resumed job's storage open and restore) and T_compute (one iteration); T_timeout by
//             Eq. 3 with the seed's terms (T_hm = 0, T_i = one iteration without persistence, T_r =
//             T_i / 5, T_w = T_i) at resiliency intervals 1 and 3, and which strategies satisfy Eq. 2.
//   traffic   what a redundancy level sends per commit and what it costs: dist_worker jobs of
//             --job-ranks ranks (one per simulated node) whose state of --traffic-words 64-bit words
//             per rank changes entirely, in 10 % or in 1 % of its words each version, at levels local
//             (the baseline), partner (only the 64 KiB blocks that changed since that slot's copy) and
//             xor (the whole state, always); bytes sent per rank and commit in the steady state, and
//             the commit time (local commit + copy or parity + agreement) against local's.
//   octree    apps/amr-mpi, the PM-octree partitioned by Morton ranges: per rank count, the loop time
//             per step with nothing persisted (--commit none), with every rank's pm_persistent each step
//             but no agreement (--commit local) and with the collective commit; the same "added" as
//             overhead's; from 2 ranks also the collective commit with partner copies (--redundancy
//             partner, one rank per node). Every run must end with amr-mpi's checksum of its size.
// Every run of one size must end with the same checksum (jacobi-mpi's, whatever the strategy, commit
// mode or failure); a run that does not is reported and not counted.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::bench {

// A jacobi-mpi problem: interior points per side and iterations.
struct DistSize {
  int n = 0;
  std::uint64_t iterations = 0;
};
// "512:300" → {512, 300}; `what` names the option in the error.
Result<DistSize> parse_dist_size(const std::string& text, const std::string& what);

struct DistBenchOptions {
  std::vector<std::string> experiments = {"overhead", "recovery", "timeout", "traffic", "octree"};
  int repeats = 3;
  // overhead
  std::vector<int> ranks = {1, 2, 4, 8};
  std::vector<std::string> levels = {"local"};  // local, partner, xor
  int ranks_per_node = 1;
  std::string strategy = "in-place";
  DistSize size = {512, 300};
  // recovery and timeout: one job of `job_ranks` ranks
  int job_ranks = 4;
  DistSize recovery_size = {256, 3000};
  double hang_timeout = 0.5;  // cairn launch --timeout of the hang runs, seconds
  DistSize timeout_size = {1024, 40};
  std::vector<std::string> strategies = {"in-place", "shadow", "dram-cache", "nt-copy", "file"};
  // traffic
  std::uint64_t traffic_words = 1u << 20;  // 8 MiB per rank
  std::uint64_t traffic_iterations = 40;
  std::string dist_worker;  // the program ("" or missing: the experiment reports it)
  // octree: amr-mpi --size octree_level --steps octree_steps, at each of `ranks`
  int octree_level = 5;
  std::uint64_t octree_steps = 40;
  std::string amr_mpi;  // the program
  // Where things run
  std::string dir;         // scratch base for storage ("" = /dev/shm)
  std::string file_dir;    // recovery: the file baseline's checkpoints ("" = the scratch directory)
  std::string jacobi_mpi;  // the program
  std::string cairn;       // the cairn tool, for `cairn launch`
  std::string mpirun = "mpirun";
};

struct DistOverheadRow {
  int ranks = 0;
  std::string level;
  std::string unavailable;                                     // why the level was not measured ("" if it was)
  std::vector<double> none_s, local_s, collective_s, agree_s;  // per iteration, one per good run
  std::vector<double> local_commit_s, collective_commit_s;     // of which committing (rank 0)
  double none = 0, local = 0, collective = 0, agree = 0;       // medians, seconds
  double local_commit = 0, collective_commit = 0;
  int runs = 0, good_runs = 0;
  std::string error;  // the first failed run
};

struct DistRecoveryRow {
  std::string kind;      // kill | hang
  std::string strategy;  // in-place | file
  std::string storage;   // its directory
  // Per good run: fault → the failure line of attempt 0 (mpirun ended the job); hang: fault → the
  // launcher's "declared dead"; the launcher's relaunch → restored; fault → restored; the resumed
  // ranks' restore (jacobi-mpi's "restart", ms); restored version minus the newest beaten before the
  // fault (negative: versions lost).
  std::vector<double> ended_s, detect_s, relaunch_s, total_s, restore_ms, vs_beaten;
  double ended = 0, detect = 0, relaunch = 0, total = 0, restore = 0, vs_beaten_median = 0;
  std::uint64_t restored_version = 0;  // last good run
  int runs = 0, good_runs = 0;
  std::string error;
};

struct DistTimeoutRow {
  std::string strategy;  // "none": the iteration without persistence (T_i)
  std::vector<double> checkpoint_s, restart_s, compute_s;
  double checkpoint = 0, restart = 0, compute = 0;  // medians, seconds
  double eq2[2] = {0, 0};                           // T_checkpoint + T_restart + k T_compute, k = 1, 3
  bool fits[2] = {false, false};                    // eq2[k] < T_timeout(k)
  int runs = 0, good_runs = 0;
  std::string error;
};

struct DistTrafficRow {
  std::string level;                                               // local | partner | xor
  double changed = 1;                                              // fraction of the words that change per version
  std::vector<double> bytes, payload, commit_s, redundancy_s;      // per commit, steady state; one per good run
  double sent = 0, payload_bytes = 0, commit = 0, redundancy = 0;  // medians (bytes, seconds)
  int runs = 0, good_runs = 0;
  std::string error;
};

struct DistOctreeRow {
  int ranks = 0;
  std::vector<double> none_s, local_s, collective_s;        // loop seconds per step, one per good run
  std::vector<double> local_commit_s, collective_commit_s;  // of which committing (slowest rank)
  double none = 0, local = 0, collective = 0, local_commit = 0, collective_commit = 0;  // medians
  std::vector<double> partner_s, partner_commit_s;  // --redundancy partner (ranks >= 2)
  double partner = 0, partner_commit = 0, partner_units_share = 0;
  std::vector<double> xor_s, xor_commit_s;  // --redundancy xor (ranks >= 2)
  double xor_ = 0, xor_commit = 0;
  int runs = 0, good_runs = 0, partner_runs = 0, xor_runs = 0;
  std::string error;  // the first failed run
};

struct DistReport {
  std::string machine;
  unsigned cores = 0;
  DistBenchOptions options;
  std::vector<DistOverheadRow> overhead;
  std::vector<DistRecoveryRow> recovery;
  std::vector<DistTimeoutRow> timeout;
  std::vector<DistTrafficRow> traffic;
  std::vector<DistOctreeRow> octree;
  double t_i = 0, t_hm = 0, t_r = 0, t_w = 0;  // Eq. 1's terms, seconds
  double t_timeout[2] = {0, 0};                // Eq. 3 at resiliency interval 1 and 3
  bool failed = false;                         // some run failed or ended with another checksum
};

Result<DistReport> run_dist_bench(const DistBenchOptions& options, std::ostream* progress);
void print_dist_report(const DistReport& report, std::ostream& out);
Result<void> write_dist_json(const DistReport& report, const std::string& path);

}  // namespace cairn::bench
