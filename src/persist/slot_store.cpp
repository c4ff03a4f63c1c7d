// slot_store.cpp — create / open the two-slot NVM state of pool-based strategies.
#include "persist/slot_store.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "persist/strategy.hpp"
#include "util/crc32c.hpp"
#include "util/thread_pool.hpp"

namespace cairn::persist::detail {
namespace {

constexpr std::uint64_t kStateMagic = 0x4554415453524941ULL;  // "AIRSTATE"
constexpr std::uint32_t kStateFormat = 3;
constexpr std::uint32_t kUnchecksummedFormat = 2;  // the same without checksum tables
constexpr std::size_t kPage = 4096;
constexpr unsigned kStateRoot = 0;

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

std::uint64_t header_checksum(const StateHeader& h) { return pool::checksum64(&h, offsetof(StateHeader, checksum)); }

// Records per pointer table. Pointers into cairn-owned regions are registered
// after the pool exists, so leave room: one per 4 KiB of region data plus 4096
// (16 bytes per record per slot: under 1 % of the data).
std::size_t pointer_capacity(const Layout& layout) {
  return std::max<std::size_t>(layout.pointers.size(), 4096 + layout.total_bytes() / 4096);
}

std::size_t chunks_of(std::size_t bytes) { return (bytes + SlotStore::kChunk - 1) / SlotStore::kChunk; }

// One slot's checksum table: a CRC-32C per chunk of every region.
std::size_t table_bytes(const Layout& layout) {
  std::size_t chunks = 0;
  for (const auto& e : layout.entries) chunks += chunks_of(e.bytes);
  return round_up(chunks * sizeof(std::uint32_t), 64);
}

std::size_t meta_bytes(const Layout& layout) {
  return round_up(kPage + layout.entries.size() * sizeof(RegionDesc) +
                      2 * pointer_capacity(layout) * sizeof(PointerRecord) + 2 * table_bytes(layout),
                  kPage);
}

}  // namespace

StateHeader* SlotStore::header() const { return reinterpret_cast<StateHeader*>(pool_->at(extent_)); }

void SlotStore::place_regions(const Layout& layout) {
  region_offsets_.clear();
  chunk_base_.clear();
  std::size_t off = 0, chunks = 0;
  for (const auto& e : layout.entries) {
    region_offsets_.push_back(off);
    off = round_up(off + e.bytes, kPage);
    chunk_base_.push_back(chunks);
    chunks += chunks_of(e.bytes);
  }
  area_bytes_ = std::max<std::size_t>(off, kPage);
  table_bytes_ = table_bytes(layout);
}

Result<std::unique_ptr<SlotStore>> SlotStore::open_or_create(const Options& options, const Layout& layout,
                                                             const std::string& strategy) {
  std::unique_ptr<SlotStore> s(new SlotStore());
  s->layout_ = &layout;
  s->sealing_ = options.checksums;
  s->place_regions(layout);
  if (pool::Pool* borrowed = layout.internal.borrowed_pool) {
    s->pool_ = borrowed;
    s->path_ = borrowed->path().empty() ? "borrowed pool" : borrowed->path();
    s->existed_ = s->pool_->root(kStateRoot).offset != 0;
    auto r = s->existed_ ? s->attach_existing(layout, strategy) : s->init_new(layout, strategy);
    if (!r.ok()) return std::move(r).error();
    return s;
  }
  auto dir = make_storage_dir(options);
  if (!dir.ok()) return std::move(dir).error();
  s->path_ = dir.value() + "/" + options.name + ".pool";
  struct stat st {};
  s->existed_ = ::stat(s->path_.c_str(), &st) == 0;
  auto device =
      layout.internal.fault_injector
          ? Result<std::unique_ptr<devices::Device>>(devices::make_fault_device(layout.internal.fault_injector))
          : devices::make_device(options.device);
  if (!device.ok()) return std::move(device).error();
  if (!s->existed_) {
    const std::size_t meta = meta_bytes(layout) + kPage;
    pool::CreateOptions co;
    co.size = pool::kArenaOffset + meta + 2 * s->area_bytes_ + (1u << 20);
    co.device = std::move(device.value());
    auto p = pool::Pool::create(s->path_, std::move(co));
    if (!p.ok()) return std::move(p).error();
    s->owned_ = std::move(p.value());
    s->pool_ = s->owned_.get();
    if (auto r = s->init_new(layout, strategy); !r.ok()) return r.error();
    // The slots are the application's working memory under in-place and the
    // copy strategies' commit target: map them now rather than take one
    // fault per 4 KiB page inside the first iterations or commits (npb-mg
    // class A: +7-11 % per iteration, issue 11). Only a new store: a restart
    // stays O(1) (populating 256 MiB costs ~40 ms), and its first iteration
    // takes the faults once.
    for (int k = 0; k < 2; ++k) s->pool_->prefault(s->area(k), s->area_bytes_);
  } else {
    pool::OpenOptions oo;
    oo.device = std::move(device.value());
    auto p = pool::Pool::open(s->path_, std::move(oo));
    if (!p.ok()) return std::move(p).error();
    s->owned_ = std::move(p.value());
    s->pool_ = s->owned_.get();
    if (auto r = s->attach_existing(layout, strategy); !r.ok()) return r.error();
  }
  return s;
}

Result<void> SlotStore::init_new(const Layout& layout, const std::string& strategy) {
  const std::size_t descs = layout.entries.size() * sizeof(RegionDesc);
  const std::size_t ptrs = pointer_capacity(layout) * sizeof(PointerRecord);
  const std::size_t meta = meta_bytes(layout);
  const std::size_t total = meta + 2 * area_bytes_;
  auto ext = pool_->arena().alloc(total);
  if (!ext.ok()) return ext.error();
  extent_ = ext.value();

  StateHeader h{};
  h.magic = kStateMagic;
  h.format = kStateFormat;
  h.header_bytes = sizeof(StateHeader);
  std::strncpy(h.strategy, strategy.c_str(), sizeof h.strategy - 1);
  h.layout_hash = layout.hash();
  h.region_count = layout.entries.size();
  h.pointer_count = layout.pointers.size();
  h.extent_bytes = total;
  h.desc_offset = extent_ + kPage;
  h.pointers_offset[0] = h.desc_offset + descs;
  h.pointers_offset[1] = h.pointers_offset[0] + ptrs;
  h.area_offset[0] = extent_ + meta;
  h.area_offset[1] = h.area_offset[0] + area_bytes_;
  h.area_bytes = area_bytes_;
  h.pointer_capacity = pointer_capacity(layout);
  h.checksum = header_checksum(h);
  crc_offset_[0] = h.pointers_offset[1] + ptrs;
  crc_offset_[1] = crc_offset_[0] + table_bytes_;
  for (auto& t : staged_) t.assign(table_bytes_ / sizeof(std::uint32_t), 0);
  h.version_word = 0;

  // Header and descriptors durable before the root names the extent.
  auto d = layout.descriptors();
  if (!d.empty()) pool_->memcpy_nodrain(pool_->at(h.desc_offset), d.data(), descs);
  pool_->memcpy_nodrain(header(), &h, sizeof h);
  pool_->drain();
  if (auto r = pool_->publish_root(kStateRoot, extent_, 0); !r.ok()) return r;
  layout_check_ = {};
  return {};
}

Result<void> SlotStore::attach_existing(const Layout& layout, const std::string& strategy) {
  const pool::RootSlot root = pool_->root(kStateRoot);
  if (root.offset == 0)
    return make_error(Errc::corrupted, path_ +
                                           " is a cairn pool but holds no persistence state (root slot 0 is "
                                           "empty); remove it or choose another name");
  // Bounded without wrapping and aligned as every arena extent is: a damaged
  // root must not wrap the sum or misalign the header (fuzz/slot_store_fuzz).
  if (root.offset > pool_->size() - sizeof(StateHeader) || root.offset % pool_->header().block_size != 0)
    return make_error(Errc::corrupted, path_ + ": state root points outside the pool");
  extent_ = root.offset;
  const StateHeader& h = *header();
  if (h.magic != kStateMagic || header_checksum(h) != h.checksum)
    return make_error(Errc::corrupted, path_ + ": the persistence state header is damaged (bad magic or checksum)");
  if (h.format != kStateFormat && h.format != kUnchecksummedFormat)
    return make_error(Errc::wrong_version, path_ + ": persistence state format " + std::to_string(h.format) +
                                               ", this cairn reads " + std::to_string(kUnchecksummedFormat) + " and " +
                                               std::to_string(kStateFormat) + "; open it with the cairn that wrote it");
  const std::string stored(h.strategy, strnlen(h.strategy, sizeof h.strategy));
  if (stored != strategy)
    return make_error(Errc::layout_mismatch, path_ + " holds state written by strategy '" + stored + "', not '" +
                                                 strategy +
                                                 "'; use that strategy to restore it, or "
                                                 "choose another name");
  // Every range bounded without wrapping, the descriptors inside the extent
  // (a region count from a damaged header asked for 200 TB: fuzz/slot_store_fuzz).
  const std::uint64_t size = pool_->size();
  const auto within = [](std::uint64_t off, std::uint64_t bytes, std::uint64_t end) {
    return off <= end && bytes <= end - off;
  };
  if (h.extent_bytes == 0 || !within(extent_, h.extent_bytes, size) || !within(h.area_offset[1], h.area_bytes, size) ||
      h.pointer_capacity > size / sizeof(PointerRecord) ||
      !within(h.pointers_offset[1], h.pointer_capacity * sizeof(PointerRecord), h.area_offset[0]) ||
      h.region_count >= (1u << 20) || h.desc_offset < extent_ ||
      !within(h.desc_offset, h.region_count * sizeof(RegionDesc), extent_ + h.extent_bytes))
    return make_error(Errc::corrupted, path_ + ": state extent geometry runs past the pool");
  auto rb = pool_->arena().rebuild();
  if (auto r = rb.mark(extent_, h.extent_bytes); !r.ok()) return r;
  rb.finish();

  std::vector<RegionDesc> stored_descs(h.region_count);
  if (h.region_count > 0)
    std::memcpy(stored_descs.data(), pool_->at(h.desc_offset), h.region_count * sizeof(RegionDesc));
  layout_check_ = layout.check_same(stored_descs, h.pointer_count, h.layout_hash);
  if (layout_check_.ok()) {
    if (h.area_bytes != area_bytes_)
      return make_error(Errc::corrupted, path_ + ": stored slot area size disagrees with the layout");
    if (h.format == kStateFormat) {
      // The tables follow the pointer tables, inside the metadata.
      const std::uint64_t first = h.pointers_offset[1] + h.pointer_capacity * sizeof(PointerRecord);
      if (!within(first, 2 * std::uint64_t{table_bytes_}, h.area_offset[0]))
        return make_error(Errc::corrupted, path_ + ": the checksum tables run into the slot areas");
      crc_offset_[0] = first;
      crc_offset_[1] = first + table_bytes_;
      for (int k = 0; k < 2; ++k) {
        staged_[k].resize(table_bytes_ / sizeof(std::uint32_t));
        std::memcpy(staged_[k].data(), pool_->at(crc_offset_[k]), table_bytes_);
      }
      const std::uint64_t word = h.version_word;
      if (word != 0 && h.slot_meta[word & 1].version != word >> 1)
        return make_error(Errc::corrupted, path_ + ": the version word names version " + std::to_string(word >> 1) +
                                               " in slot " + std::to_string(word & 1) + ", which holds version " +
                                               std::to_string(h.slot_meta[word & 1].version) +
                                               ": the commit record is damaged. Do not resume from this pool: "
                                               "restore the state from a copy, or start again after removing it");
    }
  } else {
    area_bytes_ = 0;  // never touch slots of a foreign layout
  }
  return {};
}

std::optional<std::uint64_t> SlotStore::committed() const {
  const std::uint64_t w = __atomic_load_n(&header()->version_word, __ATOMIC_ACQUIRE);
  if (w == 0) return std::nullopt;
  return w >> 1;
}

int SlotStore::committed_slot() const {
  return static_cast<int>(__atomic_load_n(&header()->version_word, __ATOMIC_ACQUIRE) & 1);
}

std::byte* SlotStore::area(int k) const { return pool_->at(header()->area_offset[k]); }
std::uint64_t SlotStore::area_file_offset(int k) const { return header()->area_offset[k]; }
std::byte* SlotStore::slot(std::size_t region, int k) const { return area(k) + region_offsets_[region]; }

Result<void> SlotStore::check_pointers(const Layout& layout) const {
  if (layout.pointers.size() <= header()->pointer_capacity) return {};
  return make_error(Errc::out_of_space, path_ + ": " + std::to_string(layout.pointers.size()) +
                                            " pointers are registered but the pool's pointer tables hold " +
                                            std::to_string(header()->pointer_capacity) +
                                            " (fixed when the pool was created); nothing was written, " +
                                            last_committed_text() +
                                            ". Register fewer pointers (keep linked data in a blocked array and "
                                            "store offsets), or register them before open() when the pool is "
                                            "created");
}

std::string SlotStore::last_committed_text() const {
  const auto v = committed();
  return v ? "version " + std::to_string(*v) + " (the last committed) is intact" : "nothing is committed yet";
}

Error SlotStore::fail_commit(Errc code, const std::string& what) {
  pool_->poison(what);
  return make_error(code, path_ + ": " + what + "; " + last_committed_text() +
                              ". The pool refuses further commits: fix the device (I/O error, full file system), "
                              "then reopen the state and restore it");
}

Result<void> SlotStore::check_commit(const Layout& layout) {
  if (const int err = pool_->device().io_errno(); err != 0 && !pool_->poisoned())
    return fail_commit(Errc::poisoned,
                       std::string("a write-back to the pool failed earlier (") + std::strerror(err) + ")");
  if (pool_->poisoned())
    return make_error(Errc::poisoned, path_ + ": the pool is poisoned (" + pool_->poison_reason() + "); " +
                                          last_committed_text() +
                                          ". Nothing more is committed through it: fix the device, then reopen "
                                          "the state and restore it");
  return check_pointers(layout);
}

Result<void> SlotStore::write_pointers_nodrain(int k, const std::vector<PointerRecord>& records) {
  StateHeader* h = header();
  if (records.size() > h->pointer_capacity)
    return make_error(Errc::out_of_space, path_ + ": " + std::to_string(records.size()) +
                                              " pointers exceed the pointer table capacity of " +
                                              std::to_string(h->pointer_capacity) + "; " + last_committed_text() +
                                              ". Register fewer pointers");
  if (!records.empty())
    pool_->memcpy_nodrain(pool_->at(h->pointers_offset[k]), records.data(), records.size() * sizeof(PointerRecord));
  // The slot's count and layout hash become durable with the table, before
  // publish() stores the version word naming slot k.
  const StateHeader::SlotMeta meta{records.size(), layout_->hash(), checksummed() && sealing_ ? 1u : 0u,
                                   h->slot_meta[k].version};
  pool_->memcpy_nodrain(&h->slot_meta[k], &meta, sizeof meta);
  return {};
}

std::vector<PointerRecord> SlotStore::read_pointers(int k) const {
  const StateHeader& h = *header();
  std::vector<PointerRecord> out(std::min(h.slot_meta[k].pointer_count, h.pointer_capacity));
  if (!out.empty()) std::memcpy(out.data(), pool_->at(h.pointers_offset[k]), out.size() * sizeof(PointerRecord));
  return out;
}

Result<void> SlotStore::check_version_layout(const Layout& layout, int k) const {
  if (!layout_check_.ok()) return layout_check_;
  const StateHeader& h = *header();
  std::vector<RegionDesc> stored(h.region_count);
  if (!stored.empty()) std::memcpy(stored.data(), pool_->at(h.desc_offset), stored.size() * sizeof(RegionDesc));
  return layout.check_same(stored, h.slot_meta[k].pointer_count, h.slot_meta[k].layout_hash);
}

std::size_t SlotStore::chunks(std::size_t region) const { return chunks_of(layout_->entries[region].bytes); }

void SlotStore::seal(std::size_t region, int k, const std::byte* content, std::size_t offset, std::size_t n,
                     unsigned threads) {
  if (!checksummed() || !sealing_ || n == 0) return;
  const std::size_t bytes = layout_->entries[region].bytes;
  const std::size_t first = offset / kChunk, last = std::min(chunks_of(offset + n), chunks_of(bytes));
  std::uint32_t* table = staged_[k].data() + chunk_base_[region];
  const auto run = [&](std::size_t from, std::size_t to) {
    for (std::size_t c = from; c < to; ++c) {
      const std::size_t at = c * kChunk;
      table[c] = util::crc32c(0, content + at, std::min(kChunk, bytes - at));
    }
  };
  // Below the pool's own threshold for parallel work, on the calling thread.
  if (threads == 1 || (last - first) * kChunk < pool::Pool::kParallelMin) return run(first, last);
  // One 4 KiB "page" of parallel_ranges per chunk: ranges stay whole chunks.
  util::parallel_ranges((last - first) * kPage, threads, [&](std::size_t off, std::size_t len) {
    run(first + off / kPage, first + (off + len) / kPage);
  });
}

void SlotStore::seal_chunk(std::size_t region, int k, std::size_t chunk, std::uint32_t crc) {
  if (!checksummed() || !sealing_) return;
  staged_[k][chunk_base_[region] + chunk] = crc;
}

void SlotStore::flush_seals(int k) {
  if (checksummed() && sealing_) pool_->memcpy_nodrain(pool_->at(crc_offset_[k]), staged_[k].data(), table_bytes_);
}

Result<void> SlotStore::verify_region(std::size_t region, int k, const std::byte* content, unsigned threads,
                                      const std::function<bool(std::size_t)>& skip) const {
  if (!checksummed() || header()->slot_meta[k].sealed != 1) return {};
  const std::size_t bytes = layout_->entries[region].bytes, n = chunks_of(bytes);
  const auto* table = reinterpret_cast<const std::uint32_t*>(pool_->at(crc_offset_[k])) + chunk_base_[region];
  std::atomic<std::size_t> bad{SIZE_MAX};  // the first damaged chunk found
  const auto run = [&](std::size_t from, std::size_t to) {
    for (std::size_t c = from; c < to; ++c) {
      if (skip && skip(c)) continue;
      const std::size_t at = c * kChunk;
      if (util::crc32c(0, content + at, std::min(kChunk, bytes - at)) != table[c]) {
        std::size_t seen = bad.load();
        while (c < seen && !bad.compare_exchange_weak(seen, c)) {
        }
        return;
      }
    }
  };
  // Threads of its own, joined before it returns (util::parallel_for), not
  // the persistent workers: restore is where a process commonly forks next
  // (a supervisor, a test), and it must leave no threads behind for the child.
  const unsigned parts = std::min<std::size_t>(n, threads == 0 ? util::default_threads() : threads);
  if (parts <= 1 || bytes < pool::Pool::kParallelMin)
    run(0, n);
  else
    util::parallel_for(parts, parts, [&](std::size_t i) { run(n * i / parts, n * (i + 1) / parts); });
  const std::size_t c = bad.load();
  if (c == SIZE_MAX) return {};
  const auto v = committed();
  return make_error(Errc::corrupted,
                    path_ + ": region '" + layout_->entries[region].name + "' of version " +
                        (v ? std::to_string(*v) : std::string("?")) +
                        " does not match the checksum written with it (bytes " + std::to_string(c * kChunk) + " to " +
                        std::to_string(std::min(bytes, (c + 1) * kChunk)) +
                        " were damaged on the media). Do not resume from this pool: restore the state from a copy "
                        "(a buddy replica, a backup of the file) or start again, after removing the pool");
}

Result<void> SlotStore::publish(std::uint64_t version, int slot) {
  // Every write-back behind this version succeeded, or the word is never
  // stored; if the word's own write-back fails, the previous word is put back.
  // The slot's own record of its version, durable with its data (commit_word
  // drains first).
  if (checksummed()) pool_->memcpy_nodrain(&header()->slot_meta[slot & 1].version, &version, sizeof version);
  pool_->marker(devices::Marker::commit_begin, "version word");
  auto r = pool_->commit_word(&header()->version_word, (version << 1) | static_cast<std::uint64_t>(slot & 1),
                              "version " + std::to_string(version));
  if (!r.ok())
    return make_error(r.error().code,
                      r.error().message + "; " + last_committed_text() + ". Reopen the state and restore it");
  return {};
}

void RestoreCheck::start(std::function<Result<void>()> check) {
  (void)wait();
  result_ = {};
  done_.store(false, std::memory_order_relaxed);
  lost_ = false;
  if (::getpid() != created_) {
    result_ = check();
    done_.store(true, std::memory_order_release);
    return;
  }
  thread_ = std::make_unique<std::thread>([this, check = std::move(check)] {
    result_ = check();
    done_.store(true, std::memory_order_release);
  });
}

Result<void> RestoreCheck::wait() {
  if (!thread_) return result_;
  if (created_ == ::getpid()) {
    thread_->join();
    thread_.reset();
    return result_;
  }
  // A forked child: the thread is not in this process, and its descriptor
  // must be neither joined nor destroyed here (both would act on the parent's
  // thread). It is left as it is.
  (void)thread_.release();
  lost_ = !done_.load(std::memory_order_acquire);
  if (lost_)
    result_ = make_error(Errc::not_ready,
                         "the check of the restored version was still running when this process was forked from the "
                         "one that restored it, so this process cannot know whether the version is intact; restore "
                         "it again in this process before committing");
  return result_;
}

}  // namespace cairn::persist::detail
