// amr_bench.hpp — `cairn bench amr`: seed 000's experiments (§5, Figs. 3, 10
// and 11, and the restart of §5.6) on the adaptive interface app (apps/amr),
// scaled to one machine (internal).
//
//   versions   Fig. 3: after each of the first --steps persists, the overlap
//              of V(i-1) and V(i) (shared bytes / bytes of V(i)), the memory
//              of both versions per 1000 octants, and its factor against one
//              copy.
//   c0         Fig. 10: run time of --steps steps against the DRAM budget of C0
//              (1/8, 1/4, 1/2 and all of the tree's bytes) under an emulated
//              NVM profile, against in-core (DRAM, snapshot every 10 steps)
//              and out-of-core (LMDB) in the same run.
//   transform  Fig. 11: the layout transformation on and off at several finest
//              levels, C0 at 1/8 of the tree: run time and NVM writes.
//   restart    §5.6: a run SIGKILLed at the start of step --crash-at, then the
//              time until the restarted run is back at that step: restore for
//              the PM-octree and LMDB, restore plus recomputation for in-core.
// Runs are interleaved over --repeats rounds; medians are reported with
// ratios against the baseline measured in the same run. Every run of one
// size must end with the same checksum.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "apps/amr/amr.hpp"
#include "cairn/error.hpp"

namespace cairn::bench {

struct AmrBenchOptions {
  std::vector<std::string> experiments = {"versions", "c0", "transform", "restart"};
  std::string profile = "pcm-2017";  // the emulated NVM of c0 and transform
  int size = 6;                      // finest level (versions, c0, restart)
  int level_min = 0;                 // coarsest level (0: size - 2, at least 2)
  std::vector<int> sizes = {4, 5, 6, 7};
  std::uint64_t steps = 150;    // steps per run (versions, c0, transform)
  std::uint64_t crash_at = 25;  // restart
  int repeats = 3;
  std::string dir = "/dev/shm";
};

struct AmrRun {
  std::string label;  // "in-core", "lmdb", "pm-octree 1/8", ...
  int size = 0;
  std::vector<double> seconds;  // per repeat
  double median_s = 0;
  std::uint64_t nvm_store_bytes = 0, leaves = 0, checksum = 0;
};

struct AmrBenchReport {
  std::string machine;
  AmrBenchOptions options;
  std::vector<apps::amr::VersionSample> versions;
  std::uint64_t tree_bytes = 0;  // V(i) at its largest over the versions run (the c0 budgets' base)
  std::vector<AmrRun> c0, transform, restart;
  bool checksums_equal = true;
};

Result<AmrBenchReport> run_amr_bench(const AmrBenchOptions& options, std::ostream* progress);
void print_amr_report(const AmrBenchReport& report, std::ostream& out);
Result<void> write_amr_json(const AmrBenchReport& report, const std::string& path);

}  // namespace cairn::bench
