// checksums_bench.hpp — what the pool strategies' payload checksums cost (internal), behind
// `cairn bench checksums`.
//
// For each directory (tmpfs, a disk file system) and each case, runs with
// Options::checksums off and on take turns (off, on, off, on, ...: a shared
// machine's slow phases hit both), R pairs:
//   iteration   a dual region of `size` bytes rewritten whole and committed,
//               `iterations` times: the mean time per iteration. The region
//               is written with cached stores (in-place: its flush, or the
//               copy strategies' copy, follows at commit) or, for
//               "in-place streamed", through Context::stream from a 1 MiB
//               buffer, as a streaming kernel writes;
//   restore     a fresh Context opening the pool and restoring it;
//   resume      restore plus the first commit after it, which waits for
//               in-place's and shadow's background check of the restored
//               version (the copy strategies check inside restore).
// Ratios are on / off of the medians. What the checksums buy is tested, not
// measured here (persist conformance: DamagedPayload*, EveryVersionWord*).
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::bench {

struct ChecksumsBenchOptions {
  std::vector<std::string> dirs;  // one directory per file system to measure
  std::size_t size = std::size_t{64} << 20;
  std::vector<std::string> cases;  // empty: every case (in-place, in-place streamed, shadow, dram-cache, nt-copy)
  int iterations = 10;
  int repeats = 5;
  unsigned threads = 0;
};

struct ChecksumsRow {
  std::string dir, fs_type, what;
  double iteration_off_s = 0, iteration_on_s = 0;  // medians of the per-run means
  double restore_off_s = 0, restore_on_s = 0;
  double resume_off_s = 0, resume_on_s = 0;
  std::string status = "ok";  // "ok" or "failed"
  std::string reason;
};

struct ChecksumsReport {
  std::string cpu_model, date;
  unsigned nproc = 0;
  std::size_t size = 0;
  int iterations = 0, repeats = 0;
  double load_before = -1, load_after = -1, elapsed_s = 0;
  std::vector<ChecksumsRow> rows;
};

// Runs the benchmark; progress on `log` if not null. Errors: no directory,
// an unusable one, an unknown case, bad options.
Result<ChecksumsReport> run_checksums_bench(const ChecksumsBenchOptions& options, std::ostream* log = nullptr);
void print_checksums_report(const ChecksumsReport& report, std::ostream& out);
Result<void> write_checksums_json(const ChecksumsReport& report, const std::string& path);

}  // namespace cairn::bench
