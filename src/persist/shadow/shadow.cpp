// shadow.cpp — `shadow`: multi-versioning by copy-on-write with O(1) restore
// (seed 001 §3.2.2). Two versions of every region live in NVM (SlotStore's
// two slots); the application works on a private copy-on-write view of the
// committed one.
//
// The working view. The slot area of the committed slot is mapped MAP_PRIVATE
// from the pool file; Region::data() points into that mapping. Reads hit the
// NVM pages directly; the first write to a page makes the kernel copy it into
// a private DRAM page, so no slot is ever written by the application.
//
// Commit v (durability order):
//   1. copy every region's latest buffer into the other slot k with
//      non-temporal stores on all threads (Pool::memcpy_persist_mt: each
//      worker fences its own stores), and the pointer table of slot k;
//   2. SlotStore::publish(v, k): drain, store the version word, persist it —
//      the commit point. A crash before it leaves slot c (never written) as
//      the committed version; after it, slot k. If any write-back of step 1
//      failed, publish refuses and poisons the store instead: slot c stays
//      the committed version (and the view, never re-mapped, still valid).
// The view is NOT re-mapped onto slot k: it already shows exactly slot k's
// bytes. Its private pages were copied into slot k; its other pages still
// show slot c, where they were never written since the view was mapped, and
// slot k received those same bytes in step 1. So the invariant is "the view's
// shared pages hold the same bytes in both slots", and it survives the next
// commit too: that one writes slot c, copying each shared page onto itself.
// Keeping the private pages makes a commit one copy (freeing them would cost
// about half as much again) and spares the next iteration its copy-on-write
// faults on pages it writes again, at the price of DRAM: up to one private
// page per page of state, as during an iteration that writes all of it.
// Restore: re-map the view onto the committed slot, which drops the private
// pages, and relocate the registered pointers. No data is copied: in
// a fresh process after a crash the cost is a few mmap calls plus one page
// fault per page holding a registered pointer, whatever the state size; a
// rollback in the same process also frees the private pages.
//
// Dual regions. Each of the two buffers is a private view of one slot: buffer
// k of every dual region lives in a mapping of slot area k. The buffer a
// commit makes latest is then always the view of the slot that commit writes
// (read index and slot alternate together; restore sets the read index to the
// committed slot), so write() keeps the previous version's contents as with
// every other strategy, and nothing is ever copied between the two buffers.
// Copying that buffer into its own slot rewrites unmodified pages with the
// bytes they already hold (the same page-cache page seen through two
// mappings), which is harmless: that slot is not the committed one.
//
// Costs. Memory: a private 4 KiB DRAM page for every page written since the
// last restore (at most the size of the state), on top of the pool file.
// Time: the first write to each page after a restore is a minor fault that
// copies the page (a microsecond or two each), the first read a cheaper fault
// that maps the page-cache page. Reads through the view are not charged by an
// emulated device, only the commit's writes into NVM are.
//
// If the pool is not backed by a regular file that can be mapped (a pool over
// a memory image), the working set falls back to DRAM copies: commit as
// nt-copy, restore copies back (O(data), not O(1)).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "persist/copy_strategy.hpp"
#include "persist/slot_store.hpp"
#include "persist/strategy.hpp"

namespace cairn::persist::detail {

namespace {

constexpr std::size_t kPage = 4096;

class Shadow final : public Strategy {
 public:
  ~Shadow() override { unmap_all(); }
  std::string name() const override { return "shadow"; }
  Result<void> open(Layout& layout, const Options& options) override;
  std::optional<std::uint64_t> committed() const override {
    return store_ ? store_->committed() : std::optional<std::uint64_t>{};
  }
  Result<void> restore(Layout& layout) override;
  Result<void> commit(Layout& layout, std::uint64_t version) override;
  devices::Stats device_stats() const override { return store_ ? store_->pool().stats().device : devices::Stats{}; }

 private:
  // The slot the committed version is in; slot 0 while nothing is committed.
  int committed_slot() const { return store_->committed() ? store_->committed_slot() : 0; }
  // Maps slot area `slot` privately at `at` (MAP_FIXED) or anywhere (at == null).
  Result<std::byte*> map_slot(std::byte* at, int slot);
  Result<void> map_views(Layout& layout);
  void point_regions(Layout& layout, int read_slot);
  void unmap_all();
  Result<void> open_dram_fallback(Layout& layout);

  // Checks the committed slot against its checksums (see the top).
  Result<void> verify_slot(const Layout& layout, int c, unsigned threads) const;

  std::unique_ptr<SlotStore> store_;
  RestoreCheck check_;  // of the version restore switched to
  unsigned threads_ = 0;
  int fd_ = -1;
  std::size_t map_bytes_ = 0;
  std::byte* view_ = nullptr;            // plain regions: a view of slot c (see the top)
  std::byte* dual_view_[2] = {nullptr};  // dual buffer k: always slot k
  bool dram_ = false;                    // fallback: DRAM working set, copies
  std::vector<util::DramBuffer> owned_;
};

Result<std::byte*> Shadow::map_slot(std::byte* at, int slot) {
  const int flags = MAP_PRIVATE | (at != nullptr ? MAP_FIXED : 0);
  void* p =
      ::mmap(at, map_bytes_, PROT_READ | PROT_WRITE, flags, fd_, static_cast<off_t>(store_->area_file_offset(slot)));
  if (p == MAP_FAILED)
    return make_error(Errc::io_error, store_->path() + ": cannot map slot " + std::to_string(slot) +
                                          " privately as the working view: " + std::strerror(errno));
  return static_cast<std::byte*>(p);
}

void Shadow::unmap_all() {
  if (view_ != nullptr) ::munmap(view_, map_bytes_);
  for (auto& d : dual_view_)
    if (d != nullptr) ::munmap(d, map_bytes_);
  view_ = dual_view_[0] = dual_view_[1] = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Shadow::point_regions(Layout& layout, int read_slot) {
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    Entry& e = layout.entries[i];
    const std::size_t off = store_->region_offset(i);
    if (e.dual) {
      detail_access::buf(*e.pair, 0) = dual_view_[0] + off;
      detail_access::buf(*e.pair, 1) = dual_view_[1] + off;
      detail_access::read_index(*e.pair) = read_slot;
    } else {
      detail_access::data(*e.plain) = view_ + off;
    }
  }
}

Result<void> Shadow::map_views(Layout& layout) {
  const std::string& path = store_->pool().path();
  if (path.empty() || layout.internal.shadow_dram_view) return make_error(Errc::unsupported, "no pool file");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return make_error(Errc::unsupported, path + " is not a regular file");
  map_bytes_ = store_->area_bytes();
  if (map_bytes_ % kPage != 0 || store_->area_file_offset(0) % kPage != 0 || store_->area_file_offset(1) % kPage != 0)
    return make_error(Errc::unsupported, path + ": slot areas are not page aligned");
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // private mappings need only read access
  if (fd_ < 0) return make_error(Errc::unsupported, path + ": " + std::strerror(errno));
  const int c = committed_slot();
  auto v = map_slot(nullptr, c);
  if (!v.ok()) return std::move(v).error();
  view_ = v.value();
  bool has_dual = false;
  for (const auto& e : layout.entries) has_dual |= e.dual;
  if (has_dual) {
    for (int k = 0; k < 2; ++k) {
      auto d = map_slot(nullptr, k);
      if (!d.ok()) return std::move(d).error();
      dual_view_[k] = d.value();
    }
  }
  point_regions(layout, c);
  return {};
}

Result<void> Shadow::open_dram_fallback(Layout& layout) {
  dram_ = true;
  return allocate_dram_working_set(layout, owned_);
}

Result<void> Shadow::open(Layout& layout, const Options& options) {
  threads_ = options.threads;
  // Whether the pool is new (its slots are zero from creation) or an earlier
  // run left it, possibly with a half-written first commit in it.
  auto s = SlotStore::open_or_create(options, layout, name());
  if (!s.ok()) return std::move(s).error();
  store_ = std::move(s.value());
  // The working set is the stored slots themselves: a pool of another layout
  // cannot even be viewed, so say so now.
  if (auto r = store_->check_layout(); !r.ok()) return r;
  if (!store_->committed() && store_->existed()) {
    // Nothing committed: no slot holds a version, so both may be cleared. The
    // application starts from zeroed memory, as with the DRAM strategies.
    pool::Pool& pool = store_->pool();
    for (int k = 0; k < 2; ++k) pool.memset_persist(store_->area(k), 0, store_->area_bytes());
  }
  if (auto r = map_views(layout); !r.ok()) {
    unmap_all();
    return open_dram_fallback(layout);
  }
  return {};
}

Result<void> Shadow::commit(Layout& layout, std::uint64_t version) {
  if (auto r = store_->check_layout(); !r.ok())
    return make_error(r.error().code, r.error().message + " (refusing to overwrite it)");
  // A poisoned store or too many pointers: refused before slot k is touched.
  if (auto r = store_->check_commit(layout); !r.ok()) return r;
  // Nothing is committed on top of a restored version found damaged.
  if (auto r = check_.wait(); !r.ok()) return r;
  std::vector<PointerRecord> ptrs;
  if (auto r = layout.capture_pointers(ptrs); !r.ok()) return r;
  const int k = 1 - committed_slot();
  // Dual buffers alternate with the slots: the latest one must be the view of
  // slot k (Context flipped the read indices just before this call).
  if (!dram_)
    for (const auto& e : layout.entries)
      if (e.dual && detail_access::read_index(*e.pair) != k)
        return make_error(Errc::invalid_argument,
                          "shadow: dual region '" + e.name + "' is out of step with the slots; call restore() first");

  // 1. The new version into slot k, which holds no committed version.
  pool::Pool& pool = store_->pool();
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    const Entry& e = layout.entries[i];
    const auto* src = static_cast<const std::byte*>(e.latest());
    pool.memcpy_persist_mt(store_->slot(i, k), src, e.bytes, threads_,
                           pool::Pool::Drain::by_commit);  // publish drains
    store_->seal(i, k, src, 0, e.bytes, threads_);
    bytes_copied += e.bytes;
  }
  store_->flush_seals(k);
  if (auto r = store_->write_pointers_nodrain(k, ptrs); !r.ok()) return r;
  // 2. The commit point; it fails, naming nothing, if a write-back failed.
  if (auto r = store_->publish(version, k); !r.ok()) return r;
  return {};  // the view stays as it is: see the top
}

Result<void> Shadow::restore(Layout& layout) {
  if (auto r = store_->check_layout(); !r.ok()) return r;
  const int c = store_->committed_slot();
  if (dram_) {
    // Fallback: copy the committed slot back, as the DRAM strategies do.
    pool::Pool& pool = store_->pool();
    for (std::size_t i = 0; i < layout.entries.size(); ++i) {
      const Entry& e = layout.entries[i];
      pool.device().read_charge(e.bytes, true);
      std::memcpy(e.latest(), store_->slot(i, c), e.bytes);
      bytes_copied += e.bytes;
      if (auto r = store_->verify_region(i, c, static_cast<const std::byte*>(e.latest()), threads_); !r.ok()) return r;
    }
    return layout.apply_pointers(store_->read_pointers(c));
  }
  // Re-map instead of copying: the view shows slot c again and the private
  // pages (uncommitted writes) are dropped. Dual buffers keep their slots;
  // the committed one becomes read().
  auto p = map_slot(view_, c);
  if (!p.ok()) return std::move(p).error();
  for (int k = 0; k < 2; ++k) {
    if (dual_view_[k] == nullptr) continue;
    auto d = map_slot(dual_view_[k], k);
    if (!d.ok()) return std::move(d).error();
  }
  point_regions(layout, c);
  // The slot itself is checked (the views are private: relocating the
  // pointers below never writes it), at once if small, else in the background.
  if (layout.total_bytes() <= RestoreCheck::kInlineBytes) {
    if (auto r = verify_slot(layout, c, threads_); !r.ok()) return r;
  } else {
    check_.start([this, &layout, c] { return verify_slot(layout, c, 1); });
  }
  return layout.apply_pointers(store_->read_pointers(c));
}

Result<void> Shadow::verify_slot(const Layout& layout, int c, unsigned threads) const {
  for (std::size_t i = 0; i < layout.entries.size(); ++i)
    if (auto r = store_->verify_region(i, c, store_->slot(i, c), threads); !r.ok()) return r;
  return {};
}

}  // namespace

std::unique_ptr<Strategy> make_shadow() { return std::make_unique<Shadow>(); }

}  // namespace cairn::persist::detail
