// protection.cpp — node layout, slot files for partner copies and parity,
// and the asynchronous flush to the shared directory (protection.hpp).
#include "dist/protection.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "util/hash.hpp"
#include "util/io.hpp"

namespace cairn::dist::detail {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kBlock = RankStore::kBlock;
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

}  // namespace

Result<Topology> make_topology(MPI_Comm comm, int ranks_per_node, int xor_group) {
  Topology t;
  MPI_Comm_rank(comm, &t.rank);
  MPI_Comm_size(comm, &t.nranks);
  ranks_per_node = ranks_per_node_setting(ranks_per_node);
  if (ranks_per_node < 0)
    return make_error(Errc::invalid_argument,
                      "ranks per node must be positive (got " + std::to_string(ranks_per_node) + ")");
  if (ranks_per_node > 0) {
    if (t.nranks % ranks_per_node != 0)
      return make_error(Errc::invalid_argument, std::to_string(t.nranks) + " ranks do not fill nodes of " +
                                                    std::to_string(ranks_per_node) +
                                                    " ranks each: choose a ranks-per-node that divides the rank count");
    t.simulated = true;
    t.ranks_per_node = ranks_per_node;
  } else {
    // The machine's nodes: ranks sharing memory. dist needs them to hold
    // consecutive ranks, the same number each (as block placement gives).
    MPI_Comm shared;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, t.rank, MPI_INFO_NULL, &shared);
    int local = 0, size = 0;
    MPI_Comm_rank(shared, &local);
    MPI_Comm_size(shared, &size);
    MPI_Comm_free(&shared);
    int lo = size, hi = size;
    MPI_Allreduce(&size, &lo, 1, MPI_INT, MPI_MIN, comm);
    MPI_Allreduce(&size, &hi, 1, MPI_INT, MPI_MAX, comm);
    const int expect = t.rank % size;
    int ok = lo == hi && local == expect ? 1 : 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all)
      return make_error(Errc::unsupported,
                        "the job's nodes hold different numbers of ranks, or ranks that are not consecutive: place "
                        "ranks by node in blocks of equal size, or simulate nodes with a ranks-per-node setting");
    t.ranks_per_node = size;
  }
  t.nodes = t.nranks / t.ranks_per_node;
  t.node = t.rank / t.ranks_per_node;
  t.local = t.rank % t.ranks_per_node;
  t.xor_group = std::max(2, xor_group);
  std::tie(t.group_first, t.group_size) = t.group_of(t.node);
  return t;
}

std::pair<int, int> Topology::group_of(int n) const {
  const int groups = std::max(1, nodes / xor_group);
  const int index = std::min(n / xor_group, groups - 1);
  const int first = index * xor_group;
  return {first, index == groups - 1 ? nodes - first : xor_group};
}

int ranks_per_node_setting(int option) {
  if (option != 0) return option;
  const char* e = std::getenv("CAIRN_RANKS_PER_NODE");
  return e && *e ? std::atoi(e) : 0;
}

std::string node_dir(const std::string& dir, const Topology& t) {
  if (!t.simulated) return dir;
  return (fs::path(dir.empty() ? "." : dir) / ("node" + std::to_string(t.node))).string();
}

namespace {
constexpr std::string_view kNumaToken = "{numa}";

std::string with_numa(std::string dir, int node) {
  for (auto at = dir.find(kNumaToken); at != std::string::npos; at = dir.find(kNumaToken, at))
    dir.replace(at, kNumaToken.size(), std::to_string(node));
  return dir;
}

// The NUMA nodes present (node<k> in sysfs); {0} on a machine without them.
std::vector<int> numa_nodes() {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string f = e.path().filename().string();
    if (f.size() > 4 && f.rfind("node", 0) == 0 && f.find_first_not_of("0123456789", 4) == std::string::npos)
      out.push_back(std::atoi(f.c_str() + 4));
  }
  if (out.empty()) out.push_back(0);
  std::sort(out.begin(), out.end());
  return out;
}

bool holds(const std::string& dir, const std::string& stem) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir, ec))
    if (e.path().filename().string().rfind(stem, 0) == 0) return true;
  return false;
}
}  // namespace

Result<std::string> numa_dir(const std::string& dir, const Topology& t, const std::string& stem) {
  if (dir.find(kNumaToken) == std::string::npos) return dir;
  const std::vector<int> nodes = numa_nodes();
  int node = 0;
  if (const char* e = std::getenv("CAIRN_NUMA_NODE"); e != nullptr && *e != '\0') {
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end != '\0' || std::find(nodes.begin(), nodes.end(), v) == nodes.end())
      return make_error(Errc::invalid_argument, std::string("CAIRN_NUMA_NODE=") + e +
                                                    " names no NUMA node of this machine (it has " +
                                                    std::to_string(nodes.size()) + "): unset it or name one");
    node = static_cast<int>(v);
  } else {
    unsigned cpu = 0, here = 0;
    if (::getcpu(&cpu, &here) == 0) node = static_cast<int>(here);
  }
  const std::string mine = with_numa(dir, node);
  if (holds(node_dir(mine, t), stem)) return mine;
  for (const int k : nodes)
    if (k != node && holds(node_dir(with_numa(dir, k), t), stem)) return with_numa(dir, k);
  return mine;
}

std::vector<std::string> numa_dirs(const std::string& dir) {
  if (dir.find(kNumaToken) == std::string::npos) return {dir};
  std::vector<std::string> out;
  for (const int k : numa_nodes()) out.push_back(with_numa(dir, k));
  return out;
}

// ---- SlotFile ----

SlotFile::~SlotFile() = default;

const std::string& SlotFile::path() const { return pool_->path(); }

std::byte* SlotFile::data(int slot) const { return pool_->at(offset_[slot] + kSlotHeader); }

Result<std::unique_ptr<SlotFile>> SlotFile::open(const std::string& path, Kind kind, int holder, int source, int nranks,
                                                 std::size_t bytes) {
  std::unique_ptr<SlotFile> f(new SlotFile());
  f->bytes_ = bytes;
  const std::uint64_t slot_bytes = kSlotHeader + (bytes + 4095) / 4096 * 4096;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    auto p = pool::Pool::open(path);
    if (!p.ok()) return std::move(p).error();
    f->pool_ = std::move(p.value());
    for (int i = 0; i < 2; ++i) {
      const auto root = f->pool_->root(static_cast<unsigned>(i));
      const auto* h = root.offset && f->pool_->contains(f->pool_->at(root.offset), slot_bytes)
                          ? reinterpret_cast<const SlotHeader*>(f->pool_->at(root.offset))
                          : nullptr;
      if (!h || h->magic != kSlotMagic || h->kind != static_cast<std::uint32_t>(kind) ||
          h->holder != static_cast<std::uint32_t>(holder) || h->source != static_cast<std::uint32_t>(source) ||
          h->nranks != static_cast<std::uint32_t>(nranks) || h->bytes != bytes)
        return make_error(Errc::corrupted,
                          path + " is not the " + (kind == Kind::partner ? "partner copy" : "parity segment") +
                              " of rank " + std::to_string(source) + " of this " + std::to_string(nranks) +
                              "-rank job with " + std::to_string(bytes) +
                              " bytes per version (another job's, or damaged): remove it to start over");
      f->offset_[i] = root.offset;
      f->held_[i] = root.version == h->version ? root.version : 0;
    }
    return f;
  }
  pool::CreateOptions co;
  co.size = (pool::kArenaOffset + 2 * slot_bytes + (1u << 20) + (1u << 20) - 1) / (1u << 20) * (1u << 20);
  auto p = pool::Pool::create(path, std::move(co));
  if (!p.ok()) return std::move(p).error();
  f->pool_ = std::move(p.value());
  for (int i = 0; i < 2; ++i) {
    auto off = f->pool_->arena().alloc(slot_bytes);
    if (!off.ok()) return std::move(off).error();
    f->offset_[i] = off.value();
    SlotHeader h{};
    h.magic = kSlotMagic;
    h.kind = static_cast<std::uint32_t>(kind);
    h.holder = static_cast<std::uint32_t>(holder);
    h.source = static_cast<std::uint32_t>(source);
    h.nranks = static_cast<std::uint32_t>(nranks);
    h.bytes = bytes;
    f->pool_->memcpy_persist(f->pool_->at(off.value()), &h, sizeof h);
  }
  if (auto r =
          f->pool_->publish_roots({{0u, pool::RootSlot{f->offset_[0], 0}}, {1u, pool::RootSlot{f->offset_[1], 0}}});
      !r.ok())
    return std::move(r).error();
  return f;
}

Result<void> SlotFile::begin(std::uint64_t version) {
  const int s = static_cast<int>(version % 2);
  if (held_[s] == 0) return {};
  held_[s] = 0;
  return pool_->publish_root(static_cast<unsigned>(s), offset_[s], 0);
}

Result<void> SlotFile::publish(std::uint64_t version, std::uint64_t checksum) {
  const int s = static_cast<int>(version % 2);
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

// ---- XOR parity ----

std::uint64_t xor_reduce_scatter(MPI_Comm group, std::size_t chunk,
                                 const std::function<void(std::size_t, std::byte*)>& chunk_of, std::byte* result,
                                 std::vector<std::byte>& scratch) {
  // A ring: in step s member j sends the partial XOR of segment
  // (j - s - 1) mod g to j + 1 and receives that of segment (j - s - 2) mod g
  // from j - 1, adding its own chunk for it; after g - 1 steps it holds its
  // own segment, to which it adds nothing. Member j's contribution to
  // segment t is its chunk (t - j - 1) mod g (none to t = j).
  int gi = 1, ji = 0;
  MPI_Comm_size(group, &gi);
  MPI_Comm_rank(group, &ji);
  const std::size_t g = static_cast<std::size_t>(gi), j = static_cast<std::size_t>(ji);
  const int next = static_cast<int>((j + 1) % g), prev = static_cast<int>((j + g - 1) % g);
  scratch.resize(2 * chunk);
  std::byte* send = scratch.data();
  std::byte* recv = scratch.data() + chunk;
  auto contribution = [&](std::size_t segment, std::byte* out) {
    if (chunk_of)
      chunk_of((segment + 2 * g - j - 1) % g, out);
    else
      std::memset(out, 0, chunk);
  };
  std::uint64_t sent = 0;
  contribution((j + g - 1) % g, send);
  for (std::size_t step = 0; step + 1 < g; ++step) {
    const bool last = step + 2 == g;
    std::byte* in = last ? result : recv;
    MPI_Sendrecv(send, static_cast<int>(chunk), MPI_BYTE, next, 31, in, static_cast<int>(chunk), MPI_BYTE, prev, 31,
                 group, MPI_STATUS_IGNORE);
    sent += chunk;
    if (last) break;
    contribution((j + 2 * g - step - 2) % g, send);
    auto* a = reinterpret_cast<std::uint64_t*>(send);
    const auto* b = reinterpret_cast<const std::uint64_t*>(recv);
    for (std::size_t i = 0; i < chunk / 8; ++i) a[i] ^= b[i];
  }
  return sent;
}

void xor_rebuild(MPI_Comm group, int k, std::size_t chunk, const std::function<void(std::size_t, std::byte*)>& chunk_of,
                 const std::byte* parity, std::vector<std::byte>* out, std::vector<std::byte>& scratch) {
  int gi = 1, ji = 0;
  MPI_Comm_size(group, &gi);
  MPI_Comm_rank(group, &ji);
  const std::size_t g = static_cast<std::size_t>(gi);
  // The survivors' XOR without k; member t's parity XOR that is k's chunk
  // (t - k - 1) mod g, so chunk c comes from member (k + 1 + c) mod g.
  std::vector<std::byte> q(chunk);
  xor_reduce_scatter(group, chunk, ji == k ? std::function<void(std::size_t, std::byte*)>{} : chunk_of, q.data(),
                     scratch);
  if (ji == k) {
    out->resize((g - 1) * chunk);
    std::vector<MPI_Request> reqs(g - 1);
    for (std::size_t c = 0; c + 1 < g; ++c)
      MPI_Irecv(out->data() + c * chunk, static_cast<int>(chunk), MPI_BYTE,
                static_cast<int>((static_cast<std::size_t>(k) + 1 + c) % g), 22, group, &reqs[c]);
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  } else {
    for (std::size_t i = 0; i < chunk; ++i) q[i] ^= parity[i];
    MPI_Send(q.data(), static_cast<int>(chunk), MPI_BYTE, k, 22, group);
  }
}

// ---- PfsFlusher ----

std::vector<std::uint64_t> flushed_everywhere(const std::vector<std::uint64_t>& two_per_rank) {
  std::vector<std::uint64_t> out;
  for (const std::uint64_t candidate : two_per_rank) {
    bool everywhere = candidate > 0 && std::find(out.begin(), out.end(), candidate) == out.end();
    for (std::size_t r = 0; everywhere && r + 1 < two_per_rank.size(); r += 2)
      everywhere = two_per_rank[r] == candidate || two_per_rank[r + 1] == candidate;
    if (everywhere) out.push_back(candidate);
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

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
    const std::string f = fs::path(path).filename().string();
    if (f.size() <= prefix.size() + 5 || f.compare(f.size() - 5, 5, ".ckpt") != 0) continue;  // .tmp: unfinished
    const std::string num = f.substr(prefix.size(), f.size() - prefix.size() - 5);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
    v.push_back(std::stoull(num));
  }
  std::sort(v.rbegin(), v.rend());
  return v;
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
  h.format = 1;
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
  // Keep the two newest complete versions.
  const auto v = versions();
  std::error_code ec;
  for (std::size_t i = 2; i < v.size(); ++i) fs::remove(file(v[i]), ec);
}

Result<void> PfsFlusher::read(std::uint64_t version, std::vector<std::byte>& payload) const {
  const std::string path = file(version);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return util::errno_error(path, "cannot open the flushed version", errno);
  PfsHeader h{};
  const long long n = util::pread_full(fd, &h, sizeof h, 0);
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0 && n == static_cast<long long>(sizeof h) &&
                     h.bytes == static_cast<std::uint64_t>(st.st_size) - sizeof h;
  if (payload.empty() && sized) payload.resize(h.bytes);
  Result<void> r;
  if (n != static_cast<long long>(sizeof h) || h.magic != kPfsMagic || h.format != 1 ||
      h.rank != static_cast<std::uint32_t>(rank_) || h.nranks != static_cast<std::uint32_t>(nranks_) ||
      h.version != version || h.bytes != payload.size())
    r = make_error(Errc::corrupted, path + ": not version " + std::to_string(version) + " of rank " +
                                        std::to_string(rank_) + " of this job (" +
                                        (payload.empty() ? std::string("its length disagrees with its header")
                                                         : std::to_string(payload.size()) + " bytes expected") +
                                        ")");
  else if (util::pread_full(fd, payload.data(), payload.size(), sizeof h) != static_cast<long long>(payload.size()))
    r = make_error(Errc::corrupted, path + " is truncated");
  else if (payload_checksum(block_hashes(payload.data(), payload.size())) != h.checksum)
    r = make_error(Errc::corrupted, path + ": checksum mismatch (damaged)");
  ::close(fd);
  return r;
}

}  // namespace cairn::dist::detail
