// checksums_bench.cpp — see checksums_bench.hpp.
#include "bench/checksums_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "bench/bench_util.hpp"
#include "cairn/persist.hpp"
#include "util/io.hpp"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Case {
  std::string what, strategy;
  bool streamed = false;
};

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = {{"in-place", "in-place", false},
                                          {"in-place streamed", "in-place", true},
                                          {"shadow", "shadow", false},
                                          {"dram-cache", "dram-cache", false},
                                          {"nt-copy", "nt-copy", false}};
  return cases;
}

// Iteration i's bytes: a word per 8 bytes that depends on i, so every commit
// writes (and checksums) new contents.
void fill_words(void* p, std::size_t bytes, std::size_t first_word, std::uint64_t i) {
  auto* w = static_cast<std::uint64_t*>(p);
  for (std::size_t k = 0; k < bytes / 8; ++k) w[k] = (first_word + k) * 0x9E3779B97F4A7C15ULL + i;
}

struct Sample {
  double iteration_s = 0, restore_s = 0, resume_s = 0;
};

Result<Sample> run_once(const Case& c, const ChecksumsBenchOptions& o, const std::string& dir, bool checksums) {
  persist::Options po;
  po.strategy = c.strategy;
  po.dir = dir;
  po.name = "checksums-bench";
  po.threads = o.threads;
  po.checksums = checksums;
  (void)persist::remove_storage(po);
  Sample s;
  {
    auto ctx = persist::Context::create(po);
    if (!ctx.ok()) return std::move(ctx).error();
    auto region = ctx.value()->dual_region("state", o.size);
    if (!region.ok()) return std::move(region).error();
    if (auto r = ctx.value()->open(); !r.ok()) return r.error();
    persist::DualRegion* d = region.value();
    std::vector<std::uint64_t> row(std::min<std::size_t>(o.size, 1u << 20) / 8);
    const auto step = [&](std::uint64_t i) -> Result<void> {
      if (!c.streamed) {
        fill_words(d->write(), o.size, 0, i);
      } else {
        auto* out = static_cast<std::byte*>(d->write());
        for (std::size_t at = 0; at < o.size; at += row.size() * 8) {
          const std::size_t n = std::min(row.size() * 8, o.size - at);
          fill_words(row.data(), n, at / 8, i);
          ctx.value()->stream(out + at, row.data(), n);
        }
        ctx.value()->stream_fence();
        ctx.value()->streamed(*d);
      }
      auto v = ctx.value()->commit();
      if (!v.ok()) return std::move(v).error();
      return {};
    };
    if (auto r = step(0); !r.ok()) return r.error();  // the first commit also maps the slots
    const auto t0 = Clock::now();
    for (int i = 1; i <= o.iterations; ++i)
      if (auto r = step(static_cast<std::uint64_t>(i)); !r.ok()) return r.error();
    s.iteration_s = seconds_since(t0) / o.iterations;
  }
  {
    auto ctx = persist::Context::create(po);
    if (!ctx.ok()) return std::move(ctx).error();
    auto region = ctx.value()->dual_region("state", o.size);
    if (!region.ok()) return std::move(region).error();
    if (auto r = ctx.value()->open(); !r.ok()) return r.error();
    const auto t0 = Clock::now();
    if (auto r = ctx.value()->restore(); !r.ok()) return std::move(r).error();
    s.restore_s = seconds_since(t0);
    // The resumed iteration writes nothing new: what is measured is restore
    // plus what the first commit waits for.
    if (auto r = ctx.value()->commit(); !r.ok()) return std::move(r).error();
    s.resume_s = seconds_since(t0);
  }
  (void)persist::remove_storage(po);
  return s;
}

}  // namespace

Result<ChecksumsReport> run_checksums_bench(const ChecksumsBenchOptions& options, std::ostream* log) {
  if (options.dirs.empty())
    return make_error(Errc::invalid_argument, "checksums: give at least one directory (--dirs)");
  if (options.size < 4096 || options.iterations < 1 || options.repeats < 1)
    return make_error(Errc::invalid_argument, "checksums: --size must be at least 4K, --iterations and --repeats >= 1");
  std::vector<Case> cases;
  for (const auto& name : options.cases) {
    auto it = std::find_if(all_cases().begin(), all_cases().end(), [&](const Case& c) { return c.what == name; });
    if (it == all_cases().end())
      return make_error(Errc::invalid_argument, "checksums: unknown case '" + name +
                                                    "' (in-place, in-place streamed, shadow, dram-cache, nt-copy)");
    cases.push_back(*it);
  }
  if (cases.empty()) cases = all_cases();
  ChecksumsReport report;
  report.cpu_model = cpu_model();
  report.date = utc_now();
  report.nproc = std::thread::hardware_concurrency();
  report.size = options.size;
  report.iterations = options.iterations;
  report.repeats = options.repeats;
  report.load_before = load_average();
  const auto t_all = Clock::now();
  for (const auto& dir : options.dirs) {
    if (auto r = create_bench_dir(dir); !r.ok()) return r.error();
    for (const Case& c : cases) {
      ChecksumsRow row;
      row.dir = dir;
      row.fs_type = fs_type_name(dir);
      row.what = c.what;
      if (log) *log << dir << " (" << row.fs_type << "): " << c.what << "\n";
      std::vector<double> it[2], rs[2], rm[2];
      for (int k = 0; k < options.repeats && row.status == "ok"; ++k)
        for (const bool on : {false, true}) {
          auto s = run_once(c, options, dir, on);
          if (!s.ok()) {
            row.status = "failed";
            row.reason = s.error().message;
            break;
          }
          it[on].push_back(s.value().iteration_s);
          rs[on].push_back(s.value().restore_s);
          rm[on].push_back(s.value().resume_s);
        }
      row.iteration_off_s = median(it[0]);
      row.iteration_on_s = median(it[1]);
      row.restore_off_s = median(rs[0]);
      row.restore_on_s = median(rs[1]);
      row.resume_off_s = median(rm[0]);
      row.resume_on_s = median(rm[1]);
      report.rows.push_back(std::move(row));
    }
  }
  report.elapsed_s = seconds_since(t_all);
  report.load_after = load_average();
  return report;
}

void print_checksums_report(const ChecksumsReport& report, std::ostream& out) {
  const auto ratio = [](double on, double off) { return off > 0 ? fmt("%.2fx", on / off) : std::string("-"); };
  const auto ms = [](double s) { return fmt("%.2f", s * 1e3); };
  out << "# cairn bench checksums: payload checksums on / off\n"
      << report.cpu_model << ", " << report.nproc << " hardware threads; " << report.date << "; a dual region of "
      << report.size / (1u << 20) << " MiB rewritten and committed " << report.iterations
      << " times per run; medians of " << report.repeats << " runs each way, taking turns; load "
      << fmt("%.2f", report.load_before) << " -> " << fmt("%.2f", report.load_after) << "\n\n"
      << "| dir | fs | case | iteration ms off | on | on/off | restore ms off | on | resume ms off | on | on/off |\n"
      << "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : report.rows) {
    out << "| " << r.dir << " | " << r.fs_type << " | " << r.what << " | ";
    if (r.status != "ok") {
      out << "failed: " << r.reason << " |||||||\n";
      continue;
    }
    out << ms(r.iteration_off_s) << " | " << ms(r.iteration_on_s) << " | " << ratio(r.iteration_on_s, r.iteration_off_s)
        << " | " << ms(r.restore_off_s) << " | " << ms(r.restore_on_s) << " | " << ms(r.resume_off_s) << " | "
        << ms(r.resume_on_s) << " | " << ratio(r.resume_on_s, r.resume_off_s) << " |\n";
  }
  out << "\niteration: rewrite + commit; restore: open's restore() alone; resume: restore + the first commit, which\n"
         "waits for in-place's and shadow's background check of the restored version (above 4 MiB).\n";
}

Result<void> write_checksums_json(const ChecksumsReport& report, const std::string& path) {
  Json rows = Json::array();
  for (const ChecksumsRow& r : report.rows)
    rows.push_back({{"dir", r.dir},
                    {"fs", r.fs_type},
                    {"what", r.what},
                    {"status", r.status},
                    {"iteration_off_ms", r.iteration_off_s * 1e3},
                    {"iteration_on_ms", r.iteration_on_s * 1e3},
                    {"restore_off_ms", r.restore_off_s * 1e3},
                    {"restore_on_ms", r.restore_on_s * 1e3},
                    {"resume_off_ms", r.resume_off_s * 1e3},
                    {"resume_on_ms", r.resume_on_s * 1e3}});
  const Json doc = {{"benchmark", "checksums"},
                    {"cpu", report.cpu_model},
                    {"date", report.date},
                    {"size", report.size},
                    {"iterations", report.iterations},
                    {"repeats", report.repeats},
                    {"load_before", report.load_before},
                    {"load_after", report.load_after},
                    {"rows", rows}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench
