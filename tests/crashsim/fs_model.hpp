// fs_model.hpp — a logical model of one checkpoint directory and the states a
// power failure may leave it in (the file-system crash explorer, README.md
// "File-system crash states"). Internal to the fs_* test.
//
// The directory is a set of names -> inodes, each inode a byte string. The
// operations a program made on it (recorded by fs_record.cpp) are replayed
// into a Tracker, which keeps two views: what is durable (file data and size
// made durable by fsync of the file, names by fsync of the directory, the
// directory's own entry by fsync of its parent) and what is current. The
// difference is the pending set; a crash state is the durable view plus some
// of the pending operations:
//   posix    any subset of the pending name operations (each atomic, applied
//            in program order), and for every reachable file with pending
//            data: its size durable or current, each differing 4 KiB block
//            old or new, blocks torn at 512-byte sectors (the pessimistic
//            POSIX reading: nothing is promised without fsync);
//   ordered  ext4 data=ordered-like: name operations reach disk as a
//            program-order prefix (a metadata journal) and a file never
//            grows by bytes that were not written (no zero-filled tail).
// Both add the program-order prefixes of all pending operations (data and
// names interleaved, with intermediate values), which any file system can
// produce. States are deduplicated by content and generated in a fixed
// order from (seed, point), so a state number identifies a state on replay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::testing::crashsim::fs {

// Mixes words into one seed (splitmix64 finalizer per word). The explorer's
// own, so this test needs only crashsim.hpp's header types, not the library.
inline std::uint64_t fs_mix(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0, std::uint64_t d = 0) noexcept {
  std::uint64_t h = 0x243F6A8885A308D3ULL;
  for (std::uint64_t w : {a, b, c, d}) {
    h ^= w + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL;
    h ^= h >> 31;
  }
  return h;
}

inline constexpr std::size_t kFsBlock = 4096;
inline constexpr std::size_t kSector = 512;

enum class OpKind : std::uint8_t {
  mkdir,         // the directory itself was created (its entry lives in the parent)
  fsync_parent,  // fsync of the directory's parent
  create,        // a new file `name` (inode `ino`)
  truncate,      // size of `ino` set to `off` (O_TRUNC, ftruncate)
  write,         // `data` written to `ino` at `off`
  fsync,         // fsync / fdatasync of `ino`
  fsync_dir,     // fsync of the directory
  rename,        // `name` -> `to` (inode `ino`), replacing `to`
  unlink,        // `name` (inode `ino`) removed
  unsupported,   // an operation the model does not know (`name` says which): a failure
  begin,         // workload marker: commit of model version `off` starts
  end,           // workload marker: that commit returned
};
const char* op_name(OpKind kind) noexcept;

struct Op {
  OpKind kind = OpKind::unsupported;
  std::uint32_t ino = 0;
  std::string name, to;
  std::uint64_t off = 0;
  std::vector<std::byte> data;
};

// What the directory holds after a crash (or a clean shutdown).
struct Image {
  bool dir_exists = true;
  std::map<std::string, std::vector<std::byte>> files;
  std::uint64_t hash() const;
};

enum class FsModel : std::uint8_t { posix = 0, ordered = 1 };
const char* model_name(FsModel m) noexcept;
Result<FsModel> parse_model(const std::string& text);

struct GenOptions {
  FsModel model = FsModel::posix;
  std::uint64_t seed = 1;
  std::uint64_t point = 0;
  unsigned depth = 1;
  unsigned random_subsets = 8;               // per set of data units not enumerated exhaustively
  std::uint64_t exhaustive_limit = 1 << 10;  // data-unit combinations enumerated completely (per name subset)
  unsigned torn_per_block = 2;               // sector-torn states per pending block
};

class Tracker {
 public:
  // Inode numbers of the initial files are 1.. in name order (as fs_record assigns them).
  explicit Tracker(const Image& initial);
  void apply(const Op& op, std::size_t index);
  // A hash of the durable view and the pending operations (equal: same crash states).
  std::uint64_t signature() const;
  std::size_t pending() const { return pending_.size(); }
  // Calls fn(state number, image) for every distinct crash state here, in a
  // fixed order; fn returns false to stop. Returns whether the enumeration
  // was exhaustive (for the model) and the number of states.
  std::uint64_t for_each_state(const GenOptions& o, const std::function<bool(std::uint64_t, const Image&)>& fn,
                               bool* exhaustive = nullptr) const;

 private:
  struct Inode {
    std::vector<std::byte> durable, current;
  };
  struct Pending {
    std::size_t index;
    const Op* op;
  };
  std::map<std::uint32_t, Inode> inodes_;
  std::map<std::string, std::uint32_t> dnames_, cnames_;
  bool ddir_ = true, cdir_ = true;
  std::vector<Pending> pending_;  // program order
};

}  // namespace cairn::testing::crashsim::fs
