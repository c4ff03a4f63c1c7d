// parity.hpp — amr-mpi's XOR parity (--redundancy xor, internal to
// apps/amr-mpi): what rebuilds the leaves of a lost node's ranks when no
// partner copy is kept, for a fraction of the storage.
//
// Groups. dist's layout (cairn/dist.hpp, dist/protection.hpp): nodes of
// --ranks-per-node ranks, groups of --xor-group consecutive nodes (a short
// last group joins the one before it), one rank per node in a group (the
// same index on its node). A group survives one lost node.
//
// Payload. A rank's payload at a version is {step, leaf count, its own leaves
// as LeafRec}, padded with zeros to the group's chunk size x (g - 1): the
// payloads differ in length and change every version, so the chunk is
// chosen at every protect from the group's longest.
//
// Storage. Member j's parity segment of version V is a cairn stream in its
// node's directory, pmem:<node>/<name>.n<P>.r<rank>.xor.pool#v<V % 2>:
// {magic, V, chunk, members, each member's payload length and hash, the
// segment's hash} then the segment. A stream's commit is atomic, so slot
// V % 2 holds V or what it held before, never a mix; the slots follow the
// trees' rule (V is written only once every tree holds V, and V is global
// once every segment holds it too).
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps/amr-mpi/mesh.hpp"
#include "dist/protection.hpp"

namespace cairn::apps::amr_mpi {

// The payload of a rank's leaves at `step` (LeafRec in visiting order), and back.
std::vector<std::byte> leaf_payload(std::uint64_t step, const std::vector<LeafRec>& leaves);
Result<void> read_leaf_payload(const std::vector<std::byte>& payload, std::uint64_t& step,
                               std::vector<LeafRec>& leaves);

class Parity {
 public:
  // Collective over MPI_COMM_WORLD (it splits the groups' communicator).
  static Result<std::unique_ptr<Parity>> create(const Args& a, int rank, int ranks);
  ~Parity();
  Parity(const Parity&) = delete;
  Parity& operator=(const Parity&) = delete;

  // The ranks of this rank's group, in member order.
  const std::vector<int>& members() const { return members_; }
  // The members of rank r's group.
  std::vector<int> members_of(int r) const;
  const std::string& path() const { return path_; }

  // Removes the stream pool (a fresh job).
  void remove();
  // The versions slots 0 and 1 hold (0: empty); an error when the pool is
  // missing or damaged (lost with its node).
  Result<std::array<std::uint64_t, 2>> held() const;

  // Writes the parity segment of `version` from this member's payload.
  // Collective over the group.
  Result<void> protect(std::uint64_t version, const std::vector<std::byte>& payload);
  // Rebuilds the payload of version `version` of member `lost` (its rank):
  // the survivors pass their payload of that version (whose parity slot must
  // hold it), `lost` passes nothing and gets its payload back, checked
  // against the hash its group recorded. Collective over the group.
  Result<std::vector<std::byte>> rebuild(std::uint64_t version, int lost, const std::vector<std::byte>& payload);

  std::uint64_t bytes_sent() const { return bytes_sent_; }
  std::uint64_t bytes_stored() const { return bytes_stored_; }

 private:
  Parity() = default;
  std::string slot_uri(std::uint64_t version) const;
  dist::detail::Topology topo_;
  std::uint64_t pool_size_ = 0;  // of the stream pool, when a protect creates it
  MPI_Comm group_ = MPI_COMM_NULL;
  std::vector<int> members_;
  std::string path_;
  std::vector<std::byte> scratch_;
  std::uint64_t bytes_sent_ = 0, bytes_stored_ = 0;
};

}  // namespace cairn::apps::amr_mpi
