// file.cpp — `file`: checkpoint through file I/O (seed 001 §3.2.3). The working
// set is in DRAM; each commit writes one self-describing checkpoint file into
// Options::dir, which may be a DAX mount, tmpfs or a disk.
//
// File <dir>/<name>.<version>.ckpt, integers little-endian, fixed width:
//
//   CkptHeader            magic, format, version, layout hash, counts, offsets,
//                         the body checksum and a checksum of the header
//   RegionDesc[n]         the registration layout (names, sizes, kinds)
//   PointerRecord[p]      where each registered pointer pointed at commit
//   (zero padding to 4 KiB)
//   region data           each region at a 4 KiB aligned offset, in order
//
// The body checksum covers descriptors, pointer table and all region data; it
// is computed over 1 MiB blocks in parallel (one 64-bit hash per block,
// folded in order), so checking a checkpoint costs about one read of it.
// file_bytes in the header catches truncation before the checksum is needed.
//
// Commit v (durability order; the rename is the commit point):
//   1. write <name>.<v>.ckpt.tmp with large pwrite calls, fsync it;
//   2. rename it to <name>.<v>.ckpt (atomic), fsync the directory — from here
//      on version v survives a crash; before, the previous checkpoint stands.
//      A failed write or fsync of the file fails the commit (the temporary
//      is removed; nothing is in doubt, so the next commit may succeed); a
//      failed fsync of the directory fails it and refuses every later commit
//      (Errc::poisoned), since whether the rename is durable is unknown;
//   3. delete checkpoints other than v and the previous one (kept as the
//      fallback should v later turn out damaged: media errors, truncation by
//      a full disk elsewhere, an operator's mistake).
// With Options::hdf5 each version is also written as <name>.<v>.h5 before
// step 1 (hdf5_export.cpp); its retention follows the checkpoints'.
// Open: a checkpoint directory it creates is made durable (its parent is
// fsynced); stale *.ckpt.tmp files (a crash in step 1) are removed; checkpoints
// are checked newest first and the newest whose header, size and checksum
// verify is the committed version. Skipped ones are recorded in warnings()
// (and printed once to stderr, as the user would otherwise never know).
// One process writes a given <dir>/<name> at a time.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string_view>
#include <thread>

#include "persist/copy_strategy.hpp"
#include "persist/file/hdf5_export.hpp"
#include "persist/strategy.hpp"
#include "util/hash.hpp"
#include "util/io.hpp"
#include "util/thread_pool.hpp"

namespace cairn::persist::detail {
namespace {

constexpr std::uint64_t kCkptMagic = 0x54504b434e524941ULL;  // "AIRNCKPT"
constexpr std::uint32_t kCkptFormat = 1;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kBlock = 1u << 20;    // checksum block
constexpr std::size_t kIoChunk = 1u << 30;  // largest single pread/pwrite
constexpr std::uint64_t kMaxCount = 1u << 20;

struct CkptHeader {
  std::uint64_t magic;
  std::uint32_t format;
  std::uint32_t header_bytes;
  std::uint64_t version;
  std::uint64_t layout_hash;
  std::uint64_t region_count;
  std::uint64_t pointer_count;
  std::uint64_t data_offset;  // first region's data, page aligned
  std::uint64_t file_bytes;   // size of the complete file
  std::uint64_t block_bytes;  // checksum block size
  std::uint64_t body_checksum;
  std::uint64_t header_checksum;  // over everything above
};
static_assert(sizeof(CkptHeader) == 88);
static_assert(offsetof(CkptHeader, magic) == 0);
static_assert(offsetof(CkptHeader, format) == 8);
static_assert(offsetof(CkptHeader, header_checksum) == 80);

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// ---- checksum ----

// The body checksum folds per-block hashes (util/hash.hpp) in order.
std::uint64_t block_hash(const std::byte* p, std::size_t n, std::uint64_t seed) { return util::hash_bytes(p, n, seed); }
std::uint64_t fold(std::uint64_t acc, std::uint64_t block) { return util::hash_combine(acc, block); }

std::uint64_t header_checksum(const CkptHeader& h) {
  return block_hash(reinterpret_cast<const std::byte*>(&h), offsetof(CkptHeader, header_checksum), kCkptMagic);
}

// Hashes data in kBlock blocks (in parallel) and folds them into acc. The
// seed of each block mixes the region and block index, so blocks swapped in
// place are detected.
std::uint64_t hash_blocks(std::uint64_t acc, const std::byte* data, std::size_t n, std::uint64_t region,
                          std::uint64_t first_block, unsigned threads) {
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<std::uint64_t> h(blocks);
  util::parallel_for(blocks, threads, [&](std::size_t b) {
    const std::size_t off = b * kBlock;
    h[b] = block_hash(data + off, std::min(kBlock, n - off), (region << 40) ^ (first_block + b));
  });
  for (auto x : h) acc = fold(acc, x);
  return acc;
}

// ---- file helpers ----

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// What a user of the file strategy should do about an error of this code.
std::string advice(Errc code) {
  switch (code) {
    case Errc::not_found: return "set Options::dir (or CAIRN_POOL_DIR) to an existing directory";
    case Errc::permission_denied: return "checkpoints need a directory the process can write";
    case Errc::device_full: return "free space or choose another directory";
    default: return "";
  }
}

// An errno as a typed error (util::errc_from_errno) with that advice.
Error io_error(const std::string& path, const char* what, int err) {
  return util::errno_error(path, what, err, advice(util::errc_from_errno(err)));
}

// Writes all of [p, p+n) at off, in calls of at most kIoChunk; 0 or errno.
int pwrite_all(int fd, const void* p, std::size_t n, std::uint64_t off, std::uint64_t& calls) {
  return util::pwrite_full(fd, p, n, off, kIoChunk, &calls);
}

// Reads exactly n bytes at off; 0, errno, or -1 at end of file.
int pread_all(int fd, void* p, std::size_t n, std::uint64_t off) {
  const long long r = util::pread_full(fd, p, n, off);
  if (r < 0) return static_cast<int>(-r);
  return static_cast<std::size_t>(r) == n ? 0 : -1;
}

// What a checkpoint file holds, once its header and metadata check out.
struct Meta {
  CkptHeader h{};
  std::vector<RegionDesc> descs;
  std::vector<PointerRecord> pointers;
  std::vector<std::uint64_t> region_offset;  // file offsets of region data
};

std::size_t meta_bytes(std::uint64_t regions, std::uint64_t pointers) {
  return sizeof(CkptHeader) + regions * sizeof(RegionDesc) + pointers * sizeof(PointerRecord);
}

// Region data offsets as the writer places them: page aligned, in order.
std::vector<std::uint64_t> place(const std::vector<std::uint64_t>& sizes, std::uint64_t data_offset,
                                 std::uint64_t& end) {
  std::vector<std::uint64_t> out;
  std::uint64_t off = data_offset;
  end = data_offset;
  for (auto s : sizes) {
    out.push_back(off);
    end = off + s;
    off = round_up(off + s, kPage);
  }
  return out;
}

class FileCheckpoint final : public Strategy {
 public:
  ~FileCheckpoint() override {
    if (dir_fd_ >= 0) ::close(dir_fd_);
  }
  std::string name() const override { return "file"; }
  Result<void> open(Layout& layout, const Options& options) override;
  std::optional<std::uint64_t> committed() const override { return committed_; }
  Result<void> restore(Layout& layout) override;
  Result<void> commit(Layout& layout, std::uint64_t version) override;
  devices::Stats device_stats() const override { return io_; }

  // Checkpoints that were skipped because they failed to verify, one line each.
  const std::string& warnings() const { return warnings_; }

 private:
  std::string path_of(std::uint64_t v) const { return dir_ + "/" + name_ + "." + std::to_string(v) + ".ckpt"; }
  std::string hdf5_path_of(std::uint64_t v) const { return dir_ + "/" + name_ + "." + std::to_string(v) + ".h5"; }
  // Versions of <name>.<v>.ckpt files in the directory, newest first.
  std::vector<std::uint64_t> list_versions(bool remove_stale_tmp);
  // Reads and checks header and metadata of a checkpoint.
  Result<Meta> read_meta(int fd, const std::string& path, std::uint64_t want_version) const;
  // Checks the body checksum by streaming the data through a bounce buffer.
  Result<void> verify_body(int fd, const std::string& path, const Meta& m) const;
  // Finds the newest checkpoint that verifies; records those skipped.
  Result<void> scan();
  void warn(const std::string& line);

  std::string dir_, name_;
  int dir_fd_ = -1;
  unsigned threads_ = 0;
  bool hdf5_ = false;
  std::optional<std::uint64_t> committed_;
  // Layout of the committed checkpoint, compared with the registered one at
  // restore and commit (pointers may be registered after open).
  std::vector<RegionDesc> stored_descs_;
  std::uint64_t stored_pointers_ = 0, stored_hash_ = 0;
  Result<void> check_layout(const Layout& layout) const {
    if (!committed_) return {};
    return layout.check_same(stored_descs_, stored_pointers_, stored_hash_);
  }
  std::string warnings_;
  std::string poisoned_;  // why commits are refused (a failed directory fsync); empty: they are not
  devices::Stats io_;
  std::vector<util::DramBuffer> owned_;
};

void FileCheckpoint::warn(const std::string& line) {
  warnings_ += line + "\n";
  std::fprintf(stderr, "cairn: %s\n", line.c_str());
}

std::vector<std::uint64_t> FileCheckpoint::list_versions(bool remove_stale_tmp) {
  namespace fs = std::filesystem;
  std::vector<std::uint64_t> out;
  const std::string prefix = name_ + ".";
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (f.rfind(prefix, 0) != 0) continue;
    std::string rest = f.substr(prefix.size());
    auto strip = [&rest](std::string_view suffix) {
      if (rest.size() <= suffix.size() || !rest.ends_with(suffix)) return false;
      rest.resize(rest.size() - suffix.size());
      return true;
    };
    const bool tmp = strip(".ckpt.tmp") || strip(".h5.tmp");
    if (!tmp && !strip(".ckpt")) continue;
    if (rest.empty() || rest.size() > 19 ||
        !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (tmp) {
      // A checkpoint that never reached its rename: never a committed version.
      if (remove_stale_tmp) ::unlink(it->path().c_str());
      continue;
    }
    out.push_back(std::stoull(rest));
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

Result<Meta> FileCheckpoint::read_meta(int fd, const std::string& path, std::uint64_t want_version) const {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error(path, "fstat", errno);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  Meta m;
  if (size < sizeof(std::uint64_t))
    return make_error(Errc::truncated, path + " is " + std::to_string(size) + " bytes long: truncated");
  int r = pread_all(fd, &m.h, std::min<std::uint64_t>(size, sizeof m.h), 0);
  if (r > 0) return io_error(path, "read", r);
  if (m.h.magic != kCkptMagic) return make_error(Errc::foreign_file, path + " is not a cairn checkpoint (bad magic)");
  if (size < sizeof m.h) return make_error(Errc::truncated, path + " ends inside its header: truncated");
  if (m.h.header_checksum != header_checksum(m.h))
    return make_error(Errc::corrupted, path + ": the checkpoint header is damaged (checksum mismatch)");
  if (m.h.format != kCkptFormat)
    return make_error(Errc::wrong_version, path + ": checkpoint format " + std::to_string(m.h.format) +
                                               ", this cairn reads " + std::to_string(kCkptFormat));
  if (m.h.version != want_version)
    return make_error(Errc::corrupted, path + " holds version " + std::to_string(m.h.version) + ", not the " +
                                           std::to_string(want_version) + " its name says");
  if (size < m.h.file_bytes)
    return make_error(Errc::truncated, path + " is " + std::to_string(size) + " bytes, its header says " +
                                           std::to_string(m.h.file_bytes) + ": truncated");
  if (size > m.h.file_bytes || m.h.region_count > kMaxCount || m.h.pointer_count > kMaxCount ||
      m.h.block_bytes != kBlock || m.h.header_bytes != sizeof(CkptHeader) ||
      m.h.data_offset != round_up(meta_bytes(m.h.region_count, m.h.pointer_count), kPage))
    return make_error(Errc::corrupted, path + ": checkpoint geometry is inconsistent");
  m.descs.resize(m.h.region_count);
  m.pointers.resize(m.h.pointer_count);
  if (!m.descs.empty()) r = pread_all(fd, m.descs.data(), m.descs.size() * sizeof(RegionDesc), sizeof(CkptHeader));
  if (r == 0 && !m.pointers.empty())
    r = pread_all(fd, m.pointers.data(), m.pointers.size() * sizeof(PointerRecord),
                  sizeof(CkptHeader) + m.descs.size() * sizeof(RegionDesc));
  if (r != 0) return r > 0 ? io_error(path, "read", r) : make_error(Errc::truncated, path + ": truncated");
  std::vector<std::uint64_t> sizes;
  for (const auto& d : m.descs) sizes.push_back(d.bytes);
  std::uint64_t end = 0;
  m.region_offset = place(sizes, m.h.data_offset, end);
  if (end != m.h.file_bytes) return make_error(Errc::corrupted, path + ": region sizes disagree with the file size");
  return m;
}

// The body checksum: metadata block first, then each region's blocks.
std::uint64_t meta_hash(const Meta& m) {
  std::uint64_t acc = kCkptMagic ^ m.h.version;
  if (!m.descs.empty())
    acc = fold(acc,
               block_hash(reinterpret_cast<const std::byte*>(m.descs.data()), m.descs.size() * sizeof(RegionDesc), 1));
  if (!m.pointers.empty())
    acc = fold(acc, block_hash(reinterpret_cast<const std::byte*>(m.pointers.data()),
                               m.pointers.size() * sizeof(PointerRecord), 2));
  return acc;
}

Result<void> FileCheckpoint::verify_body(int fd, const std::string& path, const Meta& m) const {
  constexpr std::size_t kBounce = 16 * kBlock;
  std::uint64_t largest = 0;
  for (const auto& d : m.descs) largest = std::max(largest, d.bytes);
  util::DramBuffer buf;
  if (largest > 0) {
    auto b = util::DramBuffer::allocate(std::min<std::uint64_t>(kBounce, round_up(largest, kBlock)),
                                        "the bounce buffer that checks " + path);
    if (!b.ok()) return std::move(b).error();
    buf = std::move(b.value());
  }
  std::uint64_t acc = meta_hash(m);
  for (std::size_t i = 0; i < m.descs.size(); ++i) {
    const std::uint64_t bytes = m.descs[i].bytes;
    for (std::uint64_t off = 0; off < bytes; off += kBounce) {
      const std::size_t n = std::min<std::uint64_t>(kBounce, bytes - off);
      int r = pread_all(fd, buf.data(), n, m.region_offset[i] + off);
      if (r != 0) return r > 0 ? io_error(path, "read", r) : make_error(Errc::truncated, path + ": truncated");
      acc = hash_blocks(acc, buf.data(), n, i, off / kBlock, threads_);
    }
  }
  if (acc != m.h.body_checksum)
    return make_error(Errc::corrupted, path + ": checkpoint data is damaged (checksum mismatch)");
  return {};
}

Result<void> FileCheckpoint::scan() {
  committed_.reset();
  Error newest_error;
  for (std::uint64_t v : list_versions(true)) {
    const std::string path = path_of(v);
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    Result<void> ok;
    Meta m;
    if (fd.fd < 0) {
      ok = io_error(path, "open", errno);
    } else if (auto meta = read_meta(fd.fd, path, v); !meta.ok()) {
      ok = std::move(meta).error();
    } else {
      m = std::move(meta.value());
      ok = verify_body(fd.fd, path, m);
    }
    if (ok.ok()) {
      committed_ = v;
      stored_descs_ = std::move(m.descs);
      stored_pointers_ = m.h.pointer_count;
      stored_hash_ = m.h.layout_hash;
      return {};
    }
    if (newest_error.code == Errc::ok) newest_error = ok.error();
    warn("skipping checkpoint version " + std::to_string(v) + ": " + ok.error().message);
  }
  if (newest_error.code != Errc::ok) {
    newest_error.message += "; no checkpoint of '" + name_ + "' in " + dir_ +
                            " verifies. Move the damaged files away to start from scratch";
    return newest_error;
  }
  return {};  // nothing committed yet
}

Result<void> FileCheckpoint::open(Layout& layout, const Options& options) {
  if (options.hdf5)
    if (auto r = check_hdf5_names(layout); !r.ok()) return r;
  hdf5_ = options.hdf5;
  dir_ = storage_dir(options);
  name_ = options.name;
  threads_ = options.threads;
  if (auto r = allocate_dram_working_set(layout, owned_); !r.ok()) return r;
  // A directory created here is an entry of its parent: fsync each parent of
  // a created directory too, or a power failure may take the directory away
  // with every checkpoint committed into it (found by the crash explorer).
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> created;
  fs::path p = fs::path(dir_).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  for (; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created.push_back(p);
    if (p == p.parent_path()) break;
  }
  ec.clear();
  fs::create_directories(dir_, ec);
  if (ec) return io_error(dir_, "creating the checkpoint directory", ec.value());
  for (const auto& d : created) {
    const std::string parent = d.has_parent_path() ? d.parent_path().string() : ".";
    Fd pfd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (pfd.fd < 0 || ::fsync(pfd.fd) != 0) return io_error(parent, "fsync of the new directory's parent", errno);
  }
  dir_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) return io_error(dir_, "opening the checkpoint directory", errno);
  if (::access(dir_.c_str(), W_OK | X_OK) != 0) return io_error(dir_, "checking write access", errno);
  return scan();
}

Result<void> FileCheckpoint::commit(Layout& layout, std::uint64_t version) {
  if (!poisoned_.empty())
    return make_error(Errc::poisoned, dir_ + ": " + poisoned_ +
                                          "; nothing more is committed here. Fix the file system, then reopen the "
                                          "state and restore it");
  if (auto r = check_layout(layout); !r.ok())
    return make_error(r.error().code, r.error().message + " (refusing to overwrite it)");
  Meta m;
  if (auto r = layout.capture_pointers(m.pointers); !r.ok()) return r;
  m.descs = layout.descriptors();
  std::vector<std::uint64_t> sizes;
  for (const auto& e : layout.entries) sizes.push_back(e.bytes);
  CkptHeader& h = m.h;
  h.magic = kCkptMagic;
  h.format = kCkptFormat;
  h.header_bytes = sizeof(CkptHeader);
  h.version = version;
  h.layout_hash = layout.hash();
  h.region_count = m.descs.size();
  h.pointer_count = m.pointers.size();
  h.data_offset = round_up(meta_bytes(h.region_count, h.pointer_count), kPage);
  h.block_bytes = kBlock;
  m.region_offset = place(sizes, h.data_offset, h.file_bytes);
  std::uint64_t acc = meta_hash(m);
  for (std::size_t i = 0; i < layout.entries.size(); ++i)
    acc = hash_blocks(acc, static_cast<const std::byte*>(layout.entries[i].latest()), sizes[i], i, 0, threads_);
  h.body_checksum = acc;
  h.header_checksum = header_checksum(h);

  std::vector<std::byte> meta(meta_bytes(h.region_count, h.pointer_count));
  std::memcpy(meta.data(), &h, sizeof h);
  if (!m.descs.empty()) std::memcpy(meta.data() + sizeof h, m.descs.data(), m.descs.size() * sizeof(RegionDesc));
  if (!m.pointers.empty())
    std::memcpy(meta.data() + sizeof h + m.descs.size() * sizeof(RegionDesc), m.pointers.data(),
                m.pointers.size() * sizeof(PointerRecord));

  // 1-2. The whole checkpoint under a temporary name, durable, then renamed
  // into place and the directory fsynced (util::write_file_atomically; its
  // HDF5 copy first, renamed into place already: without the checkpoint it is
  // no version).
  if (hdf5_)
    if (auto r = write_hdf5(hdf5_path_of(version), name_, layout, version); !r.ok()) return r;
  std::uint64_t calls = 0;
  util::AtomicFileOptions ao;
  ao.what = "checkpoint version " + std::to_string(version);
  ao.advice = advice;
  ao.dir_fd = dir_fd_;
  util::WriteStep failed = util::WriteStep::done;
  auto written = util::write_file_atomically(
      path_of(version),
      [&](int fd) {
        int err = pwrite_all(fd, meta.data(), meta.size(), 0, calls);
        for (std::size_t i = 0; err == 0 && i < layout.entries.size(); ++i)
          err = pwrite_all(fd, layout.entries[i].latest(), sizes[i], m.region_offset[i], calls);
        return err;
      },
      ao, &failed);
  if (written.ok() || failed >= util::WriteStep::rename) {  // the temporary was written and fsynced
    io_.flush_calls += calls;
    io_.bytes_flushed += h.file_bytes;
    io_.lines_flushed += (h.file_bytes + 63) / 64;
    io_.copied_bytes += h.file_bytes;
    io_.msyncs += 1;
    io_.drains += 1;
    for (auto s : sizes) bytes_copied += s;
  }
  if (!written.ok()) {
    if (failed != util::WriteStep::fsync_dir) {
      // Nothing renamed: the previous checkpoint stands and nothing is in doubt.
      if (hdf5_) ::unlink(hdf5_path_of(version).c_str());
      return written;
    }
    // The rename may or may not be durable, and after a failed fsync Linux
    // may report the next one clean without writing what this one lost: no
    // later commit can be trusted in this directory. Refuse them.
    Error e = std::move(written).error();
    poisoned_ = "fsync of " + dir_ + " failed after version " + std::to_string(version) + " was renamed into place (" +
                e.message + ")";
    e.message += "; version " + std::to_string(version) +
                 " is not committed, though after a power failure it may be found. Further commits are refused: "
                 "fix the file system, then reopen the state and restore it";
    return e;
  }
  io_.msyncs += 1;  // the directory's fsync
  io_.drains += 1;
  const std::optional<std::uint64_t> previous = committed_;
  committed_ = version;
  stored_descs_ = std::move(m.descs);
  stored_pointers_ = h.pointer_count;
  stored_hash_ = h.layout_hash;

  // 3. Version v is durable: keep it and the previous one, nothing else.
  for (std::uint64_t v : list_versions(false))
    if (v != version && (!previous || v != *previous)) {
      ::unlink(path_of(v).c_str());
      ::unlink(hdf5_path_of(v).c_str());
    }
  return {};
}

Result<void> FileCheckpoint::restore(Layout& layout) {
  if (auto r = check_layout(layout); !r.ok()) return r;
  if (!committed_) return make_error(Errc::no_version, "no checkpoint of '" + name_ + "' in " + dir_);
  const std::uint64_t v = *committed_;
  const std::string path = path_of(v);
  // Read straight into the working buffers, then check: the file verified at
  // open, so a failure here means it changed since.
  Result<void> ok;
  Meta m;
  {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.fd < 0) return io_error(path, "open", errno);
    auto meta = read_meta(fd.fd, path, v);
    if (meta.ok()) {
      m = std::move(meta.value());
      ok = layout.check_same(m.descs, m.h.pointer_count, m.h.layout_hash);
      if (!ok.ok()) return ok;
      std::uint64_t acc = meta_hash(m);
      for (std::size_t i = 0; ok.ok() && i < layout.entries.size(); ++i) {
        auto* dst = static_cast<std::byte*>(layout.entries[i].latest());
        const std::size_t n = layout.entries[i].bytes;
        const int r = pread_all(fd.fd, dst, n, m.region_offset[i]);
        if (r != 0) ok = r > 0 ? io_error(path, "read", r) : make_error(Errc::truncated, path + ": truncated");
        acc = hash_blocks(acc, dst, n, i, 0, threads_);
        bytes_copied += n;
      }
      if (ok.ok() && acc != m.h.body_checksum)
        ok = make_error(Errc::corrupted, path + ": checkpoint data is damaged (checksum mismatch)");
    } else {
      ok = std::move(meta).error();
    }
  }
  if (!ok.ok()) {
    warn("checkpoint version " + std::to_string(v) + " changed since open: " + ok.error().message);
    (void)scan();
    std::string next = committed_ ? "version " + std::to_string(*committed_) + " is now the newest that verifies"
                                  : "no checkpoint verifies";
    return make_error(Errc::corrupted, ok.error().message + " (it verified at open); " + next +
                                           (committed_ ? ": call restore() again" : ""));
  }
  return layout.apply_pointers(m.pointers);
}

}  // namespace

std::unique_ptr<Strategy> make_file() { return std::make_unique<FileCheckpoint>(); }

// Warnings of a file strategy (empty for other strategies), for tests and tools
// that hold the Strategy itself.
std::string file_warnings(const Strategy& s) {
  auto* f = dynamic_cast<const FileCheckpoint*>(&s);
  return f ? f->warnings() : std::string();
}

}  // namespace cairn::persist::detail
