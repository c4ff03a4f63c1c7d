// sim_device.cpp — the crash-simulator device (see sim_device.hpp for the
// durability models and what is pending at a crash point).
#include "tests/crashsim/sim_device.hpp"

#include <execinfo.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "cairn/extended/pool.hpp"

namespace cairn::testing::crashsim {
namespace {

constexpr std::size_t kLine = 64;
constexpr std::size_t kSector = 512;

std::uint64_t load64(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

SimDevice::SimDevice(Config config) : config_(config) {}

SimDevice::~SimDevice() { unbind(); }

Result<devices::Ops> SimDevice::bind(const devices::Mapping& m) {
  if (base_ != nullptr) return make_error(Errc::invalid_argument, "crashsim device: already bound to a pool");
  base_ = m.base;
  size_ = m.size;
  if (config_.durable != nullptr) {
    durable_ = config_.durable;
  } else {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return make_error(Errc::io_error, "crashsim device: cannot allocate the durable image");
    own_durable_ = static_cast<std::byte*>(p);
    std::memcpy(own_durable_, base_, size_);
    durable_ = own_durable_;
  }
  if (config_.tracker != nullptr) {
    tracker_ = config_.tracker;
  } else if (config_.track_writes) {
    own_tracker_ = std::make_unique<WriteTracker>(base_, size_);
    tracker_ = own_tracker_.get();
  }
  if (tracker_ != nullptr) {
    auto started = tracker_->start();
    if (!started.ok()) return std::move(started).error();
  }
  const std::size_t pages = (size_ + kPage - 1) / kPage;
  changed_bits_.assign((pages + 63) / 64, 0);
  devices::Ops ops;
  ops.flush = &op_flush;
  ops.drain = &op_drain;
  ops.copy_nodrain = &op_copy;
  ops.fill_nodrain = &op_fill;
  return ops;
}

void SimDevice::unbind() {
  if (base_ == nullptr) return;
  own_tracker_.reset();  // stops tracking; an external tracker is the caller's
  tracker_ = nullptr;
  if (own_durable_ != nullptr) munmap(own_durable_, size_);
  own_durable_ = nullptr;
  durable_ = nullptr;
  base_ = nullptr;
}

void SimDevice::arm(bool on) {
  std::lock_guard lk(mu_);
  armed_ = on;
  arm_thread_ = std::this_thread::get_id();
}

std::uint64_t SimDevice::stack_hash() const {
  void* frames[32];
  const int n = backtrace(frames, 32);
  std::uint64_t h = 0x51ed270b27c2f3a5ULL;
  // Skip this function and crash_point; the op or marker that follows is
  // part of the failure point's identity.
  for (int i = 2; i < n; ++i) h = mix_seed(h, reinterpret_cast<std::uintptr_t>(frames[i]));
  return h;
}

void SimDevice::crash_point(PointKind kind, devices::Marker m, const char* label) {
  if (!armed_ || !hook_ || in_hook_) return;
  Point p;
  p.id = points_++;
  p.kind = kind;
  p.marker = m;
  p.label = label ? label : "";
  p.deferred = std::this_thread::get_id() != arm_thread_ || pool::Pool::in_parallel_persist();
  p.stack = hash_stacks_ ? stack_hash() : 0;
  // Keep the learned set near the working set: forget pages that are clean.
  if (tracker_ != nullptr && !p.deferred &&
      tracker_->learned_count() > std::max<std::size_t>(256, tracker_->pages() / 4)) {
    std::vector<std::uint64_t> busy;
    for (const auto& t : threads_)
      for (const auto& r : t.records) busy.push_back(r.line / kPage);
    std::sort(busy.begin(), busy.end());
    tracker_->forget_clean([&](std::uint32_t page) {
      const std::size_t off = std::size_t{page} * kPage;
      const std::size_t len = std::min(kPage, size_ - off);
      return !std::binary_search(busy.begin(), busy.end(), page) && std::memcmp(base_ + off, durable_ + off, len) == 0;
    });
  }
  in_hook_ = true;
  hook_(p);
  in_hook_ = false;
}

void SimDevice::end_point() {
  std::lock_guard lk(mu_);
  crash_point(PointKind::end);
}

void SimDevice::marker(devices::Marker m, const char* label) {
  std::lock_guard lk(mu_);
  crash_point(PointKind::marker, m, label);
}

std::vector<SimDevice::Record>& SimDevice::my_records() {
  const auto me = std::this_thread::get_id();
  for (auto& t : threads_)
    if (t.thread == me) return t.records;
  threads_.push_back(ThreadRecords{me, {}});
  return threads_.back().records;
}

void SimDevice::mark_durable_page(std::uint64_t page) {
  const std::uint64_t bit = std::uint64_t{1} << (page % 64);
  if ((changed_bits_[page / 64] & bit) == 0) {
    changed_bits_[page / 64] |= bit;
    changed_.push_back(static_cast<std::uint32_t>(page));
  }
}

void SimDevice::take_durable_changes(std::vector<std::uint32_t>& pages) {
  for (std::uint32_t p : changed_) {
    changed_bits_[p / 64] &= ~(std::uint64_t{1} << (p % 64));
    pages.push_back(p);
  }
  changed_.clear();
}

void SimDevice::record_lines(const void* addr, std::size_t len) {
  if (len == 0) return;
  const auto off = static_cast<std::uint64_t>(static_cast<const std::byte*>(addr) - base_);
  const std::uint64_t first = off / kLine * kLine;
  const std::uint64_t end = std::min<std::uint64_t>((off + len + kLine - 1) / kLine * kLine, size_);
  auto& recs = my_records();
  for (std::uint64_t line = first; line < end; line += kLine) {
    Record r;
    r.line = line;
    r.seq = seq_++;
    std::memcpy(r.data, base_ + line, kLine);
    recs.push_back(r);
  }
}

void SimDevice::sync_pages(std::uint64_t first, std::uint64_t last) {
  for (std::uint64_t p = first; p <= last; ++p) {
    const std::size_t off = p * kPage;
    const std::size_t len = std::min(kPage, size_ - off);
    if (std::memcmp(durable_ + off, base_ + off, len) == 0) continue;
    std::memcpy(durable_ + off, base_ + off, len);
    mark_durable_page(p);
    ++generation_;
  }
}

template <class Fn>
void SimDevice::for_each_candidate_page(Fn&& fn) {
  if (tracker_ != nullptr) {
    const std::size_t n = tracker_->learned_count();
    for (std::size_t i = 0; i < n; ++i) fn(tracker_->learned(i));
  } else {
    const std::size_t pages = (size_ + kPage - 1) / kPage;
    for (std::size_t p = 0; p < pages; ++p) fn(static_cast<std::uint32_t>(p));
  }
}

void SimDevice::sync_dirty_pages() {
  for_each_candidate_page([&](std::uint32_t p) { sync_pages(p, p); });
}

void SimDevice::after_write(const void* addr, std::size_t len) {
  if (len == 0) return;
  switch (config_.durability) {
    case Durability::adr: record_lines(addr, len); break;
    case Durability::eadr: break;  // durable at the next fence
    case Durability::msync: {
      const auto off = static_cast<std::uint64_t>(static_cast<const std::byte*>(addr) - base_);
      sync_pages(off / kPage, (off + len - 1) / kPage);
      break;
    }
    case Durability::pagecache: {
      const auto off = static_cast<std::uint64_t>(static_cast<const std::byte*>(addr) - base_);
      recorded_pages_.push_back({off / kPage, (off + len - 1) / kPage});
      break;
    }
  }
}

void SimDevice::drain_thread() {
  switch (config_.durability) {
    case Durability::adr: {
      auto& recs = my_records();
      // Lines become durable as they were when flushed, in flush order.
      for (const Record& r : recs) {
        if (std::memcmp(durable_ + r.line, r.data, kLine) == 0) continue;
        std::memcpy(durable_ + r.line, r.data, kLine);
        mark_durable_page(r.line / kPage);
        ++generation_;
      }
      recs.clear();
      break;
    }
    case Durability::eadr: sync_dirty_pages(); break;
    case Durability::msync: break;  // msync was durable when it returned
    case Durability::pagecache:
      // Every page recorded by any thread, as it is now.
      for (const auto& [first, last] : recorded_pages_) sync_pages(first, last);
      recorded_pages_.clear();
      break;
  }
}

void SimDevice::op_flush(void* ctx, const void* addr, std::size_t len) {
  auto& d = self(ctx);
  std::lock_guard lk(d.mu_);
  d.crash_point(PointKind::flush);
  d.after_write(addr, len);
  auto& c = d.counters();
  c.add(c.flush_calls, 1);
  if (len > 0) {
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    c.add(c.lines_flushed, (a + len + kLine - 1) / kLine - a / kLine);
  }
  if (d.config_.durability == Durability::msync) c.add(c.msyncs, 1);
}

void SimDevice::op_drain(void* ctx) {
  auto& d = self(ctx);
  std::lock_guard lk(d.mu_);
  d.crash_point(PointKind::drain);
  d.drain_thread();
  d.counters().add(d.counters().drains, 1);
}

void SimDevice::op_copy(void* ctx, void* dst, const void* src, std::size_t len) {
  auto& d = self(ctx);
  std::lock_guard lk(d.mu_);
  d.crash_point(PointKind::copy);
  std::memcpy(dst, src, len);
  d.after_write(dst, len);
  auto& c = d.counters();
  c.add(c.copied_bytes, len);
  c.add(c.nt_bytes, len);
}

void SimDevice::op_fill(void* ctx, void* dst, int v, std::size_t len) {
  auto& d = self(ctx);
  std::lock_guard lk(d.mu_);
  d.crash_point(PointKind::fill);
  std::memset(dst, v, len);
  d.after_write(dst, len);
  auto& c = d.counters();
  c.add(c.copied_bytes, len);
  c.add(c.nt_bytes, len);
}

void SimDevice::pending(UnitSet& out) {
  out.clear();
  const std::byte* vals[3];
  if (config_.durability == Durability::msync || config_.durability == Durability::pagecache) {
    for_each_candidate_page([&](std::uint32_t p) {
      const std::size_t off = std::size_t{p} * kPage;
      const std::size_t len = std::min(kPage, size_ - off);
      if (std::memcmp(base_ + off, durable_ + off, len) == 0) return;
      for (std::size_t s = off; s < off + len; s += kSector) {
        const std::size_t n = std::min(kSector, off + len - s);
        if (std::memcmp(base_ + s, durable_ + s, n) == 0) continue;
        vals[0] = durable_ + s;
        vals[1] = base_ + s;
        out.add(s, static_cast<std::uint32_t>(n), p, vals, 2);
      }
    });
    return;
  }

  // Flushed, undrained lines: the newest record of each line, in flush order.
  std::vector<const Record*> recs;
  for (const auto& t : threads_)
    for (const auto& r : t.records) recs.push_back(&r);
  std::sort(recs.begin(), recs.end(),
            [](const Record* a, const Record* b) { return a->line != b->line ? a->line < b->line : a->seq < b->seq; });
  std::vector<const Record*> newest;
  for (std::size_t i = 0; i < recs.size(); ++i)
    if (i + 1 == recs.size() || recs[i + 1]->line != recs[i]->line) newest.push_back(recs[i]);
  std::vector<std::uint64_t> covered;  // lines handled here, sorted
  covered.reserve(newest.size());
  for (const Record* r : newest) covered.push_back(r->line);
  std::sort(newest.begin(), newest.end(), [](const Record* a, const Record* b) { return a->seq < b->seq; });
  for (const Record* r : newest) {
    for (std::size_t w = 0; w < kLine && r->line + w + 8 <= size_; w += 8) {
      const std::byte* d = durable_ + r->line + w;
      const std::byte* f = r->data + w;
      const std::byte* c = base_ + r->line + w;
      const std::uint64_t dv = load64(d), fv = load64(f), cv = load64(c);
      unsigned n = 0;
      vals[n++] = d;
      if (fv != dv) vals[n++] = f;
      if (cv != dv && cv != fv) vals[n++] = c;
      if (n >= 2) out.add(r->line + w, 8, r->line / kLine, vals, n);
    }
  }
  // Written, not flushed (or flushed and written again, handled above).
  for_each_candidate_page([&](std::uint32_t p) {
    const std::size_t off = std::size_t{p} * kPage;
    const std::size_t len = std::min(kPage, size_ - off);
    if (std::memcmp(base_ + off, durable_ + off, len) == 0) return;
    for (std::size_t line = off; line < off + len; line += kLine) {
      if (std::memcmp(base_ + line, durable_ + line, std::min(kLine, off + len - line)) == 0) continue;
      if (!covered.empty() && std::binary_search(covered.begin(), covered.end(), line)) continue;
      for (std::size_t w = line; w < line + kLine && w + 8 <= off + len; w += 8) {
        if (load64(base_ + w) == load64(durable_ + w)) continue;
        vals[0] = durable_ + w;
        vals[1] = base_ + w;
        out.add(w, 8, w / kLine, vals, 2);
      }
    }
  });
}

}  // namespace cairn::testing::crashsim
