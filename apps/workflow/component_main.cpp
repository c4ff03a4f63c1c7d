// component_main.cpp — one component of the workflow as its own executable
// (workflow-solve, workflow-sizefield, workflow-adapt, workflow-rebalance,
// workflow-preprocess: each main() calls component_main with its name; this
// file is compiled once, into cairn_workflow). It reads
// and writes the streams named in components.hpp through $CAIRN_STREAM_PREFIX
// and prints its times on the last line of stdout for the driver:
//   cairn-workflow-times read=S compute=S write=S in=BYTES out=BYTES
// Exit status: 0 done, 1 failed (the message on stderr), 2 bad options.
//
// Sample run (what the driver does at cycle 0 with two parts):
//   CAIRN_STREAM_PREFIX=pmem:/dev/shm/wf.pool# workflow-rebalance --cycle 0 --uniform 3
//   CAIRN_STREAM_PREFIX=pmem:/dev/shm/wf.pool# workflow-preprocess --cycle 0
//   CAIRN_STREAM_PREFIX=pmem:/dev/shm/wf.pool# workflow-solve --cycle 0 --part 1
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "apps/workflow/components.hpp"

namespace cairn::apps::workflow {

int component_main(std::string_view name, int argc, char** argv) {
  const std::string component(name);
  Params p;
  CLI::App cli("workflow-" + component + ": the " + component + " step of the solve-adapt workflow");
  cli.add_option("--cycle", p.cycle, "cycle of the inputs to read")->check(CLI::NonNegativeNumber);
  cli.add_option("--part", p.part, "part (solve, sizefield)")->check(CLI::NonNegativeNumber);
  cli.add_option("--parts", p.parts, "solver processes")->check(CLI::Range(1, 256));
  cli.add_option("--level-min", p.level_min, "coarsest level")->check(CLI::Range(1, 14));
  cli.add_option("--level-max", p.level_max, "finest level")->check(CLI::Range(1, 14));
  cli.add_option("--sweeps", p.sweeps, "Jacobi sweeps per solve")->check(CLI::NonNegativeNumber);
  cli.add_option("--tol", p.tol, "refine above this indicator, coarsen below a quarter of it")
      ->check(CLI::PositiveNumber);
  cli.add_option("--uniform", p.uniform_level, "rebalance: write the uniform mesh of this level")
      ->check(CLI::Range(1, 14));
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  // Fault injection for the workflow's kill tests: die after this fraction of the output.
  if (const char* k = std::getenv("CAIRN_WORKFLOW_KILL"); k != nullptr && *k != '\0') p.kill_fraction = std::atof(k);
  if (const char* w = std::getenv("CAIRN_WORKFLOW_KILL_WAIT"); w != nullptr) p.kill_wait = w;
  auto t = run_component(component, p);
  if (!t.ok()) {
    std::fprintf(stderr, "workflow-%s: error: %s\n", component.c_str(), t.error().message.c_str());
    return t.error().code == Errc::invalid_argument ? 2 : 1;
  }
  const Times& x = t.value();
  std::printf("cairn-workflow-times read=%.9f compute=%.9f write=%.9f in=%llu out=%llu\n", x.read_s, x.compute_s,
              x.write_s, static_cast<unsigned long long>(x.bytes_in), static_cast<unsigned long long>(x.bytes_out));
  return 0;
}

}  // namespace cairn::apps::workflow
