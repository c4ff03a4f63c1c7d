// in_place.cpp — `in-place`: in-place versioning with asynchronous proactive
// flushing (seed 004 §4).
//
// Dual regions. The two buffers of every DualRegion ARE the region's two
// SlotStore slots in the pool: nothing is ever copied. In the iteration that
// will become version v the application reads read() (the slot holding v-1)
// and writes write() (the other slot, the "target"). Commit v:
//   1. every target line is written back (clwb/clflushopt) and fenced by the
//      thread that flushed it: the helper thread, the threads of persist_mt,
//      or the committing thread;
//   2. the pointer table and the layout hash of the target slot are stored;
//   3. SlotStore::publish fences the committing thread, refuses (poisoning
//      the store) if any of these write-backs failed, and stores the version
//      word (v << 1 | target) — one aligned 8-byte store, the commit point.
// The slot of the committed version is never written until a newer version
// is committed (restore sets read() to it and write() to the other slot), so
// a crash at any moment leaves it whole. The one exception is pointer
// relocation: restore rewrites the registered pointers inside read() for this
// run's addresses. Their bytes on media do not matter: every restore rewrites
// them from the slot's pointer table, which is never touched.
//
// Plain regions (one working copy, e.g. data updated non-uniformly — the
// seed's MG case) keep their working copy in page-aligned DRAM and are
// persisted by non-temporal copies into the target slot (the seed's fallback
// "use nt-copy for objects with non-uniform updates"); restore copies them
// back from the committed slot. Restore of dual regions is O(1): it only sets
// the read index.
//
// Asynchronous proactive flushing (seed 004 §4.2). With Options::async_flush,
// open() is the seed's flush_init(): it starts one helper thread and a FIFO
// queue. flush_async() (whole state) or flush_async(region) (one region the
// iteration is done writing) queue the target's flush — or, for a plain
// region, its non-temporal copy — and return; the helper works through the
// queue in 512 KiB pieces while the application computes. flush_barrier()
// makes the calling thread take what is still queued (with all threads, via
// persist_mt / memcpy_persist_mt) and waits for the helper's piece in flight.
// Every piece is flushed and drained by the thread that did it before it is
// counted done under the queue's mutex, so once the barrier returns all of it
// is durable: a fence orders only its own thread's flushes. commit() hands
// over whatever the application did not, then runs the barrier, then
// publishes. Without async_flush the same hand-over happens at once on the
// calling threads (Pool::persist_mt, memcpy_persist_mt), and so does, with
// it, a hand-over of kInlineBytes or less.
//
// Checksums (SlotStore's payload checksums). Whoever writes back a piece
// computes its chunks' CRC-32C first, while it has the bytes in cache: the
// helper, the barrier's threads, or the caller of an inline hand-over. What
// is streamed is checksummed by stream() from its source in the copy's own
// pass (see stream()); a region nothing was handed over for (Options::flush
// off), and what stream() did not gather whole, is sealed at commit from the
// slot. The table is written back with the pointer
// table, before the version word. Restore checks the slot it switches to
// (check_dual): at once for a small state, else in the background, the next
// commit waiting for the result.
//
// Streamed regions. A kernel may write a dual region's new version through
// Context::stream (non-temporal copies through the pool's device, no fence),
// fence on each writing thread (stream_fence) and declare it (streamed): the
// region then counts as handed over and nothing of it is written back. Its
// lines reached the memory controller by non-temporal stores, each ordered
// by its thread's fence before the commit, so publish's rule (data durable
// before the version word) holds as for a flushed region.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "persist/slot_store.hpp"
#include "persist/strategy.hpp"
#include "util/crc32c.hpp"
#include "util/dram_buffer.hpp"

namespace cairn::persist::detail {
namespace {

// The helper takes the queue in pieces of this size, so a barrier can take
// over the rest of a large region with all threads.
constexpr std::size_t kHelperPiece = 512 * 1024;
// A hand-over this small is flushed (or copied) at once by the calling
// thread, its lines still in cache: waking the helper and waiting for it at
// the barrier costs more than the work (npb-cg class A hands over three
// 112 KiB vectors per 2.8 ms iteration: +3.6 % through the helper, +0.7 %
// flushed by the caller; issue 11).
constexpr std::size_t kInlineBytes = 256 * 1024;

// What one thread streamed last into one chunk of a dual region: bytes
// [start, end) of the region, consecutive, and their CRC register chained
// from zero (no shift, no atomic per stream() call); void once `iteration`
// is not the strategy's.
struct Run {
  const void* owner = nullptr;
  std::uint64_t iteration = 0;
  std::size_t region = 0, chunk = 0, start = 0, end = 0;
  std::uint32_t reg = 0;
};
thread_local Run t_run;
// Iterations are numbered across every InPlace of the process, so a Run left
// by a strategy since destroyed never matches one at the same address.
std::atomic<std::uint64_t> g_iterations{1};

class InPlace final : public Strategy {
 public:
  ~InPlace() override;
  std::string name() const override { return "in-place"; }

  Result<void> open(Layout& layout, const Options& options) override;
  std::optional<std::uint64_t> committed() const override { return store_->committed(); }
  Result<void> restore(Layout& layout) override;
  Result<void> commit(Layout& layout, std::uint64_t version) override;
  void flush_async(Layout& layout) override;
  void flush_async_region(Layout& layout, std::size_t entry) override;
  void flush_barrier() override;
  void stream(void* dst, const void* src, std::size_t len) override;
  // Where the commit's own drain covers every thread (page write-back), a
  // fence per streaming thread would only split one write-back into many.
  void stream_fence() override {
    if (!store_->pool().drain_covers_all_threads()) store_->pool().drain();
    if (t_run.owner == this) publish_run(t_run);
  }
  void streamed_region(Layout& layout, std::size_t entry) override;
  devices::Stats device_stats() const override { return store_ ? store_->pool().stats().device : devices::Stats{}; }

 private:
  // One flush (src == nullptr) or non-temporal copy of n bytes into dst:
  // bytes [offset, offset + n) of region `entry`, bound for slot `slot`.
  struct Piece {
    std::byte* dst = nullptr;
    const std::byte* src = nullptr;
    std::size_t n = 0;
    std::size_t entry = 0, offset = 0;
    int slot = 0;
  };
  // The checksum of a chunk of a streamed dual region, gathered run by run
  // as stream() copies them (each run's register moved past the bytes after
  // it, util::crc32c_shift, and joined by xor: any order, any thread) and how
  // many bytes that covers.
  struct StreamedChunk {
    std::atomic<std::uint32_t> pieces{0};
    std::atomic<std::uint32_t> bytes{0};
    // A chunk one thread streamed whole, start to end, in one run: its CRC,
    // stored without a locked instruction (which would wait for the thread's
    // non-temporal stores in flight), and how many times that happened.
    std::atomic<std::uint32_t> whole_crc{0};
    std::atomic<std::uint32_t> whole{0};
  };
  // Publishes the calling thread's run (see Run) into its chunk's gathering.
  void publish_run(Run& run);
  // Clears what stream() gathered and voids every thread's Run.
  void reset_streamed();
  // Seals region i's chunks from what stream() gathered where that covers a
  // chunk exactly, from the slot elsewhere; clears the gathering.
  void seal_streamed(std::size_t i, int k);
  // Writes back (or copies) p on the calling threads and seals its checksums.
  void do_piece(const Piece& p, unsigned threads);
  // Checks the dual regions of slot k against their checksums, every chunk
  // for which skip(region, chunk) is false.
  Result<void> verify_dual(const Layout& layout, int k, unsigned threads,
                           const std::function<bool(std::size_t, std::size_t)>& skip) const;
  // restore's check of the slot it switches to (see the definition).
  Result<void> check_dual(const Layout& layout, int k);
  // The slot the current iteration writes: the one the latest version is not in.
  int target() const { return 1 - latest_slot_; }
  void hand_over(const Layout& layout, std::size_t entry);
  // Takes up to `max` bytes off the front of the queue; caller holds its mutex.
  bool take(Piece& out, std::size_t max);
  void helper_loop();
  // Empties the queue without doing it and waits for the piece in flight.
  void cancel_pending();
  // In a process forked from the one that started the helper: the helper is
  // not here. Its state is left allocated (see Helper), the rest of the run is
  // synchronous, and write-back that was queued or in flight at the fork
  // makes this iteration uncommittable (forked_mid_iteration_).
  void leave_helper_after_fork();

  std::unique_ptr<SlotStore> store_;
  RestoreCheck check_;  // of the version restore switched to
  std::vector<util::DramBuffer> dram_;
  unsigned threads_ = 0;
  bool async_ = false;
  bool flush_ = true;  // Options::flush
  std::size_t inline_bytes_ = kInlineBytes;
  int latest_slot_ = 0;                // slot of the latest version (0 before any commit)
  std::uint64_t checked_version_ = 0;  // the version whose slot restore last checked
  std::vector<char> handed_;           // per entry: handed over in this iteration
  std::vector<char> sealed_;           // per entry: its checksums are (being) computed in this iteration
  const Layout* layout_ = nullptr;     // the Context's, for stream()
  std::vector<std::unique_ptr<StreamedChunk[]>> streamed_;  // per dual entry, per chunk
  std::uint64_t iteration_ = g_iterations.fetch_add(1);     // renewed at each commit and restore: see Run

  // Helper thread and its FIFO queue (seed 004's flush_init / flush_async),
  // on the heap: a process forked from this one has no helper thread and must
  // neither join it nor destroy its mutex and condition variables (a waiter
  // copied from the parent holds pthread_cond_destroy forever), so a forked
  // child leaves it allocated.
  struct Helper {
    std::mutex mu;
    std::condition_variable work_cv;  // the helper waits for pieces
    std::condition_variable idle_cv;  // the barrier waits for the piece in flight
    std::deque<Piece> queue;          // whole requests; front is consumed in pieces
    std::size_t in_flight = 0;
    bool stop = false;
    std::thread thread;
    pid_t owner = ::getpid();
  };
  std::unique_ptr<Helper> helper_;
  bool forked_mid_iteration_ = false;
};

InPlace::~InPlace() {
  (void)check_.wait();
  leave_helper_after_fork();
  if (helper_) {
    // Work not yet done belongs to an iteration that was never committed.
    {
      std::lock_guard lk(helper_->mu);
      helper_->stop = true;
      helper_->queue.clear();
    }
    helper_->work_cv.notify_all();
    helper_->thread.join();
  }
}

void InPlace::leave_helper_after_fork() {
  if (!helper_ || helper_->owner == ::getpid()) return;
  Helper* h = helper_.release();  // left allocated: see Helper
  // The mutex held at the fork (by the parent's helper) means its state may
  // be half-changed: count it as work in flight. It is never unlocked here.
  if (!h->mu.try_lock() || !h->queue.empty() || h->in_flight != 0) forked_mid_iteration_ = true;
  async_ = false;
}

Result<void> InPlace::open(Layout& layout, const Options& options) {
  threads_ = options.threads;
  async_ = options.async_flush;
  flush_ = options.flush;
  if (layout.internal.in_place_helper_only) inline_bytes_ = 0;
  // The pool first: a state too large for the device fails here, before any
  // DRAM is reserved.
  auto s = SlotStore::open_or_create(options, layout, name());
  if (!s.ok()) return std::move(s).error();
  store_ = std::move(s.value());
  // Dual regions live in the slots themselves, so the slots must be this
  // layout's: refuse a pool committed with another registration.
  if (auto r = store_->check_layout(); !r.ok())
    return make_error(r.error().code, store_->path() + ": " + r.error().message);

  // Whatever is committed stays untouched: write() is the other slot even if
  // the application never calls restore().
  latest_slot_ = store_->committed() ? store_->committed_slot() : 0;
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    Entry& e = layout.entries[i];
    if (e.dual) {
      detail_access::buf(*e.pair, 0) = store_->slot(i, 0);
      detail_access::buf(*e.pair, 1) = store_->slot(i, 1);
      detail_access::read_index(*e.pair) = latest_slot_;
      continue;
    }
    // Populated, as the native run's arrays and the slots are: no first-touch
    // faults inside the iterations.
    auto b = util::DramBuffer::allocate(e.bytes, "the working copy of region '" + e.name + "'");
    if (!b.ok()) return std::move(b).error();
    detail_access::data(*e.plain) = b.value().data();
    dram_.push_back(std::move(b.value()));
  }
  handed_.assign(layout.entries.size(), 0);
  sealed_.assign(layout.entries.size(), 0);
  layout_ = &layout;
  streamed_.resize(layout.entries.size());
  for (std::size_t i = 0; i < layout.entries.size(); ++i)
    if (layout.entries[i].dual) streamed_[i] = std::make_unique<StreamedChunk[]>(store_->chunks(i));
  if (async_) {  // flush_init()
    helper_ = std::make_unique<Helper>();
    helper_->thread = std::thread([this] { helper_loop(); });
  }
  return {};
}

bool InPlace::take(Piece& out, std::size_t max) {
  auto& queue = helper_->queue;
  if (queue.empty()) return false;
  Piece& front = queue.front();
  out = front;
  out.n = std::min(max, front.n);
  front.dst += out.n;
  front.offset += out.n;
  if (front.src != nullptr) front.src += out.n;
  front.n -= out.n;
  if (front.n == 0) queue.pop_front();
  ++helper_->in_flight;
  return true;
}

void InPlace::helper_loop() {
  pool::Pool& pool = store_->pool();
  Helper& h = *helper_;
  std::unique_lock lk(h.mu);
  for (;;) {
    h.work_cv.wait(lk, [&] { return h.stop || !h.queue.empty(); });
    if (h.stop) return;
    Piece p;
    if (!take(p, kHelperPiece)) continue;
    lk.unlock();
    // Write back (or copy) and fence on this thread before reporting done:
    // the committing thread's fence would not order these flushes. Where
    // the committing thread's drain covers them (page write-back), only
    // record them: one write-back per commit instead of one per piece.
    // The piece's checksums are computed first, while the helper has it in
    // cache (pieces start at whole chunks of their region: kHelperPiece is a
    // multiple of the chunk).
    const std::byte* content = (p.src != nullptr ? p.src : p.dst) - p.offset;
    store_->seal(p.entry, p.slot, content, p.offset, p.n);
    if (pool.drain_covers_all_threads()) {
      if (p.src == nullptr)
        pool.flush(p.dst, p.n);
      else
        pool.memcpy_nodrain(p.dst, p.src, p.n);
    } else if (p.src == nullptr) {
      pool.persist(p.dst, p.n);
    } else {
      pool.memcpy_persist(p.dst, p.src, p.n);
    }
    lk.lock();
    if (--h.in_flight == 0 && h.queue.empty()) h.idle_cv.notify_all();
  }
}

void InPlace::hand_over(const Layout& layout, std::size_t entry) {
  if (handed_[entry]) return;
  handed_[entry] = 1;
  const Entry& e = layout.entries[entry];
  if (e.dual && !flush_) return;  // Options::flush = false: measurement only (commit seals it)
  sealed_[entry] = 1;
  Piece req{store_->slot(entry, target()), nullptr, e.bytes, entry, 0, target()};
  if (!e.dual) {
    // Non-uniformly updated data: copy the DRAM working copy into the target
    // slot with non-temporal stores (the seed's nt-copy fallback).
    req.src = static_cast<const std::byte*>(e.plain->data());
    bytes_copied += e.bytes;
  }
  leave_helper_after_fork();
  if (!async_ || req.n <= inline_bytes_) return do_piece(req, threads_);
  {
    std::lock_guard lk(helper_->mu);
    helper_->queue.push_back(req);
  }
  helper_->work_cv.notify_one();
}

void InPlace::do_piece(const Piece& p, unsigned threads) {
  const std::byte* content = (p.src != nullptr ? p.src : p.dst) - p.offset;
  store_->seal(p.entry, p.slot, content, p.offset, p.n, threads);
  pool::Pool& pool = store_->pool();
  if (p.src == nullptr)
    pool.persist_mt(p.dst, p.n, threads, pool::Pool::Drain::by_commit);
  else
    pool.memcpy_persist_mt(p.dst, p.src, p.n, threads, pool::Pool::Drain::by_commit);
}

void InPlace::stream(void* dst, const void* src, std::size_t len) {
  pool::Pool& pool = store_->pool();
  if (!pool.contains(dst, len)) return stream_copy(dst, src, len);
  // The checksums of what is streamed into a dual region's write() version
  // are computed from the source as it is copied (Pool::memcpy_crc_nodrain:
  // in one pass where the device can): otherwise commit reads the whole
  // region back from memory, which costs a memory-bound kernel as much as a
  // second pass over its state. A thread's consecutive rows chain one CRC
  // register per chunk (Run); the chunk's gathering sees it once per chunk.
  const int k = target();
  const auto* at = static_cast<const std::byte*>(dst);
  // The dual region dst lies in (i - 1), if checksums are being gathered.
  std::size_t i = 0, off = 0;
  if (at >= store_->area(k) && store_->sealing()) {
    off = static_cast<std::size_t>(at - store_->area(k));
    for (i = layout_->entries.size(); i > 0 && store_->region_offset(i - 1) > off;) --i;
  }
  if (i == 0 || !streamed_[i - 1])
    return pool.memcpy_nodrain(dst, src, len);  // through the device: emulation and accounting see it
  --i;
  const std::size_t bytes = layout_->entries[i].bytes;
  off -= store_->region_offset(i);
  auto* to = static_cast<std::byte*>(dst);
  const auto* from = static_cast<const std::byte*>(src);
  Run& run = t_run;
  while (len > 0) {
    if (off >= bytes) return pool.memcpy_nodrain(to, from, len);  // past the region (not checksummed here)
    const std::size_t c = off / SlotStore::kChunk, end = std::min((c + 1) * SlotStore::kChunk, bytes);
    const std::size_t n = std::min(len, end - off);
    if (run.owner != this || run.iteration != iteration_ || run.region != i || run.chunk != c || run.end != off) {
      if (run.owner == this) publish_run(run);
      run = Run{this, iteration_, i, c, off, off, 0};
    }
    run.reg = ~pool.memcpy_crc_nodrain(to, from, n, ~run.reg);  // the raw register, chained
    run.end += n;
    if (run.end == end) publish_run(run);
    off += n, to += n, from += n, len -= n;
  }
}

void InPlace::publish_run(Run& run) {
  const bool current = run.iteration == iteration_ && run.end > run.start;
  run.owner = nullptr;
  if (!current) return;
  StreamedChunk& g = streamed_[run.region][run.chunk];
  const std::size_t at = run.chunk * SlotStore::kChunk;
  const std::size_t end = std::min(at + SlotStore::kChunk, layout_->entries[run.region].bytes);
  if (run.start == at && run.end == end) {
    // Only this thread streams this chunk (threads stream disjoint ranges).
    g.whole_crc.store(util::crc32c_join(run.reg, end - at), std::memory_order_relaxed);
    g.whole.store(g.whole.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return;
  }
  g.pieces.fetch_xor(util::crc32c_shift(run.reg, static_cast<std::uint32_t>(end - run.end)), std::memory_order_relaxed);
  g.bytes.fetch_add(static_cast<std::uint32_t>(run.end - run.start), std::memory_order_relaxed);
}

void InPlace::reset_streamed() {
  for (std::size_t i = 0; i < streamed_.size(); ++i)
    for (std::size_t c = 0; streamed_[i] && c < store_->chunks(i); ++c) {
      StreamedChunk& g = streamed_[i][c];
      g.pieces.store(0, std::memory_order_relaxed);
      g.bytes.store(0, std::memory_order_relaxed);
      g.whole.store(0, std::memory_order_relaxed);
    }
  iteration_ = g_iterations.fetch_add(1);
}

void InPlace::seal_streamed(std::size_t i, int k) {
  const std::size_t bytes = layout_->entries[i].bytes, n = store_->chunks(i);
  const std::byte* slot = store_->slot(i, k);
  // Chunk by chunk: streamed whole by one run, or in pieces that cover it
  // exactly once, or else from the slot (consecutive such chunks at once,
  // with all threads: a region streamed with checksums gathered nowhere).
  std::size_t from_slot = n;  // first chunk of the pending stretch to seal from the slot
  const auto seal_pending = [&](std::size_t upto) {
    if (from_slot < upto)
      store_->seal(i, k, slot, from_slot * SlotStore::kChunk,
                   std::min(upto * SlotStore::kChunk, bytes) - from_slot * SlotStore::kChunk, threads_);
    from_slot = n;
  };
  for (std::size_t c = 0; c < n; ++c) {
    const StreamedChunk& g = streamed_[i][c];
    const std::size_t len = std::min(SlotStore::kChunk, bytes - c * SlotStore::kChunk);
    const std::uint32_t whole = g.whole.load(std::memory_order_relaxed);
    const std::uint32_t piecewise = g.bytes.load(std::memory_order_relaxed);
    if (whole == 1 && piecewise == 0) {
      store_->seal_chunk(i, k, c, g.whole_crc.load(std::memory_order_relaxed));
    } else if (whole == 0 && piecewise == len) {
      store_->seal_chunk(i, k, c, util::crc32c_join(g.pieces.load(std::memory_order_relaxed), len));
    } else {
      if (from_slot == n) from_slot = c;
      continue;
    }
    seal_pending(c);
  }
  seal_pending(n);
}

void InPlace::streamed_region(Layout& layout, std::size_t entry) {
  // Written entirely by non-temporal stores, fenced by each streaming thread:
  // nothing to write back. Counts as handed over, so commit skips it.
  if (entry < layout.entries.size() && layout.entries[entry].dual) handed_[entry] = 1;
}

void InPlace::flush_async(Layout& layout) {
  for (std::size_t i = 0; i < layout.entries.size(); ++i) hand_over(layout, i);
}

void InPlace::flush_async_region(Layout& layout, std::size_t entry) {
  if (entry < layout.entries.size()) hand_over(layout, entry);
}

void InPlace::flush_barrier() {
  leave_helper_after_fork();
  if (!async_) return;  // everything handed over is already durable
  std::unique_lock lk(helper_->mu);
  // Take what the helper has not started, with all threads: each worker of
  // persist_mt / memcpy_persist_mt fences its own part before they join.
  Piece p;
  while (take(p, SIZE_MAX)) {
    lk.unlock();
    do_piece(p, threads_);
    lk.lock();
    --helper_->in_flight;
  }
  // The helper's piece in flight: it drains before decrementing in_flight.
  helper_->idle_cv.wait(lk, [&] { return helper_->in_flight == 0; });
}

void InPlace::cancel_pending() {
  leave_helper_after_fork();
  forked_mid_iteration_ = false;  // restore abandons that iteration
  if (!async_) return;
  std::unique_lock lk(helper_->mu);
  helper_->queue.clear();
  helper_->idle_cv.wait(lk, [&] { return helper_->in_flight == 0; });
}

Result<void> InPlace::restore(Layout& layout) {
  // Work handed over in an abandoned iteration must not race with the copies
  // below (a plain region's DRAM copy is the source of its pending nt-copy).
  cancel_pending();
  std::fill(handed_.begin(), handed_.end(), 0);
  std::fill(sealed_.begin(), sealed_.end(), 0);
  reset_streamed();  // what the abandoned iteration streamed
  const int k = store_->committed_slot();
  if (auto r = store_->check_version_layout(layout, k); !r.ok()) return r;
  if (auto r = check_dual(layout, k); !r.ok()) return r;
  pool::Pool& pool = store_->pool();
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    Entry& e = layout.entries[i];
    if (e.dual) {
      // O(1): the committed slot becomes read(); write() is the other one.
      detail_access::read_index(*e.pair) = k;
      continue;
    }
    pool.device().read_charge(e.bytes, true);
    std::memcpy(e.plain->data(), store_->slot(i, k), e.bytes);
    bytes_copied += e.bytes;
    if (auto r = store_->verify_region(i, k, static_cast<const std::byte*>(e.plain->data()), threads_); !r.ok())
      return r;
  }
  latest_slot_ = k;
  // Pointers are rewritten in the latest buffers, read() included: see the top.
  return layout.apply_pointers(store_->read_pointers(k));
}

Result<void> InPlace::verify_dual(const Layout& layout, int k, unsigned threads,
                                  const std::function<bool(std::size_t, std::size_t)>& skip) const {
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    if (!layout.entries[i].dual) continue;
    const auto skip_chunk = skip ? std::function<bool(std::size_t)>([&, i](std::size_t c) { return skip(i, c); })
                                 : std::function<bool(std::size_t)>();
    if (auto r = store_->verify_region(i, k, store_->slot(i, k), threads, skip_chunk); !r.ok()) return r;
  }
  return {};
}

// Restore switches to slot k without copying it, so the slot itself is
// checked: a small state at once, a large one in the background
// (RestoreCheck), which the next commit waits for. The chunks holding
// registered pointers are not checked: every restore rewrites those pointers
// in the slot for its own run's addresses, so once a process restored this
// version (and died before committing another) their bytes on media are no
// longer the ones the checksums describe, and checking them would report a
// pool that is whole as damaged. A version already checked by an earlier
// restore in this process (a rollback) is not checked again (unless this
// process was forked while that check ran: then it is checked here again).
Result<void> InPlace::check_dual(const Layout& layout, int k) {
  const std::uint64_t version = store_->committed().value_or(0);
  if (version == checked_version_ && !check_.lost_to_fork()) return {};
  std::vector<std::pair<std::size_t, std::size_t>> with_pointers;  // (region, chunk)
  for (const auto& [region, offset] : layout.pointers)
    if (layout.entries[region].dual)
      for (std::uint64_t at : {offset, offset + sizeof(void*) - 1})
        with_pointers.emplace_back(region, at / SlotStore::kChunk);
  std::sort(with_pointers.begin(), with_pointers.end());
  const auto has_pointer = [with_pointers](std::size_t region, std::size_t chunk) {
    return std::binary_search(with_pointers.begin(), with_pointers.end(), std::pair{region, chunk});
  };
  std::size_t dual_bytes = 0;
  for (const Entry& e : layout.entries)
    if (e.dual) dual_bytes += e.bytes;
  if (dual_bytes <= RestoreCheck::kInlineBytes) {
    if (auto r = verify_dual(layout, k, threads_, has_pointer); !r.ok()) return r;
    checked_version_ = version;
    return {};
  }
  checked_version_ = version;
  check_.start([this, &layout, k, has_pointer] { return verify_dual(layout, k, 1, has_pointer); });
  return {};
}

Result<void> InPlace::commit(Layout& layout, std::uint64_t version) {
  if (auto r = store_->check_layout(); !r.ok())
    return make_error(r.error().code, r.error().message + " (refusing to overwrite it)");
  // A poisoned store or too many pointers: refused before anything is written.
  if (auto r = store_->check_commit(layout); !r.ok()) return r;
  // Nothing is committed on top of a restored version found damaged.
  if (auto r = check_.wait(); !r.ok()) return r;
  leave_helper_after_fork();
  if (forked_mid_iteration_)
    return make_error(Errc::not_ready,
                      "in-place: this process was forked from the one that ran this iteration while the helper "
                      "thread was writing it back, so what reached the slot is unknown here; restore before "
                      "committing");
  const int k = target();
  // Context has already switched the roles: read() is the version just
  // written, which must be the target slot of every dual region.
  for (const Entry& e : layout.entries)
    if (e.dual && detail_access::read_index(*e.pair) != k)
      return make_error(Errc::corrupted, "in-place: region '" + e.name +
                                             "' has its versions out of step with the others (internal error)");
  std::vector<PointerRecord> ptrs;
  if (auto r = layout.capture_pointers(ptrs); !r.ok()) {
    // The application may now change regions already handed over (to fix the
    // pointer): finish what is in flight and redo everything next time.
    flush_barrier();
    std::fill(handed_.begin(), handed_.end(), 0);
    reset_streamed();
    return r;
  }
  flush_async(layout);  // whatever the application did not hand over yet
  flush_barrier();
  // Regions nothing was handed over for (streamed, or Options::flush off):
  // their checksums from the slot, now that every writer is done.
  for (std::size_t i = 0; i < layout.entries.size(); ++i)
    if (!sealed_[i]) {
      if (streamed_[i])
        seal_streamed(i, k);
      else
        store_->seal(i, k, store_->slot(i, k), 0, layout.entries[i].bytes, threads_);
    }
  store_->flush_seals(k);
  std::fill(sealed_.begin(), sealed_.end(), 0);
  reset_streamed();
  // 1. the target slot's data is durable (barrier); 2. its pointer table and
  // layout hash; 3. publish fences this thread, checks that none of these
  // write-backs failed (the helper's included: the device keeps the first
  // error) and only then stores the version word.
  std::fill(handed_.begin(), handed_.end(), 0);
  if (auto r = store_->write_pointers_nodrain(k, ptrs); !r.ok()) return r;
  if (auto r = store_->publish(version, k); !r.ok()) return r;
  latest_slot_ = k;
  return {};
}

}  // namespace

std::unique_ptr<Strategy> make_in_place() { return std::make_unique<InPlace>(); }

}  // namespace cairn::persist::detail
