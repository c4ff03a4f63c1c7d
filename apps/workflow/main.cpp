// main.cpp — `workflow`: seed 002's solve-adapt loop (solve -> size field ->
// adapt -> rebalance -> preprocess) run by its driver under one coupling.
// Components and streams: components.hpp; couplings and steps: driver.hpp.
//
// Sample runs:
//   workflow --coupling pmem                      # separate processes, one pool
//   workflow --coupling mem --json out.json       # one process, same checksum
//   workflow --coupling pmem --kill random --seed 7
//     (a component dies mid-write and is rerun alone; same checksum)
//   workflow --coupling pmem --dir /dev/shm/wf    # kill -9 the driver, then
//   workflow --coupling pmem --dir /dev/shm/wf --resume
// Exit status: 0 verified, 1 failed or not verified, 2 bad options.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "apps/workflow/driver.hpp"

int main(int argc, char** argv) {
  namespace wf = cairn::apps::workflow;
  wf::Config c;
  std::string json;
  bool quiet = false;
  CLI::App cli("workflow: a solve-adapt loop of separate components coupled through cairn streams");
  cli.add_option("--coupling", c.coupling, "file-tmpfs, file-disk (fsync), mem (one process) or pmem")
      ->check(CLI::IsMember({"file-tmpfs", "file-disk", "mem", "pmem"}));
  cli.add_option("--dir", c.dir, "where the files or the pool go (kept); default: a temporary directory");
  cli.add_option("--cycles", c.cycles, "solve-adapt cycles")->check(CLI::Range(1, 10000));
  cli.add_option("--parts", c.params.parts, "solver processes (Morton ranges)")->check(CLI::Range(1, 256));
  cli.add_option("--level-min", c.params.level_min, "coarsest level")->check(CLI::Range(1, 14));
  cli.add_option("--level-max", c.params.level_max, "finest level")->check(CLI::Range(1, 14));
  cli.add_option("--sweeps", c.params.sweeps, "Jacobi sweeps per solve")->check(CLI::NonNegativeNumber);
  cli.add_option("--tol", c.params.tol, "refine above this indicator")->check(CLI::PositiveNumber);
  cli.add_option("--kill", c.kill, "kill this component (or 'random') mid-write once; it is rerun alone");
  cli.add_option("--kill-cycle", c.kill_cycle, "the cycle of the kill (default: chosen by --seed)");
  cli.add_option("--kill-wait", c.kill_wait,
                 "with --kill: create this file at the kill point and wait there to be killed from outside");
  cli.add_option("--seed", c.seed, "chooses the kill's run, part and moment");
  cli.add_flag("--resume", c.resume, "continue after the last step the stored progress records");
  cli.add_option("--pool-size", c.pool_size, "pmem: pool bytes (default: from --level-max)");
  cli.add_option("--bin-dir", c.bin_dir, "directory of the workflow-* executables (default: this one's)");
  cli.add_option("--json", json, "write the report as JSON");
  cli.add_flag("--quiet", quiet, "only the result line");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  c.log = &std::cerr;
  auto r = wf::run_workflow(c);
  if (!r.ok()) {
    std::fprintf(stderr, "workflow: error: %s\n", r.error().message.c_str());
    return r.error().code == cairn::Errc::invalid_argument ? 2 : 1;
  }
  const wf::Report& rep = r.value();
  if (!quiet) wf::print_report(rep, std::cout);
  if (!json.empty())
    if (auto w = wf::write_report_json(rep, json); !w.ok()) {
      std::fprintf(stderr, "workflow: error: %s\n", w.error().message.c_str());
      return 1;
    }
  std::printf("workflow %s: %d cycles, %d parts, %zu leaves, integral %.9g, max %.9g, checksum %016llx%s: %s\n",
              c.coupling.c_str(), c.cycles, c.params.parts, rep.leaves, rep.integral, rep.max_value,
              static_cast<unsigned long long>(rep.checksum), rep.reruns > 0 ? " (after a rerun)" : "",
              rep.mesh_error.empty() ? "VERIFIED" : ("NOT VERIFIED: " + rep.mesh_error).c_str());
  return rep.mesh_error.empty() ? 0 : 1;
}
