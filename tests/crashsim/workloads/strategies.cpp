// strategies.cpp — the persistence strategies under the harness: one workload
// per crash variant of every strategy the registry (src/persist/registry.cpp)
// marks CrashHarness::pool, named strategy.NAME[.SUFFIX]. Each runs a
// persist::Context of that strategy on the harness's pool (lent through
// InternalOptions::borrowed_pool, so every flush, drain and non-temporal copy
// the strategy makes goes through the simulator device), with the state of
// context_state.hpp: each step changes a few random words and re-aims two
// registered pointers, then commits. Recovery is a fresh Context: open,
// restore, read everything back.
//
// What this covers and what it does not:
//   dram-cache, nt-copy   the whole protocol (slot copy, pointer table, version word).
//   in-place              dual regions written in their slots and flushed at commit,
//                         plain regions copied; with and without the helper thread
//                         (which gets every hand-over, however small), and with
//                         the dual region streamed (non-temporal, nothing flushed).
//   shadow                the slot protocol is the same as with a file-backed
//                         view, but a simulator pool has no file to map privately,
//                         so the working view is shadow's DRAM fallback.
//   undo-log, file        do not run on a cairn pool (CrashHarness::libpmemobj,
//                         ::files): undo-log has its own workload,
//                         workloads/undo_log.cpp, and file its own explorer of
//                         file-system states, fs_*.cpp.
#include "cairn/persist.hpp"
#include "persist/strategy.hpp"
#include "tests/crashsim/workloads/context_state.hpp"
#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {
namespace {

class StrategyState final : public Structure {
 public:
  StrategyState(std::string strategy, const persist::detail::CrashVariant& variant)
      : strategy_(std::move(strategy)), variant_(variant) {}

  Result<void> create(pool::Pool& pool, Model& model, Rng& rng) override {
    if (auto r = open(pool); !r.ok()) return r;
    if (auto r = state_.fill(rng); !r.ok()) return r;
    return state_.commit(model);
  }

  Result<Version> recover(pool::Pool& pool) override {
    if (auto r = open(pool); !r.ok()) return std::move(r).error();
    return state_.restore();
  }

  Result<void> step(pool::Pool&, Model& model, Rng& rng) override {
    if (auto r = state_.change(rng); !r.ok()) return r;
    return state_.commit(model);
  }

 private:
  Result<void> open(pool::Pool& pool) {
    persist::Options o;
    o.strategy = strategy_;
    o.threads = 1;
    o.async_flush = variant_.async_flush;
    o.incremental = variant_.incremental;
    persist::detail::InternalOptions internal;
    internal.borrowed_pool = &pool;
    internal.in_place_helper_only = variant_.async_flush;
    if (auto r = state_.create_context(o, internal); !r.ok()) return r;
    state_.stream_dual(variant_.streamed);
    if (auto r = state_.context().open(); !r.ok()) return r;
    return state_.register_pointers();
  }

  std::string strategy_;
  persist::detail::CrashVariant variant_;
  ContextState state_;
};

Workload make(const std::string& name, const std::string& strategy, const persist::detail::CrashVariant& variant) {
  Workload w;
  w.name = name;
  w.description = variant.what;
  w.pool_size = 1u << 20;
  w.steps = 12;
  w.make = [=] { return std::make_unique<StrategyState>(strategy, variant); };
  return w;
}

}  // namespace

std::string strategy_workload_name(const std::string& strategy, const std::string& suffix) {
  return "strategy." + strategy + (suffix.empty() ? "" : "." + suffix);
}

std::vector<Workload> strategy_workloads() {
  std::vector<Workload> out;
  for (const auto& r : persist::detail::registry()) {
    if (r.crash != persist::detail::CrashHarness::pool) continue;
    for (const auto& v : r.crash_variants) out.push_back(make(strategy_workload_name(r.name, v.suffix), r.name, v));
  }
  return out;
}

}  // namespace cairn::testing::crashsim::builtin
