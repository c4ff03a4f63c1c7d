// protection.cpp — node layout, NUMA directories and the XOR parity over a
// group (protection.hpp).
#include "dist/protection.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>

namespace cairn::dist::detail {
namespace fs = std::filesystem;

static_assert(kBlock == RankStore::kBlock, "files.hpp's block is the rank store's");

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

}  // namespace cairn::dist::detail
