// streams_bench.hpp — `cairn bench streams`: seed 002's transfer measurements
// (Figs. 3-5) for cairn's data streams (internal).
//
// Per transfer (Figs. 3-4): each of P processes (forked, started together)
// writes its own stream of S bytes (open, fwrite in 1 MiB calls, close: the
// commit for pmem:) and then reads it back (open, fread into a DRAM buffer,
// close), four times: the first transfer of the process (fresh pages, the
// pool not mapped yet), then three in the steady state of a component that
// transfers every cycle, which the ratios compare. Modes:
//   file-disk-fsync  file: on a disk file system, fsync at close (what a
//                    component that must not lose its output does)
//   file-disk        file: on the disk, no fsync (page cache)
//   file-tmpfs       file: on tmpfs (the seed's ramdisk)
//   mem              mem: (process memory)
//   pmem             pmem: (a pool on tmpfs: durable against process crashes)
// Times are medians over repeats of the per-process times; bandwidth is
// S / time per process. The reference is memcpy of S bytes between two DRAM
// buffers already touched, in the same run.
//
// Preallocation (Fig. 5): effective write bandwidth S / time(open + write +
// close) of one process at sizes from 64 KiB to 16 MiB, writing in 64 KiB
// fwrite calls, for mem: and pmem: with a size hint (preallocated) and
// without (doubling from 64 KiB), and glibc's fmemopen (preallocated) and
// open_memstream (growing), which are the seed's own two streams.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::bench {

struct StreamsBenchOptions {
  std::vector<std::uint64_t> sizes = {64u << 10, 1u << 20, 16u << 20, 256u << 20};
  std::vector<unsigned> processes = {1, 2, 4};
  std::vector<std::string> modes = {"file-disk-fsync", "file-disk", "file-tmpfs", "mem", "pmem"};
  std::vector<std::uint64_t> prealloc_sizes;  // empty: 64 KiB to 16 MiB, 4 per octave
  int repeats = 5;
  std::string disk_dir = "/var/tmp";
  std::string tmpfs_dir = "/dev/shm";
};

struct TransferRow {
  std::string mode;
  std::uint64_t size = 0;
  unsigned processes = 0;
  double write_s = 0, read_s = 0;            // medians, per process, steady state (transfers 2-4 of a process)
  double cold_write_s = 0, cold_read_s = 0;  // the first transfer of a process
  double write_gbps = 0, read_gbps = 0;
  double memcpy_gbps = 0;  // the reference, same size, same run
  // Every steady-state transfer's time (seconds, per process, in the order
  // they ran) behind the medians, for an interval around them.
  std::vector<double> write_samples_s, read_samples_s;
  bool ok = true;
  std::string error;
};

struct PreallocRow {
  std::string mode;  // mem, mem-prealloc, pmem, pmem-prealloc, open_memstream, fmemopen
  std::uint64_t size = 0;
  double gbps = 0;  // median effective bandwidth
};

struct StreamsReport {
  std::string machine;
  std::vector<TransferRow> transfers;
  std::vector<PreallocRow> prealloc;
  int repeats = 0;
  bool failed = false;
};

Result<StreamsReport> run_streams_bench(const StreamsBenchOptions& options, std::ostream* progress);
void print_streams_report(const StreamsReport& report, std::ostream& out);
Result<void> write_streams_json(const StreamsReport& report, const std::string& path);

}  // namespace cairn::bench
