// driver.hpp — runs the solve-adapt workflow (components.hpp) for a number of
// cycles under one coupling, and reports its result and where the time went.
//
// Couplings (one option; the components do not know which):
//   file-tmpfs  separate processes, streams are files on tmpfs
//   file-disk   separate processes, files on a disk file system, each
//               fsynced when its writer closes ($CAIRN_STREAM_SYNC=1)
//   mem         one process: the components are library calls, streams are
//               mem: buffers (the parts of a step run on threads)
//   pmem        separate processes, streams in one pmem: pool; a component
//               that dies leaves every committed stream intact, so the driver
//               reruns that component alone, and a driver that dies resumes
//               (--resume) at the step it had not finished
//
// The steps: rebalance --uniform and preprocess make cycle 0's input; each
// cycle then runs solve (one process per part), and all but the last
// sizefield (per part), adapt, rebalance and preprocess. After each step the
// driver commits its progress to the stream `workflow.progress`. The result is
// the last cycle's solution: its checksum (FNV-1a of the solution records of
// every part, in part order) is the same under every coupling.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "apps/workflow/components.hpp"
#include "cairn/error.hpp"

namespace cairn::apps::workflow {

inline constexpr std::string_view kCouplings[] = {"file-tmpfs", "file-disk", "mem", "pmem"};

struct Config {
  std::string coupling = "pmem";
  // Where the files or the pool go. "": a fresh directory (/dev/shm, or
  // /var/tmp for file-disk) removed at the end; else kept, created if missing.
  std::string dir;
  int cycles = 6;
  Params params;  // parts, levels, sweeps, tol (cycle, part: set per step)
  // The component executables (workflow-solve, ...); "": the directory of
  // this executable.
  std::string bin_dir;
  // Fault injection (process couplings): kill this component ("random": one
  // chosen by the seed) at a random point of its output, at cycle
  // kill_cycle (-1: chosen by the seed), in one part (chosen by the seed).
  std::string kill;
  int kill_cycle = -1;
  // With kill: the component does not kill itself; it creates this file at
  // the kill point and waits there to be killed from outside (by a test that
  // kills the whole workflow when the file appears).
  std::string kill_wait;
  std::uint64_t seed = 1;
  bool resume = false;          // continue after the last committed step
  std::uint64_t pool_size = 0;  // pmem: 0 = sized from level_max
  std::ostream* log = nullptr;  // progress lines (kills, reruns)
};

struct ComponentTotals {
  int runs = 0;
  double read_s = 0, compute_s = 0, write_s = 0;
  std::uint64_t bytes_in = 0, bytes_out = 0;
};

struct Report {
  std::string coupling;
  std::uint64_t checksum = 0;
  std::size_t leaves = 0;
  double integral = 0, max_value = 0;  // of the last solution: sum u h^2, max u
  std::string mesh_error;              // "" if the final mesh tiles the square, 2:1 balanced
  int steps_run = 0, first_step = 0;   // first_step > 0 after --resume
  double setup_s = 0;                  // before the steps: creating the pool (pmem:)
  double total_s = 0;                  // wall time of the steps run
  // Along the critical path (per step: the slowest part's time).
  double transfer_s = 0;  // reading and writing streams, inside components
  double compute_s = 0;   // computing, inside components
  // total - transfer - compute: starting processes, waiting for them
  double launch_s() const { return total_s - transfer_s - compute_s; }
  std::map<std::string, ComponentTotals> components;
  int reruns = 0;      // components rerun after they were killed
  std::string killed;  // which one was killed ("" if none)
};

Result<Report> run_workflow(const Config& config);

// One line per component and the totals, for humans.
void print_report(const Report& report, std::ostream& out);
Result<void> write_report_json(const Report& report, const std::string& path);

}  // namespace cairn::apps::workflow
