// step4_strategies.cpp — tutorial step 4 (C++): switch strategies without touching the code, and compare them.
//
// The loop never names a strategy: Options::strategy is left empty, so cairn
// reads $CAIRN_STRATEGY. Run it with one,
//   CAIRN_STRATEGY=nt-copy build/release/examples/step4_strategies
// or without the variable to run the same loop under every strategy this
// library has (persist::strategy_names()) and print what a commit costs each
// and that each restores the last version bit for bit. For a proper
// comparison (large states, device profiles, medians, ratios against the
// non-temporal copy bandwidth measured in the same run) use
//   cairn bench strategies --size 1G
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cairn/persist.hpp"

constexpr std::size_t kN = 1 << 20;  // 8 MiB of doubles
constexpr int kSteps = 20;

// Commits kSteps versions of the field under `strategy` ("" = $CAIRN_STRATEGY),
// then checks that a fresh context restores the last one exactly.
bool run(const std::string& strategy) {
  cairn::persist::Options o{.strategy = strategy, .name = "step4-" + (strategy.empty() ? "env" : strategy)};
  double commit_ms = 0;
  std::string name;
  {
    auto ctx = cairn::persist::Context::create(o).value();
    name = ctx->strategy();
    auto* u = ctx->dual_region("u", kN * sizeof(double)).value();
    ctx->open().value();
    for (int s = 1; s <= kSteps; ++s) {
      const double* in = u->read<double>();
      double* out = u->write<double>();
      for (std::size_t i = 0; i < kN; ++i) out[i] = 0.5 * in[i] + s;
      ctx->commit().value();
    }
    commit_ms = ctx->stats().total_commit_seconds * 1e3 / kSteps;
  }
  auto ctx = cairn::persist::Context::create(o).value();
  auto* u = ctx->dual_region("u", kN * sizeof(double)).value();
  ctx->open().value();
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t v = ctx->restore().value();
  const double restore_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  double expect = 0;  // every element follows the same recurrence from 0
  for (int s = 1; s <= kSteps; ++s) expect = 0.5 * expect + s;
  bool ok = v == kSteps;
  for (std::size_t i = 0; ok && i < kN; ++i) ok = u->read<double>()[i] == expect;
  std::printf("%-11s commit %8.3f ms   restore %8.3f ms   version %llu %s\n", name.c_str(), commit_ms, restore_ms,
              static_cast<unsigned long long>(v), ok ? "restored exactly" : "WRONG");
  return ok;
}

int main() {
  const char* env = std::getenv("CAIRN_STRATEGY");
  if (env != nullptr && *env != '\0') return run("") ? 0 : 1;
  std::printf("%zu MiB state, %d commits per strategy:\n", kN * sizeof(double) >> 20, kSteps);
  bool ok = true;
  for (const auto& s : cairn::persist::strategy_names()) ok = run(s) && ok;
  return ok ? 0 : 1;
}
