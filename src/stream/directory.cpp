// directory.cpp — the pmem: stream directory: entries, commit words, and the
// arena rebuilt from what they reach (protocol in directory.hpp).
#include "stream/directory.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "util/crc32c.hpp"
#include "util/thread_pool.hpp"

namespace cairn::stream::detail {

namespace {

std::uint64_t name_checksum(std::string_view name) {
  const std::uint64_t c = pool::checksum64(name.data(), name.size());
  return c == 0 ? 1 : c;  // 0 means "free entry"
}

std::uint64_t header_check(const DirHeader& h) { return pool::checksum64(&h, offsetof(DirHeader, check)); }

std::string quoted(std::string_view name) {
  std::string q(1, '\'');
  q.append(name);
  q.push_back('\'');
  return q;
}

// True when d describes version v (its check holds) and has an extent.
bool holds(const StreamDesc& d, std::uint64_t v) { return v >= 1 && d.offset != 0 && desc_check(d, v) == d.check; }

std::uint64_t arena_end(const pool::Pool& pool) {
  const auto& h = pool.header();
  return h.arena_offset + h.block_size * h.block_count;
}

}  // namespace

std::uint64_t desc_check(const StreamDesc& d, std::uint64_t version) noexcept {
  const std::uint64_t words[5] = {d.offset, d.length, d.capacity, d.crc | (std::uint64_t{d.reserved} << 32), version};
  return pool::checksum64(words, sizeof words);
}

std::uint64_t directory_bytes(std::uint32_t entries) noexcept {
  return sizeof(DirHeader) + std::uint64_t{entries} * sizeof(StreamEntry);
}

Directory::Directory(pool::Pool& pool, std::uint64_t offset, Hooks hooks)
    : pool_(&pool), offset_(offset), hooks_(std::move(hooks)) {}

Result<Directory> Directory::format(pool::Pool& pool, std::uint32_t entries, Hooks hooks) {
  if (entries == 0 || entries > (1u << 20))
    return make_error(Errc::invalid_argument,
                      "a stream directory needs 1 to 2^20 entries, not " + std::to_string(entries));
  const std::uint64_t bytes = directory_bytes(entries);
  auto off = pool.arena().alloc(bytes);
  if (!off.ok())
    return make_error(off.error().code, "pool " + pool.path() + " cannot hold a stream directory of " +
                                            std::to_string(entries) + " entries: " + off.error().message);
  std::byte* p = pool.at(off.value());
  pool.memset_nodrain(p, 0, bytes);
  DirHeader h{};
  h.magic = kDirMagic;
  h.version = kDirVersion;
  h.entry_size = sizeof(StreamEntry);
  h.entry_count = entries;
  h.check = header_check(h);
  pool.memcpy_nodrain(p, &h, offsetof(DirHeader, retired_count));
  pool.drain();
  if (auto r = pool.publish_root(kStreamRoot, off.value(), kDirVersion); !r.ok()) return r.error();
  return Directory(pool, off.value(), std::move(hooks));
}

Result<Directory> Directory::attach(pool::Pool& pool, Hooks hooks) {
  const pool::RootSlot root = pool.root(kStreamRoot);
  const std::uint64_t end = arena_end(pool);
  if (root.offset == 0)
    return make_error(Errc::foreign_file, "pool " + pool.path() +
                                              " holds no stream directory: it was made for something else "
                                              "(use another pool file for pmem: streams)");
  // Bounded without wrapping, and on a block boundary as every extent is (a
  // damaged root was read misaligned or past the pool: fuzz/stream_fuzz).
  if (root.offset < pool.header().arena_offset || root.offset > end - sizeof(DirHeader) ||
      root.offset % pool.header().block_size != 0)
    return make_error(Errc::corrupted, "pool " + pool.path() + ": its stream directory lies outside the arena");
  const auto* h = reinterpret_cast<const DirHeader*>(pool.at(root.offset));
  if (h->magic != kDirMagic || header_check(*h) != h->check)
    return make_error(Errc::foreign_file, "pool " + pool.path() +
                                              " holds no valid stream directory (root slot 0 names something "
                                              "else, or it is damaged)");
  if (h->version != kDirVersion || root.version != kDirVersion)
    return make_error(
        Errc::wrong_version,
        "pool " + pool.path() + " has stream directory version " + std::to_string(h->version) +
            "; this cairn reads version " + std::to_string(kDirVersion) +
            (h->version < kDirVersion ? " (since version 2 every stream version carries a checksum). Read its streams "
                                        "with the cairn that wrote them (cairn stage out), then remove the pool file"
                                      : ". Use the cairn that wrote it"));
  if (h->entry_size != sizeof(StreamEntry) || h->entry_count == 0 || h->entry_count > (1u << 20) ||
      root.offset + directory_bytes(static_cast<std::uint32_t>(h->entry_count)) > end)
    return make_error(Errc::corrupted, "pool " + pool.path() + ": the stream directory's geometry is damaged");
  Directory d(pool, root.offset, std::move(hooks));
  if (auto r = d.reclaim(); !r.ok()) return r.error();
  return d;
}

Result<void> Directory::reclaim() {
  const auto& ph = pool_->header();
  const std::uint64_t end = arena_end(*pool_);
  const auto sane = [&](const Extent& e) {
    return e.offset >= ph.arena_offset && e.capacity > 0 && e.offset % ph.block_size == 0 &&
           e.capacity <= end - e.offset;
  };
  // Several records may name the same extent (a pending extent that its dead
  // writer committed; a retired extent a descriptor still names): mark once.
  std::vector<Extent> keep;
  keep.push_back({offset_, directory_bytes(static_cast<std::uint32_t>(entry_count()))});
  DirHeader* h = header();
  std::uint64_t kept = 0;
  for (std::uint64_t i = 0; i < std::min<std::uint64_t>(h->retired_count, kRetiredMax); ++i) {
    const Extent e = h->retired[i];
    if (sane(e) && !unpinned(e.offset)) {
      h->retired[kept++] = e;
      keep.push_back(e);
    }
  }
  h->retired_count = kept;
  for (long i = 0; i < static_cast<long>(entry_count()); ++i) {
    StreamEntry& e = at(i);
    if (e.commit != 0) {
      const std::uint64_t v = e.commit >> 1;
      const StreamDesc& live = e.desc[e.commit & 1];
      const Extent le{live.offset, live.capacity};
      if (holds(live, v) && sane(le)) keep.push_back(le);
      StreamDesc& old = e.desc[1 - (e.commit & 1)];
      const Extent oe{old.offset, old.capacity};
      if (holds(old, v - 1) && sane(oe)) {
        if (!unpinned(old.offset)) {
          keep.push_back(oe);
        } else {
          // Released now: its extent may be reused by another stream, whose
          // readers pin the same first byte. The descriptor must never
          // claim it again (not even after a crash), so it is cleared.
          const std::uint64_t zero = 0;
          pool_->memcpy_persist(&old.offset, &zero, sizeof zero);
        }
      }
    }
    if (e.owner.pid != 0 && !alive(i)) {
      e.owner = Owner{};
      e.pending = Extent{};
    }
    if (e.owner.pid != 0 && e.pending.offset != 0 && sane(e.pending)) keep.push_back(e.pending);
  }
  std::sort(keep.begin(), keep.end(), [](const Extent& a, const Extent& b) { return a.offset < b.offset; });
  auto rebuild = pool_->arena().rebuild();
  for (std::size_t i = 0; i < keep.size(); ++i) {
    if (i > 0 && keep[i].offset == keep[i - 1].offset && keep[i].capacity == keep[i - 1].capacity) continue;
    if (auto r = rebuild.mark(keep[i].offset, keep[i].capacity); !r.ok())
      return make_error(Errc::corrupted, "pool " + pool_->path() +
                                             ": the stream directory names overlapping extents (" + r.error().message +
                                             "); run `cairn pool check`");
  }
  rebuild.finish();
  return {};
}

long Directory::find(std::string_view name) const {
  if (name.empty() || name.size() > kNameMax) return -1;
  const std::uint64_t c = name_checksum(name);
  for (long i = 0; i < static_cast<long>(entry_count()); ++i) {
    const StreamEntry& e = at(i);
    if (e.name_check == c && std::strncmp(e.name, name.data(), name.size()) == 0 && e.name[name.size()] == '\0')
      return i;
  }
  return -1;
}

Result<Committed> Directory::committed(std::string_view name) const {
  const long i = find(name);
  if (i < 0)
    return make_error(Errc::not_found, "stream " + quoted(name) + " does not exist in pool " + pool_->path() +
                                           " (nothing was ever written under that name)");
  return committed(i);
}

Result<Committed> Directory::committed(long i) const {
  const StreamEntry& e = at(i);
  const std::uint64_t word = __atomic_load_n(&e.commit, __ATOMIC_ACQUIRE);
  if (word == 0) {
    std::string why = e.owner.pid != 0 ? "its writer (pid " + std::to_string(e.owner.pid) + ") has not closed it yet"
                                       : "its writer never closed it (it was interrupted or died)";
    return make_error(Errc::no_version,
                      "stream " + quoted(e.name) + " in pool " + pool_->path() + " was never committed: " + why);
  }
  Committed c;
  c.version = word >> 1;
  c.desc = e.desc[word & 1];
  if (desc_check(c.desc, c.version) != c.desc.check || c.desc.length > c.desc.capacity ||
      (c.desc.offset != 0 &&
       (c.desc.offset < pool_->header().arena_offset || c.desc.capacity > arena_end(*pool_) - c.desc.offset)))
    return make_error(Errc::corrupted, "stream " + quoted(e.name) + " in pool " + pool_->path() + ": version " +
                                           std::to_string(c.version) +
                                           "'s descriptor fails its check (damaged media); remove the stream "
                                           "and write it again");
  c.data = c.desc.offset != 0 ? pool_->at(c.desc.offset) : nullptr;
  return c;
}

namespace {

// CRC-32C of n bytes; a large version over the threads (one core reads
// memory at a fraction of the machine's bandwidth), the parts joined in order.
// Below 32 MiB one thread: a reader is often a fresh process, whose first
// parallel call starts the worker threads and waits for them to be
// scheduled (0.6-4 ms measured for a 12 MB version on 2 busy cores, more
// than the checksum itself takes on one).
std::uint32_t crc_of(const std::byte* data, std::uint64_t n) {
  constexpr std::uint64_t kParallelMin = 32ull << 20;
  if (n < kParallelMin) return util::crc32c(0, data, n);
  std::mutex mu;
  std::map<std::size_t, std::pair<std::uint32_t, std::size_t>> parts;  // offset -> crc, length
  util::parallel_ranges(n, 0, [&](std::size_t off, std::size_t len) {
    const std::uint32_t c = util::crc32c(0, data + off, len);
    std::lock_guard<std::mutex> g(mu);
    parts[off] = {c, len};
  });
  std::uint32_t crc = 0;
  for (const auto& [off, part] : parts) crc = util::crc32c_combine(crc, part.first, part.second);
  return crc;
}

}  // namespace

Result<void> Directory::verify(std::string_view name, const Committed& c) const {
  const std::uint32_t crc = crc_of(c.data, c.desc.length);
  if (crc == c.desc.crc) return {};
  return make_error(Errc::corrupted, "stream " + quoted(name) + " in pool " + pool_->path() + ": the " +
                                         std::to_string(c.desc.length) + " bytes of version " +
                                         std::to_string(c.version) +
                                         " fail their checksum (damaged media or a stray write); nothing was "
                                         "read. Write the stream again, or stage it in from a copy");
}

Result<std::uint64_t> Directory::allocate(std::uint64_t capacity) {
  auto off = pool_->arena().alloc(capacity);
  if (!off.ok())
    return make_error(off.error().code, "pool " + pool_->path() + " has no room for " + std::to_string(capacity) +
                                            " more bytes of stream data (" + off.error().message +
                                            "); create a larger pool, or remove streams");
  return off.value();
}

Result<long> Directory::begin_write(std::string_view name, std::uint64_t capacity, const Owner& me) {
  if (name.empty() || name.size() > kNameMax || name.find('\0') != std::string_view::npos)
    return make_error(Errc::invalid_argument, "a stream name has 1 to " + std::to_string(kNameMax) +
                                                  " bytes and no NUL; got " + std::to_string(name.size()) + " bytes");
  if (auto r = reclaim(); !r.ok()) return r.error();
  long i = find(name);
  if (i >= 0 && alive(i))
    return make_error(Errc::busy, "stream " + quoted(name) + " in pool " + pool_->path() + " is being written by pid " +
                                      std::to_string(at(i).owner.pid) + "; one writer per stream at a time");
  auto off = allocate(std::max<std::uint64_t>(capacity, 1));
  if (!off.ok()) return off.error();
  if (i < 0) {
    for (long j = 0; j < static_cast<long>(entry_count()) && i < 0; ++j)
      if (at(j).name_check == 0 && at(j).commit == 0) i = j;
    if (i < 0) {
      pool_->arena().free(off.value(), capacity);
      return make_error(Errc::out_of_space, "the stream directory of pool " + pool_->path() + " is full (" +
                                                std::to_string(entry_count()) +
                                                " streams); remove streams or use another pool");
    }
    // The name is durable before its checksum names the entry in use, and
    // both before any commit word refers to them.
    StreamEntry& e = at(i);
    char buf[kNameMax + 1] = {};
    std::memcpy(buf, name.data(), name.size());
    pool_->memcpy_nodrain(e.name, buf, sizeof buf);
    pool_->drain();
    const std::uint64_t c = name_checksum(name);
    pool_->memcpy_persist(&e.name_check, &c, sizeof c);
  }
  StreamEntry& e = at(i);
  e.pending = Extent{off.value(),
                     pool_->arena().blocks_for(std::max<std::uint64_t>(capacity, 1)) * pool_->arena().block_size()};
  e.owner = me;
  return i;
}

std::byte* Directory::pending_data(long entry) const { return pool_->at(at(entry).pending.offset); }

std::uint64_t Directory::unwritten_from(long entry) const {
  const Extent& p = at(entry).pending;
  return p.offset == 0 ? 0 : pool_->written_prefix(pool_->at(p.offset), p.capacity);
}

void Directory::put(std::byte* data, std::uint64_t pos, const void* buf, std::size_t n, std::uint64_t fresh_from) {
  if (pos + n > fresh_from) {
    const std::uint64_t split = std::max(pos, fresh_from);
    const std::size_t before = static_cast<std::size_t>(split - pos);
    if (pool_->copy_through_file(data + split, static_cast<const std::byte*>(buf) + before, n - before)) n = before;
  }
  if (n > 0) pool_->memcpy_nodrain(data + pos, buf, n);
}

Result<void> Directory::grow(long entry, std::uint64_t capacity, std::uint64_t used) {
  StreamEntry& e = at(entry);
  if (auto r = reclaim(); !r.ok()) return r.error();
  auto off = allocate(capacity);
  if (!off.ok()) return off.error();
  const Extent old = e.pending;
  std::byte* to = pool_->at(off.value());
  const std::uint64_t warm = pool_->written_prefix(to, capacity);
  pool_->prefault(to, warm);
  if (used > 0) put(to, 0, pool_->at(old.offset), std::min(used, old.capacity), warm);
  e.pending = Extent{off.value(),
                     pool_->arena().blocks_for(std::max<std::uint64_t>(capacity, 1)) * pool_->arena().block_size()};
  pool_->arena().free(old.offset, old.capacity);  // never committed: nobody reads it
  return {};
}

Result<void> Directory::write(long entry, std::uint64_t pos, const void* buf, std::size_t n, std::uint64_t& length,
                              std::uint64_t* fresh_from) {
  if (n == 0) return {};
  const std::uint64_t cap = at(entry).pending.capacity;
  if (pos + n > cap) {
    // Doubling: each growth copies what was written (seed 002, Fig. 5).
    if (hooks_.lock)
      if (auto l = hooks_.lock(); !l.ok()) return l;
    auto r = grow(entry, std::max(cap * 2, pos + n), length);
    if (hooks_.unlock) hooks_.unlock();
    if (!r.ok()) return r;
    if (fresh_from != nullptr) *fresh_from = unwritten_from(entry);
  }
  std::byte* data = pending_data(entry);
  if (pos > length) pool_->memset_nodrain(data + length, 0, pos - length);
  put(data, pos, buf, n, fresh_from != nullptr ? *fresh_from : UINT64_MAX);
  length = std::max<std::uint64_t>(length, pos + n);
  return {};
}

Result<std::uint64_t> Directory::finish(long entry, std::uint64_t length, std::optional<std::uint32_t> crc) {
  // commit() fences (Pool::commit_word drains before it checks the device).
  auto v = commit(entry, length, crc);
  if (v.ok()) return v;
  if (pool_->poisoned()) {
    // The commit word's own write-back may have failed after the word reached
    // the media, which would then name this extent: never hand it out again
    // from this mapping (another writer of this process could grow into it).
    // The pool refuses every commit from now on; the next open rebuilds the
    // arena from what the media's words reach.
    StreamEntry& e = at(entry);
    e.pending = Extent{};
    e.owner = Owner{};
  } else {
    abandon(entry);
  }
  return v;
}

void Directory::retire(const Extent& x) {
  DirHeader* h = header();
  if (h->retired_count < kRetiredMax) h->retired[h->retired_count++] = x;
}

Result<std::uint64_t> Directory::commit(long entry, std::uint64_t length, std::optional<std::uint32_t> crc) {
  StreamEntry& e = at(entry);
  if (length > e.pending.capacity)
    return make_error(Errc::invalid_argument, "commit of " + std::to_string(length) + " bytes into an extent of " +
                                                  std::to_string(e.pending.capacity));
  const std::uint64_t word = e.commit;
  const std::uint64_t version = (word >> 1) + 1;
  const unsigned next = word == 0 ? 0 : 1 - static_cast<unsigned>(word & 1);
  // desc[next] names the version before the live one; a reader of another
  // process may still pin it. Once overwritten, only the retired list
  // remembers it.
  const StreamDesc victim = e.desc[next];
  if (version >= 3 && holds(victim, version - 2) && victim.offset != e.pending.offset && !unpinned(victim.offset)) {
    if (header()->retired_count >= kRetiredMax)
      return make_error(Errc::busy, "stream " + quoted(e.name) + ": " + std::to_string(kRetiredMax) +
                                        " old stream versions are still open by readers; close some readers first");
    retire(Extent{victim.offset, victim.capacity});
  }
  StreamDesc d{e.pending.offset, length, e.pending.capacity, 0, 0, 0};
  d.crc = crc ? *crc : length == 0 ? 0 : util::crc32c(0, pending_data(entry), length);
  d.check = desc_check(d, version);
  pool_->memcpy_nodrain(&e.desc[next], &d, sizeof d);
  // The commit point. commit_word drains (the bytes and the descriptor) and
  // refuses if any write-back of this pool failed; if the word's own
  // write-back fails it puts the previous word back. Either way the live
  // version stays the previous one and the pool refuses further commits.
  if (auto r = pool_->commit_word(&e.commit, (version << 1) | next,
                                  "stream " + quoted(e.name) + " version " + std::to_string(version));
      !r.ok())
    return r.error();
  e.pending = Extent{};
  e.owner = Owner{};
  return version;
}

void Directory::abandon(long entry) {
  StreamEntry& e = at(entry);
  if (e.pending.offset != 0) pool_->arena().free(e.pending.offset, e.pending.capacity);
  e.pending = Extent{};
  e.owner = Owner{};
}

Result<void> Directory::remove(std::string_view name) {
  const long i = find(name);
  if (i < 0) return make_error(Errc::not_found, "stream " + quoted(name) + " does not exist in pool " + pool_->path());
  StreamEntry& e = at(i);
  if (alive(i))
    return make_error(Errc::busy, "stream " + quoted(name) + " is being written by pid " + std::to_string(e.owner.pid) +
                                      "; remove it after its writer closes it");
  const std::uint64_t word = e.commit;
  if (word != 0) {
    for (unsigned k = 0; k < 2; ++k) {
      const StreamDesc& d = e.desc[k];
      const std::uint64_t v = (word & 1) == k ? (word >> 1) : (word >> 1) - 1;
      if (holds(d, v) && !unpinned(d.offset)) retire(Extent{d.offset, d.capacity});
    }
  }
  // The removal's commit point: readers see "not found" from here on.
  if (auto r = pool_->commit_word(&e.commit, 0, "the removal of stream " + quoted(name)); !r.ok()) return r;
  const std::uint64_t zero = 0;
  pool_->memcpy_persist(&e.name_check, &zero, sizeof zero);
  return reclaim();
}

std::vector<Info> Directory::list() const {
  std::vector<Info> out;
  for (long i = 0; i < static_cast<long>(entry_count()); ++i) {
    const StreamEntry& e = at(i);
    if (e.name_check == 0) continue;
    Info l{std::string(e.name, strnlen(e.name, kNameMax)), 0, 0, 0, alive(i) ? static_cast<int>(e.owner.pid) : 0};
    if (auto c = committed(i); c.ok()) {
      l.version = c.value().version;
      l.length = c.value().desc.length;
      l.capacity = c.value().desc.capacity;
    }
    out.push_back(std::move(l));
  }
  std::sort(out.begin(), out.end(), [](const Info& a, const Info& b) { return a.name < b.name; });
  return out;
}

std::uint64_t Directory::committed_blocks() const {
  auto& a = pool_->arena();
  std::uint64_t n = a.blocks_for(directory_bytes(static_cast<std::uint32_t>(entry_count())));
  for (long i = 0; i < static_cast<long>(entry_count()); ++i)
    if (auto c = committed(i); c.ok() && c.value().desc.offset != 0) n += a.blocks_for(c.value().desc.capacity);
  return n;
}

}  // namespace cairn::stream::detail
