// pool_publish.cpp — the pool's own commit protocol under the harness: each
// step writes fresh arena extents, makes them durable (non-temporal copies,
// or memcpy_persist_mt split over threads that each fence their own part) and
// publishes them as roots in one publish_roots call, whose commit point is the
// pool's 8-byte selector word; the replaced extents are freed. Recovery reads
// the roots and rebuilds the arena from them.
#include <cstring>

#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {
namespace {

class PoolPublish final : public Structure {
 public:
  PoolPublish(std::uint64_t extent, unsigned slots, unsigned threads, bool data_after_root)
      : extent_(extent), slots_(slots), threads_(threads), data_after_root_(data_after_root) {}

  Result<void> create(pool::Pool& pool, Model& model, Rng& rng) override {
    data_.assign(slots_, {});
    versions_.assign(slots_, 1);
    offs_.assign(slots_, 0);
    std::vector<std::pair<unsigned, pool::RootSlot>> changes;
    for (unsigned s = 0; s < slots_; ++s) {
      fill(data_[s], rng);
      auto off = pool.arena().alloc(extent_);
      if (!off.ok()) return std::move(off).error();
      offs_[s] = off.value();
      write(pool, off.value(), data_[s]);
      changes.push_back({s, pool::RootSlot{off.value(), 1}});
    }
    model.begin(version());
    if (auto r = pool.publish_roots(changes); !r.ok()) return r;
    model.end();
    return {};
  }

  Result<Version> recover(pool::Pool& pool) override {
    data_.assign(slots_, {});
    versions_.assign(slots_, 0);
    offs_.assign(slots_, 0);
    auto rb = pool.arena().rebuild();
    for (unsigned s = 0; s < slots_; ++s) {
      const pool::RootSlot r = pool.root(s);
      if (r.offset == 0) return make_error(Errc::corrupted, "pool_publish: root " + std::to_string(s) + " is empty");
      if (auto m = rb.mark(r.offset, extent_); !m.ok()) return std::move(m).error();
      offs_[s] = r.offset;
      versions_[s] = r.version;
      data_[s].resize(extent_);
      std::memcpy(data_[s].data(), pool.at(r.offset), extent_);
    }
    rb.finish();
    return version();
  }

  Result<void> step(pool::Pool& pool, Model& model, Rng& rng) override {
    std::uint64_t next = 0;
    for (auto v : versions_) next = std::max(next, v);
    ++next;
    // Replace one slot or (sometimes) all of them in one publish.
    const unsigned mask_all = (1u << slots_) - 1;
    unsigned mask = slots_ == 1 ? 1u : static_cast<unsigned>(1 + rng.below(mask_all));
    auto old_data = data_;
    auto old_versions = versions_;
    std::vector<std::pair<unsigned, pool::RootSlot>> changes;
    std::vector<std::uint64_t> freed;
    for (unsigned s = 0; s < slots_; ++s) {
      if ((mask & (1u << s)) == 0) continue;
      fill(data_[s], rng);
      versions_[s] = next;
      auto off = pool.arena().alloc(extent_);
      if (!off.ok()) {
        data_ = old_data;
        versions_ = old_versions;
        return std::move(off).error();
      }
      changes.push_back({s, pool::RootSlot{off.value(), next}});
      freed.push_back(offs_[s]);
      offs_[s] = off.value();
    }
    model.begin(version());
    if (!data_after_root_)
      for (const auto& [s, slot] : changes) write(pool, slot.offset, data_[s]);
    if (auto r = pool.publish_roots(changes); !r.ok()) {
      model.abort();
      return r;
    }
    if (data_after_root_)
      for (const auto& [s, slot] : changes) write(pool, slot.offset, data_[s]);
    for (auto off : freed) pool.arena().free(off, extent_);
    model.end();
    return {};
  }

  std::optional<std::uint64_t> blocks_in_use(const Version&) const override {
    return slots_ * ((extent_ + pool::kDefaultBlockSize - 1) / pool::kDefaultBlockSize);
  }

 private:
  void fill(std::vector<std::byte>& d, Rng& rng) const {
    d.resize(extent_);
    for (std::size_t i = 0; i + 8 <= extent_; i += 8) {
      const std::uint64_t w = rng();
      std::memcpy(d.data() + i, &w, 8);
    }
  }
  void write(pool::Pool& pool, std::uint64_t off, const std::vector<std::byte>& d) const {
    if (threads_ > 1)
      pool.memcpy_persist_mt(pool.at(off), d.data(), d.size(), threads_);
    else
      pool.memcpy_persist(pool.at(off), d.data(), d.size());
  }
  Version version() const {
    Version v;
    for (unsigned s = 0; s < slots_; ++s) v.number = std::max(v.number, versions_[s]);
    for (unsigned s = 0; s < slots_; ++s) {
      const auto* p = reinterpret_cast<const std::byte*>(&versions_[s]);
      v.bytes.insert(v.bytes.end(), p, p + 8);
    }
    for (unsigned s = 0; s < slots_; ++s) v.bytes.insert(v.bytes.end(), data_[s].begin(), data_[s].end());
    return v;
  }

  std::uint64_t extent_;
  unsigned slots_, threads_;
  bool data_after_root_;
  std::vector<std::vector<std::byte>> data_;
  std::vector<std::uint64_t> versions_, offs_;
};

Workload make(const char* name, const char* what, std::uint64_t pool_size, unsigned steps, std::uint64_t extent,
              unsigned slots, unsigned threads, bool broken) {
  Workload w;
  w.name = name;
  w.description = what;
  w.pool_size = pool_size;
  w.steps = steps;
  w.broken = broken;
  w.make = [=] { return std::make_unique<PoolPublish>(extent, slots, threads, broken); };
  return w;
}

}  // namespace

std::vector<Workload> pool_publish_workloads() {
  return {
      make("pool_publish", "pool: extents made durable, then published as roots (two slots)", 1u << 20, 24, 1024, 2, 1,
           false),
      make("pool_publish_mt",
           "pool: 1 MiB extents made durable by memcpy_persist_mt on 2 threads (per-thread fences), then published",
           4u << 20, 3, 1u << 20, 1, 2, false),
      make("pool_publish_16m", "pool: two 1 MiB extents in a 16 MiB pool (benchmark)", 16u << 20, 6, 1u << 20, 2, 1,
           false),
      make("pool_publish.data_after_root", "broken: roots published before the extents they point to are durable",
           1u << 20, 8, 1024, 2, 1, true),
  };
}

}  // namespace cairn::testing::crashsim::builtin
