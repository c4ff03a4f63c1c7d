// protection.hpp — what keeps a rank's global versions when its own storage
// is gone (internal to dist): the node layout and the XOR parity over a
// group; the files that hold copies, parity and flushed versions are in
// dist/files.hpp (no MPI there: the fuzz targets read them too).
//
// XOR parity (SCR's scheme). In a group of g members (one rank per node of
// the group, same index on its node), each member's payload is padded to the
// group's largest and cut into g - 1 chunks; member j puts chunk c into
// segment (j + 1 + c) mod g of a g-segment vector and zeros in segment j. A
// reduce-scatter with XOR leaves member i the XOR of everything in segment
// i: its parity segment, which never includes its own data. Member k lost:
// the survivors reduce-scatter again with k contributing zeros; member t's
// parity XOR that result is k's chunk (t - k - 1) mod g.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cairn/dist.hpp"
#include "dist/files.hpp"

namespace cairn::dist::detail {

struct Topology {
  int rank = 0, nranks = 1;
  int ranks_per_node = 1;  // every node has this many ranks
  int node = 0, nodes = 1, local = 0;
  bool simulated = false;  // node directories <dir>/node<k>
  int rank_of(int node_index, int local_index) const { return node_index * ranks_per_node + local_index; }
  // Rank r's copy is held by the same local rank on the next node.
  int partner_of(int r) const { return rank_of((r / ranks_per_node + 1) % nodes, r % ranks_per_node); }
  int partner() const { return partner_of(rank); }                           // holds my copy
  int source() const { return rank_of((node + nodes - 1) % nodes, local); }  // whose copy I hold
  // XOR groups of xor_group consecutive nodes (a short last group joins the
  // one before it): {first node, nodes} of node n's group, and of mine.
  int xor_group = 2;
  std::pair<int, int> group_of(int n) const;
  int group_first = 0, group_size = 1;
};
// Collective over comm. ranks_per_node > 0: simulated nodes; 0: real nodes
// (ranks are renumbered by node only in the sense that nodes must hold
// consecutive ranks and the same number each).
Result<Topology> make_topology(MPI_Comm comm, int ranks_per_node, int xor_group);
std::string node_dir(const std::string& dir, const Topology& t);
// NUMA placement: "{numa}" in a storage directory stands for the NUMA node
// the rank runs on ($CAIRN_NUMA_NODE if set, else the node of its CPU), so
// each rank keeps its pools on its own socket's device (/mnt/pmem{numa}).
// A rank whose files (`stem`*) are only under another node's directory (it
// was relaunched on another socket) keeps using them there. Without
// "{numa}" the directory is returned as it is.
Result<std::string> numa_dir(const std::string& dir, const Topology& t, const std::string& stem);
// The directory for every NUMA node present (dir itself without "{numa}").
std::vector<std::string> numa_dirs(const std::string& dir);
// Simulated ranks per node: the option, else $CAIRN_RANKS_PER_NODE, else 0.
int ranks_per_node_setting(int option);

// The XOR parity of one group (the scheme above), for any payload: the
// group communicator orders the members (rank j in it), every payload is
// cut into chunks of `chunk` bytes (a multiple of 8) and `chunk_of(c, out)`
// fills chunk c of this member's padded payload (zeros past its end).
// Reduce-scatter: `result` (chunk bytes) gets this member's parity segment;
// chunk_of empty: this member contributes zeros. Returns the bytes it sent.
std::uint64_t xor_reduce_scatter(MPI_Comm group, std::size_t chunk,
                                 const std::function<void(std::size_t, std::byte*)>& chunk_of, std::byte* result,
                                 std::vector<std::byte>& scratch);
// Rebuilds lost member k's padded payload ((g - 1) chunks) into `out` on k;
// every survivor passes its payload's chunk_of and its parity segment of the
// same version, and k neither (empty, nullptr). Collective over the group.
void xor_rebuild(MPI_Comm group, int k, std::size_t chunk, const std::function<void(std::size_t, std::byte*)>& chunk_of,
                 const std::byte* parity, std::vector<std::byte>* out, std::vector<std::byte>& scratch);

}  // namespace cairn::dist::detail
