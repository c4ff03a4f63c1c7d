// strategies.cpp — the persistence strategies under the harness. Each workload
// runs a persist::Context of one strategy on the harness's pool (borrowed
// through BorrowedPoolScope, so every flush, drain and non-temporal copy the
// strategy makes goes through the simulator device), with the state of
// context_state.hpp: each step changes a few random words and re-aims two
// registered pointers, then commits. Recovery is a fresh Context: open,
// restore, read everything back.
//
// What this covers and what it does not:
//   dram-cache, nt-copy   the whole protocol (slot copy, pointer table, version word).
//   in-place              dual regions written in their slots and flushed at commit,
//                         plain regions copied; with and without the helper thread.
//   shadow                the slot protocol is the same as with a file-backed
//                         view, but a simulator pool has no file to map privately,
//                         so the working view is shadow's DRAM fallback.
//   undo-log, file        do not run on a cairn pool: undo-log (libpmemobj's own
//                         pool) has its own workload, workloads/undo_log.cpp, and
//                         file its own explorer of file-system states, fs_*.cpp.
#include "cairn/persist.hpp"
#include "persist/slot_store.hpp"
#include "testing/crashsim/workloads/context_state.hpp"
#include "testing/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {
namespace {

class StrategyState final : public Structure {
 public:
  StrategyState(std::string strategy, bool async_flush, bool incremental)
      : strategy_(std::move(strategy)), async_(async_flush), incremental_(incremental) {}

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
    o.async_flush = async_;
    o.incremental = incremental_;
    if (auto r = state_.create_context(o); !r.ok()) return r;
    {
      const persist::detail::BorrowedPoolScope scope(pool);
      if (auto r = state_.context().open(); !r.ok()) return r;
    }
    return state_.register_pointers();
  }

  std::string strategy_;
  bool async_, incremental_;
  ContextState state_;
};

Workload make(const std::string& name, const std::string& strategy, const char* what, bool async_flush,
              bool incremental) {
  Workload w;
  w.name = name;
  w.description = what;
  w.pool_size = 1u << 20;
  w.steps = 12;
  w.make = [=] { return std::make_unique<StrategyState>(strategy, async_flush, incremental); };
  return w;
}

}  // namespace

std::vector<Workload> strategy_workloads() {
  return {
      make("strategy.dram-cache", "dram-cache", "dram-cache: DRAM working set copied into two NVM slots, version word",
           false, false),
      make("strategy.nt-copy", "nt-copy", "nt-copy: as dram-cache with non-temporal copies", false, false),
      make("strategy.nt-copy.incremental", "nt-copy",
           "nt-copy with incremental commit (only pages written since the last commit)", false, true),
      make("strategy.shadow", "shadow", "shadow: two NVM versions, commit copies the working view (DRAM fallback view)",
           false, false),
      make("strategy.in-place", "in-place", "in-place: dual regions written in their NVM slots, flushed at commit",
           false, false),
      make("strategy.in-place.async", "in-place", "in-place with the helper thread flushing (flush_async / barrier)",
           true, false),
  };
}

}  // namespace cairn::testing::crashsim::builtin
