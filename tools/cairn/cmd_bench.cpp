// cmd_bench.cpp — `cairn bench NAME`: the experiments of src/experiments/, one subcommand each.
//
// An experiment lives in src/experiments/NAME_bench.{hpp,cpp} (run, print,
// write JSON) and is exposed here by one add_NAME() that registers its
// subcommand under `bench`; add the call to add_bench_commands() at the end.
// Conventions shared by all of them: progress on stderr (--quiet silences
// it), the table on stdout, --json FILE for the same data; exit status 0
// measured (whatever the numbers), 1 measured but some part failed with an
// error, 2 bad option or nothing could be measured.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "experiments/bench_util.hpp"
#include "experiments/strategies_bench.hpp"

namespace cairn::tool {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitPartFailed = 1;
constexpr int kExitCannot = 2;

// Reports `e` for command `cmd` and sets the exit status for "cannot run".
void fail(const std::string& cmd, const Error& e) {
  std::cerr << "cairn bench " << cmd << ": " << e.message << "\n";
  exit_code() = kExitCannot;
}

void add_strategies(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("strategies",
                                   "Every persistence strategy side by side on one state: commit, partial commit, "
                                   "restore and rollback time, NVM bytes, bandwidth against non-temporal copy");
  cmd->footer(
      "For each device profile and strategy, one state of --size bytes (a DualRegion for in-place, a region\n"
      "otherwise) is committed --repeats times after writing all of it, rolled back --repeats times, restored\n"
      "--repeats times in a fresh Context (as after a restart), and committed --repeats times after writing\n"
      "--partial percent of its pages with incremental commit on. Medians are reported. Per profile, the\n"
      "non-temporal copy bandwidth into a pool of the same size is measured in the same run; copy-based\n"
      "commits are held to 80 % of it, shadow and in-place restores to 1 ms. Storage goes to --dir (default\n"
      "$CAIRN_POOL_DIR, else /dev/shm/cairn) and is removed afterwards; a strategy that does not fit there\n"
      "or in memory is listed as skipped, with the reason.\n"
      "Exit status: 0 measured, 1 a strategy failed with an error (its row says which), 2 bad option.");
  struct Args {
    std::string size = "1G", strategies, profiles = "dram,optane-dcpmm", dir, json;
    unsigned threads = 0, partial = 10;
    int repeats = 5;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--size,-s", args->size, "State size in bytes, with K, M or G suffix (default 1G)");
  cmd->add_option("--threads,-t", args->threads, "Threads for copies and flushes (default: all hardware threads)");
  cmd->add_option("--repeats,-r", args->repeats, "Repetitions; medians are reported (default 5)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--strategies", args->strategies, "Comma-separated strategies (default: all registered)");
  cmd->add_option("--profiles", args->profiles, "Comma-separated device profiles (default dram,optane-dcpmm)");
  cmd->add_option("--partial", args->partial, "Percent of pages a partial update writes (default 10)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--dir", args->dir, "Directory for the pools and checkpoint files (tmpfs or DAX)");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    auto size = experiments::parse_size(args->size);
    if (!size.ok()) return fail("strategies", size.error());
    experiments::StrategiesBenchOptions o;
    o.size = size.value();
    o.threads = args->threads;
    o.repeats = args->repeats;
    o.partial_pct = args->partial;
    o.dir = args->dir;
    o.strategies = experiments::split_list(args->strategies);
    o.profiles = experiments::split_list(args->profiles);
    auto report = experiments::run_strategies_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("strategies", report.error());
    experiments::print_strategies_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = experiments::write_strategies_json(report.value(), args->json); !w.ok())
        return fail("strategies", w.error());
    exit_code() = kExitOk;
    for (const auto& row : report.value().rows)
      if (row.status == "failed") exit_code() = kExitPartFailed;
  });
}

}  // namespace

void add_bench_commands(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Experiments: run one, print its table, optionally write JSON");
  bench->require_subcommand(1);
  add_strategies(*bench);
}

}  // namespace cairn::tool
