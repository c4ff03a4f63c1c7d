// files.cpp — slot files for partner copies and parity, and the flushed
// versions in the shared directory (files.hpp).
#include "dist/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>

#include "util/hash.hpp"
#include "util/io.hpp"

namespace cairn::dist::detail {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kSlotHeader = 4096;

struct SlotHeader {
  std::uint64_t magic;
  std::uint32_t kind;
  std::uint32_t holder;
  std::uint32_t source;
  std::uint32_t nranks;
  std::uint64_t bytes;
  std::uint64_t version;
  std::uint64_t checksum;
  std::uint64_t reserved[2];
};
static_assert(sizeof(SlotHeader) == 64);
constexpr std::uint64_t kSlotMagic = 0x31746f6c736e7263ULL;  // "crnslot1"

struct PfsHeader {
  std::uint64_t magic;
  std::uint32_t format;
  std::uint32_t rank;
  std::uint32_t nranks;
  std::uint32_t reserved0;
  std::uint64_t version;
  std::uint64_t bytes;
  std::uint64_t checksum;
  std::uint64_t reserved[2];
};
static_assert(sizeof(PfsHeader) == 64);
constexpr std::uint64_t kPfsMagic = 0x31736670736e7263ULL;  // "crnspfs1"
constexpr std::uint32_t kPfsFormat = 1;

}  // namespace

// ---- SlotFile ----

SlotFile::~SlotFile() = default;

const std::string& SlotFile::path() const { return pool_->path(); }

std::byte* SlotFile::data(int slot) const { return pool_->at(offset_[slot] + kSlotHeader); }

Result<std::unique_ptr<SlotFile>> SlotFile::open(const std::string& path, Kind kind, int holder, int source, int nranks,
                                                 std::size_t bytes, std::unique_ptr<devices::Device> device) {
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  std::unique_ptr<pool::Pool> pool;
  if (exists) {
    pool::OpenOptions po;
    po.device = std::move(device);
    auto p = pool::Pool::open(path, std::move(po));
    if (!p.ok()) return std::move(p).error();
    pool = std::move(p.value());
  } else {
    pool::CreateOptions co;
    co.size = (pool::kArenaOffset + 2 * slot_bytes(bytes) + (1u << 20) + (1u << 20) - 1) / (1u << 20) * (1u << 20);
    co.device = std::move(device);
    auto p = pool::Pool::create(path, std::move(co));
    if (!p.ok()) return std::move(p).error();
    pool = std::move(p.value());
  }
  auto f =
      exists ? load(*pool, kind, holder, source, nranks, bytes) : format(*pool, kind, holder, source, nranks, bytes);
  if (f.ok()) f.value()->owned_ = std::move(pool);
  return f;
}

Result<std::unique_ptr<SlotFile>> SlotFile::attach(pool::Pool& pool, Kind kind, int holder, int source, int nranks,
                                                   std::size_t bytes) {
  if (pool.root(0).offset == 0 && pool.root(1).offset == 0) return format(pool, kind, holder, source, nranks, bytes);
  return load(pool, kind, holder, source, nranks, bytes);
}

std::uint64_t SlotFile::slot_bytes(std::size_t bytes) { return kSlotHeader + (bytes + 4095) / 4096 * 4096; }

Result<std::unique_ptr<SlotFile>> SlotFile::load(pool::Pool& pool, Kind kind, int holder, int source, int nranks,
                                                 std::size_t bytes) {
  std::unique_ptr<SlotFile> f(new SlotFile());
  f->pool_ = &pool;
  f->bytes_ = bytes;
  const std::uint64_t slot_bytes = SlotFile::slot_bytes(bytes);
  const std::string& path = pool.path();
  const std::string what = kind == Kind::partner ? "partner copy" : "parity segment";
  const std::uint64_t size = pool.size();
  auto damaged = [&](const std::string& why) {
    return make_error(Errc::corrupted, path + ": the " + what + " of rank " + std::to_string(source) + " is damaged (" +
                                           why + "): remove it to start over (the next commit writes it anew)");
  };
  // The pool falls back to its older root table when the one its selector
  // names is damaged: that table names older slot versions. Refused: never
  // a silently older copy.
  const pool::Health& health = pool.health();
  if (health.selector <= 1 && health.live_table != static_cast<int>(health.selector))
    return damaged("its live root table is damaged, so the versions its slots hold are lost");
  for (int i = 0; i < 2; ++i) {
    const auto root = pool.root(static_cast<unsigned>(i));
    // Bounded without wrapping, aligned for the header, apart from the
    // other slot: a slot written over the other would destroy its version.
    if (root.offset < pool::kArenaOffset || root.offset > size || slot_bytes > size - root.offset ||
        root.offset % alignof(SlotHeader) != 0)
      return damaged("slot " + std::to_string(i) + " at " + std::to_string(root.offset) + " is not within the file");
    const auto* h = reinterpret_cast<const SlotHeader*>(pool.at(root.offset));
    if (h->magic != kSlotMagic)
      return make_error(Errc::foreign_file, path + " is a pool but no " + what +
                                                " (no slot header): remove it, or point dist at another directory");
    if (h->kind != static_cast<std::uint32_t>(kind) || h->holder != static_cast<std::uint32_t>(holder) ||
        h->source != static_cast<std::uint32_t>(source) || h->nranks != static_cast<std::uint32_t>(nranks) ||
        h->bytes != bytes)
      return make_error(Errc::corrupted, path + " is not the " + what + " of rank " + std::to_string(source) +
                                             " of this " + std::to_string(nranks) + "-rank job with " +
                                             std::to_string(bytes) +
                                             " bytes per version (another job's, or damaged): remove it to start "
                                             "over");
    // The header names its version durably before the root does (publish).
    if (root.version != 0 && h->version != root.version)
      return damaged("slot " + std::to_string(i) + " is published as version " + std::to_string(root.version) +
                     " but its header names " + std::to_string(h->version));
    f->offset_[i] = root.offset;
    f->held_[i] = root.version;
  }
  const std::uint64_t gap =
      f->offset_[0] > f->offset_[1] ? f->offset_[0] - f->offset_[1] : f->offset_[1] - f->offset_[0];
  if (gap < slot_bytes) return damaged("its two slots overlap");
  return f;
}

Result<std::unique_ptr<SlotFile>> SlotFile::format(pool::Pool& pool, Kind kind, int holder, int source, int nranks,
                                                   std::size_t bytes) {
  std::unique_ptr<SlotFile> f(new SlotFile());
  f->pool_ = &pool;
  f->bytes_ = bytes;
  for (int i = 0; i < 2; ++i) {
    auto off = pool.arena().alloc(slot_bytes(bytes));
    if (!off.ok()) return std::move(off).error();
    f->offset_[i] = off.value();
    SlotHeader h{};
    h.magic = kSlotMagic;
    h.kind = static_cast<std::uint32_t>(kind);
    h.holder = static_cast<std::uint32_t>(holder);
    h.source = static_cast<std::uint32_t>(source);
    h.nranks = static_cast<std::uint32_t>(nranks);
    h.bytes = bytes;
    pool.memcpy_persist(pool.at(off.value()), &h, sizeof h);
  }
  if (auto r = pool.publish_roots({{0u, pool::RootSlot{f->offset_[0], 0}}, {1u, pool::RootSlot{f->offset_[1], 0}}});
      !r.ok())
    return std::move(r).error();
  return f;
}

Result<void> SlotFile::begin(std::uint64_t version) {
  const int s = static_cast<int>(version % 2);
  if (held_[s] == 0 && !emptying_[s]) return {};
  // Until the empty root is durable the slot still holds its version: a
  // failed begin leaves it held, and publish refuses to write over it.
  emptying_[s] = true;
  if (auto r = pool_->publish_root(static_cast<unsigned>(s), offset_[s], 0); !r.ok()) return r;
  emptying_[s] = false;
  held_[s] = 0;
  return {};
}

Result<void> SlotFile::publish(std::uint64_t version, std::uint64_t checksum) {
  const int s = static_cast<int>(version % 2);
  // The header may change only while the root names no version: a slot
  // that begin() did not empty keeps its header and bytes as published.
  if (held_[s] != 0 || emptying_[s])
    return make_error(Errc::invalid_argument, path() + ": slot " + std::to_string(s) + " still holds version " +
                                                  std::to_string(held_[s]) + " (begin(" + std::to_string(version) +
                                                  ") did not empty it): version " + std::to_string(version) +
                                                  " is not published");
  pool_->flush(data(s), bytes_);
  auto* h = reinterpret_cast<SlotHeader*>(pool_->at(offset_[s]));
  h->version = version;
  h->checksum = checksum;
  pool_->persist(h, sizeof *h);  // drains the data's flushes too
  if (auto r = pool_->publish_root(static_cast<unsigned>(s), offset_[s], version); !r.ok()) return r;
  held_[s] = version;
  return {};
}

bool SlotFile::verify(int slot) const {
  const auto* h = reinterpret_cast<const SlotHeader*>(pool_->at(offset_[slot]));
  return held_[slot] != 0 && h->version == held_[slot] &&
         payload_checksum(block_hashes(data(slot), bytes_)) == h->checksum;
}

std::vector<std::uint64_t> block_hashes(const std::byte* payload, std::size_t bytes) {
  std::vector<std::uint64_t> h((bytes + kBlock - 1) / kBlock);
  for (std::size_t i = 0; i < h.size(); ++i)
    h[i] = util::hash_bytes(payload + i * kBlock, std::min(kBlock, bytes - i * kBlock), i);
  return h;
}

std::uint64_t payload_checksum(const std::vector<std::uint64_t>& block_hashes) {
  std::uint64_t acc = block_hashes.size();
  for (auto h : block_hashes) acc = util::hash_combine(acc, h);
  return acc;
}

// ---- PfsFlusher ----

std::vector<std::uint64_t> flushed_everywhere(const std::vector<std::uint64_t>& two_per_rank) {
  std::vector<std::vector<std::uint64_t>> per_rank;
  for (std::size_t r = 0; r + 1 < two_per_rank.size(); r += 2)
    per_rank.push_back({two_per_rank[r], two_per_rank[r + 1]});
  return flushed_everywhere(per_rank);
}

std::vector<std::uint64_t> flushed_everywhere(const std::vector<std::vector<std::uint64_t>>& per_rank) {
  std::vector<std::uint64_t> out;
  if (per_rank.empty()) return out;
  for (const std::uint64_t candidate : per_rank.front()) {
    bool everywhere = candidate > 0 && std::find(out.begin(), out.end(), candidate) == out.end();
    for (std::size_t r = 1; everywhere && r < per_rank.size(); ++r)
      everywhere = std::find(per_rank[r].begin(), per_rank[r].end(), candidate) != per_rank[r].end();
    if (everywhere) out.push_back(candidate);
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

namespace {
// "<digits><suffix>" at `at` of `f`: the number, or nothing.
std::optional<std::uint64_t> number_at(const std::string& f, std::size_t at, std::string_view suffix) {
  if (f.size() <= at + suffix.size() || f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const char* b = f.data() + at;
  const char* e = f.data() + f.size() - suffix.size();
  std::uint64_t n = 0;
  const auto [end, err] = std::from_chars(b, e, n);
  if (err != std::errc{} || end != e) return std::nullopt;
  return n;
}
}  // namespace

PfsFlusher::PfsFlusher(std::string dir, std::string name, int rank, int nranks)
    : dir_(std::move(dir)), name_(std::move(name)), rank_(rank), nranks_(nranks) {}

PfsFlusher::~PfsFlusher() { (void)wait(); }

std::string PfsFlusher::file(std::uint64_t version) const {
  return (fs::path(dir_) / (name_ + ".n" + std::to_string(nranks_) + ".r" + std::to_string(rank_) + ".v" +
                            std::to_string(version) + ".ckpt"))
      .string();
}

std::vector<std::string> PfsFlusher::files(const std::string& dir, const std::string& name, int rank, int nranks) {
  std::vector<std::string> out;
  const std::string prefix = name + ".n" + std::to_string(nranks) + ".r" + std::to_string(rank) + ".v";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) == 0) out.push_back(e.path().string());
  }
  return out;
}

std::vector<std::uint64_t> PfsFlusher::versions() const {
  std::vector<std::uint64_t> v;
  const std::string prefix = name_ + ".n" + std::to_string(nranks_) + ".r" + std::to_string(rank_) + ".v";
  for (const auto& path : files(dir_, name_, rank_, nranks_)) {
    // .tmp: unfinished; a name no integer holds: not a version
    if (const auto n = number_at(fs::path(path).filename().string(), prefix.size(), ".ckpt")) v.push_back(*n);
  }
  std::sort(v.rbegin(), v.rend());
  return v;
}

std::vector<std::uint64_t> PfsFlusher::complete_everywhere() const {
  // <name>.n<N>.r<R>.v<V>.ckpt: the ranks that have V complete, per V.
  const std::string prefix = name_ + ".n" + std::to_string(nranks_) + ".r";
  std::map<std::uint64_t, std::vector<bool>> ranks_of;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) != 0) continue;
    const auto dot = f.find(".v", prefix.size());
    if (dot == std::string::npos) continue;
    const auto r = number_at(f.substr(0, dot) + ".", prefix.size(), ".");
    const auto v = number_at(f, dot + 2, ".ckpt");
    if (!r || !v || *r >= static_cast<std::uint64_t>(nranks_)) continue;
    auto& seen = ranks_of[*v];
    seen.resize(static_cast<std::size_t>(nranks_), false);
    seen[static_cast<std::size_t>(*r)] = true;
  }
  std::vector<std::uint64_t> out;
  for (const auto& [v, seen] : ranks_of)
    if (v > 0 && std::all_of(seen.begin(), seen.end(), [](bool b) { return b; })) out.push_back(v);
  std::sort(out.rbegin(), out.rend());
  return out;
}

void PfsFlusher::retire() const {
  // See the retention rule in files.hpp. Safe under concurrent flushes and
  // retirements of the other ranks: a rank deletes only versions below what
  // it saw complete everywhere, and a version complete everywhere stays so
  // (nobody deletes at or above such a version), so the newest version
  // complete everywhere only moves forward and is never deleted.
  const auto common = complete_everywhere();
  if (common.empty()) return;
  const std::uint64_t floor = common.size() > 1 ? common[1] : common[0];
  std::error_code ec;
  for (const std::uint64_t v : versions())
    if (v < floor) fs::remove(file(v), ec);
}

void PfsFlusher::remove_newer_than(std::uint64_t version) const {
  std::error_code ec;
  for (const std::uint64_t v : versions())
    if (v > version) fs::remove(file(v), ec);
}

Result<void> PfsFlusher::wait() {
  if (thread_.joinable()) thread_.join();
  return result_;
}

Result<void> PfsFlusher::start(std::uint64_t version, std::vector<std::byte>&& payload) {
  if (auto r = wait(); !r.ok()) return r;
  buffer_ = std::move(payload);
  result_ = {};
  thread_ = std::thread([this, version] { write(version, buffer_); });
  return {};
}

std::vector<std::byte> PfsFlusher::take_buffer() {
  (void)wait();
  return std::move(buffer_);
}

void PfsFlusher::write(std::uint64_t version, const std::vector<std::byte>& payload) {
  PfsHeader h{};
  h.magic = kPfsMagic;
  h.format = kPfsFormat;
  h.rank = static_cast<std::uint32_t>(rank_);
  h.nranks = static_cast<std::uint32_t>(nranks_);
  h.version = version;
  h.bytes = payload.size();
  h.checksum = payload_checksum(block_hashes(payload.data(), payload.size()));
  util::AtomicFileOptions o;
  o.what = "flushed version " + std::to_string(version);
  o.advice = [](Errc code) {
    return code == Errc::io_error ? std::string("check the flush directory's file system")
                                  : std::string("check the space and permissions of the flush directory");
  };
  result_ = util::write_file_atomically(
      file(version),
      [&](int fd) {
        int err = util::pwrite_full(fd, &h, sizeof h, 0);
        if (err == 0) err = util::pwrite_full(fd, payload.data(), payload.size(), sizeof h);
        return err;
      },
      o);
  if (!result_.ok()) return;
  retire();
}

Result<void> PfsFlusher::read(std::uint64_t version, std::vector<std::byte>& payload) const {
  const std::string path = file(version);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return util::errno_error(path, "cannot open the flushed version", errno);
  PfsHeader h{};
  const long long n = util::pread_full(fd, &h, sizeof h, 0);
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const std::uint64_t file_bytes = stat_ok ? static_cast<std::uint64_t>(st.st_size) : 0;
  const bool any_size = payload.empty();
  const std::string job = "version " + std::to_string(version) + " of rank " + std::to_string(rank_) + " of this " +
                          std::to_string(nranks_) + "-rank job";
  const std::string advice = ": remove it (restore falls back to the flushed version before it)";
  Result<void> r;
  if (n < 0 || !stat_ok)
    r = util::errno_error(path, "cannot read the flushed version", n < 0 ? static_cast<int>(-n) : errno);
  else if (n != static_cast<long long>(sizeof h))
    r = make_error(Errc::truncated, path + " is shorter than the header of a flushed version (" +
                                        std::to_string(file_bytes) + " bytes)" + advice);
  else if (h.magic != kPfsMagic)
    r = make_error(Errc::foreign_file, path + " is not a flushed version of a cairn dist job" + advice);
  else if (h.format != kPfsFormat)
    r = make_error(Errc::wrong_version, path + " is a flushed version of format " + std::to_string(h.format) +
                                            ", this cairn reads format " + std::to_string(kPfsFormat) + advice);
  else if (h.rank != static_cast<std::uint32_t>(rank_) || h.nranks != static_cast<std::uint32_t>(nranks_) ||
           h.version != version)
    r = make_error(Errc::corrupted, path + ": not " + job + " (its header names version " + std::to_string(h.version) +
                                        " of rank " + std::to_string(h.rank) + " of " + std::to_string(h.nranks) + ")" +
                                        advice);
  else if (h.bytes != file_bytes - sizeof h)  // bounded by the file before anything is sized from it
    r = make_error(Errc::corrupted, path + ": its header records " + std::to_string(h.bytes) +
                                        " bytes of payload, the file holds " + std::to_string(file_bytes - sizeof h) +
                                        " (truncated or damaged)" + advice);
  else if (!any_size && h.bytes != payload.size())
    r = make_error(Errc::corrupted, path + ": " + std::to_string(h.bytes) + " bytes of payload, " +
                                        std::to_string(payload.size()) + " expected for " + job + advice);
  else {
    payload.resize(h.bytes);
    if (util::pread_full(fd, payload.data(), payload.size(), sizeof h) != static_cast<long long>(payload.size()))
      r = make_error(Errc::truncated, path + " is truncated" + advice);
    else if (payload_checksum(block_hashes(payload.data(), payload.size())) != h.checksum)
      r = make_error(Errc::corrupted, path + ": checksum mismatch (damaged)" + advice);
  }
  ::close(fd);
  if (!r.ok() && any_size) payload.clear();
  return r;
}

}  // namespace cairn::dist::detail
