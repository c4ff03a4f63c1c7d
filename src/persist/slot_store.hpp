// slot_store.hpp — the NVM side shared by the pool-based strategies (shadow,
// dram-cache, nt-copy, in-place): one pool file holding two slots of every
// registered region, a pointer table per slot, and the version word (internal).
//
// Pool layout: root slot 0 points to one arena extent:
//
//   StateHeader (4 KiB)   magic, strategy, layout hash, counts, the version
//                         word, offsets of everything below, checksum; then
//                         per slot the pointer count and full layout hash of
//                         the version it holds
//   RegionDesc[n]         the registration layout (names, sizes, kinds)
//   PointerRecord[cap] x 2 pointer table of slot 0 and of slot 1
//   uint32[chunks] x 2     checksum table of slot 0 and of slot 1 (format 3)
//   slot area 0           every region's slot-0 copy, each 4 KiB aligned
//   slot area 1           every region's slot-1 copy
//
// The version word is the commit point: (version << 1) | slot, 0 meaning
// nothing committed. Commit order: write the slot data and its pointer table,
// make them durable, then store the version word (one aligned 8-byte store)
// and persist it. Restore reads the word and uses that slot; a crash before
// the word's store leaves the previous version, whose slot nobody wrote.
//
// A failed write-back (the device's io_errno(): an msync that returned EIO,
// or ENOSPC on a sparse file) poisons the pool. publish() looks at it after
// draining and before storing the word, so a version whose data may not have
// reached the media is never named; if persisting the word itself fails, the
// previous word is put back (the new one may or may not be on the media: both
// name whole versions). A poisoned store refuses every later commit with
// Errc::poisoned; reopening restores the last committed version.
//
// Payload checksums (format 3). Every region's bytes in a slot are covered by
// one CRC-32C per kChunk (chunks counted from the region's start), kept in the
// slot's checksum table. A commit seals the chunks it wrote into the table of
// the slot it writes, before publish() names that slot, so the table of the
// committed slot is never written either. Where the version is first read it
// is verified: the copy strategies check what restore copied back; in-place
// and shadow, whose restore copies nothing, check the slot on a background
// thread and the next commit waits for that check (verify_region()). A
// version whose bytes differ from its checksums is Errc::corrupted, never a
// silently different state. Format 2 pools (no tables) are still read, and
// keep being written, without checksums. Each slot also records the version
// it holds, which must agree with the version word: a flipped bit of the word
// (naming the other slot, or another number) is Errc::corrupted at open, not
// the older slot's bytes restored under the newer number.
//
// Pointers into cairn-owned regions can only be registered after open(), when
// the pool already exists, so each pointer table has a fixed capacity chosen
// at create (pointer_capacity) and every slot records, with its table, how
// many pointers it holds and the full layout hash (pointers included) of the
// version it holds; check_version_layout() compares that with the registered
// layout before a restore.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cairn/extended/pool.hpp"
#include "cairn/persist.hpp"
#include "persist/layout.hpp"

namespace cairn::persist::detail {

struct StateHeader {
  std::uint64_t magic;
  std::uint32_t format;
  std::uint32_t header_bytes;
  char strategy[32];
  std::uint64_t layout_hash;
  std::uint64_t region_count;
  std::uint64_t pointer_count;
  std::uint64_t extent_bytes;  // the whole extent, for the arena rebuild
  std::uint64_t desc_offset;   // pool offsets
  std::uint64_t pointers_offset[2];
  std::uint64_t area_offset[2];  // slot areas, page aligned
  std::uint64_t area_bytes;
  std::uint64_t pointer_capacity;  // records per pointer table
  std::uint64_t checksum;          // over everything above
  std::uint8_t pad[64 - (8 * 13 + 40) % 64];
  std::uint64_t version_word;  // own cache line: (version << 1) | slot
  std::uint8_t pad2[56];
  // What slot k's pointer table holds; written with the table, before the
  // version word names the slot.
  struct SlotMeta {
    std::uint64_t pointer_count;
    std::uint64_t layout_hash;  // Layout::hash() at the commit, pointers included
    std::uint64_t sealed;       // format 3: 1 if the checksum table holds this version's checksums
    std::uint64_t version;      // format 3: the version the slot holds, checked against the version word
  } slot_meta[2];
};
static_assert(offsetof(StateHeader, version_word) % 64 == 0);
static_assert(offsetof(StateHeader, slot_meta) % 64 == 0);
static_assert(sizeof(StateHeader) <= 4096);

class SlotStore {
 public:
  // Opens <dir>/<name>.pool or creates it sized for `layout`. A pool written
  // by another strategy is refused; a layout that differs from the stored one
  // is remembered and reported by check_layout(). With
  // layout.internal.borrowed_pool it attaches to that pool instead.
  static Result<std::unique_ptr<SlotStore>> open_or_create(const Options& options, const Layout& layout,
                                                           const std::string& strategy);

  pool::Pool& pool() { return *pool_; }
  const std::string& path() const { return path_; }
  // False when open_or_create created the pool or its state just now.
  bool existed() const { return existed_; }

  std::optional<std::uint64_t> committed() const;
  int committed_slot() const;
  // Layout of the stored version vs the registered one.
  Result<void> check_layout() const { return layout_check_; }

  // Region i's copy in slot k, and its byte offset within the slot area.
  std::byte* slot(std::size_t region, int k) const;
  std::size_t region_offset(std::size_t region) const { return region_offsets_[region]; }
  std::byte* area(int k) const;
  std::size_t area_bytes() const { return area_bytes_; }
  // Pool file offset of slot area k (page aligned), for mapping it.
  std::uint64_t area_file_offset(int k) const;

  // Errc::out_of_space if the registered pointers exceed the tables'
  // capacity (fixed when the pool was created).
  Result<void> check_pointers(const Layout& layout) const;
  // Whether a commit may begin, checked before it writes anything: not if the
  // store is poisoned (Errc::poisoned, see the top), nor if the registered
  // pointers do not fit the tables (check_pointers). A device error seen here
  // poisons the store.
  Result<void> check_commit(const Layout& layout);
  // Writes slot k's pointer table and its count and layout hash (non-temporal,
  // no fence). Errc::out_of_space, with nothing written, if there are more
  // records than the capacity (check_commit catches that earlier).
  Result<void> write_pointers_nodrain(int k, const std::vector<PointerRecord>& records);
  // The pointer table slot k holds (as many records as were written to it).
  std::vector<PointerRecord> read_pointers(int k) const;
  // Errc::layout_mismatch if the version in slot k was committed with a
  // different registration layout (pointers included) than `layout`.
  Result<void> check_version_layout(const Layout& layout, int k) const;
  // ---- payload checksums (see the top) ----
  static constexpr std::size_t kChunk = 64 * 1024;
  // False for a format 2 pool, which has no checksum tables.
  bool checksummed() const { return crc_offset_[0] != 0; }
  // Whether the versions committed now get checksums (the format has them and
  // Options::checksums is on): what a writer may skip computing otherwise.
  bool sealing() const { return checksummed() && sealing_; }
  // Chunks of region i.
  std::size_t chunks(std::size_t region) const;
  // Checksums of the chunks of region i that overlap [offset, offset+n),
  // computed from `content` (the region's bytes: the slot itself or the buffer
  // copied into it), staged for slot k's table (flush_seals() puts the table
  // in the pool). `threads` as Options::threads; threads may seal
  // disjoint chunks at once.
  void seal(std::size_t region, int k, const std::byte* content, std::size_t offset, std::size_t n,
            unsigned threads = 1);
  // Stores a checksum computed elsewhere (in pieces) for chunk c of region i.
  void seal_chunk(std::size_t region, int k, std::size_t chunk, std::uint32_t crc);
  // Copies slot k's staged checksum table into the pool, without draining (publish() drains).
  void flush_seals(int k);
  // Checks region i's bytes at `content` against slot k's table, every chunk
  // for which skip(chunk) is false (null: every chunk). Errc::corrupted naming
  // the pool, the region, the version and the damaged bytes.
  Result<void> verify_region(std::size_t region, int k, const std::byte* content, unsigned threads,
                             const std::function<bool(std::size_t)>& skip = {}) const;

  // The commit point: drains; fails with Errc::poisoned (and poisons the
  // store) without storing the word if any write-back failed; stores the
  // version word and persists it; if that persist failed, puts the previous
  // word back, poisons the store and fails with Errc::io_error.
  Result<void> publish(std::uint64_t version, int slot);

 private:
  SlotStore() = default;
  Result<void> init_new(const Layout& layout, const std::string& strategy);
  Result<void> attach_existing(const Layout& layout, const std::string& strategy);
  void place_regions(const Layout& layout);
  StateHeader* header() const;
  // "version N (the last committed) is intact" or "nothing is committed yet".
  std::string last_committed_text() const;
  // Poisons the pool and returns the refusal of the failed commit.
  Error fail_commit(Errc code, const std::string& what);

  std::unique_ptr<pool::Pool> owned_;
  pool::Pool* pool_ = nullptr;  // owned_, or InternalOptions::borrowed_pool
  std::string path_;
  bool existed_ = false;
  std::uint64_t extent_ = 0;
  std::vector<std::size_t> region_offsets_;
  std::size_t area_bytes_ = 0;
  std::vector<std::size_t> chunk_base_;   // per region: index of its first chunk in a table
  std::size_t table_bytes_ = 0;           // one checksum table, cache-line aligned
  std::uint64_t crc_offset_[2] = {0, 0};  // pool offsets of the tables; 0: none (format 2)
  // The tables as they will be at the next commit of each slot: seal() writes
  // here (any thread: in-place's helper seals beside the application), and
  // only flush_seals(), on the committing thread, copies a table into the pool.
  std::vector<std::uint32_t> staged_[2];
  bool sealing_ = true;             // Options::checksums
  const Layout* layout_ = nullptr;  // the Context's; outlives the store
  Result<void> layout_check_;
};

// The check of a restored version on a thread of its own, for the strategies
// whose restore copies nothing (in-place, shadow): restore stays O(1) and the
// next commit waits for the check, so nothing is committed on top of a
// damaged version. A state of kInlineBytes or less is checked at once (it
// costs well under a millisecond), so restore itself reports the damage.
//
// A process forked while a check runs has no copy of its thread: there the
// check's result is the one it had reached before the fork, or, if it was
// still running, an error that asks for a restore in that process. Joining
// the thread there would wait forever.
class RestoreCheck {
 public:
  static constexpr std::size_t kInlineBytes = 4u << 20;
  RestoreCheck() = default;
  RestoreCheck(const RestoreCheck&) = delete;
  RestoreCheck& operator=(const RestoreCheck&) = delete;
  ~RestoreCheck() { (void)wait(); }
  // Waits for the previous check, then runs `check` on a new thread; in a
  // process forked from the one that made this RestoreCheck, at once on the
  // calling thread (a child of a multi-threaded process starts no threads:
  // a lock another thread held at the fork, in the allocator or a sanitizer's
  // runtime, would stop them).
  void start(std::function<Result<void>()> check);
  // Waits for the check started last; its result stays until the next start
  // (every commit until the next restore is refused after a failed check).
  Result<void> wait();
  // This process was forked while the check ran: its result is unknown here.
  bool lost_to_fork() const {
    return lost_ || (thread_ && created_ != ::getpid() && !done_.load(std::memory_order_acquire));
  }

 private:
  std::unique_ptr<std::thread> thread_;
  const pid_t created_ = ::getpid();  // the process that made this RestoreCheck (and starts its threads)
  std::atomic<bool> done_{false};     // result_ holds the check's result
  bool lost_ = false;                 // wait() found the check unfinished in a forked child
  Result<void> result_;
};

}  // namespace cairn::persist::detail
