// strategies.cpp — the persistence strategies under the harness. Each workload
// runs a persist::Context of one strategy on the harness's pool (borrowed
// through BorrowedPoolScope, so every flush, drain and non-temporal copy the
// strategy makes goes through the simulator device), with a state of three
// regions: a dual region (two versions whose roles alternate), a plain region,
// and a plain region holding two registered pointers into the plain one. Each
// step changes a few random words (sometimes whole regions), re-aims the
// pointers and commits; the model is a DRAM mirror of the same changes.
// Recovery is a fresh Context: open, restore, read everything back (pointers
// as offsets into their target region, so versions compare bit for bit
// wherever the regions are mapped).
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
#include <cstring>

#include "cairn/persist.hpp"
#include "persist/slot_store.hpp"
#include "testing/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {
namespace {

constexpr std::size_t kDualBytes = 6 * 1024;
constexpr std::size_t kPlainBytes = 5 * 1024 + 256;  // not a page multiple
constexpr std::size_t kLinks = 2;

class StrategyState final : public Structure {
 public:
  StrategyState(std::string strategy, bool async_flush, bool incremental)
      : strategy_(std::move(strategy)), async_(async_flush), incremental_(incremental) {}

  Result<void> create(pool::Pool& pool, Model& model, Rng& rng) override {
    if (auto r = open(pool); !r.ok()) return r;
    dual_.assign(kDualBytes, std::byte{0});
    plain_.assign(kPlainBytes, std::byte{0});
    links_.assign(kLinks, 0);
    if (auto r = ctx_->begin(); !r.ok()) return r;
    scribble(dual_.data(), u_->write(), kDualBytes, rng, true);
    scribble(plain_.data(), a_->data(), kPlainBytes, rng, true);
    aim_links(rng);
    return commit(model);
  }

  Result<Version> recover(pool::Pool& pool) override {
    if (auto r = open(pool); !r.ok()) return std::move(r).error();
    auto v = ctx_->restore();
    if (!v.ok()) return std::move(v).error();
    dual_.assign(static_cast<const std::byte*>(u_->read()), static_cast<const std::byte*>(u_->read()) + kDualBytes);
    plain_.assign(a_->as<std::byte>(), a_->as<std::byte>() + kPlainBytes);
    links_.assign(kLinks, 0);
    auto* const base = a_->as<std::byte>();
    for (std::size_t i = 0; i < kLinks; ++i) {
      std::byte* p = links()[i];
      if (p == nullptr) continue;
      if (p < base || p >= base + kPlainBytes)
        return make_error(Errc::corrupted, "restored pointer " + std::to_string(i) + " points outside region 'a'");
      links_[i] = static_cast<std::uint64_t>(p - base) + 1;
    }
    return version(v.value());
  }

  Result<void> step(pool::Pool&, Model& model, Rng& rng) override {
    if (auto r = ctx_->begin(); !r.ok()) return r;
    // Elements this iteration does not update are carried over (seed 004).
    u_->carry_over(0, kDualBytes);
    scribble(dual_.data(), u_->write(), kDualBytes, rng, rng.below(8) == 0);
    scribble(plain_.data(), a_->data(), kPlainBytes, rng, rng.below(8) == 0);
    aim_links(rng);
    return commit(model);
  }

 private:
  Result<void> open(pool::Pool& pool) {
    persist::Options o;
    o.strategy = strategy_;
    o.threads = 1;
    o.async_flush = async_;
    o.incremental = incremental_;
    auto c = persist::Context::create(o);
    if (!c.ok()) return std::move(c).error();
    ctx_ = std::move(c.value());
    auto u = ctx_->dual_region("u", kDualBytes);
    auto a = ctx_->region("a", kPlainBytes);
    auto l = ctx_->region("links", kLinks * sizeof(void*));
    if (!u.ok()) return std::move(u).error();
    if (!a.ok()) return std::move(a).error();
    if (!l.ok()) return std::move(l).error();
    u_ = u.value();
    a_ = a.value();
    l_ = l.value();
    {
      const persist::detail::BorrowedPoolScope scope(pool);
      if (auto r = ctx_->open(); !r.ok()) return r;
    }
    for (std::size_t i = 0; i < kLinks; ++i)
      if (auto r = ctx_->register_pointer(&links()[i]); !r.ok()) return r;
    return {};
  }

  std::byte** links() const { return l_->as<std::byte*>(); }

  // Changes a few random words (or all of them) in the working buffer and
  // in the mirror alike.
  static void scribble(std::byte* mirror, void* work, std::size_t bytes, Rng& rng, bool all) {
    const std::size_t words = bytes / 8;
    const std::size_t n = all ? words : 1 + rng.below(6);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t w = all ? k : rng.below(words);
      const std::uint64_t v = rng();
      std::memcpy(mirror + 8 * w, &v, 8);
      std::memcpy(static_cast<std::byte*>(work) + 8 * w, &v, 8);
    }
  }

  // Each pointer aims at a random word of region a, or is null.
  void aim_links(Rng& rng) {
    for (std::size_t i = 0; i < kLinks; ++i) {
      if (rng.below(4) == 0) {
        links_[i] = 0;
        links()[i] = nullptr;
      } else {
        const std::uint64_t off = 8 * rng.below(kPlainBytes / 8);
        links_[i] = off + 1;
        links()[i] = a_->as<std::byte>() + off;
      }
    }
  }

  Result<void> commit(Model& model) {
    model.begin(version(ctx_->version() + 1));
    auto v = ctx_->commit();
    if (!v.ok()) {
      model.abort();
      return std::move(v).error();
    }
    model.end();
    return {};
  }

  Version version(std::uint64_t number) const {
    Version v;
    v.number = number;
    v.bytes = dual_;
    v.bytes.insert(v.bytes.end(), plain_.begin(), plain_.end());
    const auto* l = reinterpret_cast<const std::byte*>(links_.data());
    v.bytes.insert(v.bytes.end(), l, l + kLinks * 8);
    return v;
  }

  std::string strategy_;
  bool async_, incremental_;
  std::unique_ptr<persist::Context> ctx_;
  persist::DualRegion* u_ = nullptr;
  persist::Region* a_ = nullptr;
  persist::Region* l_ = nullptr;
  // The model's view of the working state: region bytes, pointers as
  // offset + 1 into region a (0 = null).
  std::vector<std::byte> dual_, plain_;
  std::vector<std::uint64_t> links_;
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
