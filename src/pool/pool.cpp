// pool.cpp — create, open, validate and close pool files; roots; primitives.
#include "cairn/extended/pool.hpp"

#include <fcntl.h>
#include <libpmem.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "util/crc32c.hpp"
#include "util/hash.hpp"
#include "util/io.hpp"
#include "util/thread_pool.hpp"

namespace cairn::pool {
namespace {

constexpr long kTmpfsMagic = 0x01021994;

// An errno from open/stat/fallocate on `path` as a typed error
// (util::errc_from_errno) with what a pool's user should do about it.
Error file_error(const std::string& path, const char* what, int err) {
  switch (util::errc_from_errno(err)) {
    case Errc::not_found:
      return util::errno_error(path, what, err, "check the path, or create the pool with `cairn pool create`");
    case Errc::permission_denied:
      return util::errno_error(path, what, err,
                               "the pool needs read and write access: check its mode and the file system's mount "
                               "options");
    case Errc::is_directory:
      return make_error(Errc::is_directory, path + " is a directory; give the path of a pool file");
    case Errc::device_full:
      return util::errno_error(path, what, err, "free space on the device or choose a smaller pool size");
    case Errc::already_exists:
      return make_error(Errc::already_exists,
                        path + " already exists; cairn never overwrites a file: remove it or choose another path");
    default: return util::errno_error(path, what, err);
  }
}

// Layout 1's checksum (FNV-1a over bytes, then mixed): four cycles a byte,
// a quarter of the crash harness's time. Kept only to recognise a layout-1
// header, so that such a pool gets wrong_version rather than "corrupted".
std::uint64_t checksum64_layout1(const void* data, std::size_t len) noexcept {
  auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h ^ len;
}

bool header_checksum_ok(const PoolHeader& h) {
  const std::size_t n = offsetof(PoolHeader, checksum);
  return checksum64(&h, n) == h.checksum || (h.layout_version == 1 && checksum64_layout1(&h, n) == h.checksum);
}
bool table_checksum_ok(const RootTable& t) { return checksum64(&t, offsetof(RootTable, checksum)) == t.checksum; }

void seal(PoolHeader& h) { h.checksum = checksum64(&h, offsetof(PoolHeader, checksum)); }
void seal(RootTable& t) { t.checksum = checksum64(&t, offsetof(RootTable, checksum)); }

// The selector word. Pools of earlier cairn hold the bare table index (0 or
// 1), where one flipped bit names the other, older table and reopens the pool
// silently at older roots. Every publish now stores a self-checking word:
//   bit 0        the live table
//   bits 1..40   the low 40 bits of that table's generation
//   bits 41..62  a check of bits 0..40 (22 bits of a hash)
//   bit 63       1 (marks the form)
// so a flipped bit fails the check (the word is then corrected if exactly one
// flip of it checks and names a valid table of that generation), and a word
// that checks must agree with the table it names. Still one aligned 8-byte
// store: the commit point does not change. An earlier cairn reads such a word
// as "not 0 or 1" and takes the valid table of the newest generation.
constexpr std::uint64_t kSelectorMark = std::uint64_t{1} << 63;
constexpr std::uint64_t kSelectorGenerationMask = (std::uint64_t{1} << 40) - 1;
constexpr std::uint64_t kSelectorLowMask = (std::uint64_t{1} << 41) - 1;
constexpr std::uint64_t kSelectorCheckMask = (std::uint64_t{1} << 22) - 1;

struct SelectorWord {
  int table;
  std::uint64_t generation;  // its low 40 bits
};

std::uint64_t selector_check(std::uint64_t low) {
  return util::hash_bytes(&low, sizeof low, 0x73656c6563746f72ULL) & kSelectorCheckMask;
}

std::uint64_t encode_selector(int table, std::uint64_t generation) {
  const std::uint64_t low = static_cast<std::uint64_t>(table & 1) | ((generation & kSelectorGenerationMask) << 1);
  return kSelectorMark | (selector_check(low) << 41) | low;
}

std::optional<SelectorWord> decode_selector(std::uint64_t word) {
  const std::uint64_t low = word & kSelectorLowMask;
  if ((word & kSelectorMark) == 0 || ((word >> 41) & kSelectorCheckMask) != selector_check(low)) return std::nullopt;
  return SelectorWord{static_cast<int>(low & 1), low >> 1};
}

// The table a selector word names (either form), or -1.
int selector_table(std::uint64_t word) {
  if (word <= 1) return static_cast<int>(word);
  const auto s = decode_selector(word);
  return s ? s->table : -1;
}

bool on_tmpfs(int fd) {
  struct statfs fs {};
  return fd >= 0 && fstatfs(fd, &fs) == 0 && static_cast<long>(fs.f_type) == kTmpfsMagic;
}

// May the tmpfs holding fd back it with huge pages (its mount's huge= option,
// or shmem_enabled's `force`)? True when it cannot tell. pwrite into space
// reserved as huge pages and not yet written was measured 10-20x slower than
// through the mapping (256 MiB: 3.5 s), so such pools keep the mapping.
bool tmpfs_may_use_huge_pages(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return true;
  if (std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re")) {
    char line[256] = {};
    const bool force = std::fgets(line, sizeof line, f) != nullptr && std::strstr(line, "[force]") != nullptr;
    std::fclose(f);
    if (force) return true;
  }
  std::FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (f == nullptr) return true;
  // "id parent major:minor root point options ... - fstype source super-options"
  const std::string dev = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  bool found = false, huge = false;
  char line[4096];
  while (!found && std::fgets(line, sizeof line, f) != nullptr) {
    char id[32], parent[32], majmin[64];
    if (std::sscanf(line, "%31s %31s %63s", id, parent, majmin) != 3 || dev != majmin) continue;
    const char* sep = std::strstr(line, " - ");
    if (sep == nullptr) continue;
    found = true;
    const char* h = std::strstr(sep, "huge=");
    huge = h != nullptr && std::strncmp(h, "huge=never", 10) != 0;
  }
  std::fclose(f);
  return !found || huge;
}

devices::FlushMode resolve_mode(devices::FlushMode requested, bool is_pmem, bool tmpfs) {
  if (requested == devices::FlushMode::automatic) {
    if (const char* env = std::getenv("CAIRN_FLUSH")) {
      auto m = devices::parse_flush_mode(env);
      if (m.ok()) requested = m.value();
    }
  }
  if (requested != devices::FlushMode::automatic) return requested;
  if (is_pmem || tmpfs) return devices::FlushMode::cpu;
  return devices::FlushMode::pagecache;
}

// Reads up to n bytes at off; returns how many were read (0 on error: the
// part is then reported missing, as past the end of the file).
std::size_t read_at(int fd, void* buf, std::size_t n, off_t off) {
  const long long r = util::pread_full(fd, buf, n, static_cast<std::uint64_t>(off));
  return r < 0 ? 0 : static_cast<std::size_t>(r);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Validates the two header copies (`got` bytes of each could be read) of a
// pool of `file_size` bytes. Fills `health` and returns the header to use.
Result<PoolHeader> validate_header(const std::string& path, const PoolHeader (&h)[2], const std::size_t (&got)[2],
                                   std::uint64_t file_size, Health& health) {
  bool magic[2], ok[2];
  for (int i = 0; i < 2; ++i) {
    magic[i] = got[i] == sizeof(PoolHeader) && h[i].magic == kMagic;
    ok[i] = magic[i] && header_checksum_ok(h[i]);
  }
  health.header0_ok = ok[0];
  health.header1_ok = ok[1];
  if (!magic[0] && !magic[1]) {
    if (file_size == 0)
      return make_error(Errc::foreign_file, path + " is empty, not a cairn pool; create one with `cairn pool create`");
    if (got[0] == sizeof(PoolHeader) && h[0].magic != kMagic && file_size >= kMinPoolSize)
      return make_error(Errc::foreign_file,
                        path + " is not a cairn pool (bad magic in both header copies); check the path");
    if (file_size < kArenaOffset)
      return make_error(Errc::truncated, path + " is " + std::to_string(file_size) +
                                             " bytes, too short to hold a cairn pool header (it was truncated, or "
                                             "is not a pool)");
    return make_error(Errc::foreign_file, path + " is not a cairn pool (bad magic in both header copies)");
  }
  for (int i = 0; i < 2; ++i) {
    if (magic[i] && ok[i] && h[i].layout_version != kLayoutVersion)
      return make_error(Errc::wrong_version, path + " has pool layout version " + std::to_string(h[i].layout_version) +
                                                 ", this cairn reads version " + std::to_string(kLayoutVersion) +
                                                 "; open it with the cairn release that wrote it");
  }
  if (!ok[0] && !ok[1])
    return make_error(Errc::corrupted, path +
                                           ": header checksum mismatch on both copies; the pool header is "
                                           "corrupted and cannot be trusted (restore the file from a copy)");
  if (!ok[0]) health.problems.push_back("header copy 0 is damaged (checksum mismatch); copy 1 is used");
  if (!ok[1]) health.problems.push_back("header copy 1 is damaged (checksum mismatch); copy 0 is used");
  if (ok[0] && ok[1] && std::memcmp(&h[0], &h[1], sizeof(PoolHeader)) != 0)
    health.problems.push_back("the two header copies differ though both checksums hold");
  const PoolHeader& use = ok[0] ? h[0] : h[1];
  if (use.pool_size > file_size)
    return make_error(Errc::truncated, path + " is " + std::to_string(file_size) + " bytes but its header says " +
                                           std::to_string(use.pool_size) +
                                           ": the file was truncated (a partial copy?); restore it from a full copy");
  if (use.pool_size < file_size)
    health.problems.push_back("file is longer than the pool (" + std::to_string(file_size) + " > " +
                              std::to_string(use.pool_size) + " bytes); the tail is ignored");
  // block_size * block_count must not wrap: a header (checksum and all)
  // naming 2^64 - 1 blocks passed, and the arena's bitmap came out empty
  // (fuzz/pool_fuzz).
  if (use.arena_offset != kArenaOffset || use.block_size == 0 || (use.block_size & (use.block_size - 1)) != 0 ||
      use.arena_offset > use.pool_size || use.block_count > (use.pool_size - use.arena_offset) / use.block_size)
    return make_error(Errc::corrupted, path + ": header geometry is inconsistent (arena " +
                                           std::to_string(use.arena_offset) + " + " + std::to_string(use.block_count) +
                                           " blocks of " + std::to_string(use.block_size) + " in " +
                                           std::to_string(use.pool_size) + " bytes)");
  return use;
}

// Validates the two header copies of an open file (read with pread: nothing
// is written). Fills `health` and returns the header to use.
Result<PoolHeader> read_header(const std::string& path, int fd, std::uint64_t file_size, Health& health) {
  PoolHeader h[2]{};
  const std::size_t got[2] = {read_at(fd, &h[0], sizeof(PoolHeader), kHeaderCopy0),
                              read_at(fd, &h[1], sizeof(PoolHeader), kHeaderCopy1)};
  return validate_header(path, h, got, file_size, health);
}

// Picks the live root table from the selector and the two checksums.
Result<int> choose_table(const std::string& path, std::uint64_t selector, const RootTable& t0, const RootTable& t1,
                         Health& health) {
  health.selector = selector;
  health.table0_ok = table_checksum_ok(t0);
  health.table1_ok = table_checksum_ok(t1);
  const bool ok[2] = {health.table0_ok, health.table1_ok};
  if (!ok[0] && !ok[1])
    return make_error(Errc::corrupted, path + ": both root tables fail their checksums; the roots cannot be trusted");
  const RootTable* tables[2] = {&t0, &t1};
  // A self-checking selector names a table and its generation (see
  // encode_selector): it must agree with a valid table of that generation.
  const auto names_valid = [&](const SelectorWord& s) {
    return ok[s.table] && (tables[s.table]->generation & kSelectorGenerationMask) == s.generation;
  };
  if (const auto s = decode_selector(selector)) {
    // The word checks, so the table it names is the live one for certain: if
    // that table is damaged the newest roots are lost, and the other table's
    // older roots may name space freed since. Never reopen at them silently.
    if (!ok[s->table])
      return make_error(Errc::corrupted, path + ": root table " + std::to_string(s->table) +
                                             ", the live one, fails its checksum: the newest published roots are "
                                             "lost. Restore the state from a copy of the pool");
    if (!names_valid(*s))
      return make_error(Errc::corrupted,
                        path + ": the root selector names root table " + std::to_string(s->table) + " of generation " +
                            std::to_string(s->generation) +
                            ", which that table does not hold; the pool's commit record is damaged: restore the "
                            "state from a copy of the pool");
    health.live_table = s->table;
    return s->table;
  }
  if ((selector & kSelectorMark) != 0 || selector > 1) {
    // Damaged, as a self-checking word: one flipped bit is corrected when
    // exactly one flip of the word checks and names a valid table.
    std::optional<SelectorWord> only;
    int found = 0;
    for (int bit = 0; bit < 64; ++bit)
      if (const auto s = decode_selector(selector ^ (std::uint64_t{1} << bit)); s && names_valid(*s)) {
        only = s;
        ++found;
      }
    if (found == 1) {
      health.problems.push_back("the root selector had one damaged bit; it names root table " +
                                std::to_string(only->table) + " of generation " + std::to_string(only->generation) +
                                " once corrected");
      health.live_table = only->table;
      return only->table;
    }
    if ((selector & kSelectorMark) != 0)
      return make_error(Errc::corrupted, path + ": the root selector is damaged beyond correction (" +
                                             std::to_string(found) +
                                             " candidates); restore the state from a copy of the pool");
  }
  int live;
  if (selector > 1) {
    health.problems.push_back("root selector holds " + std::to_string(selector) +
                              " (not 0 or 1); the valid table with the newest generation is used");
    live = (ok[0] && ok[1]) ? (t0.generation >= t1.generation ? 0 : 1) : (ok[0] ? 0 : 1);
  } else if (!ok[selector]) {
    live = 1 - static_cast<int>(selector);
    health.problems.push_back("root table " + std::to_string(selector) +
                              " named by the selector is damaged; the older table " + std::to_string(live) +
                              " is used (the newest published roots are lost)");
  } else {
    live = static_cast<int>(selector);
  }
  health.live_table = live;
  return live;
}

}  // namespace

std::uint64_t checksum64(const void* data, std::size_t len) noexcept {
  return util::hash_bytes(data, len, 0x6361697275706C32ULL);
}

std::string default_pool_dir() {
  const char* env = std::getenv("CAIRN_POOL_DIR");
  return (env && *env) ? env : "/dev/shm/cairn";
}

Result<std::unique_ptr<Pool>> Pool::map_and_bind(const std::string& path, std::size_t expect_size,
                                                 devices::FlushMode mode, std::unique_ptr<devices::Device> device) {
  std::size_t mapped = 0;
  int is_pmem = 0;
  void* addr = pmem_map_file(path.c_str(), 0, 0, 0, &mapped, &is_pmem);
  if (addr == nullptr) return file_error(path, "pmem_map_file", errno);
  if (mapped < expect_size) {
    pmem_unmap(addr, mapped);
    return make_error(Errc::truncated, path + " shrank while being opened");
  }
  std::unique_ptr<Pool> pool(new Pool());
  pool->path_ = path;
  pool->base_ = static_cast<std::byte*>(addr);
  pool->size_ = mapped;
  pool->is_pmem_ = is_pmem != 0;
  // Kept open with the mapping: the pagecache device writes back through it.
  pool->fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (pool->fd_ < 0) pool->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  pool->tmpfs_ = on_tmpfs(pool->fd_);
  pool->mode_ = resolve_mode(mode, pool->is_pmem_, pool->tmpfs_);
  // On tmpfs, ask for huge pages: a tmpfs mounted with huge=advise then backs
  // the pool with 2 MiB pages (huge=within_size or huge=always do without
  // the advice), and populating a stream's extent in a fresh process maps
  // one entry per 2 MiB instead of 512 (libpmem aligns the mapping to 2 MiB).
  // Elsewhere, and where the kernel has no THP, the advice does nothing.
  if (pool->tmpfs_) (void)::madvise(addr, mapped, MADV_HUGEPAGE);
  if (!device) {
    auto d = devices::make_device("");
    if (!d.ok()) return std::move(d).error();
    device = std::move(d.value());
  }
  pool->device_ = std::move(device);
  devices::Mapping m{pool->base_, pool->size_, pool->is_pmem_, pool->mode_, pool->fd_};
  auto ops = pool->device_->bind(m);
  if (!ops.ok()) return std::move(ops).error();
  pool->ops_ = ops.value();
  pool->ctx_ = pool->device_->context();
  pool->through_file_ = pool->tmpfs_ && pool->mode_ == devices::FlushMode::cpu && pool->device_->name() == "real" &&
                        (::fcntl(pool->fd_, F_GETFL) & O_ACCMODE) == O_RDWR && !tmpfs_may_use_huge_pages(pool->fd_);
  return pool;
}

Result<std::unique_ptr<Pool>> Pool::create(const std::string& path, CreateOptions options) {
  if (path.empty()) return make_error(Errc::invalid_argument, "empty pool path");
  if (options.size < kMinPoolSize)
    return make_error(Errc::too_small, "pool size " + std::to_string(options.size) + " bytes for " + path +
                                           " is below the minimum of " + std::to_string(kMinPoolSize) +
                                           " bytes (1 MiB); ask for a larger size");
  const std::uint64_t bs = options.block_size;
  if (bs < 64 || (bs & (bs - 1)) != 0 || bs > (64u << 20))
    return make_error(Errc::invalid_argument,
                      "block size " + std::to_string(bs) + " is not a power of two between 64 bytes and 64 MiB");
  if (kArenaOffset + bs > options.size)
    return make_error(Errc::too_small, "pool size " + std::to_string(options.size) +
                                           " leaves no room for one arena block of " + std::to_string(bs) + " bytes");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return file_error(path, "create", EISDIR);
    return file_error(path, "create", EEXIST);
  }

  // Build the pool under a temporary name, then rename it into place: a crash
  // or a full device part-way never leaves a file that opens as a pool.
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".tmp-%d-%08x", static_cast<int>(getpid()), rd());
  const std::string tmp = path + suffix;
  // Sparse past the first 16 MiB when reserving as used; ftruncate still
  // fails at once on a size the file system refuses.
  const std::uint64_t reserve =
      options.reserve_as_used ? std::min<std::uint64_t>(options.size, kArenaOffset + kReserveStep) : options.size;
  {
    Fd fd{::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, options.mode)};
    if (fd.fd < 0) return file_error(path, "create", errno);
    int err = options.reserve_as_used && ::ftruncate(fd.fd, static_cast<off_t>(options.size)) != 0 ? errno : 0;
    if (err == 0) err = posix_fallocate(fd.fd, 0, static_cast<off_t>(reserve));
    if (err != 0) {
      ::unlink(tmp.c_str());
      return file_error(path, ("reserving " + std::to_string(options.size) + " bytes").c_str(), err);
    }
  }
  auto mapped = map_and_bind(tmp, options.size, options.flush_mode, std::move(options.device));
  if (!mapped.ok()) {
    ::unlink(tmp.c_str());
    return std::move(mapped).error();
  }
  std::unique_ptr<Pool> pool = std::move(mapped.value());

  PoolHeader h{};
  h.magic = kMagic;
  h.layout_version = kLayoutVersion;
  h.header_size = sizeof(PoolHeader);
  for (auto& b : h.uuid) b = static_cast<std::uint8_t>(rd());
  h.uuid[6] = static_cast<std::uint8_t>((h.uuid[6] & 0x0f) | 0x40);  // RFC 4122 version 4
  h.uuid[8] = static_cast<std::uint8_t>((h.uuid[8] & 0x3f) | 0x80);
  h.pool_size = pool->size_;
  h.create_time_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  h.arena_offset = kArenaOffset;
  h.block_size = bs;
  h.block_count = (pool->size_ - kArenaOffset) / bs;
  seal(h);

  RootTable t0{}, t1{};
  t0.generation = 1;
  seal(t0);
  seal(t1);
  std::byte* b = pool->base_;
  pool->memcpy_nodrain(b + kRootTable0, &t0, sizeof t0);
  pool->memcpy_nodrain(b + kRootTable1, &t1, sizeof t1);
  const std::uint64_t zero = 0, first = encode_selector(0, t0.generation);
  pool->memcpy_nodrain(b + kSelectorOffset, &first, sizeof first);
  pool->memcpy_nodrain(b + kHighWaterOffset, &zero, sizeof zero);
  pool->memcpy_nodrain(b + kHeaderCopy1, &h, sizeof h);
  pool->memcpy_nodrain(b + kHeaderCopy0, &h, sizeof h);
  pool->drain();
  // The rename must not become durable before the contents: msync and fsync.
  if (pmem_msync(b, kArenaOffset) != 0) pool->device_->record_io_error(errno);
  {
    Fd fd{::open(tmp.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd < 0 || ::fsync(fd.fd) != 0) pool->device_->record_io_error(errno ? errno : EIO);
  }
  if (int err = pool->device_->io_errno()) {
    ::unlink(tmp.c_str());
    return file_error(path, "writing the new pool", err);
  }
  // link() refuses to replace a file that appeared meanwhile.
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return file_error(path, "create", err);
  }
  ::unlink(tmp.c_str());
  {
    // The new name must be durable before anything is committed into the
    // pool, or a power failure takes the pool and every commit with it.
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    if (dir.empty()) dir = "/";
    Fd dfd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    if (dfd.fd < 0 || ::fsync(dfd.fd) != 0) {
      const int err = errno ? errno : EIO;
      ::unlink(path.c_str());
      return file_error(path, ("fsync of the directory " + dir).c_str(), err);
    }
  }
  pool->path_ = path;
  pool->reserved_ = std::min<std::uint64_t>(reserve, pool->size_);
  pool->header_ = h;
  pool->health_.header0_ok = pool->health_.header1_ok = true;
  pool->health_.table0_ok = pool->health_.table1_ok = true;
  pool->health_.live_table = 0;
  pool->arena_.init(h.arena_offset, h.block_size, h.block_count, reinterpret_cast<std::uint64_t*>(b + kHighWaterOffset),
                    pool.get());
  pool->arena_.reset_empty();
  return pool;
}

Result<std::unique_ptr<Pool>> Pool::open(const std::string& path, OpenOptions options) {
  Health health;
  PoolHeader header{};
  std::uint64_t sparse_reserved = 0;
  {
    // Validate with pread before mapping; nothing here writes to the file.
    Fd fd{::open(path.c_str(), O_RDWR | O_CLOEXEC)};
    if (fd.fd < 0) return file_error(path, "open", errno);
    struct stat st {};
    if (fstat(fd.fd, &st) != 0) return file_error(path, "stat", errno);
    if (S_ISDIR(st.st_mode)) return file_error(path, "open", EISDIR);
    auto h = read_header(path, fd.fd, static_cast<std::uint64_t>(st.st_size), health);
    if (!h.ok()) return std::move(h).error();
    header = h.value();
    std::uint64_t sel = 0;
    RootTable t0{}, t1{};
    read_at(fd.fd, &sel, sizeof sel, kSelectorOffset);
    read_at(fd.fd, &t0, sizeof t0, kRootTable0);
    read_at(fd.fd, &t1, sizeof t1, kRootTable1);
    auto live = choose_table(path, sel, t0, t1, health);
    if (!live.ok()) return std::move(live).error();
    // A sparse file reserves as used: every block up to the high-water mark
    // was reserved before it was handed out.
    std::uint64_t hw = 0;
    read_at(fd.fd, &hw, sizeof hw, kHighWaterOffset);
    const auto allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
    sparse_reserved = allocated < static_cast<std::uint64_t>(st.st_size)
                          ? std::min<std::uint64_t>(header.pool_size, header.arena_offset + hw * header.block_size)
                          : header.pool_size;
    // On tmpfs the file's allocated pages are exactly the reserved prefix
    // (reservations only ever extend it; st_blocks counts nothing else),
    // usually well past the high-water mark. Reserving that part again is
    // not free there: fallocate clears every page an earlier fallocate
    // reserved and nothing has written yet (the kernel keeps its promise of
    // zeros that way), up to 16 MiB on the first allocation of every
    // process that opens the pool.
    if (on_tmpfs(fd.fd) && allocated < static_cast<std::uint64_t>(st.st_size))
      sparse_reserved = std::max(sparse_reserved, std::min<std::uint64_t>(header.pool_size, allocated / 4096 * 4096));
  }
  auto mapped = map_and_bind(path, header.pool_size, options.flush_mode, std::move(options.device));
  if (!mapped.ok()) return std::move(mapped).error();
  std::unique_ptr<Pool> pool = std::move(mapped.value());
  pool->reserved_ = std::min<std::uint64_t>(sparse_reserved, pool->size_);
  pool->header_ = header;
  pool->health_ = std::move(health);
  pool->arena_.init(header.arena_offset, header.block_size, header.block_count,
                    reinterpret_cast<std::uint64_t*>(pool->base_ + kHighWaterOffset), pool.get());
  return pool;
}

Result<void> Pool::reserve(std::uint64_t end) {
  if (end <= reserved_) return {};
  const std::uint64_t to =
      std::min<std::uint64_t>(size_, std::max(end, reserved_ + std::max(kReserveStep, reserved_ / 8)));
  Fd fd{::open(path_.c_str(), O_RDWR | O_CLOEXEC)};
  const int err =
      fd.fd < 0 ? errno : posix_fallocate(fd.fd, static_cast<off_t>(reserved_), static_cast<off_t>(to - reserved_));
  if (err != 0)
    return file_error(path_, ("reserving " + std::to_string(to - reserved_) + " more bytes of the pool").c_str(), err);
  reserved_ = to;
  return {};
}

namespace {

// Problems of every part of a pool that cannot be opened, listed together so
// that one fatal problem does not hide the others.
std::vector<std::string> part_problems(const Health& h, const PoolHeader (&hdr)[2], const bool (&magic)[2]) {
  std::vector<std::string> out;
  std::vector<std::string> missing;  // parts past the end of the file: one problem for all
  const bool ok[2] = {h.header0_ok, h.header1_ok};
  for (int i = 0; i < 2; ++i) {
    const std::string name = "header copy " + std::to_string(i);
    if (!h.header_read[i])
      missing.push_back(name);
    else if (!magic[i])
      out.push_back(name + " is damaged (bad magic)");
    else if (!ok[i])
      out.push_back(name + " is damaged (checksum mismatch)");
    else if (hdr[i].layout_version != kLayoutVersion)
      out.push_back(name + " has layout version " + std::to_string(hdr[i].layout_version) +
                    ", this cairn reads version " + std::to_string(kLayoutVersion));
  }
  if (ok[0] && ok[1] && std::memcmp(&hdr[0], &hdr[1], sizeof(PoolHeader)) != 0)
    out.push_back("the two header copies differ though both checksums hold");
  for (int i = 0; i < 2; ++i) {
    if (!ok[i]) continue;
    if (hdr[i].pool_size > h.file_size)
      out.push_back("the file is " + std::to_string(h.file_size) + " bytes but header copy " + std::to_string(i) +
                    " says " + std::to_string(hdr[i].pool_size) + ": the file was truncated");
    break;
  }
  if (!h.selector_read)
    missing.push_back("the root selector");
  else if (h.selector > 1 && !decode_selector(h.selector))
    out.push_back("the root selector holds " + std::to_string(h.selector) +
                  " (neither 0 or 1 nor a self-checking word: it is damaged)");
  const bool table_ok[2] = {h.table0_ok, h.table1_ok};
  for (int i = 0; i < 2; ++i) {
    if (!h.table_read[i])
      missing.push_back("root table " + std::to_string(i));
    else if (!table_ok[i])
      out.push_back("root table " + std::to_string(i) + " fails its checksum" +
                    (h.selector_read && selector_table(h.selector) == i ? " (it is the one the selector names)" : ""));
  }
  if (!missing.empty()) {
    std::string parts;
    for (std::size_t i = 0; i < missing.size(); ++i)
      parts += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
    out.push_back("the file ends at " + std::to_string(h.file_size) + " bytes, before " + parts + ": it was truncated");
  }
  return out;
}

}  // namespace

Result<Health> Pool::inspect(const std::string& path) {
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) return file_error(path, "open", errno);
  struct stat st {};
  if (fstat(fd.fd, &st) != 0) return file_error(path, "stat", errno);
  if (S_ISDIR(st.st_mode)) return file_error(path, "open", EISDIR);
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::invalid_argument, path + " is not a regular file; give the path of a pool file");

  // Every part, read on its own.
  Health health;
  health.file_size = static_cast<std::uint64_t>(st.st_size);
  PoolHeader hdr[2]{};
  const std::size_t got[2] = {read_at(fd.fd, &hdr[0], sizeof(PoolHeader), kHeaderCopy0),
                              read_at(fd.fd, &hdr[1], sizeof(PoolHeader), kHeaderCopy1)};
  bool magic[2];
  for (int i = 0; i < 2; ++i) {
    health.header_read[i] = got[i] == sizeof(PoolHeader);
    std::uint64_t m = 0;
    magic[i] = read_at(fd.fd, &m, sizeof m, i == 0 ? kHeaderCopy0 : kHeaderCopy1) == sizeof m && m == kMagic;
  }
  std::uint64_t sel = 0, high_water = 0;
  RootTable t[2]{};
  health.selector_read = read_at(fd.fd, &sel, sizeof sel, kSelectorOffset) == sizeof sel;
  health.table_read[0] = read_at(fd.fd, &t[0], sizeof t[0], kRootTable0) == sizeof t[0];
  health.table_read[1] = read_at(fd.fd, &t[1], sizeof t[1], kRootTable1) == sizeof t[1];
  const bool high_water_read = read_at(fd.fd, &high_water, sizeof high_water, kHighWaterOffset) == sizeof high_water;

  // open()'s own checks, in open()'s order: its verdict is the pool's.
  auto header = validate_header(path, hdr, got, health.file_size, health);
  for (int i = 0; i < 2; ++i)
    if ((i == 0 ? health.header0_ok : health.header1_ok)) health.layout_version[i] = hdr[i].layout_version;
  Result<int> live = header.ok() ? choose_table(path, sel, t[0], t[1], health) : Result<int>(header.error());
  if (!header.ok()) {
    // choose_table did not run: its part of the picture still counts.
    health.selector = sel;
    health.table0_ok = health.table_read[0] && table_checksum_ok(t[0]);
    health.table1_ok = health.table_read[1] && table_checksum_ok(t[1]);
  }
  for (int i = 0; i < 2; ++i)
    if (i == 0 ? health.table0_ok : health.table1_ok) health.generation[i] = t[i].generation;

  if (!live.ok()) {
    const Errc code = live.error().code;
    const bool damaged = code == Errc::corrupted || code == Errc::truncated || code == Errc::foreign_file;
    if (!damaged || !(magic[0] || magic[1])) return std::move(live).error();  // nothing to check
    health.open_error = std::move(live).error();
    health.problems = part_problems(health, hdr, magic);
    if (health.problems.empty()) health.problems.push_back(health.open_error.message);
    return health;
  }

  // The pool opens. What open() does not look at: the other table's
  // checksum, roots outside the arena, the high-water hint.
  if (!health.table0_ok) health.problems.push_back("root table 0 fails its checksum");
  if (!health.table1_ok) health.problems.push_back("root table 1 fails its checksum");
  const PoolHeader& h = header.value();
  const RootTable& lt = t[live.value()];
  for (unsigned i = 0; i < kRootSlots; ++i) {
    const std::uint64_t off = lt.slots[i].offset;
    if (off != 0 && (off < h.arena_offset || off >= h.pool_size))
      health.problems.push_back("root slot " + std::to_string(i) + " holds offset " + std::to_string(off) +
                                ", outside the arena [" + std::to_string(h.arena_offset) + ", " +
                                std::to_string(h.pool_size) + ")");
  }
  if (high_water_read && high_water > h.block_count)
    health.problems.push_back("the arena high-water mark (" + std::to_string(high_water) +
                              " blocks) exceeds the block count (" + std::to_string(h.block_count) +
                              "); it is only a hint, but the word is damaged");
  return health;
}

Pool::~Pool() {
  if (base_ != nullptr) {
    device_->unbind();
    if (owns_mapping_) pmem_unmap(base_, size_);
  }
  if (fd_ >= 0) ::close(fd_);
}

RootTable* Pool::table(int which) const {
  return reinterpret_cast<RootTable*>(base_ + (which == 0 ? kRootTable0 : kRootTable1));
}
std::uint64_t* Pool::selector() const { return reinterpret_cast<std::uint64_t*>(base_ + kSelectorOffset); }

RootSlot Pool::root(unsigned slot) const {
  if (slot >= kRootSlots) return RootSlot{0, 0};
  return table(health_.live_table)->slots[slot];
}

std::uint64_t Pool::root_generation() const { return table(health_.live_table)->generation; }

Result<void> Pool::publish_root(unsigned slot, std::uint64_t offset, std::uint64_t version) {
  return publish_roots({{slot, RootSlot{offset, version}}});
}

Result<void> Pool::publish_roots(const std::vector<std::pair<unsigned, RootSlot>>& changes) {
  std::lock_guard lock(publish_mu_);
  if (int err = device_->io_errno(); err != 0 && !poisoned_)
    poison(std::string("a flush failed earlier: ") + std::strerror(err));
  if (poisoned_)
    return make_error(Errc::poisoned, path_ + ": the pool is poisoned (" + poison_reason_ +
                                          "); nothing more is committed. Reopen the pool to recover the last "
                                          "committed version");
  for (const auto& [slot, value] : changes) {
    if (slot >= kRootSlots)
      return make_error(Errc::invalid_argument, "root slot " + std::to_string(slot) + " out of range (0.." +
                                                    std::to_string(kRootSlots - 1) + ")");
    if (value.offset != 0 && (value.offset < kArenaOffset || value.offset >= size_))
      return make_error(Errc::invalid_argument,
                        "root offset " + std::to_string(value.offset) + " does not point into the pool's arena");
  }
  const int live = health_.live_table;
  const int next = 1 - live;
  RootTable t = *table(live);
  for (const auto& [slot, value] : changes) t.slots[slot] = value;
  t.generation += 1;
  seal(t);
  // 1. the inactive table, durable before the selector names it: commit_word
  //    drains first, so the table and whatever the caller flushed for the
  //    new roots are written back together (one write-back on a page-cache
  //    file system, not two). If any of that failed, the selector is never
  //    stored: the live table stays as it was.
  memcpy_nodrain(table(next), &t, sizeof t);
  marker(devices::Marker::root_publish, "root table written");
  // 2. the commit point: one aligned 8-byte store.
  if (auto r = commit_word(selector(), encode_selector(next, t.generation),
                           "the root table of generation " + std::to_string(t.generation));
      !r.ok())
    return r;
  health_.live_table = next;
  health_.selector = encode_selector(next, t.generation);
  ++roots_published_;
  return {};
}

std::uint32_t Pool::memcpy_crc_nodrain(void* dst, const void* src, std::size_t len, std::uint32_t crc) {
  if (ops_.copy_crc_nodrain != nullptr) return ops_.copy_crc_nodrain(ctx_, dst, src, len, crc);
  ops_.copy_nodrain(ctx_, dst, src, len);
  return util::crc32c(crc, src, len);
}

Result<void> Pool::commit_word(std::uint64_t* word, std::uint64_t value, const std::string& what) {
  drain();
  if (int err = device_->io_errno(); err != 0 && !poisoned_)
    poison(std::string("a write-back to the pool failed (") + std::strerror(err) + ")");
  if (poisoned_)
    return make_error(Errc::poisoned, path_ + ": " + what + " was not committed: the pool is poisoned (" +
                                          poison_reason_ +
                                          "); the previous version is intact. Fix the device (I/O error, full "
                                          "file system), then reopen the pool");
  const std::uint64_t previous = __atomic_load_n(word, __ATOMIC_ACQUIRE);
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
  persist(word, sizeof(std::uint64_t));
  marker(devices::Marker::commit_point, what.c_str());
  if (int err = device_->io_errno(); err != 0) {
    __atomic_store_n(word, previous, __ATOMIC_RELEASE);
    persist(word, sizeof(std::uint64_t));
    poison("persisting the commit word of " + what + " failed: " + std::strerror(err));
    return make_error(Errc::io_error, path_ + ": " + what + " was not committed: persisting its commit word failed (" +
                                          std::strerror(err) +
                                          "); after a power failure it may be found. The pool refuses further "
                                          "commits: fix the device, then reopen the pool");
  }
  return {};
}

void Pool::poison(const std::string& why) {
  poisoned_ = true;
  poison_reason_ = why;
}

PoolStats Pool::stats() const {
  PoolStats s;
  s.device = device_->stats();
  s.roots_published = roots_published_;
  return s;
}

std::size_t Pool::prefault(const void* addr, std::size_t len) const {
  // On a disk file system a write fault dirties the page-cache page, and
  // the next write-back would write every populated page.
  if (len == 0 || !contains(addr, len) || devices::writes_back_pages(mode_)) return 0;
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const auto b = reinterpret_cast<std::uintptr_t>(addr) / page * page;
  const auto e = (reinterpret_cast<std::uintptr_t>(addr) + len + page - 1) / page * page;
  // On tmpfs a read fault of a shared writable mapping maps the page
  // writable already (shmem tracks no dirty pages, so nothing asks to be
  // told of the first write), and skips what a write fault adds per page:
  // marking the page dirty and updating the file's times. Measured on a
  // 16 MiB extent: 1.5-11 ms read-populated against 5-16 ms
  // write-populated, and no fault afterwards when the page is written. A
  // DAX mapping (MAP_SYNC) must take its write faults: there it stays
  // MADV_POPULATE_WRITE.
  if (::madvise(reinterpret_cast<void*>(b), e - b, tmpfs_ ? MADV_POPULATE_READ : MADV_POPULATE_WRITE) == 0)
    return (e - b) / page;
  if (errno != EINVAL) return 0;  // EFAULT/ENOMEM/EHWPOISON: leave it to the faults
  // Before Linux 5.14: a read maps the page (its first write then costs only
  // a write-protect fault).
  for (std::uintptr_t p = b; p < e; p += page) (void)*reinterpret_cast<const volatile std::byte*>(p);
  return (e - b) / page;
}

std::size_t Pool::written_prefix(const void* addr, std::size_t len) const {
  if (!through_file_ || len == 0 || !contains(addr, len)) return len;
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t first = a / page * page;
  const std::size_t pages = (a + len - first + page - 1) / page;
  // Was page i of the range written? A failed call says yes: the mapping
  // then populates it as before.
  const auto written = [&](std::size_t i) {
    unsigned char v = 1;
    if (::mincore(reinterpret_cast<void*>(first + i * page), 1, &v) != 0) return true;
    return (v & 1) != 0;
  };
  if (written(pages - 1)) return len;
  if (!written(0)) return 0;
  std::size_t lo = 0, hi = pages - 1;  // page lo written, page hi not
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (written(mid) ? lo : hi) = mid;
  }
  return std::min(len, first + hi * page - a);
}

bool Pool::copy_through_file(void* dst, const void* src, std::size_t len) {
  if (!through_file_ || len == 0 || !contains(dst, len)) return false;
  const auto off = static_cast<std::uint64_t>(static_cast<std::byte*>(dst) - base_);
  return util::pwrite_full(fd_, src, len, off) == 0;
}

void Pool::persist_mt(const void* addr, std::size_t len, unsigned threads, Drain drain) {
  // Page write-back: one drain does it all, and more threads would only
  // split it into more calls.
  if (drain_covers_all_threads()) {
    flush(addr, len);
    if (drain == Drain::now) this->drain();
    return;
  }
  if (len < kParallelMin) return persist(addr, len);
  ParallelScope scope;
  auto* p = static_cast<const std::byte*>(addr);
  util::parallel_ranges(len, threads, [&](std::size_t off, std::size_t n) {
    ops_.flush(ctx_, p + off, n);
    ops_.drain(ctx_);
  });
}

void Pool::memcpy_persist_mt(void* dst, const void* src, std::size_t len, unsigned threads, Drain drain) {
  const Run whole{0, len};
  memcpy_persist_runs_mt(dst, src, {&whole, 1}, Stores::non_temporal, threads, drain);
}

void Pool::memcpy_flush_persist_mt(void* dst, const void* src, std::size_t len, unsigned threads) {
  const Run whole{0, len};
  memcpy_persist_runs_mt(dst, src, {&whole, 1}, Stores::cached_then_flushed, threads);
}

void Pool::memcpy_persist_runs_mt(void* dst, const void* src, std::span<const Run> runs, Stores stores,
                                  unsigned threads, Drain drain) {
  auto* d = static_cast<std::byte*>(dst);
  auto* s = static_cast<const std::byte*>(src);
  // Through the page cache both kinds of store are the device's copy (which
  // writes large copies with pwrite instead of faulting every page in).
  const bool device_copy = stores == Stores::non_temporal || devices::writes_back_pages(mode_);
  auto copy = [&](std::size_t off, std::size_t n) {
    if (device_copy) {
      ops_.copy_nodrain(ctx_, d + off, s + off, n);
    } else {
      std::memcpy(d + off, s + off, n);
      ops_.flush(ctx_, d + off, n);
    }
  };
  std::size_t total = 0;
  for (const Run& r : runs) total += r.bytes;
  const bool drain_at_end = !drain_covers_all_threads() || drain == Drain::now;
  if (total < kParallelMin) {
    for (const Run& r : runs) copy(r.offset, r.bytes);
    if (drain_at_end) ops_.drain(ctx_);
    return;
  }
  // Run i covers [start[i], start[i+1]) of the runs laid end to end; each
  // worker copies the pieces of its part of that line.
  std::vector<std::size_t> start(runs.size() + 1, 0);
  for (std::size_t i = 0; i < runs.size(); ++i) start[i + 1] = start[i] + runs[i].bytes;
  ParallelScope scope;
  util::parallel_ranges(total, threads, [&](std::size_t off, std::size_t n) {
    auto i = static_cast<std::size_t>(std::upper_bound(start.begin(), start.end(), off) - start.begin()) - 1;
    for (std::size_t pos = off; pos < off + n; ++i) {
      const std::size_t from = pos - start[i], take = std::min(runs[i].bytes - from, off + n - pos);
      copy(runs[i].offset + from, take);
      pos += take;
    }
    if (!drain_covers_all_threads()) ops_.drain(ctx_);
  });
  if (drain_covers_all_threads() && drain == Drain::now) ops_.drain(ctx_);
}

// ---- in-memory images (used by the crash simulator, tests/crashsim) ----

namespace {
thread_local int parallel_depth = 0;
}  // namespace

Pool::ParallelScope::ParallelScope() { ++parallel_depth; }
Pool::ParallelScope::~ParallelScope() { --parallel_depth; }
bool Pool::in_parallel_persist() noexcept { return parallel_depth > 0; }

Result<std::unique_ptr<Pool>> Pool::open_image(std::byte* base, std::size_t size, OpenOptions options,
                                               const std::string& label) {
  if (base == nullptr) return make_error(Errc::invalid_argument, label + ": no image to open");
  // The same checks as open(), on the bytes in memory instead of pread.
  Health health;
  PoolHeader h[2]{};
  std::size_t got[2] = {0, 0};
  if (size >= kHeaderCopy0 + sizeof(PoolHeader)) got[0] = sizeof(PoolHeader);
  if (size >= kHeaderCopy1 + sizeof(PoolHeader)) got[1] = sizeof(PoolHeader);
  if (got[0] != 0) std::memcpy(&h[0], base + kHeaderCopy0, sizeof(PoolHeader));
  if (got[1] != 0) std::memcpy(&h[1], base + kHeaderCopy1, sizeof(PoolHeader));
  auto header = validate_header(label, h, got, size, health);
  if (!header.ok()) return std::move(header).error();
  std::uint64_t sel = 0;
  RootTable t0{}, t1{};
  std::memcpy(&sel, base + kSelectorOffset, sizeof sel);
  std::memcpy(&t0, base + kRootTable0, sizeof t0);
  std::memcpy(&t1, base + kRootTable1, sizeof t1);
  auto live = choose_table(label, sel, t0, t1, health);
  if (!live.ok()) return std::move(live).error();

  std::unique_ptr<Pool> pool(new Pool());
  pool->path_ = label;
  pool->base_ = base;
  pool->size_ = header.value().pool_size;
  pool->reserved_ = pool->size_;
  pool->owns_mapping_ = false;
  pool->is_pmem_ = false;
  // No file to look at: the caller (its device) decides; automatic means cpu.
  pool->mode_ = options.flush_mode == devices::FlushMode::automatic ? devices::FlushMode::cpu : options.flush_mode;
  if (!options.device) {
    auto d = devices::make_device("");
    if (!d.ok()) return std::move(d).error();
    options.device = std::move(d.value());
  }
  pool->device_ = std::move(options.device);
  devices::Mapping m{pool->base_, pool->size_, pool->is_pmem_, pool->mode_};
  auto ops = pool->device_->bind(m);
  if (!ops.ok()) {
    pool->base_ = nullptr;  // never bound: nothing to unbind
    return std::move(ops).error();
  }
  pool->ops_ = ops.value();
  pool->ctx_ = pool->device_->context();
  pool->header_ = header.value();
  pool->health_ = std::move(health);
  const PoolHeader& hd = pool->header_;
  pool->arena_.init(hd.arena_offset, hd.block_size, hd.block_count,
                    reinterpret_cast<std::uint64_t*>(pool->base_ + kHighWaterOffset), pool.get());
  return pool;
}

}  // namespace cairn::pool
