// workflow_bench.hpp — `cairn bench workflow`: the whole solve-adapt workflow
// (apps/workflow) under each coupling, seed 002's end-to-end measurement
// (internal).
//
// Each coupling runs the same workflow --repeats times, interleaved (one run
// of every coupling, then the next round), so that a noisy neighbour slows
// all of them alike. Per run the driver reports its wall time and, along the
// critical path (per step, the slowest part), the time its components spent
// transferring (opening, reading or writing, closing, committing streams) and
// computing; the rest is starting processes and waiting for them. The table
// shows medians and, for total and transfer time, the ratio of file-disk and
// file-tmpfs to each coupling, measured in the same run. Every run's
// checksum must equal the first: the couplings compute the same bits.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "apps/workflow/driver.hpp"
#include "cairn/error.hpp"

namespace cairn::bench {

struct WorkflowBenchOptions {
  std::vector<std::string> couplings = {"file-disk", "file-tmpfs", "mem", "pmem"};
  int repeats = 5;
  int cycles = 8;
  int parts = 2;
  int level_min = 4, level_max = 10;
  int sweeps = 100;
  std::string bin_dir;  // the workflow-* executables
  // Where file-tmpfs puts its files and pmem its pool ("": a fresh directory
  // in /dev/shm). Both go to the same file system, so that a tmpfs mounted
  // with huge pages (huge=within_size) serves both alike.
  std::string tmpfs_dir;
};

struct WorkflowRow {
  std::string coupling;
  std::vector<apps::workflow::Report> runs;
  double total_s = 0, transfer_s = 0, compute_s = 0, launch_s = 0;  // medians
  std::size_t leaves = 0;
  std::uint64_t bytes = 0;  // bytes written by the components in one run
};

struct WorkflowReport {
  std::string machine;
  WorkflowBenchOptions options;
  std::vector<WorkflowRow> rows;
  bool checksums_equal = true;
  std::uint64_t checksum = 0;
};

Result<WorkflowReport> run_workflow_bench(const WorkflowBenchOptions& options, std::ostream* progress);
void print_workflow_report(const WorkflowReport& report, std::ostream& out);
Result<void> write_workflow_json(const WorkflowReport& report, const std::string& path);

}  // namespace cairn::bench
