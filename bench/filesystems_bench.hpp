// filesystems_bench.hpp — every strategy, a stream and the PM-octree on the file systems a user has
// (internal), behind `cairn bench filesystems`.
//
// For each directory (tmpfs, an ext4 or XFS directory on an SSD, a DAX
// mount) and each state size, in one run:
//   raw          the file system's physical limit: `size` bytes written with
//                pwrite over an existing file, then fdatasync (median of R);
//   strategies   `cairn bench strategies` on that directory with the real
//                device, whose flush mode is what the pool picks there
//                (cpu on tmpfs and DAX, pagecache elsewhere): commit,
//                restore, write-back system calls and bytes per commit;
//   stream       a pmem: stream of `size` bytes written and committed by a
//                writer (open, fwrite, close), R times;
//   octree       a PM-octree of 64-byte payloads refined to about `size`
//                bytes of leaves: its first persist (every block), then a
//                persist after 1 % of the leaves changed.
// Every time is set against raw figures of the same directory and run: a
// strategy's commit against the `file` strategy's and against `size` at raw
// bandwidth; a stream commit and an octree persist against raw write +
// fdatasync of as many bytes as they wrote, measured beside them (issue
// 39's goals: at most the file strategy's commit, in-place fastest; >= 50 %
// of raw bandwidth from 64 MiB; stream and octree within 2x).
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "bench/strategies_bench.hpp"
#include "cairn/error.hpp"

namespace cairn::bench {

struct FilesystemsBenchOptions {
  std::vector<std::string> dirs;  // one directory per file system to measure
  std::vector<std::size_t> sizes = {std::size_t{2} << 20, std::size_t{64} << 20};
  std::vector<std::string> strategies;  // empty: every registered strategy
  int repeats = 5;
  unsigned threads = 0;
};

// A layer's operation set against the raw bandwidth.
struct LayerRow {
  std::string what;           // "stream commit", "octree persist (all)", ...
  double seconds = 0;         // median
  double bytes = 0;           // bytes the operation wrote (median)
  double raw_s = 0;           // raw write + fdatasync of the same bytes (whole pages), median
  double vs_raw = 0;          // seconds / raw_s: 1 is the file system's limit for those bytes
  std::string status = "ok";  // "ok" or "failed"
  std::string reason;
};

struct FilesystemRun {
  std::string dir, fs_type, flush_mode;
  std::size_t size = 0;
  double raw_s = 0, raw_bw = 0;  // write + fdatasync of `size` bytes: median seconds, bytes/s
  StrategiesReport strategies;
  std::vector<LayerRow> layers;
};

struct FilesystemsReport {
  std::string cpu_model, date;
  unsigned nproc = 0;
  int repeats = 0;
  double load_before = -1, load_after = -1, elapsed_s = 0;
  std::vector<FilesystemRun> runs;
};

// Runs the benchmark; progress on `log` if not null. Errors: no directory,
// an unusable one, bad options.
Result<FilesystemsReport> run_filesystems_bench(const FilesystemsBenchOptions& options, std::ostream* log = nullptr);
void print_filesystems_report(const FilesystemsReport& report, std::ostream& out);
Result<void> write_filesystems_json(const FilesystemsReport& report, const std::string& path);

}  // namespace cairn::bench
