// device_bench.cpp — measures the device primitives and the emulation fidelity (see device_bench.hpp).
#include "bench/device_bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "bench/bench_util.hpp"
#include "cairn/extended/pool.hpp"
#include "cairn/extended/profile.hpp"
#include "util/thread_pool.hpp"

namespace cairn::bench {

using devices::Device;
using devices::Profile;

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGB = 1e9;
constexpr std::size_t kMiB = 1u << 20;
constexpr std::size_t kFlushLines = 4096;  // 256 KiB: stays in L2, so flush cost is not a cache miss
constexpr int kDrainCalls = 4000;
constexpr int kReadCalls = 4000;
// Numbers that exercise every mechanism, drain included (no named profile
// charges drains).
constexpr const char* kNumericProfile = "write_ns=300,drain_ns=500,write_gbps=1,read_ns=200,read_gbps=2";

double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Times samples on a machine shared with other work. A sample during which
// this process did not hold its `threads` CPUs (the scheduler ran someone
// else) measures the machine's load, not the code: such a sample is run again,
// up to kTries times, and the least disturbed one is kept. Preemption only
// ever makes a sample slower, so this removes noise, not signal.
class Meter {
 public:
  static constexpr int kTries = 12;

  template <class Setup, class F>
  double seconds(unsigned threads, Setup&& setup, F&& fn) {
    const double want = threads > 1 ? 0.90 : 0.95;  // hand-offs to workers cost a little CPU share
    double best_share = -1, best_s = 0;
    for (int t = 0; t < kTries; ++t) {
      setup();
      const double c0 = cpu_seconds();
      const auto t0 = Clock::now();
      fn();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      const double share = s > 0 ? (cpu_seconds() - c0) / (s * threads) : 1;
      if (share > best_share) best_share = share, best_s = s;
      if (share >= want) break;
      ++retried_;
    }
    ++samples_;
    if (best_share < want) ++disturbed_;
    return best_s;
  }
  template <class F>
  double seconds(unsigned threads, F&& fn) {
    return seconds(
        threads, [] {}, std::forward<F>(fn));
  }

  int samples_ = 0, retried_ = 0, disturbed_ = 0;
};

// A pool file that is removed when the scratch pool goes away.
struct Scratch {
  std::string path;
  std::unique_ptr<pool::Pool> pool;
  ~Scratch() {
    pool.reset();
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove(path, ec);
  }
  std::byte* buffer() const { return pool->at(pool::kArenaOffset); }
};

Result<std::unique_ptr<Scratch>> make_scratch(const std::string& dir, const std::string& name, std::size_t bytes) {
  auto s = std::make_unique<Scratch>();
  s->path = dir + "/device-bench-" + std::to_string(::getpid()) + "-" + name + ".pool";
  std::error_code ec;
  std::filesystem::remove(s->path, ec);  // a leftover of a killed run
  pool::CreateOptions o;
  o.size = pool::kArenaOffset + bytes + kMiB;
  o.device = devices::make_real_device();
  auto p = pool::Pool::create(s->path, std::move(o));
  if (!p.ok()) {
    s->path.clear();  // create removes its temporary; the path was never ours
    return std::move(p).error();
  }
  s->pool = std::move(p.value());
  std::memset(s->buffer(), 0, bytes);  // fault the pages in before timing
  return s;
}

// Seconds to flush kFlushLines freshly written lines one call each (the
// writes before and the drain after are outside the timing).
double time_flush_lines(Meter& meter, pool::Pool& p, std::byte* buf, int pass) {
  const double s = meter.seconds(
      1,
      [&] {
        p.drain();
        std::memset(buf, pass & 0xff, kFlushLines * 64);
      },
      [&] {
        for (std::size_t i = 0; i < kFlushLines; ++i) p.flush(buf + i * 64, 64);
      });
  p.drain();
  return s;
}

double time_drains(Meter& meter, pool::Pool& p) {
  return meter.seconds(1, [&] {
    for (int i = 0; i < kDrainCalls; ++i) p.drain();
  });
}

double time_random_reads(Meter& meter, Device& d) {
  return meter.seconds(1, [&] {
    for (int i = 0; i < kReadCalls; ++i) d.read_charge(64, false);
  });
}

// Bandwidth samples copy in chunks of this size: many crossings of the
// token bucket per sample.
constexpr std::size_t kChunk = 256u << 10;

// Bytes for a bandwidth test at `bw` bytes/s: about 5 ms of device time
// (short, so that on a busy machine some samples see no preemption), whole
// chunks, between 1 MiB and the buffer size.
std::size_t bw_bytes(double bw, std::size_t cap) {
  auto n = static_cast<std::size_t>(bw * 0.005) / kChunk * kChunk;
  return std::clamp<std::size_t>(n, std::min<std::size_t>(kMiB, cap), cap);
}

Result<void> run_primitives(const DeviceBenchOptions& opt, unsigned threads, Scratch& real, const std::byte* src,
                            DeviceBenchReport& r, Meter& meter, std::ostream* log) {
  pool::Pool& p = *real.pool;
  std::byte* dst = real.buffer();
  const std::size_t n = opt.size;
  std::map<std::string, std::vector<double>> m;
  for (int rep = 0; rep < opt.reps; ++rep) {
    if (log) *log << "primitives: repetition " << rep + 1 << "/" << opt.reps << "\n";
    // Every rep runs every operation, so slow phases of a shared machine hit
    // the baseline and the operations alike.
    m["memcpy1"].push_back(n / meter.seconds(1, [&] { std::memcpy(dst, src, n); }));
    m["memcpyT"].push_back(n / meter.seconds(threads, [&] {
      util::parallel_ranges(n, threads,
                            [&](std::size_t off, std::size_t len) { std::memcpy(dst + off, src + off, len); });
    }));
    m["nt1"].push_back(n / meter.seconds(1, [&] { p.memcpy_persist(dst, src, n); }));
    m["ntT"].push_back(n / meter.seconds(threads, [&] { p.memcpy_persist_mt(dst, src, n, threads); }));
    m["cp+persist"].push_back(n / meter.seconds(1, [&] {
      std::memcpy(dst, src, n);
      p.persist(dst, n);
    }));
    m["persist1"].push_back(n / meter.seconds(
                                    1, [&] { std::memset(dst, rep, n); }, [&] { p.persist(dst, n); }));
    m["persistT"].push_back(
        n / meter.seconds(
                threads, [&] { std::memset(dst, rep + 1, n); }, [&] { p.persist_mt(dst, n, threads); }));
    m["flush"].push_back(time_flush_lines(meter, p, dst, rep) * 1e9 / kFlushLines);
    m["persist-line"].push_back(1e9 / kFlushLines * meter.seconds(1, [&] {
      for (std::size_t i = 0; i < kFlushLines; ++i) {
        dst[i * 64] = static_cast<std::byte>(i);
        p.persist(dst + i * 64, 64);
      }
    }));
    m["drain"].push_back(time_drains(meter, p) * 1e9 / kDrainCalls);
  }
  const double mc1 = median(m["memcpy1"]), mcT = median(m["memcpyT"]);
  const double line_copy_ns = 64 / mc1 * 1e9;  // time memcpy takes for one line's worth of bytes
  auto bw_row = [&](const char* op, unsigned t, const char* key, double base) {
    const double v = median(m[key]);
    r.primitives.push_back({op, t, v / kGB, "GB/s", v / base});
  };
  auto ns_row = [&](const char* op, const char* key, bool per_line) {
    const double v = median(m[key]);
    r.primitives.push_back({op, 1, v, per_line ? "ns/line" : "ns", per_line ? v / line_copy_ns : 0});
  };
  bw_row("memcpy into the pool (baseline)", 1, "memcpy1", mc1);
  bw_row("memcpy into the pool (baseline)", threads, "memcpyT", mcT);
  bw_row("non-temporal copy + drain (memcpy_persist)", 1, "nt1", mc1);
  bw_row("non-temporal copy + drain (memcpy_persist_mt)", threads, "ntT", mcT);
  bw_row("memcpy, then persist", 1, "cp+persist", mc1);
  bw_row("persist a written buffer (flush + drain)", 1, "persist1", mc1);
  bw_row("persist a written buffer (persist_mt)", threads, "persistT", mcT);
  ns_row("flush, one dirty line per call", "flush", true);
  ns_row("store + persist one line", "persist-line", true);
  ns_row("drain, nothing pending", "drain", false);

  const std::pair<const char*, const char*> copies[] = {
      {"memcpy1", "memcpy, 1 thread"},
      {"memcpyT", "memcpy, N threads"},
      {"nt1", "non-temporal copy, 1 thread"},
      {"ntT", "non-temporal copy, N threads"},
  };
  for (const auto& [key, what] : copies) {
    const double v = median(m[key]);
    if (v > r.best_copy_bw) {
      r.best_copy_bw = v;
      r.best_copy_what = what;
    }
  }
  r.nt_mt_bw = median(m["ntT"]);
  return {};
}

Result<void> run_fidelity(const DeviceBenchOptions& opt, unsigned threads, Scratch& real, const std::byte* src,
                          DeviceBenchReport& r, Meter& meter, std::ostream* log) {
  std::vector<std::string> specs = opt.profiles;
  if (specs.empty()) {
    specs = devices::profile_names();
    specs.emplace_back(kNumericProfile);
  }
  // One more pool file that each profile's emulated device opens in turn.
  auto emu_file = make_scratch(opt.dir, "emulated", opt.size);
  if (!emu_file.ok()) return std::move(emu_file).error();
  Scratch& emu = *emu_file.value();
  emu.pool.reset();  // closed; reopened below with each emulated device

  for (const auto& spec : specs) {
    auto parsed = devices::parse_profile(spec);
    if (!parsed.ok()) return std::move(parsed).error();
    const Profile prof = parsed.value();
    if (log) *log << "fidelity: " << prof.name << "\n";
    pool::OpenOptions oo;
    oo.device = make_emulated_device(prof);
    auto opened = pool::Pool::open(emu.path, std::move(oo));
    if (!opened.ok()) return std::move(opened).error();
    emu.pool = std::move(opened.value());
    pool::Pool& e = *emu.pool;
    std::byte* edst = emu.buffer();
    std::byte* rdst = real.buffer();
    std::memset(edst, 0, opt.size);  // fault the pages in before timing

    const bool lat = prof.write_ns > 0 || !prof.injects_delay();
    const std::size_t wn = prof.write_bw > 0 ? bw_bytes(prof.write_bw, opt.size) : 0;
    const std::size_t rn = prof.read_bw > 0 ? bw_bytes(prof.read_bw, 1u << 30) : 0;
    std::vector<double> flush, drain, w1, wT, rlat, rbw;
    for (int rep = 0; rep < opt.reps; ++rep) {
      // Extra latencies are the emulated time minus the real device's time
      // for the same calls, measured back to back; which goes first
      // alternates so that neither always follows the other's write-backs.
      const bool real_first = rep % 2 == 0;
      // Each side is the best of three (undisturbed) runs.
      auto pair = [&](auto&& run_real, auto&& run_emu) {
        double tr = 1e300, te = 1e300;
        for (int k = 0; k < 3; ++k) {
          if (real_first) tr = std::min(tr, run_real());
          te = std::min(te, run_emu());
          if (!real_first) tr = std::min(tr, run_real());
        }
        return te - tr;
      };
      if (lat) {
        flush.push_back(pair([&] { return time_flush_lines(meter, *real.pool, rdst, rep); },
                             [&] { return time_flush_lines(meter, e, edst, rep); }) *
                        1e9 / kFlushLines);
      }
      if (prof.drain_ns > 0) {
        drain.push_back(pair([&] { return time_drains(meter, *real.pool); }, [&] { return time_drains(meter, e); }) *
                        1e9 / kDrainCalls);
      }
      if (wn > 0) {
        // One thread, copies of kChunk: the bucket is crossed many times.
        w1.push_back(wn / meter.seconds(1, [&] {
          for (std::size_t off = 0; off < wn; off += kChunk) e.memcpy_nodrain(edst + off, src + off, kChunk);
          e.drain();
        }));
        // The threads share one bucket: each copies its part at DRAM speed,
        // then waits for its slot, so together they need little more than
        // one CPU; ask the meter for one.
        if (threads > 1) wT.push_back(wn / meter.seconds(1, [&] { e.memcpy_persist_mt(edst, src, wn, threads); }));
      }
      if (prof.read_ns > 0) {
        rlat.push_back(pair([&] { return time_random_reads(meter, real.pool->device()); },
                            [&] { return time_random_reads(meter, e.device()); }) *
                       1e9 / kReadCalls);
      }
      if (rn > 0) {
        rbw.push_back(rn / meter.seconds(1, [&] {
          for (std::size_t off = 0; off < rn; off += kChunk) e.device().read_charge(kChunk, true);
        }));
      }
    }
    auto row = [&](const std::string& metric, double req, const std::vector<double>& v) {
      if (!v.empty()) r.fidelity.push_back({prof.name, metric, req, median(v)});
    };
    row("flush extra ns/line", prof.write_ns, flush);
    row("drain extra ns", prof.drain_ns, drain);
    row("write GB/s, nt copy 1 thread", prof.write_bw / kGB, [&] {
      for (auto& x : w1) x /= kGB;
      return w1;
    }());
    row("write GB/s, nt copy " + std::to_string(threads) + " threads", prof.write_bw / kGB, [&] {
      for (auto& x : wT) x /= kGB;
      return wT;
    }());
    row("read extra ns/line, random", prof.read_ns, rlat);
    row("read GB/s, sequential", prof.read_bw / kGB, [&] {
      for (auto& x : rbw) x /= kGB;
      return rbw;
    }());
    emu.pool.reset();
  }
  return {};
}

}  // namespace

bool DeviceBenchReport::fidelity_ok() const {
  for (const auto& f : fidelity)
    if (f.requested != 0 && std::abs(f.error_pct()) > 10.0) return false;
  return true;
}

Result<DeviceBenchReport> run_device_bench(const DeviceBenchOptions& in, std::ostream* log) {
  DeviceBenchOptions opt = in;
  if (opt.dir.empty()) opt.dir = pool::default_pool_dir();
  if (opt.size < 4 * kMiB || opt.size % kMiB != 0)
    return make_error(Errc::invalid_argument, "benchmark buffer size " + std::to_string(opt.size) +
                                                  " bytes: give a whole number of MiB, at least 4 MiB");
  if (opt.reps < 1) return make_error(Errc::invalid_argument, "repetitions must be at least 1");
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = opt.threads ? opt.threads : hw;

  if (auto made = create_bench_dir(opt.dir); !made.ok()) return std::move(made).error();

  DeviceBenchReport r;
  r.cpu_model = cpu_model();
  r.date = utc_now();
  r.pool_dir = opt.dir;
  r.nproc = hw;
  r.threads = threads;
  r.reps = opt.reps;
  r.size = opt.size;

  auto real_file = make_scratch(opt.dir, "real", opt.size);
  if (!real_file.ok()) return std::move(real_file).error();
  Scratch& real = *real_file.value();
  r.is_pmem = real.pool->is_pmem();
  r.flush_mode = flush_mode_name(real.pool->flush_mode());

  // The source: ordinary DRAM, written once so its pages exist.
  std::unique_ptr<std::byte[]> src_mem(new std::byte[opt.size + 64]);
  auto* src =
      reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(src_mem.get()) + 63) & ~std::uintptr_t{63});
  for (std::size_t i = 0; i < opt.size; ++i) src[i] = static_cast<std::byte>(i * 131);

  if (log) *log << "probing DRAM copy bandwidth\n";
  r.dram_copy_bw = devices::measured_dram_copy_bandwidth();
  Meter meter;
  if (opt.primitives) {
    auto ok = run_primitives(opt, threads, real, src, r, meter, log);
    if (!ok.ok()) return std::move(ok).error();
  }
  if (opt.fidelity) {
    auto ok = run_fidelity(opt, threads, real, src, r, meter, log);
    if (!ok.ok()) return std::move(ok).error();
  }
  r.samples = meter.samples_;
  r.samples_retried = meter.retried_;
  r.samples_disturbed = meter.disturbed_;
  return r;
}

void print_device_report(const DeviceBenchReport& r, std::ostream& out) {
  out << "Machine: " << r.cpu_model << ", " << r.nproc << " hardware threads; " << r.date << "\n"
      << "Pool: " << r.pool_dir << " (flush mode " << r.flush_mode << ", is_pmem " << (r.is_pmem ? "yes" : "no")
      << "); buffers " << r.size / kMiB << " MiB; medians of " << r.reps << " repetitions; DRAM copy bandwidth probe "
      << fmt("%.2f", r.dram_copy_bw / kGB) << " GB/s\n"
      << "Samples: " << r.samples << ", re-run because another process held the CPU: " << r.samples_retried
      << ", still disturbed after " << Meter::kTries << " tries: " << r.samples_disturbed << "\n\n";
  if (!r.primitives.empty()) {
    out << "| operation (real device) | threads | median | unit | vs memcpy |\n"
        << "|---|--:|--:|---|--:|\n";
    for (const auto& p : r.primitives)
      out << "| " << p.operation << " | " << p.threads << " | " << fmt(p.unit == "GB/s" ? "%.2f" : "%.1f", p.value)
          << " | " << p.unit << " | " << (p.ratio > 0 ? fmt("%.2f", p.ratio) : std::string("-")) << " |\n";
    const double frac = r.best_copy_bw > 0 ? r.nt_mt_bw / r.best_copy_bw : 0;
    out << "\n"
        << "\"vs memcpy\": bandwidth rows divide by memcpy with the same thread count; ns rows divide by the time "
           "memcpy takes for the same bytes (1 thread).\n"
        << "Best copy bandwidth: " << fmt("%.2f", r.best_copy_bw / kGB) << " GB/s (" << r.best_copy_what
        << "). Multi-threaded non-temporal copy (" << r.threads << " threads): " << fmt("%.2f", r.nt_mt_bw / kGB)
        << " GB/s = " << fmt("%.0f", 100 * frac) << " % of it (goal >= 80 %: " << (frac >= 0.8 ? "met" : "NOT met")
        << ").\n\n";
  }
  if (!r.fidelity.empty()) {
    out << "| profile | metric | requested | achieved | error |\n"
        << "|---|---|--:|--:|--:|\n";
    int outside = 0, checked = 0;
    for (const auto& f : r.fidelity) {
      const bool gb = f.metric.find("GB/s") != std::string::npos;
      std::string err = "-";
      if (f.requested != 0) {
        ++checked;
        err = fmt("%+.1f %%", f.error_pct());
        if (std::abs(f.error_pct()) > 10.0) {
          ++outside;
          err += " !";
        }
      }
      out << "| " << f.profile << " | " << f.metric << " | " << fmt(gb ? "%.3f" : "%.1f", f.requested) << " | "
          << fmt(gb ? "%.3f" : "%.1f", f.achieved) << " | " << err << " |\n";
    }
    out << "\nFidelity: " << checked - outside << " of " << checked << " requested values achieved within +-10 %"
        << (outside ? " (rows marked ! are outside)" : "") << ".\n";
  }
}

Result<void> write_device_report_json(const DeviceBenchReport& r, const std::string& path) {
  Json primitives = Json::array();
  for (const auto& p : r.primitives)
    primitives.push_back({{"operation", p.operation},
                          {"threads", p.threads},
                          {"median", p.value},
                          {"unit", p.unit},
                          {"vs_memcpy", p.ratio}});
  Json fidelity = Json::array();
  for (const auto& f : r.fidelity)
    fidelity.push_back({{"profile", f.profile},
                        {"metric", f.metric},
                        {"requested", f.requested},
                        {"achieved", f.achieved},
                        {"error_pct", f.error_pct()}});
  const Json doc = {{"cpu_model", r.cpu_model},
                    {"date", r.date},
                    {"nproc", r.nproc},
                    {"threads", r.threads},
                    {"reps", r.reps},
                    {"size_bytes", r.size},
                    {"pool_dir", r.pool_dir},
                    {"flush_mode", r.flush_mode},
                    {"is_pmem", r.is_pmem},
                    {"dram_copy_bw_bytes_per_s", r.dram_copy_bw},
                    {"best_copy_bw_bytes_per_s", r.best_copy_bw},
                    {"best_copy_what", r.best_copy_what},
                    {"nt_mt_bw_bytes_per_s", r.nt_mt_bw},
                    {"samples", r.samples},
                    {"samples_retried", r.samples_retried},
                    {"samples_disturbed", r.samples_disturbed},
                    {"primitives", primitives},
                    {"fidelity", fidelity},
                    {"fidelity_within_10pct", r.fidelity_ok()}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench
