// files.hpp — the files dist keeps besides the ranks' lanes (internal to
// dist): the two-version slot files that hold partner copies and parity
// segments, and the versions flushed to the directory standing for the
// parallel file system. No MPI here: the fuzz targets read these files too.
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
// Partner deltas. The payload is cut into kBlock blocks; the sender keeps,
// per slot, the hash of every block it last sent there, and sends only the
// blocks whose hash changed since (slot V % 2 held V - 2). The slot's
// checksum is the hash of its blocks' hashes, so the holder stores it without
// reading the payload, and a rebuild verifies it.
//
// What opening detects (each a typed error naming the file): a file that is
// no pool or no slot file (foreign_file), a slot file of another kind, rank,
// job or payload size, a slot root off the pool, misaligned or overlapping
// the other slot, a slot header whose version disagrees with its root
// (corrupted). The payload's checksum is checked when a rebuild reads it
// (verify). A flushed version's header is checked field by field against
// what the reader expects and its payload against its checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/extended/pool.hpp"

namespace cairn::dist::detail {

// RankStore::kBlock: the unit of partner deltas, parity and checksums.
inline constexpr std::size_t kBlock = 64 << 10;

// Two versions of one byte stream in a pool file (see the top of the file).
class SlotFile {
 public:
  enum class Kind : std::uint32_t { partner = 1, parity = 2 };
  // Opens the file, or creates it if it does not exist. A file of another
  // kind, rank, job or size is Errc::corrupted, a damaged one too; a file
  // that is no slot file Errc::foreign_file. `device`: the pool's device
  // (null: $CAIRN_DEVICE, else the real one).
  static Result<std::unique_ptr<SlotFile>> open(const std::string& path, Kind kind, int holder, int source, int nranks,
                                                std::size_t bytes, std::unique_ptr<devices::Device> device = nullptr);
  // The same on a pool the caller owns and keeps open while the SlotFile
  // lives (the crash harness's simulator pool, tests/crashsim/workloads/
  // dist_slots.cpp): formats the two slots in a pool whose roots name none,
  // else checks them as open() does.
  static Result<std::unique_ptr<SlotFile>> attach(pool::Pool& pool, Kind kind, int holder, int source, int nranks,
                                                  std::size_t bytes);
  ~SlotFile();
  std::uint64_t held(int slot) const { return held_[slot]; }
  std::byte* data(int slot) const;
  std::size_t bytes() const { return bytes_; }
  // Empties slot `version % 2` durably before its bytes are overwritten.
  Result<void> begin(std::uint64_t version);
  // Makes the slot's bytes durable, then names `version` with `checksum`;
  // refused unless begin(version) emptied the slot.
  Result<void> publish(std::uint64_t version, std::uint64_t checksum);
  // Recomputes the slot's checksum from its bytes.
  bool verify(int slot) const;
  const std::string& path() const;

 private:
  SlotFile() = default;
  // A slot's header and its bytes rounded up to 4 KiB.
  static std::uint64_t slot_bytes(std::size_t bytes);
  static Result<std::unique_ptr<SlotFile>> load(pool::Pool& pool, Kind kind, int holder, int source, int nranks,
                                                std::size_t bytes);
  static Result<std::unique_ptr<SlotFile>> format(pool::Pool& pool, Kind kind, int holder, int source, int nranks,
                                                  std::size_t bytes);
  pool::Pool* pool_ = nullptr;  // owned_, or the caller's (attach)
  std::unique_ptr<pool::Pool> owned_;
  std::uint64_t offset_[2] = {0, 0};
  std::uint64_t held_[2] = {0, 0};
  bool emptying_[2] = {false, false};  // begin() failed: the root may name a version still
  std::size_t bytes_ = 0;
};

// The checksum of a payload given its blocks' hashes.
std::uint64_t payload_checksum(const std::vector<std::uint64_t>& block_hashes);
std::vector<std::uint64_t> block_hashes(const std::byte* payload, std::size_t bytes);

// The versions every rank flushed, newest first, from each rank's two newest
// (0: none) side by side, as an all-gather of PfsFlusher::versions() gives them.
std::vector<std::uint64_t> flushed_everywhere(const std::vector<std::uint64_t>& two_per_rank);
// The same from each rank's list of every version it has complete.
std::vector<std::uint64_t> flushed_everywhere(const std::vector<std::vector<std::uint64_t>>& per_rank);

// The asynchronous flush of one rank's versions to the shared directory:
// <pfs>/<name>.n<N>.r<rank>.v<V>.ckpt (header, payload), written to a
// temporary name, fsynced and renamed.
//
// Retention is coordinated through the directory: after its flush of V a
// rank lists the directory once, finds the versions whose files every rank
// of the job has complete (complete_everywhere), and deletes only its own
// versions older than the second newest of them (all of them older than the
// newest when there is only one; none when there is none). No rank ever
// deletes a version at or above the newest one complete everywhere, so the
// ranks' flushed sets always overlap in it, however far one rank lags (a
// lagging rank makes the others keep more files, not fewer). The version
// before it is kept too, so that a damaged file of the newest leaves restore
// an older complete version to fall back to. In step, that is the two newest
// versions per rank, as before; a third only while the others finish V.
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
  // The versions every rank of the job has complete in the directory, newest
  // first (one listing of the directory).
  std::vector<std::uint64_t> complete_everywhere() const;
  // Deletes this rank's versions the retention rule above no longer keeps
  // (after each flush; exposed for tests).
  void retire() const;
  // Deletes this rank's versions newer than `version` (after a restore to
  // it: they belong to a run that was rolled back).
  void remove_newer_than(std::uint64_t version) const;
  // Reads and verifies version `version` into `payload` (its size; empty:
  // the size the file records, for payloads whose length varies). A file
  // that is no flushed version is Errc::foreign_file, one of another format
  // Errc::wrong_version, one of another rank, job, version or size, short
  // or failing its checksum Errc::corrupted.
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
