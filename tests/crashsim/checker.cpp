// checker.cpp — conditions 1-3 on one crash image (see checker.hpp).
#include "tests/crashsim/checker.hpp"

#include <cstring>

namespace cairn::testing::crashsim {
namespace {

// The counter is atomic: a recovery's persist_mt workers call these at once.
void count(void* ctx) { static_cast<std::atomic<std::uint64_t>*>(ctx)->fetch_add(1, std::memory_order_relaxed); }
void null_flush(void* ctx, const void*, std::size_t) { count(ctx); }
void null_drain(void*) {}
void null_copy(void* ctx, void* dst, const void* src, std::size_t len) {
  std::memcpy(dst, src, len);
  count(ctx);
}
void null_fill(void* ctx, void* dst, int c, std::size_t len) {
  std::memset(dst, c, len);
  count(ctx);
}

std::string describe(const Version& v) {
  return "version " + std::to_string(v.number) + " (" + std::to_string(v.bytes.size()) + " bytes)";
}

// First differing byte, or -1.
std::int64_t first_difference(const Version& a, const Version& b) {
  const std::size_t n = std::min(a.bytes.size(), b.bytes.size());
  for (std::size_t i = 0; i < n; ++i)
    if (a.bytes[i] != b.bytes[i]) return static_cast<std::int64_t>(i);
  return a.bytes.size() == b.bytes.size() ? -1 : static_cast<std::int64_t>(n);
}

std::string against(const Version& got, const Version& want, const char* what) {
  std::string s = std::string(what) + " is " + describe(want);
  if (got.number != want.number) s += ", number differs";
  const auto d = first_difference(got, want);
  if (d >= 0) s += ", first differing byte " + std::to_string(d);
  return s;
}

}  // namespace

Result<devices::Ops> NullDevice::bind(const devices::Mapping&) {
  devices::Ops ops;
  ops.flush = &null_flush;
  ops.drain = &null_drain;
  ops.copy_nodrain = &null_copy;
  ops.fill_nodrain = &null_fill;
  return ops;
}

Opener image_opener(std::byte* image, std::size_t size, Durability durability) {
  return [image, size, durability]() {
    pool::OpenOptions o;
    o.flush_mode = flush_mode_for(durability);
    o.device = std::make_unique<NullDevice>();
    return pool::Pool::open_image(image, size, std::move(o), "crash image");
  };
}

std::string match_version(const Version& got, const Expect& e) {
  const Model& m = *e.model;
  const Version* last = e.last >= 0 ? &m.at(static_cast<std::size_t>(e.last)) : nullptr;
  const Version* fly = e.in_flight >= 0 ? &m.at(static_cast<std::size_t>(e.in_flight)) : nullptr;
  if (e.point_durable && fly != nullptr) {
    if (got == *fly) return {};
    if (last != nullptr && got == *last)
      return "recovered the previous " + describe(*last) + " although the commit point of " + describe(*fly) +
             " was persisted (a commit that returned durable was lost)";
    return "recovered " + describe(got) + ", not the committed in-flight version: " + against(got, *fly, "it");
  }
  if (last != nullptr && got == *last) return {};
  if (fly != nullptr && got == *fly) return {};
  std::string s = "recovered " + describe(got) + ", which is neither the last committed version nor the one in flight";
  if (last != nullptr) s += "; " + against(got, *last, "last committed");
  if (fly != nullptr) s += "; " + against(got, *fly, "in flight");
  return s;
}

CheckOutcome check_state(const Opener& open, const CheckConfig& config, const Expect& expect, std::uint64_t rng_seed) {
  CheckOutcome out;
  auto fail = [&](std::string why) {
    out.ok = false;
    out.reason = std::move(why);
    return out;
  };
  const Workload& w = *config.workload;
  Version got;
  Model after;
  bool published = false;
  {
    auto opened = open();
    if (!opened.ok()) return fail("the pool does not open: " + opened.error().message);
    pool::Pool& pool = *opened.value();
    // Condition 2: header copies are written once at create; the selector
    // must name a valid table (a fallback means a published root was lost).
    if (!pool.health().problems.empty()) return fail("pool structure: " + pool.health().problems.front());
    auto st = w.make();
    auto rec = st->recover(pool);
    if (!rec.ok()) return fail("recovery failed: " + rec.error().message);
    got = std::move(rec.value());
    out.recovered = got.number;
    // Condition 1.
    if (auto why = match_version(got, expect); !why.empty()) return fail(why);
    // Condition 2: the arena is rebuilt from reachability, without a leak.
    if (!pool.arena().ready()) return fail("recovery did not rebuild the pool's arena");
    if (auto blocks = st->blocks_in_use(got); blocks && *blocks != pool.arena().blocks_in_use())
      return fail("the rebuilt arena holds " + std::to_string(pool.arena().blocks_in_use()) +
                  " blocks but the recovered version reaches " + std::to_string(*blocks) + " (leak or lost extent)");
    // Condition 3: K further operations.
    if (config.extend_ops == 0) return out;
    after = Model(std::move(got));  // got is not needed after this
    const std::uint64_t generation = pool.root_generation();
    Rng rng(rng_seed);
    for (unsigned i = 0; i < config.extend_ops; ++i) {
      auto r = st->step(pool, after, rng);
      if (!r.ok())
        return fail("further operation " + std::to_string(i + 1) + " after recovery failed: " + r.error().message);
      if (after.in_flight() != nullptr)
        return fail("further operation " + std::to_string(i + 1) + " did not finish its commit (model.end)");
    }
    published = pool.root_generation() != generation;
  }
  auto reopened = open();
  if (!reopened.ok())
    return fail("after " + std::to_string(config.extend_ops) +
                " further operations the pool does not open: " + reopened.error().message);
  pool::Pool& pool = *reopened.value();
  if (!pool.health().problems.empty())
    return fail("pool structure after further operations: " + pool.health().problems.front());
  // Both tables were rewritten by a publish since recovery (the live one at
  // recovery was valid): both checksums must hold now.
  if (published && !(pool.health().table0_ok && pool.health().table1_ok))
    return fail(std::string("pool structure after further operations: root table ") +
                (pool.health().table0_ok ? "1" : "0") + " fails its checksum");
  auto st = w.make();
  auto rec = st->recover(pool);
  if (!rec.ok()) return fail("recovery after further operations failed: " + rec.error().message);
  if (!(rec.value() == after.last()))
    return fail("after " + std::to_string(config.extend_ops) + " further operations a clean reopen recovered " +
                describe(rec.value()) + "; " + against(rec.value(), after.last(), "the model's last version"));
  if (auto blocks = st->blocks_in_use(rec.value()); blocks && *blocks != pool.arena().blocks_in_use())
    return fail("after further operations the arena holds " + std::to_string(pool.arena().blocks_in_use()) +
                " blocks, the structure reaches " + std::to_string(*blocks));
  return out;
}

}  // namespace cairn::testing::crashsim
