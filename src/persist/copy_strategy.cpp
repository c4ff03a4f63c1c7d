// copy_strategy.cpp — DRAM working set, two NVM slots, version word; and the
// page write tracking behind incremental commit.
#include "persist/copy_strategy.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "util/kernel_write_tracking.hpp"
#include "util/write_faults.hpp"

namespace cairn::persist::detail {

Result<void> allocate_dram_working_set(Layout& layout, std::vector<util::DramBuffer>& owned) {
  for (auto& e : layout.entries) {
    const int buffers = e.dual ? 2 : (detail_access::user_memory(*e.plain) ? 0 : 1);
    for (int k = 0; k < buffers; ++k) {
      auto b = util::DramBuffer::allocate(e.bytes, "region '" + e.name + "'");
      if (!b.ok()) return std::move(b).error();
      std::byte* p = b.value().data();
      owned.push_back(std::move(b.value()));
      if (e.dual)
        detail_access::buf(*e.pair, k) = p;
      else
        detail_access::data(*e.plain) = p;
    }
  }
  return {};
}

// ---- write tracking (incremental commit) ----

namespace {

constexpr std::size_t kPage = util::kPageBytes;

}  // namespace

// Records which pages of one buffer are written, per commit interval: by the
// kernel where it can, else by write faults.
class PageTracker {
 public:
  static std::unique_ptr<PageTracker> start(std::byte* base, std::size_t tracked_bytes) {
    const std::size_t pages = tracked_bytes / kPage;
    if (pages == 0 || reinterpret_cast<std::uintptr_t>(base) % kPage != 0) return nullptr;
    std::unique_ptr<PageTracker> t(new PageTracker(base, pages));
    if (util::kernel_write_tracking_wanted()) t->kernel_ = util::KernelWriteTracker::start(base, pages);
    if (t->kernel_) return t;
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    auto h = util::watch_write_faults(b, b + pages * kPage, &PageTracker::on_fault, t.get());
    if (!h.ok()) return nullptr;  // no handler or too many ranges: copy this buffer whole
    t->handle_ = h.value();
    t->protect();
    return t;
  }

  ~PageTracker() {
    if (kernel_) return;  // its destructor drops the protection
    ::mprotect(base_, pages_ * kPage, PROT_READ | PROT_WRITE);
    util::unwatch_write_faults(handle_);
  }
  PageTracker(const PageTracker&) = delete;
  PageTracker& operator=(const PageTracker&) = delete;

  std::size_t pages() const { return pages_; }
  // At a commit, before dirty() is asked: the kernel's record of the
  // interval joins the current set (the faults mode records as it goes).
  void gather() {
    if (kernel_ && !kernel_->collect([this](std::size_t first, std::size_t end) { mark(first, end); }))
      overflow_.store(true, std::memory_order_relaxed);
  }
  // Written in the current interval (and, with_previous, the one before).
  bool dirty(std::size_t page, bool with_previous) const {
    const std::uint64_t bit = std::uint64_t{1} << (page % 64);
    return (cur_[page / 64].load(std::memory_order_relaxed) & bit) != 0 ||
           (with_previous && (prev_[page / 64] & bit) != 0);
  }
  bool overflowed(bool with_previous) const {
    return overflow_.load(std::memory_order_relaxed) || (with_previous && prev_overflow_);
  }
  // A commit ends the interval: its pages become the previous set, a new
  // empty set starts and the buffer is write-protected again (gather() did
  // that already in the kernel mode).
  void rotate() {
    for (std::size_t w = 0; w < words_; ++w) prev_[w] = cur_[w].exchange(0, std::memory_order_relaxed);
    prev_overflow_ = overflow_.exchange(false, std::memory_order_relaxed);
    if (!kernel_) protect();
  }
  // Writable without recording (a restore copies into all of it).
  void suspend() {
    if (!kernel_) ::mprotect(base_, pages_ * kPage, PROT_READ | PROT_WRITE);
  }
  // After a restore: nothing written since, the interval before unknown.
  void reset() {
    overflow_.store(kernel_ && !kernel_->collect([](std::size_t, std::size_t) {}), std::memory_order_relaxed);
    for (std::size_t w = 0; w < words_; ++w) cur_[w].store(0, std::memory_order_relaxed);
    prev_overflow_ = true;
    if (!kernel_) protect();
  }

 private:
  PageTracker(std::byte* base, std::size_t pages)
      : base_(base),
        pages_(pages),
        words_((pages + 63) / 64),
        cur_(new std::atomic<std::uint64_t>[words_]),
        prev_(words_, 0) {
    for (std::size_t w = 0; w < words_; ++w) cur_[w].store(0, std::memory_order_relaxed);
  }
  void mark(std::size_t first, std::size_t end) {
    for (std::size_t p = first; p < end;) {
      const std::size_t w = p / 64, lo = p % 64, n = std::min<std::size_t>(64 - lo, end - p);
      const std::uint64_t bits = n == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1) << lo;
      cur_[w].fetch_or(bits, std::memory_order_relaxed);
      p += n;
    }
  }
  void protect() {
    // If this fails, writes go unseen: the interval counts as all written.
    if (::mprotect(base_, pages_ * kPage, PROT_READ) != 0) overflow_.store(true, std::memory_order_relaxed);
  }
  // In signal context: record the page and make it writable again.
  static bool on_fault(void* ctx, std::uintptr_t addr) {
    auto* t = static_cast<PageTracker*>(ctx);
    const auto b = reinterpret_cast<std::uintptr_t>(t->base_);
    const std::size_t page = (addr - b) / kPage;
    t->cur_[page / 64].fetch_or(std::uint64_t{1} << (page % 64), std::memory_order_relaxed);
    if (::mprotect(reinterpret_cast<void*>(b + page * kPage), kPage, PROT_READ | PROT_WRITE) == 0) return true;
    // Each unprotected page can split a mapping; at the kernel's limit stop
    // tracking this buffer until the next commit (it is copied whole).
    t->overflow_.store(true, std::memory_order_relaxed);
    return ::mprotect(t->base_, t->pages_ * kPage, PROT_READ | PROT_WRITE) == 0;
  }

  std::byte* base_;
  std::size_t pages_, words_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> cur_;
  std::vector<std::uint64_t> prev_;
  bool prev_overflow_ = true;          // nothing known before the first commit
  std::atomic<bool> overflow_{false};  // tracking stopped: treat all as written
  std::unique_ptr<util::KernelWriteTracker> kernel_;
  int handle_ = -1;
};

// ---- the strategy ----

CopyStrategy::CopyStrategy() = default;
CopyStrategy::~CopyStrategy() = default;

Result<void> CopyStrategy::open(Layout& layout, const Options& options) {
  threads_ = options.threads;
  if (auto r = allocate_dram_working_set(layout, owned_); !r.ok()) return r;
  auto s = SlotStore::open_or_create(options, layout, name());
  if (!s.ok()) return std::move(s).error();
  store_ = std::move(s.value());
  incremental_ = options.incremental;
  if (incremental_) start_tracking(layout);
  return {};
}

void CopyStrategy::start_tracking(Layout& layout) {
  trackers_.resize(layout.entries.size());
  for (int k = 0; k < 2; ++k) slot_buffer_[k].assign(layout.entries.size(), -1);
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    Entry& e = layout.entries[i];
    if (e.dual) {
      // Cairn's buffers are padded to whole pages: track all of them.
      for (int b = 0; b < 2; ++b)
        trackers_[i][b] = PageTracker::start(static_cast<std::byte*>(detail_access::buf(*e.pair, b)),
                                             (e.bytes + kPage - 1) / kPage * kPage);
    } else if (!detail_access::user_memory(*e.plain)) {
      trackers_[i][0] =
          PageTracker::start(static_cast<std::byte*>(e.plain->data()), (e.bytes + kPage - 1) / kPage * kPage);
    } else {
      // Application memory: whole pages only, never beyond the region.
      trackers_[i][0] = PageTracker::start(static_cast<std::byte*>(e.plain->data()), e.bytes / kPage * kPage);
    }
  }
}

std::optional<std::uint64_t> CopyStrategy::committed() const { return store_->committed(); }

Result<void> CopyStrategy::restore(Layout& layout) {
  if (auto r = store_->check_layout(); !r.ok()) return r;
  const int k = store_->committed_slot();
  pool::Pool& pool = store_->pool();
  for (auto& t : trackers_)
    for (auto& b : t)
      if (b) b->suspend();
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    const Entry& e = layout.entries[i];
    pool.device().read_charge(e.bytes, true);
    std::memcpy(e.latest(), store_->slot(i, k), e.bytes);
    bytes_copied += e.bytes;
    // What was copied back is what the application resumes from: check it
    // (before the pointers in it are relocated).
    if (auto r = store_->verify_region(i, k, static_cast<const std::byte*>(e.latest()), threads_); !r.ok()) return r;
  }
  if (incremental_) {
    // The working set equals slot k now; nothing is known about the other.
    // Tracking resumes before the pointers are relocated, so the pages they
    // live in count as written (the slot holds their old values).
    ++event_;
    slot_event_[k] = event_;
    slot_event_[1 - k] = kUnknown;
    for (std::size_t i = 0; i < layout.entries.size(); ++i) {
      const Entry& e = layout.entries[i];
      slot_buffer_[k][i] = e.dual ? detail_access::read_index(*e.pair) : 0;
      slot_buffer_[1 - k][i] = -1;
    }
    for (auto& t : trackers_)
      for (auto& b : t)
        if (b) b->reset();
  }
  return layout.apply_pointers(store_->read_pointers(k));
}

void CopyStrategy::copy_entry(const Layout& layout, std::size_t i, int k) {
  const Entry& e = layout.entries[i];
  pool::Pool& pool = store_->pool();
  std::byte* dst = store_->slot(i, k);
  const auto* src = static_cast<const std::byte*>(e.latest());
  const int buffer = e.dual ? detail_access::read_index(*e.pair) : 0;
  const PageTracker* t = incremental_ ? trackers_[i][buffer].get() : nullptr;
  // Slot k holds this buffer as it was at event slot_event_[k]: the pages
  // written since are those of the current interval, plus the previous one if
  // that event was the commit before last.
  const std::uint64_t since = slot_event_[k];
  const bool known =
      t != nullptr && since != kUnknown && (since == event_ || since + 1 == event_) && slot_buffer_[k][i] == buffer;
  const bool with_previous = known && since + 1 == event_;
  std::vector<pool::Pool::Run> runs;
  std::size_t copied = 0;
  const bool incremental = known && !t->overflowed(with_previous);
  if (incremental) {
    const std::size_t pages = t->pages();
    for (std::size_t p = 0; p < pages;) {
      if (!t->dirty(p, with_previous)) {
        ++p;
        continue;
      }
      std::size_t q = p + 1;
      while (q < pages && t->dirty(q, with_previous)) ++q;
      const std::size_t off = p * kPage, end = std::min(q * kPage, e.bytes);
      runs.push_back({off, end - off});
      copied += end - off;
      p = q;
    }
    // Application memory ending inside a page: the untracked tail, always.
    const std::size_t tracked = std::min(pages * kPage, e.bytes);
    if (tracked < e.bytes) {
      runs.push_back({tracked, e.bytes - tracked});
      copied += e.bytes - tracked;
    }
  }
  if (!incremental || static_cast<double>(copied) >= kWholeShare * static_cast<double>(e.bytes)) {
    runs.assign(1, {0, e.bytes});
    copied = e.bytes;
  }
  if (!runs.empty()) copy_out(pool, dst, src, runs);
  // The chunks this copy rewrote get their checksums, each once (runs are
  // pages, in order: several can share a chunk); the others still hold the
  // bytes, and the checksums, of the version that wrote them last.
  std::size_t sealed_to = 0;  // chunks below this one are done
  for (const auto& run : runs) {
    const std::size_t from = std::max(run.offset, sealed_to), end = run.offset + run.bytes;
    if (from >= end) continue;
    store_->seal(i, k, src, from, end - from, threads_);
    sealed_to = (end + SlotStore::kChunk - 1) / SlotStore::kChunk * SlotStore::kChunk;
  }
  bytes_copied += copied;
  incremental_bytes_saved += e.bytes - copied;
}

Result<void> CopyStrategy::commit(Layout& layout, std::uint64_t version) {
  if (auto r = store_->check_layout(); !r.ok())
    return make_error(r.error().code, r.error().message + " (refusing to overwrite it)");
  // A poisoned store or too many pointers: refused before slot k is touched.
  if (auto r = store_->check_commit(layout); !r.ok()) return r;
  std::vector<PointerRecord> ptrs;
  if (auto r = layout.capture_pointers(ptrs); !r.ok()) return r;
  // Write into the slot the committed version does not use.
  const int k = store_->committed() ? 1 - store_->committed_slot() : 0;
  for (auto& t : trackers_)
    for (auto& b : t)
      if (b) b->gather();
  for (std::size_t i = 0; i < layout.entries.size(); ++i) copy_entry(layout, i, k);
  store_->flush_seals(k);
  Result<void> done = store_->write_pointers_nodrain(k, ptrs);
  if (done.ok()) done = store_->publish(version, k);
  if (!done.ok()) {
    // Slot k was (partly) overwritten but holds no version: copy it whole
    // next time.
    if (incremental_) slot_event_[k] = kUnknown;
    return done;
  }
  if (incremental_) {
    // Slot k now equals the working set; a new write interval starts.
    slot_event_[k] = ++event_;
    for (std::size_t i = 0; i < layout.entries.size(); ++i) {
      const Entry& e = layout.entries[i];
      slot_buffer_[k][i] = e.dual ? detail_access::read_index(*e.pair) : 0;
    }
    for (auto& t : trackers_)
      for (auto& b : t)
        if (b) b->rotate();
  }
  return {};
}

devices::Stats CopyStrategy::device_stats() const { return store_ ? store_->pool().stats().device : devices::Stats{}; }

}  // namespace cairn::persist::detail
