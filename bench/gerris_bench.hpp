// gerris_bench.hpp — `cairn bench gerris`: the CairnPersist Gerris module (integrations/gerris) against
// Gerris's own OutputSimulation snapshots, issue 15 part 3 (internal).
//
// Per case (a .gfs generated from integrations/gerris/cases at a chosen finest level and step count) the
// bench runs Debian's gerris2D (gerris3D for the 3D cases) as a child process (posix_spawnp, no shell) in five
// variants, interleaved over --repeats rounds so that a noisy neighbour slows all of them alike:
//   none             no persistence
//   snapshot-text    OutputSimulation { istep = 10 } to tmpfs, text    (the seed's in-core baseline)
//   snapshot-binary  OutputSimulation { istep = 10 } to tmpfs, binary = 1
//   cairn-stream     CairnPersist { istep = 1 } mode = stream
//   cairn-octree     CairnPersist { istep = 1 } mode = octree
// and reports the median wall time, the overhead against `none` measured in the same rounds, bytes per
// persist (CAIRN_GERRIS_STATS; the snapshot files' sizes), cells written per persist and the peak
// resident memory of each child (wait4's rusage: per process, where RUSAGE_CHILDREN would be the
// maximum over every child waited for so far).
//
// Restart: the same case ending at step K (--kill-at, not a multiple of 10). CairnPersist is SIGKILLed at
// step K (CAIRN_GERRIS_KILL_AT) and resumed: its in-process restore time and the wall time of the
// resuming process until it has re-reached step K (one step recomputed). The snapshot variants run to
// step K, then gerris2D restarts from the last snapshot (step K rounded down to 10) and recomputes the
// lost steps: that process's wall time is their restart time. Every variant's restart time is set against
// the snapshot restarts measured in the same rounds. Every restarting process first pays the start-up
// of a gerris2D process (loading, MPI_Init): the row `startup` measures it (an empty simulation), and the
// table also shows each restart minus it. Round r starts with variant r, so that none always runs first.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::bench {

struct GerrisCaseSize {
  std::string name;  // shear2D, solid2D, shear3D or solid3D
  int level = 0;     // finest level
  int steps = 0;     // Time { iend }
};

struct GerrisBenchOptions {
  std::vector<GerrisCaseSize> cases = {{"shear2D", 7, 100}, {"solid2D", 6, 100}};
  int repeats = 3;
  int kill_at = 25;
  int snapshot_every = 10;
  std::string gerris = "gerris2D";                  // found on PATH unless a path
  std::string gerris3d = "gerris3D";                // the 3D cases'
  std::string module;                               // libcairn2D.so (or "cairn": Gerris's module dir)
  std::string module3d;                             // libcairn3D.so (or "cairn")
  std::string dir = "/dev/shm/cairn-bench-gerris";  // pools and snapshots, removed after each run
};

// "shear2D=7:100,solid2D=6:100" → cases; names must be known (gerris_case_names()).
Result<std::vector<GerrisCaseSize>> parse_gerris_sizes(const std::string& text);
std::vector<std::string> gerris_case_names();

// One variant of one case: the run-time measurement (kind "run") or the restart (kind "restart").
struct GerrisRow {
  std::string case_name, kind, variant;
  std::vector<double> wall_s, maxrss_kb, restore_s;  // one per round
  double wall_median = 0, maxrss_median = 0, restore_median = 0;
  double overhead_pct = 0;       // run: against none
  double persists = 0;           // run: persists or snapshots per run
  double bytes_per_persist = 0;  // run
  double cells_per_persist = 0;  // run, cairn: cells written per persist (octree: the changed ones)
  double ms_per_persist = 0;     // run, cairn: the module's own timing
  // run, cairn: persists x ms per persist against none's wall time: the
  // share of the run spent persisting, timed inside the process (steadier
  // than the wall-time difference on a noisy machine; misses what
  // persisting costs outside the event, such as caches it evicts).
  double persist_pct = 0;
  int verified_runs = 0;  // runs that ended as expected (exit 0; the crash run by SIGKILL)
  std::string error;      // the first failure, if any
};

struct GerrisReport {
  std::string machine;
  GerrisBenchOptions options;
  std::vector<GerrisRow> rows;
  bool failed = false;
};

Result<GerrisReport> run_gerris_bench(const GerrisBenchOptions& options, std::ostream* progress);
void print_gerris_report(const GerrisReport& report, std::ostream& out);
Result<void> write_gerris_json(const GerrisReport& report, const std::string& path);

}  // namespace cairn::bench
