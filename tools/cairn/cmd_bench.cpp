// cmd_bench.cpp — `cairn bench NAME`: every benchmark and experiment of bench/, one subcommand each.
//
// An experiment lives in bench/NAME_bench.{hpp,cpp} (run, print, write JSON)
// and is exposed here by one add_NAME() that registers its subcommand under
// `bench`; add the call to add_bench_commands() at the end.
// Conventions shared by all of them: progress on stderr (--quiet silences
// it), the table on stdout, --json FILE for the same data; exit status 0
// measured (whatever the numbers), 1 measured but some part failed with an
// error, 2 bad option or nothing could be measured.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bench/amr_bench.hpp"
#include "bench/bench_util.hpp"
#include "bench/checkpoint_bench.hpp"
#include "bench/checksums_bench.hpp"
#include "bench/dist_bench.hpp"
#include "bench/filesystems_bench.hpp"
#include "bench/gerris_bench.hpp"
#include "bench/octree_bench.hpp"
#include "bench/overhead_bench.hpp"
#include "bench/placement_bench.hpp"
#include "bench/strategies_bench.hpp"
#include "bench/stream_bench.hpp"
#include "bench/streams_bench.hpp"
#include "bench/workflow_bench.hpp"
#include "commands.hpp"

namespace cairn::tool {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitPartFailed = 1;
constexpr int kExitCannot = 2;

// Reports `e` for command `cmd` and sets the exit status for "cannot run".
void fail(const std::string& cmd, const Error& e) {
  std::cerr << "cairn bench " << cmd << ": " << e.message << "\n";
  exit_code() = kExitCannot;
}

void add_strategies(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("strategies",
                                   "Every persistence strategy side by side on one state: commit, partial commit, "
                                   "restore and rollback time, NVM bytes, bandwidth against non-temporal copy");
  cmd->footer(
      "For each device profile and strategy, one state of --size bytes (a DualRegion for in-place, a region\n"
      "otherwise) is committed --repeats times after writing all of it, rolled back --repeats times, restored\n"
      "--repeats times in a fresh Context (as after a restart), and committed --repeats times after writing\n"
      "--partial percent of its pages with incremental commit on. Medians are reported. Per profile, the\n"
      "non-temporal copy bandwidth into a pool of the same size is measured in the same run; copy-based\n"
      "commits are held to 80 % of it, shadow and in-place restores to 1 ms. Storage goes to --dir (default\n"
      "$CAIRN_POOL_DIR, else /dev/shm/cairn) and is removed afterwards; a strategy that does not fit there\n"
      "or in memory is listed as skipped, with the reason.\n"
      "Exit status: 0 measured, 1 a strategy failed with an error (its row says which), 2 bad option.");
  struct Args {
    std::string size = "1G", strategies, profiles = "dram,optane-dcpmm", dir, json;
    unsigned threads = 0, partial = 10;
    int repeats = 5;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--size,-s", args->size, "State size in bytes, with K, M or G suffix (default 1G)");
  cmd->add_option("--threads,-t", args->threads, "Threads for copies and flushes (default: all hardware threads)");
  cmd->add_option("--repeats,-r", args->repeats, "Repetitions; medians are reported (default 5)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--strategies", args->strategies, "Comma-separated strategies (default: all registered)");
  cmd->add_option("--profiles", args->profiles, "Comma-separated device profiles (default dram,optane-dcpmm)");
  cmd->add_option("--partial", args->partial, "Percent of pages a partial update writes (default 10)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--dir", args->dir, "Directory for the pools and checkpoint files (tmpfs or DAX)");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    auto size = bench::parse_size(args->size);
    if (!size.ok()) return fail("strategies", size.error());
    bench::StrategiesBenchOptions o;
    o.size = size.value();
    o.threads = args->threads;
    o.repeats = args->repeats;
    o.partial_pct = args->partial;
    o.dir = args->dir;
    o.strategies = bench::split_list(args->strategies);
    o.profiles = bench::split_list(args->profiles);
    auto report = bench::run_strategies_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("strategies", report.error());
    bench::print_strategies_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_strategies_json(report.value(), args->json); !w.ok())
        return fail("strategies", w.error());
    exit_code() = kExitOk;
    for (const auto& row : report.value().rows)
      if (row.status == "failed") exit_code() = kExitPartFailed;
  });
}

void add_filesystems(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("filesystems",
                                   "Every strategy, a pmem: stream and the PM-octree on each file system a user has "
                                   "(tmpfs, ext4 or XFS on an SSD, DAX), against raw write + fdatasync");
  cmd->footer(
      "Per --dirs directory and --sizes state size: raw pwrite + fdatasync of the state's bytes (the file\n"
      "system's limit, measured in the same run), `cairn bench strategies` there with the real device (its\n"
      "flush mode is the pool's automatic choice: cpu on tmpfs and DAX, pagecache elsewhere) with write-back\n"
      "system calls and bytes per commit, a pmem: stream written and committed, and a PM-octree persisted whole\n"
      "and after 1 % of its leaves changed. Ratios: commit against the file strategy's, bandwidth against raw.\n"
      "Each directory is created if missing; what the benchmark writes there is removed afterwards.\n"
      "Exit status: 0 measured, 1 a strategy or layer failed (its row says why), 2 bad option.");
  struct Args {
    std::string dirs, sizes = "2M,64M", strategies, json;
    unsigned threads = 0;
    int repeats = 5;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--dirs", args->dirs,
                  "Comma-separated directories, one per file system (e.g. /dev/shm/cairn,/var/tmp/cairn)")
      ->required();
  cmd->add_option("--sizes", args->sizes, "Comma-separated state sizes with K, M or G (default 2M,64M)");
  cmd->add_option("--strategies", args->strategies, "Comma-separated strategies (default: all registered)");
  cmd->add_option("--threads,-t", args->threads, "Threads for copies and flushes (default: all hardware threads)");
  cmd->add_option("--repeats,-r", args->repeats, "Repetitions; medians are reported (default 5)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::FilesystemsBenchOptions o;
    o.dirs = bench::split_list(args->dirs);
    o.sizes.clear();
    for (const auto& s : bench::split_list(args->sizes)) {
      auto size = bench::parse_size(s, "--sizes");
      if (!size.ok()) return fail("filesystems", size.error());
      o.sizes.push_back(size.value());
    }
    o.strategies = bench::split_list(args->strategies);
    o.threads = args->threads;
    o.repeats = args->repeats;
    auto report = bench::run_filesystems_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("filesystems", report.error());
    bench::print_filesystems_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_filesystems_json(report.value(), args->json); !w.ok())
        return fail("filesystems", w.error());
    exit_code() = kExitOk;
    for (const auto& run : report.value().runs) {
      for (const auto& row : run.strategies.rows)
        if (row.status == "failed") exit_code() = kExitPartFailed;
      for (const auto& l : run.layers)
        if (l.status == "failed") exit_code() = kExitPartFailed;
    }
  });
}

void add_checksums(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("checksums",
                                   "What the pool strategies' payload checksums cost: iterations, restore and resume "
                                   "with Options::checksums off and on, taking turns");
  cmd->footer(
      "Per --dirs directory and case (in-place, in-place streamed, shadow, dram-cache, nt-copy): a dual region\n"
      "of --size bytes rewritten and committed --iterations times (in-place streamed writes it through\n"
      "Context::stream), then a fresh Context's restore and first commit (which waits for in-place's and\n"
      "shadow's background check). Runs without and with checksums take turns; medians and on/off ratios.\n"
      "Exit status: 0 measured, 1 a case failed (its row says why), 2 bad option.");
  struct Args {
    std::string dirs, size = "64M", cases, json;
    unsigned threads = 0;
    int iterations = 10, repeats = 5;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--dirs", args->dirs,
                  "Comma-separated directories, one per file system (e.g. /dev/shm/cairn,/var/tmp/cairn)")
      ->required();
  cmd->add_option("--size", args->size, "Bytes of state, with K, M or G (default 64M)");
  cmd->add_option("--cases", args->cases, "Comma-separated cases (default: all)");
  cmd->add_option("--iterations", args->iterations, "Commits per run (default 10)")->check(CLI::Range(1, 100000));
  cmd->add_option("--threads,-t", args->threads, "Threads for copies and flushes (default: all hardware threads)");
  cmd->add_option("--repeats,-r", args->repeats, "Runs each way; medians are reported (default 5)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::ChecksumsBenchOptions o;
    o.dirs = bench::split_list(args->dirs);
    auto size = bench::parse_size(args->size);
    if (!size.ok()) return fail("checksums", size.error());
    o.size = size.value();
    o.cases = bench::split_list(args->cases);
    o.iterations = args->iterations;
    o.threads = args->threads;
    o.repeats = args->repeats;
    auto report = bench::run_checksums_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("checksums", report.error());
    bench::print_checksums_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_checksums_json(report.value(), args->json); !w.ok())
        return fail("checksums", w.error());
    exit_code() = kExitOk;
    for (const auto& row : report.value().rows)
      if (row.status == "failed") exit_code() = kExitPartFailed;
  });
}

// "1,2" → {1, 2}.
Result<std::vector<unsigned>> parse_threads(const std::string& text) {
  std::vector<unsigned> out;
  for (const auto& item : bench::split_list(text)) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(item.c_str(), &end, 10);
    if (*end != '\0' || v == 0 || v > 256)
      return make_error(Errc::invalid_argument, "--threads '" + text + "': give thread counts from 1 to 256, e.g. 1,2");
    out.push_back(static_cast<unsigned>(v));
  }
  if (out.empty()) return make_error(Errc::invalid_argument, "--threads: give at least one thread count");
  return out;
}

void add_overhead(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("overhead",
                                   "Seed 004 Fig. 12: overhead of persisting at every iteration (native, nt-copy "
                                   "checkpoint, in-place without / with flushing / with the helper thread, undo-log)");
  cmd->footer(
      "Runs each app (in-process, quiet, a fresh pool per run in a scratch directory under /dev/shm) with every\n"
      "variant, --repeats times, under each device profile and thread count, and reports the median time per\n"
      "iteration ((compute + commit) / iterations) and the overhead against native measured in the same run.\n"
      "Goals (issues 5, 11): in-place (default options) overhead <= 2 % median and <= 5 % max across the apps;\n"
      "undo-log overhead / in-place overhead >= 10 where in-place's overhead is above the spread of the native\n"
      "runs. Every run must pass its app's verification and end with the same\n"
      "checksum as the other runs of the app.\n"
      "Default sizes: npb-cg and npb-mg class A, jacobi 2048x2048 for 100 iterations, sph simsmall for 40\n"
      "frames (see --size).\n"
      "Exit status: 0 measured, 1 some run failed (error, verification or checksum), 2 bad option.");
  struct Args {
    std::string apps, variants, profiles = "dram,quartz-1/8", threads = "1", npb_class, sizes, dir, json;
    int repeats = 3;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option(
      "--apps", args->apps,
      "Comma-separated apps (default npb-cg,npb-mg,jacobi, and sph when built); known: " + bench::app_names());
  cmd->add_option("--variants", args->variants,
                  "Comma-separated variants (default all): native, nt-copy, in-place-no-flush, in-place-sync, "
                  "in-place, undo-log; native is always measured");
  cmd->add_option("--profiles", args->profiles, "Comma-separated device profiles (default dram,quartz-1/8)");
  cmd->add_option("--threads,-t", args->threads,
                  "Comma-separated app thread counts (default 1: one app thread, the helper on the other core)");
  cmd->add_option("--class", args->npb_class, "NPB class for npb-cg and npb-mg (S, W, A, B; default A)");
  cmd->add_option("--size", args->sizes, "Per-app size overrides APP=SIZE[:ITERATIONS],... (e.g. jacobi=512:100)");
  cmd->add_option("--repeats,-r", args->repeats, "Runs per cell; medians are reported (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--dir", args->dir, "Base directory for the scratch pools (default /dev/shm)");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::OverheadOptions o;
    o.apps = bench::split_list(args->apps);
    o.variants = bench::split_list(args->variants);
    o.profiles = bench::split_list(args->profiles);
    auto threads = parse_threads(args->threads);
    if (!threads.ok()) return fail("overhead", threads.error());
    o.threads = threads.value();
    o.npb_class = args->npb_class;
    o.sizes = args->sizes;
    o.repeats = args->repeats;
    o.dir = args->dir;
    auto report = bench::run_overhead_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("overhead", report.error());
    bench::print_overhead_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_overhead_json(report.value(), args->json); !w.ok()) return fail("overhead", w.error());
    exit_code() = report.value().failed_runs ? kExitPartFailed : kExitOk;
  });
}

void add_placement(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "placement",
      "Seed 003: the Jacobi stream-function kernel and the sharpening stencil with arrays in DRAM vs in the pool, "
      "without and with persistence at every iteration");
  cmd->footer(
      "Runs the jacobi app's two kernels (in-process, quiet, a fresh pool per run under /dev/shm): native (DRAM),\n"
      "in the pool without persistence (in-place, no write-back), in-place, nt-copy, shadow (reads from the\n"
      "pool's pages) and undo-log, --repeats times under each device profile; reports the median time per\n"
      "iteration and the ratio to native measured in the same run.\n"
      "Default sizes: jacobi 2048x2048, 100 iterations; sharpen 2048x2048 image in 32 bands (see --size).\n"
      "Exit status: 0 measured, 1 some run failed (error, verification or checksum), 2 bad option.");
  struct Args {
    std::string variants, profiles = "dram,optane-dcpmm", sizes, dir, json;
    unsigned threads = 0;
    int repeats = 3;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--variants", args->variants,
                  "Comma-separated variants (default all): native, pool-no-persist, in-place, nt-copy, shadow, "
                  "undo-log; native is always measured");
  cmd->add_option("--profiles", args->profiles, "Comma-separated device profiles (default dram,optane-dcpmm)");
  cmd->add_option("--threads,-t", args->threads, "App threads (default: all hardware threads)");
  cmd->add_option("--size", args->sizes,
                  "Size overrides jacobi=N[:ITERATIONS],jacobi-sharpen=N[:BANDS] (e.g. jacobi=512:100)");
  cmd->add_option("--repeats,-r", args->repeats, "Runs per row; medians are reported (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--dir", args->dir, "Base directory for the scratch pools (default /dev/shm)");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::PlacementOptions o;
    o.variants = bench::split_list(args->variants);
    o.profiles = bench::split_list(args->profiles);
    o.threads = args->threads;
    o.sizes = args->sizes;
    o.repeats = args->repeats;
    o.dir = args->dir;
    auto report = bench::run_placement_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("placement", report.error());
    bench::print_placement_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_placement_json(report.value(), args->json); !w.ok())
        return fail("placement", w.error());
    exit_code() = report.value().failed_runs ? kExitPartFailed : kExitOk;
  });
}

void add_stream(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("stream",
                                   "STREAM copy/scale/add/triad on DRAM and on pool memory, without and with "
                                   "persisting after each kernel (seed 003)");
  cmd->footer(
      "Three arrays of --size bytes each (default 4x the last-level cache, at least 64 MiB) in DRAM, then in a\n"
      "cairn pool in the default pool directory (or --dir) under each device profile, with no persistence,\n"
      "with a flush of the written array after each kernel, and with non-temporal stores. Reports GB/s\n"
      "(medians of --repeats passes after one untimed pass) and the ratio to DRAM; checks the arrays against\n"
      "STREAM's expected values.\n"
      "Exit status: 0 measured, 1 a configuration failed, 2 bad option.");
  struct Args {
    std::string size, profiles = "dram,optane-dcpmm,quartz-1/8", dir, json;
    unsigned threads = 0;
    int repeats = 3;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--size,-s", args->size, "Bytes per array, with K, M or G suffix (default 4x the last-level cache)");
  cmd->add_option("--threads,-t", args->threads, "Threads (default: all hardware threads)");
  cmd->add_option("--repeats,-r", args->repeats, "Timed passes; medians are reported (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--profiles", args->profiles,
                  "Comma-separated device profiles (default dram,optane-dcpmm,quartz-1/8)");
  cmd->add_option("--dir", args->dir, "Directory for the pool (default $CAIRN_POOL_DIR, else /dev/shm/cairn)");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::StreamBenchOptions o;
    if (!args->size.empty()) {
      auto size = bench::parse_size(args->size);
      if (!size.ok()) return fail("stream", size.error());
      o.array_bytes = size.value();
    }
    o.threads = args->threads;
    o.repeats = args->repeats;
    o.profiles = bench::split_list(args->profiles);
    o.dir = args->dir;
    auto report = bench::run_stream_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("stream", report.error());
    bench::print_stream_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_stream_json(report.value(), args->json); !w.ok()) return fail("stream", w.error());
    exit_code() = report.value().failed ? kExitPartFailed : kExitOk;
  });
}

void add_streams(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("streams",
                                   "Data streams between components: file: (disk with and without fsync, tmpfs), "
                                   "mem: and pmem: transfers, and the preallocation curve (seed 002, Figs. 3-5)");
  cmd->footer(
      "Every process (forked, started together) writes its own stream (open, fwrite in 1 MiB calls, close) and\n"
      "reads it back (open, fread, close), in every mode, at every size and process count; medians of --repeats.\n"
      "Goals (issue 14): mem: and pmem: transfers >= 10x faster than file: on disk with fsync, >= 2x faster than\n"
      "file: on tmpfs, and >= 50 % of memcpy's bandwidth at large sizes. Then the preallocation curve: one\n"
      "process, 64 KiB to 16 MiB, with and without a size hint, against glibc's fmemopen and open_memstream.\n"
      "Exit status: 0 measured, 1 a transfer failed, 2 bad option.");
  struct Args {
    std::string sizes = "64K,1M,16M,256M", procs = "1,2,4", modes, disk = "/var/tmp", tmpfs = "/dev/shm", json;
    int repeats = 5;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--sizes", args->sizes, "Comma-separated bytes per process (default 64K,1M,16M,256M; up to 1G)");
  cmd->add_option("--processes,-p", args->procs, "Comma-separated process counts (default 1,2,4)");
  cmd->add_option("--modes", args->modes,
                  "Comma-separated modes (default all): file-disk-fsync, file-disk, file-tmpfs, mem, pmem");
  cmd->add_option("--disk-dir", args->disk, "A directory on a disk file system (default /var/tmp)");
  cmd->add_option("--tmpfs-dir", args->tmpfs, "A directory on tmpfs, for file-tmpfs and the pools (default /dev/shm)");
  cmd->add_option("--repeats,-r", args->repeats, "Repetitions; medians are reported (default 5)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::StreamsBenchOptions o;
    o.sizes.clear();
    for (const auto& s : bench::split_list(args->sizes)) {
      auto v = bench::parse_size(s, "--sizes");
      if (!v.ok()) return fail("streams", v.error());
      o.sizes.push_back(v.value());
    }
    o.processes.clear();
    for (const auto& s : bench::split_list(args->procs)) {
      const int n = std::atoi(s.c_str());
      if (n < 1 || n > 64)
        return fail("streams", make_error(Errc::invalid_argument, "--processes: '" + s + "' is not 1 to 64"));
      o.processes.push_back(static_cast<unsigned>(n));
    }
    if (!args->modes.empty()) {
      o.modes = bench::split_list(args->modes);
      for (const auto& m : o.modes)
        if (m != "file-disk-fsync" && m != "file-disk" && m != "file-tmpfs" && m != "mem" && m != "pmem")
          return fail("streams", make_error(Errc::invalid_argument, "--modes: unknown mode '" + m + "'"));
    }
    o.disk_dir = args->disk;
    o.tmpfs_dir = args->tmpfs;
    o.repeats = args->repeats;
    auto report = bench::run_streams_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("streams", report.error());
    bench::print_streams_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_streams_json(report.value(), args->json); !w.ok()) return fail("streams", w.error());
    exit_code() = report.value().failed ? kExitPartFailed : kExitOk;
  });
}

void add_workflow(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("workflow",
                                   "The solve-adapt workflow (apps/workflow) under every coupling: total time and the "
                                   "share spent in transfers (seed 002)");
  cmd->footer(
      "Runs the workflow's driver in this process; file-disk, file-tmpfs and pmem start every component as its own\n"
      "process, mem calls them as library functions. Runs of the couplings are interleaved; medians of --repeats.\n"
      "Every run must give the same checksum. Exit status: 0 measured, 1 checksums differ, 2 bad option or error.");
  struct Args {
    bench::WorkflowBenchOptions o;
    std::string couplings, json;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--couplings", args->couplings, "Comma-separated (default file-disk,file-tmpfs,mem,pmem)");
  cmd->add_option("--cycles", args->o.cycles, "Solve-adapt cycles (default 8)")->check(CLI::Range(1, 1000));
  cmd->add_option("--parts", args->o.parts, "Solver processes (default 2)")->check(CLI::Range(1, 64));
  cmd->add_option("--level-max", args->o.level_max, "Finest level (default 10)")->check(CLI::Range(4, 14));
  cmd->add_option("--sweeps", args->o.sweeps, "Jacobi sweeps per solve (default 100)")->check(CLI::Range(0, 100000));
  cmd->add_option("--level-min", args->o.level_min, "Coarsest level (default 4)")->check(CLI::Range(1, 14));
  cmd->add_option("--tmpfs-dir", args->o.tmpfs_dir,
                  "Directory for file-tmpfs's files and pmem's pool (default: /dev/shm; a tmpfs mounted with "
                  "huge=within_size gives both 2 MiB pages)");
  cmd->add_option("--repeats,-r", args->o.repeats, "Repetitions; medians are reported (default 5)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::WorkflowBenchOptions o = args->o;
    if (!args->couplings.empty()) o.couplings = bench::split_list(args->couplings);
    o.bin_dir = (apps_dir() / "workflow").string();
    auto report = bench::run_workflow_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("workflow", report.error());
    bench::print_workflow_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_workflow_json(report.value(), args->json); !w.ok()) return fail("workflow", w.error());
    exit_code() = report.value().checksums_equal ? kExitOk : kExitPartFailed;
  });
}

void add_amr(CLI::App& bench) {
  auto* cmd =
      bench.add_subcommand("amr",
                           "Seed 000's experiments on the adaptive interface app (apps/amr): versions (Fig. 3), "
                           "C0 size (Fig. 10), layout transformation (Fig. 11), restart (5.6)");
  cmd->footer(
      "versions: overlap of consecutive versions and memory per 1000 octants. c0: run time against the DRAM budget\n"
      "of C0 under an emulated NVM profile, with in-core and LMDB out-of-core in the same run. transform: the layout\n"
      "transformation on and off at --sizes. restart: SIGKILL at --crash-at, time until the restarted run is back.\n"
      "Exit status: 0 measured, 1 checksums differ between variants, 2 bad option or error.");
  struct Args {
    bench::AmrBenchOptions o;
    std::string experiments, sizes, json;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--experiments", args->experiments, "Comma-separated: versions,c0,transform,restart (default all)");
  cmd->add_option("--profile", args->o.profile, "Emulated NVM profile of c0 and transform (default pcm-2017)");
  cmd->add_option("--size", args->o.size, "Finest level of versions, c0 and restart (default 6)")
      ->check(CLI::Range(3, 10));
  cmd->add_option("--level-min", args->o.level_min, "Coarsest level (default: the finest minus 2, at least 2)")
      ->check(CLI::Range(1, 10));
  cmd->add_option("--sizes", args->sizes, "Finest levels of transform (default 4,5,6,7)");
  cmd->add_option("--steps", args->o.steps, "Steps per run (default 150)")->check(CLI::Range(1, 100000));
  cmd->add_option("--crash-at", args->o.crash_at, "restart: the step killed (default 25)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--repeats,-r", args->o.repeats, "Repetitions; medians are reported (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--dir", args->o.dir, "Directory of the pools (default /dev/shm)");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::AmrBenchOptions o = args->o;
    if (!args->experiments.empty()) o.experiments = bench::split_list(args->experiments);
    for (const auto& e : o.experiments)
      if (e != "versions" && e != "c0" && e != "transform" && e != "restart")
        return fail("amr", make_error(Errc::invalid_argument, "--experiments: unknown experiment '" + e +
                                                                  "' (versions, c0, transform, restart)"));
    if (!args->sizes.empty()) {
      o.sizes.clear();
      for (const auto& s : bench::split_list(args->sizes)) {
        const int v = std::atoi(s.c_str());
        if (v < 3 || v > 10) return fail("amr", make_error(Errc::invalid_argument, "--sizes: levels 3 to 10"));
        o.sizes.push_back(v);
      }
    }
    auto report = bench::run_amr_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("amr", report.error());
    bench::print_amr_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_amr_json(report.value(), args->json); !w.ok()) return fail("amr", w.error());
    exit_code() = report.value().checksums_equal ? kExitOk : kExitPartFailed;
  });
}

void add_octree(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("octree",
                                   "PM-octree against p4est (p8est) on the same 3D refinement: refine, 2:1 balance, "
                                   "traversal, save/persist, load/restore, memory per leaf, two-version memory");
  cmd->footer(
      "Per size LEVEL:SHIFT (p4est's timings example): uniform to LEVEL-SHIFT, then children 0, 3, 5, 6 refine on\n"
      "down to LEVEL; then 2:1 face balance. Both structures, 16-byte payloads, one process, --repeats runs each;\n"
      "medians and the ratio p4est / PM-octree (> 1: PM-octree faster). Also: full balance of a fresh tree,\n"
      "persist after 1 % of the leaves changed, the memory of two versions after 1 %, 61 %, 100 % changed, and\n"
      "bytes per leaf. Both must hold the same leaves and payloads at every step. Approximate leaves after\n"
      "refine (shift 4): 7 -> 1.5e5, 8 -> 1.2e6, 9 -> 9.8e6, 10 -> 7.8e7; 10:5 -> 3.9e7, 10:6 -> 2.0e7.\n"
      "Pools and the p8est file go to --dir and are removed afterwards. Without p4est in the build, PM-octree\n"
      "is measured alone.\n"
      "Exit status: 0 measured, 1 the two structures or a restore disagree, 2 bad option or error.");
  struct Args {
    std::string levels = "7:4", dir = "/dev/shm/cairn-bench-octree", dram_budget = "256M", pool_size, json;
    int repeats = 3;
    bool no_full = false, no_p4est = false, quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--levels,--sizes", args->levels,
                  "Comma-separated LEVEL[:SHIFT] refinement depths (default 7:4, ~2.5e5 leaves after balance; "
                  "the shift defaults to 4)");
  cmd->add_option("--repeats,-r", args->repeats, "Runs per size; medians are reported (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--dir", args->dir,
                  "Directory for the pools and the p8est file (default /dev/shm/cairn-bench-octree)");
  cmd->add_option("--dram-budget", args->dram_budget, "PM-octree's C0 DRAM budget (default 256M)");
  cmd->add_option("--pool-size", args->pool_size, "PM-octree pool size (default: from the expected tree size)");
  cmd->add_flag("--no-full-balance", args->no_full, "Skip the full (face, edge, corner) balance of a fresh tree");
  cmd->add_flag("--no-p4est", args->no_p4est, "Measure PM-octree alone even when p4est is built in");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::OctreeBenchOptions o;
    auto sizes = bench::parse_octree_sizes(args->levels);
    if (!sizes.ok()) return fail("octree", sizes.error());
    o.sizes = sizes.value();
    o.repeats = args->repeats;
    o.dir = args->dir;
    auto budget = bench::parse_size(args->dram_budget, "--dram-budget");
    if (!budget.ok()) return fail("octree", budget.error());
    o.dram_budget = budget.value();
    if (!args->pool_size.empty()) {
      auto ps = bench::parse_size(args->pool_size, "--pool-size");
      if (!ps.ok()) return fail("octree", ps.error());
      o.pool_size = ps.value();
    }
    o.full_balance = !args->no_full;
    o.use_p4est = !args->no_p4est;
    auto report = bench::run_octree_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("octree", report.error());
    bench::print_octree_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_octree_json(report.value(), args->json); !w.ok()) return fail("octree", w.error());
    exit_code() = report.value().failed ? kExitPartFailed : kExitOk;
  });
}

void add_gerris(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("gerris",
                                   "Gerris with the CairnPersist module (integrations/gerris) against its own "
                                   "OutputSimulation snapshots: run-time overhead, bytes per persist, restart, memory");
  cmd->footer(
      "Per case (shear2D, solid2D, shear3D, solid3D of integrations/gerris/cases at --size; gerris3D runs the\n"
      "3D ones): Gerris without persistence, with OutputSimulation every 10 steps to --dir (text, binary) and\n"
      "with CairnPersist every step (stream, octree); wall time, overhead against no persistence, bytes and\n"
      "cells per persist, peak RSS per process. Restart:\n"
      "CairnPersist killed at --kill-at and resumed against Gerris restarting from its last snapshot and\n"
      "recomputing the steps since. Variants interleaved, medians of --repeats. The module: --module\n"
      "(--module3d), else integrations/gerris/libcairn2D.so (libcairn3D.so) of this build tree, or lib/gerris/ of\n"
      "this install, else `cairn` (Gerris's module directory).\n"
      "Exit status: 0 measured, 1 some run failed, 2 bad option or error.");
  struct Args {
    bench::GerrisBenchOptions o;
    std::string sizes, json;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--size,--sizes", args->sizes,
                  "Comma-separated CASE=LEVEL:STEPS (default shear2D=7:100,solid2D=6:100)");
  cmd->add_option("--kill-at", args->o.kill_at, "Restart: the step killed, not a multiple of 10 (default 25)")
      ->check(CLI::Range(2, 100000));
  cmd->add_option("--repeats,-r", args->o.repeats, "Repetitions; medians are reported (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--gerris", args->o.gerris, "The gerris2D executable (default: gerris2D on PATH)");
  cmd->add_option("--module", args->o.module, "libcairn2D.so (default: this build tree's, else `cairn`)");
  cmd->add_option("--gerris3d", args->o.gerris3d, "The gerris3D executable (default: gerris3D on PATH)");
  cmd->add_option("--module3d", args->o.module3d, "libcairn3D.so (default: this build tree's, else `cairn`)");
  cmd->add_option("--dir", args->o.dir, "Directory of pools and snapshots (default /dev/shm/cairn-bench-gerris)");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::GerrisBenchOptions o = args->o;
    if (!args->sizes.empty()) {
      auto sizes = bench::parse_gerris_sizes(args->sizes);
      if (!sizes.ok()) return fail("gerris", sizes.error());
      o.cases = sizes.value();
    }
    // <build>/tools/cairn/cairn -> <build>/integrations/gerris/libcairn{2D,3D}.so; installed,
    // <prefix>/bin/cairn -> <prefix>/<libdir>/gerris/libcairn{2D,3D}.so; else Gerris's module dir
    const auto built = [](const char* file) {
      std::error_code ec;
      const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
      const std::filesystem::path installed =
          ec ? std::filesystem::path() : self.parent_path().parent_path() / CAIRN_INSTALL_LIBDIR / "gerris";
      for (const auto& dir : {apps_dir().parent_path() / "integrations" / "gerris", installed})
        if (!dir.empty() && std::filesystem::exists(dir / file, ec)) return (dir / file).string();
      return std::string("cairn");
    };
    if (o.module.empty()) o.module = built("libcairn2D.so");
    if (o.module3d.empty()) o.module3d = built("libcairn3D.so");
    auto report = bench::run_gerris_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("gerris", report.error());
    bench::print_gerris_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_gerris_json(report.value(), args->json); !w.ok()) return fail("gerris", w.error());
    exit_code() = report.value().failed ? kExitPartFailed : kExitOk;
  });
}

void add_dist(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("dist",
                                   "MPI jobs of jacobi-mpi (cairn::dist): collective against local commits, recovery "
                                   "from a killed or hung rank against file checkpoints, seed 001 Figs. 11-12");
  cmd->footer(
      "overhead: per --ranks and --levels, the loop time per iteration with nothing persisted, with local commits\n"
      "only (no agreement) and with the collective commit (goal: the collective adds at most 5 % to the local\n"
      "commit's overhead at 4 ranks). A level other than local is passed as --redundancy LEVEL --ranks-per-node K\n"
      "(n/a below two nodes). recovery: --job-ranks ranks under `cairn launch`, one SIGKILLed or\n"
      "SIGSTOPped by the bench half-way; seconds from the fault to the relaunched job's restored version, in-place\n"
      "against the file strategy (checkpoints in --file-dir); for the hang, the heartbeat's detection latency\n"
      "against --hang-timeout. timeout: seed 001 Eqs. 1-3 with this machine's T_checkpoint, T_restart, T_compute\n"
      "per strategy, at resiliency intervals 1 and 3. traffic: bytes a partner copy or XOR parity sends per commit\n"
      "and its cost against local, with all, 10 % or 1 % of the state changing (dist_worker of the build tree).\n"
      "octree: amr-mpi (the PM-octree partitioned by Morton ranges) per --ranks, nothing persisted against\n"
      "pm_persistent every step without and with the agreement.\n"
      "Ranks beyond the machine's cores are oversubscribed (noted).\n"
      "Interleaved rounds, medians of --repeats; every run of a size must end with the same checksum.\n"
      "Exit status: 0 measured, 1 some run failed or ended with another checksum, 2 bad option or error.");
  struct Args {
    bench::DistBenchOptions o;
    std::string experiments, ranks, levels, strategies, size, recovery_size, timeout_size, json;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--experiments", args->experiments,
                  "Comma-separated: overhead,recovery,timeout,traffic,octree (default all)");
  cmd->add_option("--ranks", args->ranks, "overhead: comma-separated rank counts (default 1,2,4,8)");
  cmd->add_option("--levels", args->levels,
                  "overhead: comma-separated redundancy levels local,partner,xor (default local)");
  cmd->add_option("--ranks-per-node", args->o.ranks_per_node, "Simulated node size passed with a level (default 1)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--strategy", args->o.strategy, "overhead: the persistence strategy (default in-place)");
  cmd->add_option("--size", args->size, "overhead: N:ITERATIONS of jacobi-mpi (default 512:300)");
  cmd->add_option("--job-ranks", args->o.job_ranks, "recovery and timeout: ranks of the job (default 4)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--recovery-size", args->recovery_size, "recovery: N:ITERATIONS (default 256:3000)");
  cmd->add_option("--hang-timeout", args->o.hang_timeout,
                  "recovery: cairn launch --timeout of the hang (default 0.5 s)")
      ->check(CLI::Range(0.05, 600.0));
  cmd->add_option("--file-dir", args->o.file_dir,
                  "recovery: directory of the file baseline's checkpoints (default: with in-place's, on /dev/shm)");
  cmd->add_option("--timeout-size", args->timeout_size, "timeout: N:ITERATIONS (default 1024:40)");
  cmd->add_option("--strategies", args->strategies,
                  "timeout: comma-separated strategies (default in-place,shadow,dram-cache,nt-copy,file)");
  cmd->add_option("--traffic-words", args->o.traffic_words, "traffic: 64-bit words of state per rank (default 1Mi)")
      ->check(CLI::Range(std::uint64_t{8192}, std::uint64_t{1} << 30));
  cmd->add_option("--traffic-iterations", args->o.traffic_iterations, "traffic: versions per job (default 40)")
      ->check(CLI::Range(4, 100000));
  cmd->add_option("--octree-level", args->o.octree_level, "octree: amr-mpi --size (default 5)")
      ->check(CLI::Range(2, 12));
  cmd->add_option("--octree-steps", args->o.octree_steps, "octree: steps per run (default 40)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--repeats,-r", args->o.repeats, "Rounds; medians are reported (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--dir", args->o.dir, "Directory of the ranks' storage (default /dev/shm)");
  cmd->add_option("--mpirun", args->o.mpirun, "The MPI launcher (default mpirun)");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::DistBenchOptions o = args->o;
    if (!args->experiments.empty()) o.experiments = bench::split_list(args->experiments);
    if (!args->levels.empty()) o.levels = bench::split_list(args->levels);
    if (!args->strategies.empty()) o.strategies = bench::split_list(args->strategies);
    if (!args->ranks.empty()) {
      o.ranks.clear();
      for (const auto& r : bench::split_list(args->ranks)) o.ranks.push_back(std::atoi(r.c_str()));
    }
    for (auto [text, what, size] : {std::tuple{&args->size, "--size", &o.size},
                                    std::tuple{&args->recovery_size, "--recovery-size", &o.recovery_size},
                                    std::tuple{&args->timeout_size, "--timeout-size", &o.timeout_size}}) {
      if (text->empty()) continue;
      auto s = bench::parse_dist_size(*text, what);
      if (!s.ok()) return fail("dist", s.error());
      *size = s.value();
    }
    // <build>/apps/jacobi-mpi/jacobi-mpi, <build>/src/dist/dist_worker, and this tool for `cairn launch`.
    o.jacobi_mpi = (apps_dir() / "jacobi-mpi" / "jacobi-mpi").string();
    o.dist_worker = (apps_dir().parent_path() / "src" / "dist" / "dist_worker").string();
    o.amr_mpi = (apps_dir() / "amr-mpi" / "amr-mpi").string();
    std::error_code ec;
    o.cairn = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) o.cairn = "cairn";
    auto report = bench::run_dist_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) return fail("dist", report.error());
    bench::print_dist_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = bench::write_dist_json(report.value(), args->json); !w.ok()) return fail("dist", w.error());
    exit_code() = report.value().failed ? kExitPartFailed : kExitOk;
  });
}

}  // namespace

void add_bench_commands(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Experiments: run one, print its table, optionally write JSON");
  bench->require_subcommand(1);
  add_device_bench(*bench);
  add_strategies(*bench);
  add_filesystems(*bench);
  add_checksums(*bench);
  add_overhead(*bench);
  add_placement(*bench);
  add_stream(*bench);
  add_streams(*bench);
  add_workflow(*bench);
  add_octree(*bench);
  add_amr(*bench);
  add_gerris(*bench);
  add_dist(*bench);
  bench::add_checkpoint_command(*bench);
}

}  // namespace cairn::tool
