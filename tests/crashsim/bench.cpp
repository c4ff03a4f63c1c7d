// bench.cpp — crash states checked per second, per configuration (the
// budgets of the harness): medians over repetitions of whole runs (setup,
// workload, enumeration and checks all counted), on one core.
#include "tests/crashsim/bench.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "tests/crashsim/crashsim.hpp"
#include "util/json.hpp"

namespace cairn::testing::crashsim {
namespace {

struct Spec {
  const char* name;
  const char* what;
  const char* workload;
  Durability durability;
  bool forked;
  unsigned depth2;
  std::uint64_t states, quick_states;
  double goal;
  bool kill = false;
};

}  // namespace

std::vector<BenchRow> run_bench(const BenchOptions& o) {
  const Spec specs[] = {
      {"inproc-1m", "in-process: patch, open, recover, compare, K=2 ops, reopen, compare", "refarray", Durability::adr,
       false, 0, 300000, 30000, 1e5},
      {"inproc-1m-depth2", "as above, plus depth 2 (crash the recovery) as in CI", "refarray", Durability::adr, false,
       2, 300000, 30000, 0},
      {"inproc-1m-eadr", "in-process, eADR model", "refarray", Durability::eadr, false, 0, 200000, 20000, 0},
      {"inproc-1m-msync", "in-process, msync model (512-byte sectors)", "refarray", Durability::msync, false, 0, 200000,
       20000, 0},
      {"inproc-1m-publish", "in-process, the pool's publish_root protocol", "pool_publish", Durability::adr, false, 0,
       200000, 20000, 0},
      {"forked-16m", "forked child per state: full recovery + bit-for-bit check, 16 MiB pool", "refarray_16m",
       Durability::adr, true, 0, 3000, 300, 1e3},
      {"forked-16m-2x1m", "forked child per state, 16 MiB pool, 2 MiB of data compared per state", "pool_publish_16m",
       Durability::adr, true, 0, 2000, 200, 0},
      {"kill-1m", "real kill: fork, run to the point, SIGKILL, reopen the file, check", "refarray", Durability::adr,
       false, 0, 200, 40, 0, true},
  };
  std::vector<BenchRow> rows;
  for (const Spec& s : specs) {
    const Workload* w = find_workload(s.workload);
    if (w == nullptr) continue;
    BenchRow row;
    row.name = s.name;
    row.what = s.what;
    row.goal = s.goal;
    std::ostringstream cfg;
    cfg << s.workload << ", " << (w->pool_size >> 20) << " MiB pool, " << durability_name(s.durability)
        << ", K=2, depth 2 " << (s.depth2 ? "on" : "off");
    row.config = cfg.str();
    std::vector<double> rates;
    for (int rep = 0; rep < std::max(1, o.reps); ++rep) {
      Report r;
      if (s.kill) {
        KillOptions k;
        k.seed = 1 + static_cast<std::uint64_t>(rep);
        k.kills = static_cast<unsigned>(o.quick ? s.quick_states : s.states);
        k.recovery_kills = 0;
        r = run_real_kill(*w, k);
      } else {
        Options opt;
        opt.durability = s.durability;
        opt.seed = 1 + static_cast<std::uint64_t>(rep);
        opt.forked = s.forked;
        opt.depth2_per_point = s.depth2;
        opt.max_states = o.quick ? s.quick_states : s.states;
        opt.steps = 1000;  // enough work to reach max_states
        r = run(*w, opt);
      }
      row.passed = row.passed && r.passed();
      row.states = r.states;
      rates.push_back(r.seconds > 0 ? static_cast<double>(r.states) / r.seconds : 0);
      if (o.log) {
        char line[256];
        std::snprintf(line, sizeof line, "%-18s rep %d: %llu states in %.2f s = %.0f/s%s", s.name, rep + 1,
                      static_cast<unsigned long long>(r.states), r.seconds, rates.back(),
                      r.passed() ? "" : " (FAILING STATES)");
        o.log(line);
      }
    }
    row.rates = rates;
    std::sort(rates.begin(), rates.end());
    row.median = rates[rates.size() / 2];
    row.min = rates.front();
    row.max = rates.back();
    rows.push_back(row);
  }
  return rows;
}

std::string bench_table(const std::vector<BenchRow>& rows) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-18s %12s %12s %12s %10s  %s\n", "row", "states/s", "min", "max", "goal",
                "configuration");
  o << line;
  for (const auto& r : rows) {
    char goal[32] = "-";
    if (r.goal > 0) std::snprintf(goal, sizeof goal, "%.0f%s", r.goal, r.meets() ? "" : " MISS");
    std::snprintf(line, sizeof line, "%-18s %12.0f %12.0f %12.0f %10s  %s%s\n", r.name.c_str(), r.median, r.min, r.max,
                  goal, r.config.c_str(), r.passed ? "" : "  (failing states!)");
    o << line;
  }
  o << "\n";
  for (const auto& r : rows) o << "  " << r.name << ": " << r.what << "\n";
  return o.str();
}

std::string bench_json(const std::vector<BenchRow>& rows) {
  util::Json out = util::Json::array();
  for (const auto& r : rows)
    out.push_back({{"row", r.name},
                   {"states_per_s", r.median},
                   {"min", r.min},
                   {"max", r.max},
                   {"goal", r.goal},
                   {"states", r.states},
                   {"passed", r.passed},
                   {"config", r.config},
                   {"rates", r.rates}});
  return out.dump(2) + "\n";
}

}  // namespace cairn::testing::crashsim
