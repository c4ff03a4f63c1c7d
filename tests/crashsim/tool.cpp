// tool.cpp — `cairn-crashsim run|replay|list|bench`: the crash simulator and
// durability harness from the command line. A test tool, built beside the
// harness and never installed: it links the interposer (interpose.cpp), which
// replaces mmap, msync and libpmem's persist calls for the whole process, so
// it must stay out of the shipped `cairn` tool and library.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "tests/crashsim/bench.hpp"
#include "tests/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim::tool {
namespace {

int& exit_code() {
  static int code = 0;
  return code;
}

namespace cs = cairn::testing::crashsim;

constexpr int kExitPass = 0;
constexpr int kExitFailures = 1;  // failing crash states found (their keys are printed)
constexpr int kExitUsage = 2;     // bad option, unknown workload or key

int usage(const std::string& why) {
  std::cerr << "cairn-crashsim: " << why << "\n";
  return kExitUsage;
}

void print_failures(const cs::Report& r) {
  for (const auto& f : r.failures) {
    std::cout << "FAIL " << f.key << "\n     " << f.reason << "\n";
  }
  if (!r.failures.empty()) std::cout << "replay one with: cairn-crashsim replay " << r.failures.front().key << "\n";
}

void add_run(CLI::App& group) {
  auto* cmd = group.add_subcommand("run", "Run a workload through the crash simulator (or real kills)");
  cmd->footer(
      "Every flush, drain, non-temporal copy and marker of the workload is a crash point; at each one,\n"
      "crash images are built from the pending 8-byte words (exhaustively up to 16 words) and recovery\n"
      "is checked against the workload's model, with K further operations and a crash during\n"
      "recovery (depth 2). --states N tunes the random subsets / steps to explore about N states.\n"
      "--kill runs the workload in child processes on a tmpfs pool and SIGKILLs them instead.\n"
      "Exit status: 0 every state passes, 1 failing states found (keys printed), 2 bad usage.");
  struct Args {
    std::string workload, durability = "adr";
    std::uint64_t states = 0, seed = 1;
    unsigned steps = 0, k = 2, depth2 = 2, dedup = 0, max_failures = 5, random = 8, kills = 32;
    bool forked = false, kill = false, each_point = false, random_time = false, quiet = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--workload,-w", a->workload, "Workload name (see `cairn-crashsim list`)")->required();
  cmd->add_option("--states,-n", a->states, "About this many crash states (0: the workload's defaults)");
  cmd->add_option("--seed,-s", a->seed, "Seed of the workload and of the random subsets (default 1)");
  cmd->add_option("--durability,-d", a->durability, "adr (default), eadr or msync");
  cmd->add_option("--steps", a->steps, "Operations in the workload (default: the workload's)");
  cmd->add_option("-k,--further-ops", a->k, "K further operations after each recovery (default 2)");
  cmd->add_option("--depth2", a->depth2, "States per crash point whose recovery is crashed too (default 2, 0 off)");
  cmd->add_option("--random", a->random, "Random subsets per crash point not enumerated exhaustively (default 8)");
  cmd->add_option("--dedup", a->dedup, "Explore only the first N crash points of each call stack (default: all)");
  cmd->add_option("--max-failures", a->max_failures, "Stop after this many failing states (default 5)");
  cmd->add_flag("--forked", a->forked, "Check each state in a forked child (isolates crashing recoveries)");
  cmd->add_flag("--kill", a->kill, "Real-kill mode: SIGKILL child processes at crash points");
  cmd->add_option("--kills", a->kills, "Real-kill mode: number of random kill points (default 32)");
  cmd->add_flag("--each-point", a->each_point, "Real-kill mode: kill once at each unique failure point");
  cmd->add_flag("--random-time", a->random_time, "Real-kill mode: kill after random delays");
  cmd->add_flag("--quiet,-q", a->quiet, "Only the summary and failures");
  cmd->callback([a] {
    int& code = exit_code();
    const cs::Workload* w = cs::find_workload(a->workload);
    if (w == nullptr) {
      code = usage("no workload named '" + a->workload + "'; `cairn-crashsim list` shows them");
      return;
    }
    auto log = [a](const std::string& line) {
      if (!a->quiet) std::cerr << line << "\n";
    };
    cs::Report r;
    if (a->kill) {
      cs::KillOptions o;
      o.seed = a->seed;
      o.steps = a->steps;
      o.extend_ops = a->k;
      o.kills = a->states > 0 ? static_cast<unsigned>(a->states) : a->kills;
      o.each_point = a->each_point;
      o.random_time = a->random_time;
      o.max_failures = a->max_failures;
      o.log = log;
      r = cs::run_real_kill(*w, o);
    } else {
      auto d = cs::parse_durability(a->durability);
      if (!d.ok()) {
        code = usage(d.error().message);
        return;
      }
      cs::Options o;
      o.durability = d.value();
      o.seed = a->seed;
      o.steps = a->steps;
      o.extend_ops = a->k;
      o.depth2_per_point = a->depth2;
      o.random_subsets = a->random;
      o.dedup_per_stack = a->dedup;
      o.target_states = a->states;
      o.max_failures = a->max_failures;
      o.forked = a->forked;
      o.log = log;
      r = cs::run(*w, o);
    }
    std::cout << r.summary().substr(0, r.summary().find('\n')) << "\n";
    print_failures(r);
    if (w->broken && r.failures.empty())
      std::cout << "note: '" << w->name << "' is a deliberately broken variant, and no failing state was found\n";
    code = r.failures.empty() ? kExitPass : kExitFailures;
  });
}

void add_replay(CLI::App& group) {
  auto* cmd = group.add_subcommand("replay", "Rebuild and check exactly one crash state from its key");
  cmd->footer(
      "Keys are printed by failing runs and tests: cs1:... (simulator) or kill1:... (real kill).\n"
      "Exit status: 0 the state passes, 1 it fails (the reason is printed), 2 bad key.");
  auto key = std::make_shared<std::string>();
  cmd->add_option("KEY", *key, "The crash state's key")->required();
  cmd->callback([key] {
    int& code = exit_code();
    Result<cs::Report> r = key->rfind("kill1:", 0) == 0 ? cs::replay_real_kill(*key) : cs::replay(*key);
    if (!r.ok()) {
      code = usage(r.error().message);
      return;
    }
    const cs::Report& rep = r.value();
    if (rep.failures.empty()) {
      std::cout << "PASS " << *key << " (" << rep.states << " state" << (rep.states == 1 ? "" : "s") << " checked)\n";
      code = kExitPass;
    } else {
      print_failures(rep);
      code = kExitFailures;
    }
  });
}

void add_list(CLI::App& group) {
  auto* cmd = group.add_subcommand("list", "List the workloads the harness knows");
  cmd->callback([] {
    for (const cs::Workload* w : cs::workloads()) {
      std::printf("%-36s %5llu KiB  %3u steps  %s\n", w->name.c_str(),
                  static_cast<unsigned long long>(w->pool_size >> 10), w->steps, w->description.c_str());
    }
    exit_code() = kExitPass;
  });
}

void add_bench(CLI::App& group) {
  auto* cmd = group.add_subcommand("bench", "Crash states checked per second (the harness's throughput budgets)");
  cmd->footer(
      "Rows: in-process checks at 1 MiB (goal >= 100000 states/s per core), forked full recovery with a\n"
      "bit-for-bit check at 16 MiB (goal >= 1000 states/s), and informative rows (depth 2, other\n"
      "durability models, real kills). One core: the harness is single-threaded. Medians of --reps.\n"
      "Exit status: 0 measured (whatever the numbers), 1 a benchmark state failed, 2 bad option.");
  struct Args {
    int reps = 5;
    bool quick = false, quiet = false;
    std::string json;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--reps,-r", a->reps, "Repetitions per row (default 5)")->check(CLI::Range(1, 100));
  cmd->add_flag("--quick", a->quick, "Fewer states per repetition");
  cmd->add_option("--json", a->json, "Also write the rows as JSON to this file");
  cmd->add_flag("--quiet,-q", a->quiet, "No progress lines on stderr");
  cmd->callback([a] {
    cs::BenchOptions o;
    o.reps = a->reps;
    o.quick = a->quick;
    if (!a->quiet) o.log = [](const std::string& s) { std::cerr << s << "\n"; };
    const auto rows = cs::run_bench(o);
    std::cout << cs::bench_table(rows);
    if (!a->json.empty()) {
      std::ofstream out(a->json);
      out << cs::bench_json(rows);
      if (!out) {
        exit_code() = usage("cannot write " + a->json);
        return;
      }
    }
    bool ok = true;
    for (const auto& r : rows) ok = ok && r.passed;
    exit_code() = ok ? kExitPass : kExitFailures;
  });
}

}  // namespace

}  // namespace cairn::testing::crashsim::tool

int main(int argc, char** argv) {
  namespace t = cairn::testing::crashsim::tool;
  CLI::App app{"cairn-crashsim: the crash simulator and durability harness (a test tool)"};
  app.require_subcommand(1);
  t::add_run(app);
  t::add_replay(app);
  t::add_list(app);
  t::add_bench(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return t::exit_code();
}
