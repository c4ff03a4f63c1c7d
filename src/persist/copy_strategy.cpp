// copy_strategy.cpp — DRAM working set, two NVM slots, version word.
#include "persist/copy_strategy.hpp"

#include <cstdlib>
#include <cstring>

namespace cairn::persist::detail {

std::byte* alloc_dram(std::size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, (bytes + 4095) / 4096 * 4096) != 0) return nullptr;
  std::memset(p, 0, bytes);
  return static_cast<std::byte*>(p);
}
void free_dram(std::byte* p) { std::free(p); }

Result<void> CopyStrategy::open(Layout& layout, const Options& options) {
  threads_ = options.threads;
  for (auto& e : layout.entries) {
    const int buffers = e.dual ? 2 : (detail_access::user_memory(*e.plain) ? 0 : 1);
    for (int k = 0; k < buffers; ++k) {
      std::byte* p = alloc_dram(e.bytes);
      if (p == nullptr)
        return make_error(Errc::out_of_space,
                          "cannot allocate " + std::to_string(e.bytes) + " bytes of DRAM for region '" + e.name + "'");
      owned_.emplace_back(p, free_dram);
      if (e.dual)
        detail_access::buf(*e.pair, k) = p;
      else
        detail_access::data(*e.plain) = p;
    }
  }
  auto s = SlotStore::open_or_create(options, layout, name());
  if (!s.ok()) return std::move(s).error();
  store_ = std::move(s.value());
  return {};
}

std::optional<std::uint64_t> CopyStrategy::committed() const { return store_->committed(); }

Result<void> CopyStrategy::restore(Layout& layout) {
  if (auto r = store_->check_layout(); !r.ok()) return r;
  const int k = store_->committed_slot();
  pool::Pool& pool = store_->pool();
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    const Entry& e = layout.entries[i];
    pool.device().read_charge(e.bytes, true);
    std::memcpy(e.latest(), store_->slot(i, k), e.bytes);
    bytes_copied += e.bytes;
  }
  return layout.apply_pointers(store_->read_pointers(k));
}

Result<void> CopyStrategy::commit(Layout& layout, std::uint64_t version) {
  if (auto r = store_->check_layout(); !r.ok())
    return make_error(r.error().code, r.error().message + " (refusing to overwrite it)");
  std::vector<PointerRecord> ptrs;
  if (auto r = layout.capture_pointers(ptrs); !r.ok()) return r;
  // Write into the slot the committed version does not use.
  const int k = store_->committed() ? 1 - store_->committed_slot() : 0;
  pool::Pool& pool = store_->pool();
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    const Entry& e = layout.entries[i];
    copy_out(pool, store_->slot(i, k), static_cast<const std::byte*>(e.latest()), e.bytes);
    bytes_copied += e.bytes;
  }
  store_->write_pointers_nodrain(k, ptrs);
  store_->publish(version, k);
  return {};
}

devices::Stats CopyStrategy::device_stats() const { return store_ ? store_->pool().stats().device : devices::Stats{}; }

}  // namespace cairn::persist::detail
