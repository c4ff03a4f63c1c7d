// fs_explore.hpp — the file-system crash explorer for the `file` persistence
// strategy and dist's flushed versions (README.md, "File-system crash states"): record the real strategy's
// file operations (fs_record), enumerate the directory states a power failure
// may leave at every operation boundary (fs_model), and check each one with a
// fresh persist::Context: exactly the last version whose commit returned or
// the one in flight (only it once its rename may be on disk), bit for bit;
// then one more commit and a clean reopen. A sample of the checked states has
// its own recovery and commit recorded and crashed again (depth 2).
//
// Keys: fs1:WORKLOAD:MODEL:SEED:STEPS:POINT.STATE[+POINT2.STATE2], where
// POINT is the number of logged operations applied (markers included) and
// STATE the state's number at that point; replay_fs(key) rebuilds exactly
// that state (the run is deterministic).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cairn/error.hpp"
#include "tests/crashsim/crashsim.hpp"
#include "tests/crashsim/fs_model.hpp"

namespace cairn::testing::crashsim::fs {

// Deliberately broken variants, made in the test: the log is changed before
// exploring (the shipping code runs unchanged) or recovery is replaced.
enum class Variant : std::uint8_t {
  none,
  no_tmp_fsync,        // the .tmp's fsync dropped: commit without making the data durable
  no_dir_fsync,        // the directory's fsync dropped: the rename may not be on disk when commit returns
  fsync_after_rename,  // the .tmp's fsync moved after the rename (data may follow the name)
  trust_header,        // recovery takes the newest <name>.<v>.ckpt whose magic is right, no checksums
  trust_tmp,           // as trust_header, and counts <name>.<v>.ckpt.tmp files as checkpoints too
};

// What commits into the directory: the `file` strategy (a persist::Context),
// dist's flush of a rank's versions to the shared directory (PfsFlusher,
// src/dist/files.cpp: no MPI in it), which keeps the two newest, or `cairn
// stage out` of a stream (src/stream/stage.cpp).
enum class Target : std::uint8_t { file_strategy, pfs_flush, stage_out };

struct FsWorkload {
  std::string name;
  std::string description;
  Variant variant = Variant::none;
  bool broken = false;  // the explorer must find a failing state
  Target target = Target::file_strategy;
};
const std::vector<FsWorkload>& fs_workloads();
const FsWorkload* find_fs_workload(const std::string& name);

struct FsOptions {
  FsModel model = FsModel::posix;
  std::uint64_t seed = 1;
  unsigned steps = 0;               // commits recorded; 0: from target_states, else 6
  std::uint64_t target_states = 0;  // >0: choose steps for about this many states (depth 1 + 2)
  unsigned random_subsets = 8;      // per point not enumerated exhaustively
  unsigned depth2_every = 4;        // about one explored point in k has one state's recovery crashed too; 0: off
  unsigned max_failures = 1;
  std::string only_key;  // check only this state (replay)
  std::function<void(const std::string&)> log;
};

struct FsReport {
  std::string workload;
  FsModel model = FsModel::posix;
  unsigned steps = 0;
  std::uint64_t ops = 0;                // file-system operations recorded (depth 1)
  std::uint64_t crash_points = 0;       // depth 1
  std::uint64_t points_explored = 0;    // depth 1 + 2
  std::uint64_t points_duplicate = 0;   // same pending set and expectation as the point before
  std::uint64_t points_exhaustive = 0;  // every state of the model enumerated
  std::uint64_t states = 0;             // checked, depth 1 + 2
  std::uint64_t depth2_states = 0;
  std::uint64_t depth2_runs = 0;
  double seconds = 0;
  std::vector<Failure> failures;
  bool passed() const { return failures.empty(); }
  std::string summary() const;
};

FsReport run_fs(const FsWorkload& workload, const FsOptions& options = {});
Result<FsReport> replay_fs(const std::string& key, FsOptions options = {});

}  // namespace cairn::testing::crashsim::fs
