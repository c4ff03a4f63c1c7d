// cmd_device.cpp — `cairn device profiles` and `cairn bench device`: the NVM profiles, and a benchmark of the
// persistence primitives and of the emulation.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "bench/device_bench.hpp"
#include "cairn/extended/profile.hpp"
#include "commands.hpp"

namespace cairn::tool {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitCannot = 2;  // bad option value, or the benchmark could not run

// "64M", "1G", "4194304", "256MiB": binary multiples.
void add_device_bench_impl(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("device",
                                   "Measure flush, drain, persist and non-temporal copy, and how well the "
                                   "emulated device meets each profile");
  cmd->footer(
      "Creates scratch pools in DIR (default $CAIRN_POOL_DIR, else /dev/shm/cairn) and removes them.\n"
      "Table 1 (real device): memcpy into the pool is the baseline; every other row is measured in the\n"
      "same run and given as a ratio to it; also the best copy bandwidth seen and whether the\n"
      "multi-threaded non-temporal copy reaches 80 % of it.\n"
      "Table 2 (emulation fidelity): for each profile, the extra latency per flushed line, per drain\n"
      "and per random read, and the write and read bandwidth achieved, against what the profile asks\n"
      "(goal: within +-10 %). Figures are medians of --reps repetitions.\n"
      "Profiles: a name (see `cairn device profiles`) or numbers such as\n"
      "  write_ns=150,read_ns=100,write_gbps=2.3,read_gbps=6.6,drain_ns=0\n"
      "Exit status: 0 measured (whatever the numbers), 2 bad option or cannot create the pools.");
  struct Args {
    std::vector<std::string> profiles;
    std::string size = "64M";
    unsigned threads = 0;
    int reps = 5;
    std::string json, dir;
    bool no_primitives = false, no_fidelity = false, quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--profile,-p", args->profiles,
                  "Profile(s) for the fidelity table; repeat for several (default: all named ones plus a numeric one)");
  cmd->add_option("--size,-s", args->size, "Bytes per copy/persist buffer, whole MiB, >= 4M (default 64M)");
  cmd->add_option("--threads,-t", args->threads, "Threads for the multi-threaded rows (default: all hardware threads)");
  cmd->add_option("--reps,-r", args->reps, "Repetitions; medians are reported (default 5)")->check(CLI::Range(1, 1000));
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_option("--dir", args->dir, "Directory for the scratch pools (tmpfs or DAX)");
  cmd->add_flag("--no-primitives", args->no_primitives, "Skip table 1 (real-device primitives)");
  cmd->add_flag("--no-fidelity", args->no_fidelity, "Skip table 2 (emulation fidelity)");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    auto size = bench::parse_size(args->size);
    if (!size.ok()) {
      std::cerr << "cairn bench device: " << size.error().message << "\n";
      exit_code() = kExitCannot;
      return;
    }
    for (const auto& p : args->profiles) {  // fail before measuring anything
      auto parsed = devices::parse_profile(p);
      if (!parsed.ok()) {
        std::cerr << "cairn bench device: " << parsed.error().message << "\n";
        exit_code() = kExitCannot;
        return;
      }
    }
    bench::DeviceBenchOptions o;
    o.dir = args->dir;
    o.size = size.value();
    o.threads = args->threads;
    o.reps = args->reps;
    o.profiles = args->profiles;
    o.primitives = !args->no_primitives;
    o.fidelity = !args->no_fidelity;
    auto report = bench::run_device_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) {
      std::cerr << "cairn bench device: " << report.error().message << "\n";
      exit_code() = kExitCannot;
      return;
    }
    bench::print_device_report(report.value(), std::cout);
    if (!args->json.empty()) {
      auto w = bench::write_device_report_json(report.value(), args->json);
      if (!w.ok()) {
        std::cerr << "cairn bench device: " << w.error().message << "\n";
        exit_code() = kExitCannot;
        return;
      }
    }
    exit_code() = kExitOk;
  });
}

void add_profiles(CLI::App& device) {
  auto* cmd = device.add_subcommand("profiles", "List the named NVM profiles of the emulated device");
  cmd->footer(
      "Select one with CAIRN_DEVICE=emulated:NAME or CAIRN_DEVICE_PROFILE=NAME (or numbers, see\n"
      "`cairn bench device --help`). Latencies are charged on top of DRAM; bandwidths are caps.");
  cmd->callback([] {
    for (const auto& name : devices::profile_names()) {
      auto p = devices::parse_profile(name);
      if (!p.ok()) continue;  // cannot happen for a listed name
      std::printf("%-13s %s\n%-13s   %s\n", name.c_str(), p.value().describe().c_str(), "", p.value().source.c_str());
    }
    exit_code() = kExitOk;
  });
}

}  // namespace

void add_device_bench(CLI::App& bench) { add_device_bench_impl(bench); }

void add_device_commands(CLI::App& app) {
  auto* device = app.add_subcommand("device", "Device models behind the persistence primitives: the named profiles");
  device->require_subcommand(1);
  add_profiles(*device);
}

}  // namespace cairn::tool
