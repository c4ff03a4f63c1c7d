// directory.hpp — the on-media directory of the pmem: streams of one pool:
// which streams exist, where each one's committed bytes are, and who is
// writing a new version.
//
// Layout: root slot kStreamRoot of the pool names one extent holding a
// DirHeader followed by `entry_count` StreamEntry records of 256 bytes.
//
// A stream's commit protocol (Directory::commit), in this order:
//   1. the new bytes, in an extent of their own, are durable (the writer
//      persisted them);
//   2. desc[1 - live] = {offset, length, capacity, crc, check} is written
//      (crc: CRC-32C of the bytes, which a reader checks when it opens the
//      version; check: over the other fields and the version number);
//   3. the commit word = (version << 1) | (1 - live) is stored (one aligned
//      8-byte store) and persisted: the commit point, Pool::commit_word, which
//      first drains and refuses if any write-back of the pool failed (the
//      bytes or the descriptor may not be durable), and puts the previous
//      word back if the word's own write-back fails.
// A crash before 3 leaves the previous version live; after it, the new one.
// A failed write-back fails the commit (Errc::poisoned or Errc::io_error)
// and poisons the pool mapping: its process maps the pool again to commit.
// desc[live] is never written while it is live.
//
// Allocation state is derived, as for every cairn structure: reclaim()
// rebuilds the arena from the directory extent, every committed extent, the
// unfinished extents of writers that are still alive, and extents that a
// reader still pins. Nothing here is logged. Owner and pin state lives in the
// shared mapping only (it means nothing after a power failure: every process
// is dead then), so it needs no persisting; names, descriptors and commit
// words are persisted.
//
// The caller serialises every call on one pool (the pool lock of
// stream.cpp: a mutex plus an OFD lock on the pool file). Hooks answer the
// two questions that need the operating system: is a writer alive (stream.cpp:
// does an OFD lock on the entry's liveness byte exist), and is an extent
// pinned by a reader. The crash simulator's images answer "no" to both (a
// crash kills every process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/extended/pool.hpp"
#include "cairn/stream.hpp"

namespace cairn::stream::detail {

inline constexpr unsigned kStreamRoot = 0;                         // the pool root slot of the directory
inline constexpr std::uint64_t kDirMagic = 0x5352545352494143ULL;  // "CAIRSTRS"
// 2: each descriptor carries the CRC-32C of its version's bytes (version 1
// had none; its pools are refused with Errc::wrong_version).
inline constexpr std::uint32_t kDirVersion = 2;
inline constexpr std::size_t kNameMax = 127;  // bytes, without the NUL
inline constexpr unsigned kRetiredMax = 240;

struct Extent {
  std::uint64_t offset;
  std::uint64_t capacity;
};

struct StreamDesc {
  std::uint64_t offset;    // extent of the version's bytes (0: empty stream)
  std::uint64_t length;    // bytes written
  std::uint64_t capacity;  // bytes of the extent
  std::uint32_t crc;       // CRC-32C of the `length` bytes, checked when a reader opens the version
  std::uint32_t reserved;  // 0
  std::uint64_t check;     // checksum of the fields above and the version
};
static_assert(sizeof(StreamDesc) == 40);
static_assert(offsetof(StreamDesc, crc) == 24 && offsetof(StreamDesc, check) == 32);

// Who writes a stream now. Shared-memory state: never persisted. Whether
// that writer is still alive is not read from here (a pid means nothing in
// another pid namespace) but asked of Hooks::alive.
struct Owner {
  std::uint64_t pid;    // 0: nobody; else the writer's pid as its namespace sees it (for messages)
  std::uint64_t nonce;  // the writing Store (the crash simulator's workload tells its writers by it)
};

struct StreamEntry {
  std::uint64_t commit;      // (version << 1) | live desc; 0: never committed
  std::uint64_t name_check;  // checksum of the name; 0: free entry
  StreamDesc desc[2];
  Extent pending;  // a writer's extent, not yet committed (shared memory only)
  Owner owner;     // shared memory only
  char name[kNameMax + 1];
};
static_assert(sizeof(StreamEntry) == 256);
static_assert(offsetof(StreamEntry, commit) == 0 && offsetof(StreamEntry, desc) == 16);
static_assert(offsetof(StreamEntry, pending) == 96 && offsetof(StreamEntry, name) == 128);

struct DirHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t entry_size;
  std::uint64_t entry_count;
  std::uint64_t check;  // over the four fields above
  // Shared-memory state below: extents no descriptor names any more that a
  // reader may still pin; reclaim() frees each one once nobody does.
  std::uint64_t retired_count;
  Extent retired[kRetiredMax];
  std::uint64_t reserved[27];
};
static_assert(sizeof(DirHeader) == 4096);

struct Hooks {
  // Is the writer of the entry whose liveness byte (Directory::liveness_byte)
  // is `byte` alive? Default: nobody is (the crash simulator's view).
  std::function<bool(std::uint64_t byte, const Owner&)> alive;
  // Can the extent at `offset` be reused (no reader pins it)? Default: yes.
  std::function<bool(std::uint64_t offset)> unpinned;
  // Taken around the directory change inside write() (growth); the caller
  // holds the same lock around every other call. Default: none. A lock that
  // cannot be taken fails the write with its error.
  std::function<Result<void>()> lock;
  std::function<void()> unlock;
};

struct Committed {
  std::uint64_t version = 0;
  StreamDesc desc{};
  const std::byte* data = nullptr;  // in the pool mapping
};

class Directory {
 public:
  // Builds an empty directory with `entries` slots in a fresh pool and
  // publishes it in root slot kStreamRoot (the pool's only publish).
  static Result<Directory> format(pool::Pool& pool, std::uint32_t entries, Hooks hooks = {});
  // Validates the directory of an existing pool and rebuilds the arena.
  static Result<Directory> attach(pool::Pool& pool, Hooks hooks = {});

  pool::Pool& pool() const { return *pool_; }
  std::uint64_t entry_count() const { return header()->entry_count; }

  // Rebuilds the arena from what is reachable or in use (see the top). Called
  // before every allocation: another process may have changed the directory.
  Result<void> reclaim();

  // The entry named `name`, or -1.
  long find(std::string_view name) const;
  // The committed version of `name`: Errc::not_found (no such stream),
  // Errc::no_version (never committed), Errc::corrupted (descriptor fails
  // its check).
  Result<Committed> committed(std::string_view name) const;
  Result<Committed> committed(long entry) const;
  // Errc::corrupted, naming the stream and the pool, unless c's bytes have
  // the CRC its descriptor holds. O(length): readers call it once, when they
  // open the version (outside the pool lock: a pinned version does not
  // change).
  Result<void> verify(std::string_view name, const Committed& c) const;

  // A writer starts a new version of `name` (creating the entry, its name
  // persisted) in a fresh extent of at least `capacity` bytes (the caller
  // may prefault it after releasing the pool lock). Errc::busy if
  // a live writer holds it, Errc::out_of_space if the pool or the directory
  // is full, Errc::invalid_argument for a bad name.
  Result<long> begin_write(std::string_view name, std::uint64_t capacity, const Owner& me);
  // The byte of the pool file on which the writer of `entry` holds a lock
  // while it is open (stream.cpp: an OFD write lock, dropped by the kernel
  // when the writer's process ends). A byte of the entry itself, at an odd
  // offset: never byte 0 (the pool lock) nor an extent's first byte (a
  // reader's pin).
  std::uint64_t liveness_byte(long entry) const {
    return offset_ + sizeof(DirHeader) + static_cast<std::uint64_t>(entry) * sizeof(StreamEntry) + 1;
  }
  std::byte* pending_data(long entry) const;
  std::uint64_t pending_capacity(long entry) const { return at(entry).pending.capacity; }
  // The position in the pending extent from which its pages were never
  // written (Pool::written_prefix; the capacity where the pool does not
  // copy through its file). Bytes from there on go through the file
  // (Pool::copy_through_file) and the writer does not populate those
  // pages: the kernel would clear each one before the copy overwrote it.
  std::uint64_t unwritten_from(long entry) const;
  // Moves the pending extent to one of at least `capacity` bytes, copying
  // (and not persisting: commit does) the first `used` bytes.
  Result<void> grow(long entry, std::uint64_t capacity, std::uint64_t used);
  // A writer's bytes: copies n bytes to position `pos` of the pending extent
  // (flushed or non-temporal, not fenced), growing it by doubling when
  // needed (under hooks.lock) and zero-filling a gap; `length` is the bytes
  // written so far and is updated. Needs no lock unless it grows.
  // `fresh_from`, if given, is the writer's unwritten_from(entry): bytes
  // at or past it are copied through the file; a growth updates it.
  Result<void> write(long entry, std::uint64_t pos, const void* buf, std::size_t n, std::uint64_t& length,
                     std::uint64_t* fresh_from = nullptr);
  // Fences the calling thread's copies of the pending bytes and commits the
  // first `length` of them (a writer whose bytes other threads copied too
  // persists them first: a fence orders only its own thread's stores).
  // `crc`: the CRC-32C of those bytes if the caller computed it as it wrote
  // them; else it is computed here from the extent.
  Result<std::uint64_t> finish(long entry, std::uint64_t length, std::optional<std::uint32_t> crc = std::nullopt);
  // Commits `length` bytes of the pending extent, which the caller flushed
  // (copied non-temporally); see the protocol at the top. Marks
  // Marker::commit_point (through Pool::commit_word).
  Result<std::uint64_t> commit(long entry, std::uint64_t length, std::optional<std::uint32_t> crc = std::nullopt);
  // Drops the pending extent without committing.
  void abandon(long entry);
  // Deletes the stream: its commit word first (readers then see "not found"),
  // then its name. Errc::busy while a live writer holds it.
  Result<void> remove(std::string_view name);

  // Every named stream, sorted by name.
  std::vector<Info> list() const;
  // Arena blocks the committed state reaches (directory + live extents).
  std::uint64_t committed_blocks() const;

 private:
  Directory(pool::Pool& pool, std::uint64_t offset, Hooks hooks);
  DirHeader* header() const { return reinterpret_cast<DirHeader*>(pool_->at(offset_)); }
  StreamEntry& at(long i) const { return reinterpret_cast<StreamEntry*>(pool_->at(offset_ + sizeof(DirHeader)))[i]; }
  bool alive(long i) const {
    return at(i).owner.pid != 0 && hooks_.alive && hooks_.alive(liveness_byte(i), at(i).owner);
  }
  bool unpinned(std::uint64_t off) const { return !hooks_.unpinned || hooks_.unpinned(off); }
  void retire(const Extent& e);
  // Copies n bytes to data + pos: through the file from `fresh_from` on (if
  // the pool can), through the mapping before it.
  void put(std::byte* data, std::uint64_t pos, const void* buf, std::size_t n, std::uint64_t fresh_from);
  Result<std::uint64_t> allocate(std::uint64_t capacity);

  pool::Pool* pool_;
  std::uint64_t offset_;
  Hooks hooks_;
};

std::uint64_t desc_check(const StreamDesc& d, std::uint64_t version) noexcept;
std::uint64_t directory_bytes(std::uint32_t entries) noexcept;

}  // namespace cairn::stream::detail
