// strategies_bench.cpp — every persistence strategy side by side on one state, per device profile.
//
// Prints one Markdown table (see src/experiments/strategies_bench.hpp for what
// each column measures): commit, partial commit, restore and rollback times,
// NVM bytes per commit, bandwidth against the non-temporal copy bandwidth
// measured in the same run, and the ratio to undo-log (libpmemobj).
//
//   strategies_bench [--size 1G] [--threads N] [--repeats 5] [--strategies a,b] [--profiles x,y]
//                    [--partial 10] [--dir DIR] [--json FILE]
//
// `cairn bench strategies` runs the same code.
#include "experiments/strategies_bench.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "experiments/bench_util.hpp"

int main(int argc, char** argv) {
  namespace ex = cairn::experiments;
  CLI::App app{"cairn strategies benchmark: every persistence strategy on one state, per device profile"};
  ex::StrategiesBenchOptions o;
  std::string size = "1G", strategies, profiles = "dram,optane-dcpmm", json;
  bool quiet = false;
  app.add_option("--size,-s", size, "State size with K, M or G suffix (default 1G)");
  app.add_option("--threads,-t", o.threads, "Threads for copies and flushes (default: hardware threads)");
  app.add_option("--repeats,-r", o.repeats, "Repetitions; medians are reported (default 5)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--strategies", strategies, "Comma-separated strategies (default: all)");
  app.add_option("--profiles", profiles, "Comma-separated device profiles (default dram,optane-dcpmm)");
  app.add_option("--partial", o.partial_pct, "Percent of pages a partial update writes (default 10)")
      ->check(CLI::Range(1, 100));
  app.add_option("--dir", o.dir, "Directory for pools (default $CAIRN_POOL_DIR, else /dev/shm/cairn)");
  app.add_option("--json", json, "Also write the results as JSON");
  app.add_flag("--quiet,-q", quiet, "No progress on stderr");
  CLI11_PARSE(app, argc, argv);

  auto bytes = ex::parse_size(size);
  if (!bytes.ok()) {
    std::cerr << "strategies_bench: " << bytes.error().message << "\n";
    return 2;
  }
  o.size = bytes.value();
  o.strategies = ex::split_list(strategies);
  o.profiles = ex::split_list(profiles);
  auto r = ex::run_strategies_bench(o, quiet ? nullptr : &std::cerr);
  if (!r.ok()) {
    std::cerr << "strategies_bench: " << r.error().message << "\n";
    return 2;
  }
  ex::print_strategies_report(r.value(), std::cout);
  if (!json.empty()) {
    auto w = ex::write_strategies_json(r.value(), json);
    if (!w.ok()) {
      std::cerr << "strategies_bench: " << w.error().message << "\n";
      return 2;
    }
  }
  for (const auto& row : r.value().rows)
    if (row.status == "failed") return 1;
  return 0;
}
