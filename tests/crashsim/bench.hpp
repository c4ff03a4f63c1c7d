// bench.hpp — the crash harness's throughput benchmark (crash states checked
// per second), shared by `cairn crashsim bench` and bench/crashsim_bench.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace cairn::testing::crashsim {

struct BenchOptions {
  int reps = 5;        // repetitions per row; the median is reported
  bool quick = false;  // fewer states per repetition (a smoke run)
  std::function<void(const std::string&)> log;
};

struct BenchRow {
  std::string name;    // short id
  std::string what;    // what one state costs
  std::string config;  // workload, pool size, durability, depth 2, K
  double goal = 0;     // states per second the issue asks for (0: informative)
  double median = 0;   // states per second, median of the repetitions
  double min = 0, max = 0;
  std::vector<double> rates;  // states per second of every repetition, in the order they ran
  std::uint64_t states = 0;   // per repetition (last one)
  bool passed = true;         // every state of every repetition passed
  bool meets() const { return goal <= 0 || median >= goal; }
};

std::vector<BenchRow> run_bench(const BenchOptions& options);
std::string bench_table(const std::vector<BenchRow>& rows);
std::string bench_json(const std::vector<BenchRow>& rows);

}  // namespace cairn::testing::crashsim
