// stream_bench.cpp — STREAM on DRAM and on pool memory, without and with persistence (see stream_bench.hpp).
#include "bench/stream_bench.hpp"

#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "bench/bench_util.hpp"
#include "cairn/extended/pool.hpp"
#include "cairn/extended/profile.hpp"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kAlign = 512;  // elements per split unit: 4 KiB, so no two threads share a page or a line
constexpr std::size_t kTile = 2048;  // elements per non-temporal tile (16 KiB, stays in L1/L2)
constexpr double kScalar = 3.0;      // STREAM's scalar
const char* const kKernels[4] = {"copy", "scale", "add", "triad"};
constexpr double kWords[4] = {2, 2, 3, 3};  // arrays touched per element

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Calls fn(thread, lo, hi) on `threads` threads (the caller is thread 0),
// each with the same static part of [0, n) every time.
void on_threads(unsigned threads, std::size_t n, const std::function<void(unsigned, std::size_t, std::size_t)>& fn) {
  const std::size_t units = (n + kAlign - 1) / kAlign;
  auto part = [&](unsigned t) {
    const std::size_t lo = std::min(n, units * t / threads * kAlign);
    const std::size_t hi = std::min(n, units * (t + 1) / threads * kAlign);
    if (lo < hi) fn(t, lo, hi);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(part, t);
  part(0);
  for (auto& th : pool) th.join();
}

// The three arrays and how their writes are made durable.
struct Arrays {
  double *a = nullptr, *b = nullptr, *c = nullptr;
  std::size_t n = 0;
  pool::Pool* pool = nullptr;  // null: DRAM
  std::string persistence = "none";
};

// dst[i] = f(i) for i in [lo, hi), the way `persistence` says.
template <class F>
void store(const Arrays& m, double* dst, std::size_t lo, std::size_t hi, F&& f) {
  if (m.persistence == "nt") {
    alignas(64) double tile[kTile];
    for (std::size_t i = lo; i < hi; i += kTile) {
      const std::size_t k = std::min(kTile, hi - i);
      for (std::size_t j = 0; j < k; ++j) tile[j] = f(i + j);
      m.pool->memcpy_nodrain(dst + i, tile, k * sizeof(double));
    }
    m.pool->drain();
    return;
  }
  for (std::size_t i = lo; i < hi; ++i) dst[i] = f(i);
  if (m.persistence == "flush") m.pool->persist(dst + lo, (hi - lo) * sizeof(double));
}

// One kernel on all threads; seconds.
double run_kernel(const Arrays& m, int kernel, unsigned threads) {
  double* const a = m.a;
  double* const b = m.b;
  double* const c = m.c;
  const auto t0 = Clock::now();
  on_threads(threads, m.n, [&](unsigned, std::size_t lo, std::size_t hi) {
    switch (kernel) {
      case 0: store(m, c, lo, hi, [=](std::size_t i) { return a[i]; }); break;
      case 1: store(m, b, lo, hi, [=](std::size_t i) { return kScalar * c[i]; }); break;
      case 2: store(m, c, lo, hi, [=](std::size_t i) { return a[i] + b[i]; }); break;
      default: store(m, a, lo, hi, [=](std::size_t i) { return b[i] + kScalar * c[i]; }); break;
    }
  });
  return seconds_since(t0);
}

// STREAM's check: the values every element must hold after `passes` passes.
bool check(const Arrays& m, int passes, unsigned threads) {
  double ea = 1.0, eb = 2.0, ec = 0.0;
  for (int k = 0; k < passes; ++k) {
    ec = ea;
    eb = kScalar * ec;
    ec = ea + eb;
    ea = eb + kScalar * ec;
  }
  std::vector<double> err(threads * 3, 0.0);
  on_threads(threads, m.n, [&](unsigned t, std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) {
      err[t * 3 + 0] += std::fabs(m.a[i] - ea);
      err[t * 3 + 1] += std::fabs(m.b[i] - eb);
      err[t * 3 + 2] += std::fabs(m.c[i] - ec);
    }
  });
  const double n = static_cast<double>(m.n);
  double sa = 0, sb = 0, sc = 0;
  for (unsigned t = 0; t < threads; ++t) sa += err[t * 3], sb += err[t * 3 + 1], sc += err[t * 3 + 2];
  return sa / n / std::fabs(ea) <= 1e-13 && sb / n / std::fabs(eb) <= 1e-13 && sc / n / std::fabs(ec) <= 1e-13;
}

// Initialises (first touch by the threads that will use each part), runs one
// untimed pass and `repeats` timed ones, checks, and fills the row.
void measure(const Arrays& m, unsigned threads, int repeats, StreamRow& row) {
  on_threads(threads, m.n, [&](unsigned, std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) m.a[i] = 1.0, m.b[i] = 2.0, m.c[i] = 0.0;
  });
  const double bytes = static_cast<double>(m.n) * sizeof(double);
  for (int k = 0; k < 4; ++k) run_kernel(m, k, threads);
  for (int rep = 0; rep < repeats; ++rep)
    for (int k = 0; k < 4; ++k) row.samples_gbps[k].push_back(kWords[k] * bytes / run_kernel(m, k, threads) / 1e9);
  for (int k = 0; k < 4; ++k) {
    row.median_gbps[k] = median(row.samples_gbps[k]);
    row.best_gbps[k] = *std::max_element(row.samples_gbps[k].begin(), row.samples_gbps[k].end());
  }
  row.valid = check(m, 1 + repeats, threads);
  if (!row.valid) row.error = "the arrays do not hold STREAM's expected values";
}

struct Mapping {
  void* p = MAP_FAILED;
  std::size_t n = 0;
  ~Mapping() {
    if (p != MAP_FAILED) ::munmap(p, n);
  }
};

}  // namespace

std::size_t last_level_cache_bytes() {
  std::size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string d = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lv(d + "level"), sz(d + "size");
    int level = 0;
    std::string size;
    if (!(lv >> level) || !(sz >> size) || size.empty()) continue;
    std::size_t v = std::strtoull(size.c_str(), nullptr, 10);
    if (size.back() == 'K') v <<= 10;
    if (size.back() == 'M') v <<= 20;
    if (level > best_level || (level == best_level && v > best)) best = v, best_level = level;
  }
  return best;
}

Result<StreamReport> run_stream_bench(const StreamBenchOptions& opt, std::ostream* log) {
  const auto t_start = Clock::now();
  if (opt.repeats < 1) return make_error(Errc::invalid_argument, "--repeats must be at least 1");
  for (const auto& p : opt.profiles)
    if (auto parsed = devices::parse_profile(p); !parsed.ok()) return parsed.error();
  StreamReport r;
  r.cpu_model = cpu_model();
  r.date = utc_now();
  r.nproc = std::max(1u, std::thread::hardware_concurrency());
  r.threads = opt.threads ? opt.threads : r.nproc;
  r.repeats = opt.repeats;
  r.llc_bytes = last_level_cache_bytes();
  r.array_bytes = opt.array_bytes ? opt.array_bytes : std::max<std::size_t>(4 * r.llc_bytes, 64 * kMiB);
  r.array_bytes = (r.array_bytes + 4095) / 4096 * 4096;
  if (r.array_bytes < 4096) return make_error(Errc::invalid_argument, "--size must be at least 4K");
  r.elements = r.array_bytes / sizeof(double);
  r.dir = opt.dir.empty() ? pool::default_pool_dir() : opt.dir;
  r.load_before = load_average();
  for (const auto& p : opt.profiles)
    if (auto parsed = devices::parse_profile(p); parsed.ok())
      r.profile_notes.push_back(p + ": " + parsed.value().describe());

  {  // DRAM, the baseline.
    StreamRow row;
    row.memory = "DRAM";
    row.persistence = "none";
    Mapping map;
    map.n = 3 * r.array_bytes;
    map.p = ::mmap(nullptr, map.n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map.p == MAP_FAILED)
      return make_error(Errc::out_of_space, "cannot map " + std::to_string(map.n) + " bytes of DRAM for the arrays: " +
                                                std::strerror(errno) + "; choose a smaller --size");
    auto* base = static_cast<double*>(map.p);
    Arrays m{base, base + r.elements, base + 2 * r.elements, r.elements, nullptr, "none"};
    if (log) *log << "DRAM: " << r.threads << " threads, 3 x " << r.array_bytes / kMiB << " MiB" << std::endl;
    measure(m, r.threads, r.repeats, row);
    r.rows.push_back(std::move(row));
  }

  std::error_code ec;
  std::filesystem::create_directories(r.dir, ec);
  struct statfs fs {};
  r.tmpfs = ::statfs(r.dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  for (const auto& profile : opt.profiles) {
    const std::string path = r.dir + "/stream-bench-" + std::to_string(::getpid()) + ".pool";
    std::filesystem::remove(path, ec);
    std::unique_ptr<pool::Pool> p;
    std::string why;
    if (auto device = devices::make_device(profile); !device.ok()) {
      why = device.error().message;
    } else {
      pool::CreateOptions co;
      co.size = pool::kArenaOffset + 3 * r.array_bytes + kMiB;
      co.device = std::move(device.value());
      if (log) *log << "pool (" << profile << "): creating " << co.size / kMiB << " MiB in " << r.dir << std::endl;
      auto created = pool::Pool::create(path, std::move(co));
      if (created.ok())
        p = std::move(created.value());
      else
        why = created.error().message;
    }
    for (const char* persistence : {"none", "flush", "nt"}) {
      StreamRow row;
      row.memory = "pool";
      row.profile = profile;
      row.persistence = persistence;
      if (!p) {
        row.error = "cannot create the pool: " + why;
      } else {
        auto* base = reinterpret_cast<double*>(p->at(pool::kArenaOffset));
        Arrays m{base, base + r.elements, base + 2 * r.elements, r.elements, p.get(), persistence};
        if (log) *log << "pool (" << profile << "), persistence " << persistence << std::endl;
        measure(m, r.threads, r.repeats, row);
      }
      if (!row.error.empty()) ++r.failed;
      r.rows.push_back(std::move(row));
    }
    p.reset();
    std::filesystem::remove(path, ec);
  }
  if (!r.rows.front().valid) ++r.failed;
  for (auto& row : r.rows)
    for (int k = 0; k < 4; ++k)
      row.vs_dram[k] = r.rows.front().median_gbps[k] > 0 ? row.median_gbps[k] / r.rows.front().median_gbps[k] : 0;
  r.load_after = load_average();
  r.elapsed_s = seconds_since(t_start);
  return r;
}

void print_stream_report(const StreamReport& r, std::ostream& out) {
  out << "Machine: " << r.cpu_model << ", " << r.nproc << " hardware threads; " << r.date << "\n"
      << "STREAM: 3 arrays of " << r.elements << " doubles (" << r.array_bytes / kMiB << " MiB each; last-level cache "
      << r.llc_bytes / kMiB << " MiB); " << r.threads << " threads; medians of " << r.repeats
      << " passes after one untimed pass (best in the JSON); pools in " << r.dir << "\n"
      << "Load average " << fmt("%.2f", r.load_before) << " before, " << fmt("%.2f", r.load_after)
      << " after; run time " << fmt("%.0f", r.elapsed_s) << " s\n";
  for (const auto& n : r.profile_notes) out << "Profile " << n << "\n";
  out << "\nGB/s (ratio to DRAM)\n\n| memory | profile | persistence after each kernel | copy | scale | add | triad | "
         "checked |\n|---|---|---|--:|--:|--:|--:|---|\n";
  for (const auto& row : r.rows) {
    const std::string what = row.persistence == "none"    ? "none"
                             : row.persistence == "flush" ? "flush the written array + fence"
                                                          : "non-temporal stores + fence";
    out << "| " << row.memory << " | " << (row.profile.empty() ? "-" : row.profile) << " | " << what << " |";
    if (!row.error.empty() && row.samples_gbps[0].empty()) {
      out << " FAILED: " << row.error << " | | | | |\n";
      continue;
    }
    for (int k = 0; k < 4; ++k) {
      out << " " << fmt("%.2f", row.median_gbps[k]);
      if (&row != &r.rows.front()) out << " (" << fmt("%.2f", row.vs_dram[k]) << ")";
      out << " |";
    }
    out << " " << (row.valid ? "ok" : "FAILED") << " |\n";
  }
  out << "\nSeed 003 (STREAM on Optane DCPMM, App Direct, per node): DRAM median 150 GB/s, DCPMM 32 GB/s (0.21x).\n"
      << "Notes: bytes are counted as STREAM does (copy and scale 16 per element, add and triad 24). The pool is a "
         "file in "
      << r.dir << (r.tmpfs ? " (tmpfs: DRAM pages)" : "")
      << ". The emulated device charges the flushes and non-temporal stores (write bandwidth, write latency), not "
         "ordinary loads and stores, so 'none' measures pool pages at the speed of the memory behind them and the "
         "profile shows only in the persisting rows.\n";
  if (r.failed) out << r.failed << " configuration(s) FAILED (see the table).\n";
}

Result<void> write_stream_json(const StreamReport& r, const std::string& path) {
  Json rows = Json::array();
  for (const auto& row : r.rows)
    for (int k = 0; k < 4; ++k)
      rows.push_back({{"memory", row.memory},
                      {"profile", row.profile},
                      {"persistence", row.persistence},
                      {"kernel", kKernels[k]},
                      {"median_gbps", row.median_gbps[k]},
                      {"best_gbps", row.best_gbps[k]},
                      {"vs_dram", row.vs_dram[k]},
                      {"valid", row.valid},
                      {"error", row.error},
                      {"samples_gbps", row.samples_gbps[k]}});
  const Json doc = {{"benchmark", "stream"},    {"cpu_model", r.cpu_model},     {"date", r.date},
                    {"nproc", r.nproc},         {"threads", r.threads},         {"repeats", r.repeats},
                    {"llc_bytes", r.llc_bytes}, {"array_bytes", r.array_bytes}, {"elements", r.elements},
                    {"pool_dir", r.dir},        {"load_before", r.load_before}, {"load_after", r.load_after},
                    {"elapsed_s", r.elapsed_s}, {"failed", r.failed},           {"rows", rows}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench
