// cairn/extended/pool.hpp — a persistent pool: one file mapped with libpmem.
//
// On-media layout (all integers little-endian, fixed width):
//
//   0 KiB   Header copy 0 (PoolHeader, 256 bytes, checksummed). Written once at
//   4 KiB   Header copy 1  create time; either copy alone identifies the pool.
//   8 KiB   RootSelector: one aligned 8-byte word naming the live root table
//           and its generation, with a check (pool.cpp: encode_selector).
//   8 KiB+64  RootTable 0 ┐ each: generation, 16 slots of {offset, version},
//   8 KiB+512 RootTable 1 ┘ checksum; one cache-line aligned 448-byte block.
//   12 KiB  arena high-water mark (a hint for tools, never trusted for safety)
//   64 KiB  arena: fixed-size blocks up to the end of the file.
//
// Publishing a root (the commit point of everything above the pool):
//   1. the caller has made what the root points to durable;
//   2. the *inactive* table gets the current slots plus the change, generation
//      + 1 and a checksum, and is persisted;
//   3. the selector word is stored (one aligned 8-byte store) and persisted.
// A crash before 3 leaves the old table live; after 3 the new one. A table
// whose checksum fails (corrupted media) is detected on open, which LMDB's
// meta pages, carrying no checksum, cannot do: the live one is Errc::corrupted
// (the selector word checks itself, so it is known; pool.cpp), the other is
// ignored.
//
// Create writes the whole pool to PATH.tmp-XXXX, persists it and renames it
// into place, so a crash or full device during create never leaves a pool that
// looks valid. A failed open never writes to the file.
//
// The arena needs no allocation log: its state lives in DRAM and is rebuilt
// after open by the owner of the roots, which marks every extent it can reach
// (Arena::Rebuild). Until then allocation fails with Errc::not_ready.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/extended/device.hpp"
#include "cairn/extended/offset.hpp"

namespace cairn::pool {

inline constexpr std::uint64_t kMagic = 0x4C4F4F504E524941ULL;  // "AIRNPOOL" LE-ish tag
inline constexpr std::uint32_t kLayoutVersion = 2;
inline constexpr unsigned kRootSlots = 16;
inline constexpr std::size_t kHeaderCopy0 = 0;
inline constexpr std::size_t kHeaderCopy1 = 4096;
inline constexpr std::size_t kSelectorOffset = 8192;
inline constexpr std::size_t kRootTable0 = 8192 + 64;
inline constexpr std::size_t kRootTable1 = 8192 + 512;
inline constexpr std::size_t kHighWaterOffset = 12288;
inline constexpr std::size_t kArenaOffset = 65536;
// The least a pool that reserves as used reserves at a time (CreateOptions::reserve_as_used).
inline constexpr std::uint64_t kReserveStep = 16ull << 20;
inline constexpr std::size_t kMinPoolSize = 1u << 20;  // 1 MiB
inline constexpr std::uint32_t kDefaultBlockSize = 4096;

struct PoolHeader {
  std::uint64_t magic;
  std::uint32_t layout_version;
  std::uint32_t header_size;  // sizeof(PoolHeader)
  std::uint8_t uuid[16];
  std::uint64_t pool_size;       // bytes, equals the file size
  std::uint64_t create_time_ns;  // CLOCK_REALTIME at create
  std::uint64_t arena_offset;
  std::uint64_t block_size;
  std::uint64_t block_count;
  std::uint8_t reserved[176];
  std::uint64_t checksum;  // over everything before it
};
static_assert(sizeof(PoolHeader) == 256);
static_assert(offsetof(PoolHeader, magic) == 0);
static_assert(offsetof(PoolHeader, layout_version) == 8);
static_assert(offsetof(PoolHeader, checksum) == 248);

struct RootSlot {
  std::uint64_t offset;   // 0: empty
  std::uint64_t version;  // the owner's version number for what it points to
};

struct RootTable {
  std::uint64_t generation;  // +1 per publish; the selector names the live table
  std::uint64_t reserved;
  RootSlot slots[kRootSlots];
  std::uint64_t reserved2[7];
  std::uint64_t checksum;  // over everything before it
};
static_assert(sizeof(RootTable) == 16 + 16 * kRootSlots + 64);
static_assert(kRootTable0 + sizeof(RootTable) <= kRootTable1);
static_assert(kRootTable1 + sizeof(RootTable) <= kHighWaterOffset);

// 64-bit checksum used on media (layout 2: four lanes of 8-byte words, each
// step a bijection, so any one changed word changes it; layout 1 hashed byte
// by byte and was four times slower).
std::uint64_t checksum64(const void* data, std::size_t len) noexcept;

// What open() found, or what inspect() found in every part of the file;
// `cairn pool check` prints inspect()'s Health as it is.
struct Health {
  bool header0_ok = false, header1_ok = false;
  bool table0_ok = false, table1_ok = false;
  std::uint64_t selector = 0;  // raw selector word
  int live_table = -1;         // the table in use after open
  std::vector<std::string> problems;

  // Filled by inspect(), which reads each part on its own so that a short or
  // damaged file still shows what is there.
  std::uint64_t file_size = 0;
  bool header_read[2] = {false, false};      // the copy lies within the file
  std::uint32_t layout_version[2] = {0, 0};  // of each valid copy
  bool selector_read = false;
  bool table_read[2] = {false, false};
  std::uint64_t generation[2] = {0, 0};  // of each valid table
  // Why open() would refuse the pool; Errc::ok if it opens. inspect() still
  // returns a Health (with every problem listed) for a file that carries the
  // cairn magic but is truncated or damaged beyond opening.
  Error open_error;
};

struct CreateOptions {
  std::uint64_t size = 64ull << 20;
  std::uint32_t block_size = kDefaultBlockSize;
  unsigned mode = 0600;
  // false: the file's whole space is reserved (posix_fallocate) at creation,
  // so a full device shows then. true: the file is sparse past its first
  // 16 MiB and the arena reserves space as it hands out blocks (at least
  // 16 MiB or an eighth more each time), so a pool sized for growth costs
  // only what it uses (tmpfs allocates reserved pages in memory at once); an
  // allocation the device cannot hold fails with Errc::device_full, never a
  // fault on first touch.
  bool reserve_as_used = false;
  devices::FlushMode flush_mode = devices::FlushMode::automatic;
  // Null: the device named by $CAIRN_DEVICE, else the real device.
  std::unique_ptr<devices::Device> device;
};

struct OpenOptions {
  devices::FlushMode flush_mode = devices::FlushMode::automatic;
  std::unique_ptr<devices::Device> device;
};

// Allocation of whole-block extents in the arena. Allocation state is DRAM
// only; see Rebuild. Thread-safe.
class Arena {
 public:
  std::uint64_t block_size() const { return block_size_; }
  std::uint64_t block_count() const { return block_count_; }
  std::uint64_t offset() const { return offset_; }
  bool ready() const { return ready_; }
  std::uint64_t blocks_in_use() const;

  // Allocates `bytes` rounded up to whole blocks; returns the extent's offset.
  // The extent's contents are whatever was there: callers initialise and
  // persist them before making them reachable from a root.
  Result<std::uint64_t> alloc(std::uint64_t bytes);
  void free(std::uint64_t offset, std::uint64_t bytes);
  std::uint64_t blocks_for(std::uint64_t bytes) const { return (bytes + block_size_ - 1) / block_size_; }

  // Rebuilds allocation state from reachability: mark() every extent reachable
  // from the committed roots, then finish(). Marking an extent that overlaps
  // one already marked, or lies outside the arena, is an error (a block
  // reachable twice means the structure is corrupt).
  class Rebuild {
   public:
    Result<void> mark(std::uint64_t offset, std::uint64_t bytes);
    // Installs the marked set as the allocation state; everything else is free.
    void finish();
    std::uint64_t marked_blocks() const { return marked_; }

   private:
    friend class Arena;
    explicit Rebuild(Arena& a);
    Arena& arena_;
    std::vector<std::uint64_t> bits_;
    std::uint64_t marked_ = 0;
  };
  Rebuild rebuild() { return Rebuild(*this); }
  // Convenience for a fresh pool or an owner with nothing to keep.
  void reset_empty();

 private:
  friend class Pool;
  void init(std::uint64_t offset, std::uint64_t block_size, std::uint64_t count, std::uint64_t* high_water,
            class Pool* pool);
  std::uint64_t offset_ = 0, block_size_ = 0, block_count_ = 0;
  std::uint64_t* high_water_ = nullptr;  // in the pool: persisted, monotone hint
  class Pool* pool_ = nullptr;
  bool ready_ = false;
  mutable std::mutex mu_;
  std::vector<std::uint64_t> used_;  // bitmap, 1 = allocated
  std::uint64_t in_use_ = 0;
  std::uint64_t hint_ = 0;  // first block to search from
};

struct PoolStats {
  devices::Stats device;
  std::uint64_t roots_published = 0;
};

class Pool {
 public:
  // Creates a new pool file; refuses to overwrite an existing one.
  static Result<std::unique_ptr<Pool>> create(const std::string& path, CreateOptions options = {});
  // Opens an existing pool; never writes to the file if it fails.
  static Result<std::unique_ptr<Pool>> open(const std::string& path, OpenOptions options = {});
  // Reads and validates every part of a pool file without mapping or writing
  // it (`cairn pool check`): the same checks as open(), plus roots outside
  // the arena and a damaged high-water mark. An error only when there is
  // nothing to check: missing, unreadable, a directory, another layout
  // version, or no cairn magic in either header copy.
  static Result<Health> inspect(const std::string& path);
  // Opens a pool over an image already in memory (the crash simulator's crash
  // images): the same validation as open(), no file, and the memory is the
  // caller's (not unmapped on close). `label` names the image in messages.
  // FlushMode::automatic means cpu here.
  static Result<std::unique_ptr<Pool>> open_image(std::byte* base, std::size_t size, OpenOptions options = {},
                                                  const std::string& label = "<pool image>");

  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // ---- mapping ----
  std::byte* base() const { return base_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool is_pmem() const { return is_pmem_; }
  devices::FlushMode flush_mode() const { return mode_; }
  // True where one drain makes durable what every thread flushed before it
  // (pagecache, msync, none: the page cache is shared), so that threads can
  // flush and leave one drain to the thread that commits; false for cpu,
  // where a fence orders only its own thread's flushes.
  bool drain_covers_all_threads() const { return mode_ != devices::FlushMode::cpu; }
  const PoolHeader& header() const { return header_; }
  const Health& health() const { return health_; }
  devices::Device& device() { return *device_; }

  template <class T>
  T* ptr(Offset<T> off) const {
    return off.get(base_, size_);
  }
  std::byte* at(std::uint64_t off) const { return base_ + off; }
  template <class T>
  Offset<T> offset_of(const T* p) const {
    return Offset<T>(static_cast<std::uint64_t>(reinterpret_cast<const std::byte*>(p) - base_));
  }
  bool contains(const void* p, std::size_t len) const {
    auto* b = static_cast<const std::byte*>(p);
    return b >= base_ && len <= size_ && b - base_ <= static_cast<std::ptrdiff_t>(size_ - len);
  }

  // ---- persistence primitives (no branching: one indirect call each) ----
  void flush(const void* addr, std::size_t len) { ops_.flush(ctx_, addr, len); }
  void drain() { ops_.drain(ctx_); }
  void persist(const void* addr, std::size_t len) {
    ops_.flush(ctx_, addr, len);
    ops_.drain(ctx_);
  }
  void memcpy_nodrain(void* dst, const void* src, std::size_t len) { ops_.copy_nodrain(ctx_, dst, src, len); }
  // memcpy_nodrain that also returns the CRC-32C of the bytes copied,
  // extending `crc`: in the same pass where the device can (the real device
  // on a CPU with AVX-512 and VPCLMULQDQ), else copied, then checksummed.
  std::uint32_t memcpy_crc_nodrain(void* dst, const void* src, std::size_t len, std::uint32_t crc);
  void memcpy_persist(void* dst, const void* src, std::size_t len) {
    ops_.copy_nodrain(ctx_, dst, src, len);
    ops_.drain(ctx_);
  }
  void memset_nodrain(void* dst, int c, std::size_t len) { ops_.fill_nodrain(ctx_, dst, c, len); }
  void memset_persist(void* dst, int c, std::size_t len) {
    ops_.fill_nodrain(ctx_, dst, c, len);
    ops_.drain(ctx_);
  }
  // Multi-threaded variants: split the range over up to `threads` workers
  // (0: all hardware threads); each worker flushes and fences its own part
  // (a fence orders only its own thread's flushes), then they join. While
  // the workers serve another thread's operation, the caller does every part
  // itself rather than wait.
  // `drain`: Drain::now makes the range durable before the call returns;
  // Drain::by_commit leaves the last drain to the caller's commit_word where
  // one drain covers every thread (drain_covers_all_threads(): one
  // write-back per commit on a page-cache file system instead of one per
  // call). Under cpu flushes both fence every worker's part, as they must.
  enum class Drain { now, by_commit };
  void persist_mt(const void* addr, std::size_t len, unsigned threads = 0, Drain drain = Drain::now);
  void memcpy_persist_mt(void* dst, const void* src, std::size_t len, unsigned threads = 0, Drain drain = Drain::now);
  // The same split, but each worker copies with ordinary cached stores and
  // then writes its lines back (clwb/clflushopt) before its fence: the
  // dram-cache strategy's copy, for comparison with non-temporal stores.
  void memcpy_flush_persist_mt(void* dst, const void* src, std::size_t len, unsigned threads = 0);
  // The scattered form of both (incremental commits): runs[i] is copied from
  // src + offset to dst + offset; the runs' total is split over the workers
  // as one range would be, and each worker fences once, not once per run.
  struct Run {
    std::size_t offset = 0, bytes = 0;
  };
  enum class Stores { non_temporal, cached_then_flushed };
  void memcpy_persist_runs_mt(void* dst, const void* src, std::span<const Run> runs, Stores stores,
                              unsigned threads = 0, Drain drain = Drain::now);
  // Ranges smaller than this are done on the calling thread.
  static constexpr std::size_t kParallelMin = 1u << 20;
  // True on a thread that is inside persist_mt / memcpy_persist_mt. The crash
  // simulator defers work at crash points reached there (a crash point is
  // explored on the thread that runs the workload, between its operations).
  static bool in_parallel_persist() noexcept;

  // Maps the pages of [addr, addr+len) writable now (MADV_POPULATE_WRITE;
  // on tmpfs MADV_POPULATE_READ, which maps shmem pages writable without a
  // write fault's per-page work; on kernels without either, one read per
  // page), so that first-touch page faults are not paid inside the
  // application's iterations. Contents are
  // not changed and nothing is written back. Returns the number of pages
  // that were populated, 0 if the kernel refused or the pool flushes with
  // msync (populating would dirty every page for the next msync); a hint
  // only: the range then faults in as it is touched.
  std::size_t prefault(const void* addr, std::size_t len) const;

  // Pages a pool on tmpfs never had bytes stored in (reserved by fallocate,
  // or not at all) are cleared by the kernel when they are first mapped,
  // then overwritten: a fresh 16 MiB extent took 23 ms to populate and 1.4
  // ms to copy into, where writing the same bytes with pwrite took 11 ms
  // (2 cores, 4 KiB pages). These two let a writer put bytes into such pages
  // through the file instead.
  //
  // How many bytes at the start of [addr, addr+len) lie on pages that were
  // written before (one mincore call per probe: shmem reports a reserved
  // page that was never written as absent), assuming the written pages
  // come first (a reused extent, then fresh space); a page-aligned count.
  // `len` where the pool does not copy through its file.
  std::size_t written_prefix(const void* addr, std::size_t len) const;
  // Copies len bytes to dst (in the mapping) with pwrite into the pool file
  // where this pool can (copies_through_file()); false, and nothing known to
  // be written, where it cannot or pwrite fails: the caller then copies
  // through the mapping. Not a flush: the bytes are in the file's shared
  // pages, the ones the mapping shows, when it returns, which on tmpfs is
  // all that flushing the mapping's stores achieves (tmpfs survives a
  // process crash, not a power failure). Ordering is the caller's, as for
  // memcpy_nodrain: commit_word comes after the call returned.
  bool copy_through_file(void* dst, const void* src, std::size_t len);
  // True for a pool file on a tmpfs of 4 KiB pages (no huge= mount option,
  // shmem_enabled not `force`), mapped by open()/create(), flushed by the
  // CPU (FlushMode::cpu, the automatic choice there) through the real
  // device. Never on a DAX file system, where stores through the mapping
  // are the durable path, nor under a test device, which must see every
  // store, nor on a huge-page tmpfs, where pwrite into reserved, unwritten
  // huge pages was measured 10-20x slower than the mapping.
  bool copies_through_file() const { return through_file_; }

  void marker(devices::Marker m, const char* label = "") { device_->marker(m, label); }

  // ---- the commit point of every layer ----
  // Commits by one aligned 8-byte store: drains (everything the word names
  // must already be flushed by the caller), refuses if any write-back of this
  // pool failed since it was opened (the device's io_errno()) or the pool is
  // poisoned, stores `value` into `word` (inside the mapping), persists it and
  // checks the device again. Before the store, a failure leaves the word as
  // it was and returns Errc::poisoned; if the word's own write-back fails,
  // the previous value is put back (what this process and the next one to
  // map the file see agrees with the failure) and Errc::io_error is
  // returned. Either failure poisons the pool: nothing more is committed in
  // it until it is reopened. `what` names the commit in messages ("stream
  // 'x' version 3"). The crash simulator sees a commit_point marker after
  // the word is persisted.
  Result<void> commit_word(std::uint64_t* word, std::uint64_t value, const std::string& what);

  // ---- roots ----
  RootSlot root(unsigned slot) const;
  // Makes `offset` (whose target the caller already made durable) the root in
  // `slot`, tagged with `version`. The commit point is one 8-byte store.
  Result<void> publish_root(unsigned slot, std::uint64_t offset, std::uint64_t version);
  // Publishes several slots at once (one commit point).
  Result<void> publish_roots(const std::vector<std::pair<unsigned, RootSlot>>& changes);
  std::uint64_t root_generation() const;

  // ---- arena ----
  Arena& arena() { return arena_; }

  // ---- state ----
  PoolStats stats() const;
  bool poisoned() const { return poisoned_; }
  // What poisoned it (empty if it is not).
  const std::string& poison_reason() const { return poison_reason_; }
  // Marks the pool unusable for commits after a failed persist.
  void poison(const std::string& why);

 private:
  Pool() = default;
  static Result<std::unique_ptr<Pool>> map_and_bind(const std::string& path, std::size_t expect_size,
                                                    devices::FlushMode mode, std::unique_ptr<devices::Device> device);
  RootTable* table(int which) const;
  std::uint64_t* selector() const;

  // Reserves the file's space up to `end` (bytes from the start) and some
  // more, for the arena (CreateOptions::reserve_as_used).
  Result<void> reserve(std::uint64_t end);
  friend class Arena;

  std::string path_;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;                 // the pool's file, open while it is mapped (-1 for open_image)
  std::uint64_t reserved_ = 0;  // bytes of the file reserved from its start (size_ unless reserve_as_used)
  bool is_pmem_ = false;
  bool tmpfs_ = false;         // the file is on tmpfs (shmem), found once when it is mapped
  bool through_file_ = false;  // copies_through_file()
  devices::FlushMode mode_ = devices::FlushMode::cpu;
  std::unique_ptr<devices::Device> device_;
  devices::Ops ops_{};
  void* ctx_ = nullptr;
  PoolHeader header_{};
  Health health_;
  Arena arena_;
  std::mutex publish_mu_;
  std::uint64_t roots_published_ = 0;
  bool poisoned_ = false;
  std::string poison_reason_;
  bool owns_mapping_ = true;  // false for open_image(): the memory is the caller's
  struct ParallelScope {      // marks this thread as inside a parallel persist
    ParallelScope();
    ~ParallelScope();
  };
};

// The directory pools go to by default: $CAIRN_POOL_DIR, else /dev/shm/cairn
// (tmpfs: survives process crashes, not power loss; point CAIRN_POOL_DIR at a
// DAX mount for real persistence).
std::string default_pool_dir();

}  // namespace cairn::pool
