// device_bench.cpp — issue 2's device benchmark: primitives vs memcpy, and emulation fidelity per profile.
//
// Prints two Markdown tables (see src/experiments/device_bench.hpp for what each
// row measures); the baseline (memcpy into the same pool buffer) is measured
// in the same run and every other row is given as a ratio to it.
//
//   device_bench [--profile SPEC]... [--size-mib N] [--threads N] [--reps N] [--json FILE] [--dir DIR]
//
// `cairn device bench` runs the same code.
#include "experiments/device_bench.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"cairn device benchmark: persistence primitives vs memcpy, and NVM emulation fidelity"};
  cairn::experiments::DeviceBenchOptions o;
  std::size_t size_mib = 64;
  std::string json;
  bool quiet = false;
  app.add_option("--profile,-p", o.profiles, "Profile(s) for the fidelity table (default: all named + one numeric)");
  app.add_option("--size-mib", size_mib, "MiB per copy/persist buffer (default 64)")->check(CLI::Range(4, 65536));
  app.add_option("--threads,-t", o.threads, "Threads for multi-threaded rows (default: hardware threads)");
  app.add_option("--reps,-r", o.reps, "Repetitions; medians are reported (default 5)")->check(CLI::Range(1, 1000));
  app.add_option("--json", json, "Also write the results as JSON");
  app.add_option("--dir", o.dir, "Directory for scratch pools (default $CAIRN_POOL_DIR, else /dev/shm/cairn)");
  app.add_flag("--quiet,-q", quiet, "No progress on stderr");
  CLI11_PARSE(app, argc, argv);
  o.size = size_mib << 20;

  auto r = cairn::experiments::run_device_bench(o, quiet ? nullptr : &std::cerr);
  if (!r.ok()) {
    std::cerr << "device_bench: " << r.error().message << "\n";
    return 2;
  }
  cairn::experiments::print_device_report(r.value(), std::cout);
  if (!json.empty()) {
    auto w = cairn::experiments::write_device_report_json(r.value(), json);
    if (!w.ok()) {
      std::cerr << "device_bench: " << w.error().message << "\n";
      return 2;
    }
  }
  return 0;
}
