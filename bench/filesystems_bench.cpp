// filesystems_bench.cpp — see filesystems_bench.hpp.
#include "bench/filesystems_bench.hpp"

#include <fcntl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/bench_util.hpp"
#include "cairn/extended/pool.hpp"
#include "cairn/octree.hpp"
#include "cairn/stream.hpp"
#include "util/io.hpp"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
constexpr double kMiB = 1024.0 * 1024.0;

// The flush mode a pool in `dir` resolves to (a small pool made and removed).
std::string flush_mode_in(const std::string& dir) {
  const std::string path = dir + "/fsbench-probe.pool";
  std::filesystem::remove(path);
  pool::CreateOptions o;
  o.size = 1u << 20;
  auto p = pool::Pool::create(path, std::move(o));
  if (!p.ok()) return "? (" + p.error().message + ")";
  const std::string mode = devices::flush_mode_name(p.value()->flush_mode());
  p.value().reset();
  std::filesystem::remove(path);
  return mode;
}

// pwrite of `size` bytes over an existing file, then fdatasync: median seconds.
Result<double> measure_raw(const std::string& dir, std::size_t size, int repeats) {
  const std::string path = dir + "/fsbench-raw.dat";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return util::errno_error(path, "open", errno);
  std::vector<std::byte> buf(size, std::byte{1});
  std::vector<double> samples;
  int err = posix_fallocate(fd, 0, static_cast<off_t>(size));
  for (int i = -1; i < repeats && err == 0; ++i) {  // i = -1: the first write, untimed
    std::memset(buf.data(), i + 2, size);
    const auto t0 = Clock::now();
    if ((err = util::pwrite_full(fd, buf.data(), size, 0)) != 0) break;
    if (::fdatasync(fd) != 0) {
      err = errno;
      break;
    }
    if (i >= 0) samples.push_back(seconds_since(t0));
  }
  ::close(fd);
  std::filesystem::remove(path);
  if (err != 0) return util::errno_error(path, "writing the raw baseline", err);
  return median(samples);
}

LayerRow failed_row(const std::string& what, const Error& e) {
  LayerRow r;
  r.what = what;
  r.status = "failed";
  r.reason = e.message;
  return r;
}

// A pmem: stream of `size` bytes written and committed (open, fwrite, close).
LayerRow measure_stream(const std::string& dir, std::size_t size, int repeats) {
  LayerRow row;
  row.what = "stream commit";
  const std::string pool_path = dir + "/fsbench-streams.pool";
  std::filesystem::remove(pool_path);
  const std::string uri = "pmem:" + pool_path + "#state";
  std::vector<char> buf(size);
  std::vector<double> samples;
  stream::OpenOptions so;
  so.size_hint = size;
  so.pool_size = 4 * size + (64u << 20);
  for (int i = -2; i < repeats; ++i) {  // two untimed commits: the pool's creation and first extents
    std::memset(buf.data(), 'a' + (i + 2) % 26, size);
    const auto t0 = Clock::now();
    auto s = stream::Stream::open(uri, stream::Mode::write, so);
    if (!s.ok()) return failed_row(row.what, s.error());
    if (std::fwrite(buf.data(), 1, size, s.value()->file()) != size)
      return failed_row(row.what, Error{Errc::io_error, "fwrite into " + uri + " failed"});
    if (auto c = s.value()->close(); !c.ok()) return failed_row(row.what, c.error());
    if (i >= 0) samples.push_back(seconds_since(t0));
  }
  std::filesystem::remove(pool_path);
  row.seconds = median(samples);
  row.bytes = static_cast<double>(size);
  return row;
}

// A PM-octree of 64-byte payloads with about `size` bytes of leaves: its
// first persist, then persists after 1 % of the leaves changed.
std::vector<LayerRow> measure_octree(const std::string& dir, std::size_t size, int repeats) {
  constexpr std::uint32_t kPayload = 64;
  int level = 2;
  while (std::pow(8.0, level + 1) * kPayload <= static_cast<double>(size)) ++level;
  const auto leaves = static_cast<std::uint64_t>(std::pow(8.0, level));
  const std::string tag = " (" + std::to_string(leaves) + " leaves)";
  const std::string path = dir + "/fsbench-octree.pool";
  std::filesystem::remove(path);
  octree::Options o;
  o.dims = 3;
  o.data_size = kPayload;
  o.pool_size = 16 * leaves * kPayload + (256u << 20);
  auto made = octree::Octree::create(path, o);
  if (!made.ok()) return {failed_row("octree persist" + tag, made.error())};
  octree::Octree& t = *made.value();
  auto refined = t.refine(
      true, [&](const octree::Octant& oc, const std::byte*) { return oc.level < level; },
      [](const octree::Octant&, std::byte* d, const std::byte*) { std::memset(d, 1, kPayload); }, level);
  if (!refined.ok()) return {failed_row("octree persist" + tag, refined.error())};
  LayerRow full;
  full.what = "octree persist, every block" + tag;
  auto first = t.persist();
  if (!first.ok()) return {failed_row(full.what, first.error())};
  full.seconds = first.value().seconds;
  full.bytes = static_cast<double>(first.value().bytes_written);
  LayerRow part;
  part.what = "octree persist, 1 % of leaves changed" + tag;
  std::vector<double> secs, bytes;
  for (int i = 0; i < repeats; ++i) {
    std::uint64_t n = 0;
    auto u = t.update_leaves([&](const octree::Octant&, std::byte* d) {
      if (n++ % 100 != static_cast<std::uint64_t>(i)) return false;
      d[0] = static_cast<std::byte>(static_cast<int>(d[0]) + 1);
      return true;
    });
    if (!u.ok()) return {failed_row(part.what, u.error())};
    auto p = t.persist();
    if (!p.ok()) return {failed_row(part.what, p.error())};
    secs.push_back(p.value().seconds);
    bytes.push_back(static_cast<double>(p.value().bytes_written));
  }
  made.value().reset();
  std::filesystem::remove(path);
  part.seconds = median(secs);
  part.bytes = median(bytes);
  return {full, part};
}

const StrategyRow* row_of(const StrategiesReport& r, const std::string& strategy) {
  for (const auto& w : r.rows)
    if (w.strategy == strategy && w.status == "ok") return &w;
  return nullptr;
}

}  // namespace

Result<FilesystemsReport> run_filesystems_bench(const FilesystemsBenchOptions& options, std::ostream* log) {
  if (options.dirs.empty())
    return make_error(Errc::invalid_argument, "give at least one directory (--dirs), one per file system to measure");
  if (options.sizes.empty()) return make_error(Errc::invalid_argument, "give at least one state size (--sizes)");
  FilesystemsReport report;
  report.cpu_model = cpu_model();
  report.date = utc_now();
  report.nproc = std::thread::hardware_concurrency();
  report.repeats = options.repeats;
  report.load_before = load_average();
  const auto t0 = Clock::now();
  for (const std::string& dir : options.dirs) {
    if (auto made = create_bench_dir(dir); !made.ok()) return std::move(made).error();
    for (const std::size_t size : options.sizes) {
      FilesystemRun run;
      run.dir = dir;
      run.size = size;
      run.fs_type = fs_type_name(dir);
      run.flush_mode = flush_mode_in(dir);
      if (log) *log << dir << " (" << run.fs_type << ", " << run.flush_mode << "), " << size / (1u << 20) << " MiB\n";
      auto raw = measure_raw(dir, size, options.repeats);
      if (!raw.ok()) return std::move(raw).error();
      run.raw_s = raw.value();
      run.raw_bw = static_cast<double>(size) / run.raw_s;
      StrategiesBenchOptions so;
      so.dir = dir;
      so.size = size;
      so.threads = options.threads;
      so.repeats = options.repeats;
      so.strategies = options.strategies;
      so.profiles = {"real"};
      auto sr = run_strategies_bench(so, log);
      if (!sr.ok()) return std::move(sr).error();
      run.strategies = std::move(sr.value());
      if (log) *log << "  stream and octree\n";
      run.layers.push_back(measure_stream(dir, size, options.repeats));
      for (auto& r : measure_octree(dir, size, options.repeats)) run.layers.push_back(std::move(r));
      for (LayerRow& l : run.layers) {
        if (l.status != "ok" || l.bytes <= 0) continue;
        const auto pages = (static_cast<std::size_t>(l.bytes) + 4095) / 4096;
        auto same = measure_raw(dir, pages * 4096, options.repeats);
        if (!same.ok()) return std::move(same).error();
        l.raw_s = same.value();
        l.vs_raw = l.seconds / l.raw_s;
      }
      report.runs.push_back(std::move(run));
    }
  }
  report.elapsed_s = seconds_since(t0);
  report.load_after = load_average();
  return report;
}

void print_filesystems_report(const FilesystemsReport& report, std::ostream& out) {
  out << "# cairn bench filesystems\n\n"
      << report.cpu_model << ", " << report.nproc << " hardware threads; " << report.date << "; medians of "
      << report.repeats << "; load " << fmt("%.2f", report.load_before) << " before, " << fmt("%.2f", report.load_after)
      << " after; " << fmt("%.0f", report.elapsed_s) << " s\n";
  for (const FilesystemRun& run : report.runs) {
    const StrategyRow* file = row_of(run.strategies, "file");
    out << "\n## " << run.dir << ": " << run.fs_type << ", flush mode " << run.flush_mode << ", state "
        << fmt("%.0f", static_cast<double>(run.size) / kMiB) << " MiB\n\n"
        << "raw write + fdatasync: " << fmt("%.2f", run.raw_s * 1e3) << " ms, " << fmt("%.0f", run.raw_bw / kMiB)
        << " MiB/s (the physical limit)\n\n"
        << "| strategy | commit ms | vs file | % of raw bandwidth | syncs / commit | MiB written back / commit | "
           "restore ms |\n|---|--:|--:|--:|--:|--:|--:|\n";
    for (const StrategyRow& w : run.strategies.rows) {
      if (w.status != "ok") {
        out << "| " << w.strategy << " | " << w.status << ": " << w.reason << " | | | | | |\n";
        continue;
      }
      const double pct = 100.0 * (static_cast<double>(run.size) / w.commit_s) / run.raw_bw;
      const double written = w.synced_per_commit > 0 ? w.synced_per_commit : w.nvm_per_commit;
      out << "| " << w.strategy << " | " << fmt("%.2f", w.commit_s * 1e3) << " | "
          << (file ? fmt("%.2fx", w.commit_s / file->commit_s) : std::string("-")) << " | " << fmt("%.0f", pct) << " | "
          << fmt("%.1f", w.syncs_per_commit) << " | " << fmt("%.2f", written / kMiB) << " | "
          << fmt("%.3f", w.restore_s * 1e3) << " |\n";
    }
    out << "\n| layer | ms | MiB written | raw write + fdatasync of those bytes, ms | ratio |\n|---|--:|--:|--:|--:|\n";
    for (const LayerRow& l : run.layers) {
      if (l.status != "ok") {
        out << "| " << l.what << " | failed: " << l.reason << " | | | |\n";
        continue;
      }
      out << "| " << l.what << " | " << fmt("%.2f", l.seconds * 1e3) << " | " << fmt("%.2f", l.bytes / kMiB) << " | "
          << fmt("%.2f", l.raw_s * 1e3) << " | " << fmt("%.2fx", l.vs_raw) << " |\n";
    }
  }
  out << "\nvs file: the strategy's commit time over the file strategy's (issue 39: at most 1x on a page-cache\n"
         "file system, in-place the fastest). % of raw bandwidth: the state's bytes per commit second against\n"
         "raw write + fdatasync of the same bytes in the same directory (goal >= 50 % from 64 MiB). Syncs: msync,\n"
         "sync_file_range, fdatasync and fsync calls. Layers: time over raw write + fdatasync of the same\n"
         "bytes in the same directory (goal <= 2x).\n";
}

Result<void> write_filesystems_json(const FilesystemsReport& report, const std::string& path) {
  Json runs = Json::array();
  for (const FilesystemRun& run : report.runs) {
    Json strategies = Json::array();
    for (const StrategyRow& w : run.strategies.rows) {
      Json commits_ms = Json::array();
      for (const double s : w.commit_samples) commits_ms.push_back(s * 1e3);
      strategies.push_back({{"strategy", w.strategy},
                            {"status", w.status},
                            {"commit_ms", w.commit_s * 1e3},
                            {"restore_ms", w.restore_s * 1e3},
                            {"syncs_per_commit", w.syncs_per_commit},
                            {"synced_bytes_per_commit", w.synced_per_commit},
                            {"nvm_bytes_per_commit", w.nvm_per_commit},
                            {"commit_samples_ms", commits_ms}});
    }
    Json layers = Json::array();
    for (const LayerRow& l : run.layers)
      layers.push_back({{"what", l.what},
                        {"status", l.status},
                        {"ms", l.seconds * 1e3},
                        {"bytes", l.bytes},
                        {"raw_ms", l.raw_s * 1e3},
                        {"vs_raw", l.vs_raw}});
    runs.push_back({{"dir", run.dir},
                    {"fs", run.fs_type},
                    {"flush_mode", run.flush_mode},
                    {"size", run.size},
                    {"raw_ms", run.raw_s * 1e3},
                    {"raw_bytes_per_s", run.raw_bw},
                    {"strategies", strategies},
                    {"layers", layers}});
  }
  const Json doc = {{"benchmark", "filesystems"},
                    {"cpu", report.cpu_model},
                    {"date", report.date},
                    {"repeats", report.repeats},
                    {"load_before", report.load_before},
                    {"load_after", report.load_after},
                    {"runs", runs}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench
