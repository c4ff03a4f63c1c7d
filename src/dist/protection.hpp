// protection.hpp — what keeps a rank's global versions when its own storage
// is gone (internal to dist): the node layout, the two-version slot files
// that hold partner copies and parity segments, and the asynchronous flush
// to the directory standing for the parallel file system.
//
// Slot files. A partner copy of rank s (held by rank h on the next node) and
// rank h's XOR parity segment are each a pool file of their own in h's node
// directory, <name>.n<N>.r<h>.copy-of.r<s>.pool and <name>.n<N>.r<h>.xor.pool,
// holding two slots: slot V % 2 holds version V, as the lanes do. Root slot i
// of the pool = {offset of slot i, version it holds}; publishing the root
// is the slot's commit point, after its bytes and its header (checksum) are
// durable. Writing version V first publishes slot V % 2 as version 0 (so a
// crash in the middle leaves it empty, never half of two versions), then
// stores the blocks, persists them, and publishes {offset, V}.
//
// Partner deltas. The payload is cut into RankStore::kBlock blocks; the
// sender keeps, per slot, the hash of every block it last sent there, and
// sends only the blocks whose hash changed since (slot V % 2 held V - 2).
// The slot's checksum is the hash of its blocks' hashes, so the holder
// stores it without reading the payload, and a rebuild verifies it.
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
#include "cairn/extended/pool.hpp"

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

// Two versions of one byte stream in a pool file (see the top of the file).
class SlotFile {
 public:
  enum class Kind : std::uint32_t { partner = 1, parity = 2 };
  // Opens the file, or creates it if it does not exist. A file of another
  // kind, rank, job or size is Errc::corrupted; a damaged one too.
  static Result<std::unique_ptr<SlotFile>> open(const std::string& path, Kind kind, int holder, int source, int nranks,
                                                std::size_t bytes);
  ~SlotFile();
  std::uint64_t held(int slot) const { return held_[slot]; }
  std::byte* data(int slot) const;
  std::size_t bytes() const { return bytes_; }
  // Empties slot `version % 2` durably before its bytes are overwritten.
  Result<void> begin(std::uint64_t version);
  // Makes the slot's bytes durable, then names `version` with `checksum`.
  Result<void> publish(std::uint64_t version, std::uint64_t checksum);
  // Recomputes the slot's checksum from its bytes.
  bool verify(int slot) const;
  const std::string& path() const;

 private:
  SlotFile() = default;
  std::unique_ptr<pool::Pool> pool_;
  std::uint64_t offset_[2] = {0, 0};
  std::uint64_t held_[2] = {0, 0};
  std::size_t bytes_ = 0;
};

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

// The checksum of a payload given its blocks' hashes.
std::uint64_t payload_checksum(const std::vector<std::uint64_t>& block_hashes);
std::vector<std::uint64_t> block_hashes(const std::byte* payload, std::size_t bytes);

// The versions every rank flushed, newest first, from each rank's two newest
// (0: none) side by side, as an all-gather of PfsFlusher::versions() gives them.
std::vector<std::uint64_t> flushed_everywhere(const std::vector<std::uint64_t>& two_per_rank);

// The asynchronous flush of one rank's versions to the shared directory:
// <pfs>/<name>.n<N>.r<rank>.v<V>.ckpt (header, payload), written to a
// temporary name, fsynced and renamed; the two newest are kept.
class PfsFlusher {
 public:
  PfsFlusher(std::string dir, std::string name, int rank, int nranks);
  ~PfsFlusher();
  // Starts writing `payload` as `version` in the background, after the
  // flush before it finished (its error, if it failed, is returned instead).
  Result<void> start(std::uint64_t version, std::vector<std::byte>&& payload);
  // The buffer of the flush before, once it finished (to fill it again).
  std::vector<std::byte> take_buffer();
  // Waits for the flush in progress; its error if it failed.
  Result<void> wait();
  // The versions this rank has complete in the directory, newest first.
  std::vector<std::uint64_t> versions() const;
  // Reads and verifies version `version` into `payload` (its size; empty:
  // the size the file records, for payloads whose length varies).
  Result<void> read(std::uint64_t version, std::vector<std::byte>& payload) const;
  std::string file(std::uint64_t version) const;
  // The files of rank `rank` of an `nranks` job in `dir`.
  static std::vector<std::string> files(const std::string& dir, const std::string& name, int rank, int nranks);

 private:
  void write(std::uint64_t version, const std::vector<std::byte>& payload);
  std::string dir_, name_;
  int rank_, nranks_;
  std::thread thread_;
  std::vector<std::byte> buffer_;
  Result<void> result_;
};

}  // namespace cairn::dist::detail
