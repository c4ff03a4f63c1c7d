// placement_bench.cpp — seed 003's Jacobi and sharpening kernels, DRAM vs pool, with and without persistence.
#include "bench/placement_bench.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "bench/bench_util.hpp"
#include "cairn/extended/profile.hpp"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Where the arrays of `app` live and what a commit does, for the table.
std::string placement(const std::string& app, const std::string& variant) {
  const bool sharpen = app == "jacobi-sharpen";
  if (variant == "native") return "DRAM";
  if (variant == "pool-no-persist" || variant == "in-place")
    return sharpen ? "DRAM working copies (plain regions), nt-copied into the pool at commit"
                   : std::string("pool (both versions)") +
                         (variant == "in-place" ? ", written back by the helper thread" : ", never written back");
  if (variant == "nt-copy") return "DRAM, nt-copied into the pool at commit";
  if (variant == "shadow") return "pool: reads from its pages, writes to copy-on-write DRAM pages, copied at commit";
  if (variant == "undo-log") return "pool (libpmemobj objects), snapshot into the undo log every iteration";
  return "";
}

// What seed 003 measured, for the comparison under each table.
const char* seed_numbers(const std::string& app) {
  if (app == "jacobi")
    return "Seed 003 (Optane DCPMM, App Direct): no persistence DRAM 7.95 s, B-APM 9.64 s (1.21x); persistence "
           "B-APM 10.67 s (1.34x).";
  return "Seed 003: read-only data in DRAM 56.18 s, in B-APM 53.99 s (0.96x; calculation time).";
}

}  // namespace

const std::vector<Variant>& placement_variants() {
  static const std::vector<Variant> v = {
      {"native", "", false, false, "native (DRAM)"},
      {"pool-no-persist", "in-place", false, true, "pool, no persistence"},
      {"in-place", "in-place", false, false, "in-place"},
      {"nt-copy", "nt-copy", false, false, "nt-copy"},
      {"shadow", "shadow", false, false, "shadow"},
      {"undo-log", "undo-log", false, false, "undo-log"},
  };
  return v;
}

Result<PlacementReport> run_placement_bench(const PlacementOptions& opt, std::ostream* log) {
  const auto t0 = Clock::now();
  if (auto ok = check_repeats_and_profiles(opt.repeats, opt.profiles); !ok.ok()) return std::move(ok).error();
  auto variants = pick_variants(placement_variants(), opt.variants);
  if (!variants.ok()) return std::move(variants).error();

  MatrixSpec spec;
  for (const char* name : {"jacobi", "jacobi-sharpen"}) {
    const AppSpec* a = find_app(name);
    spec.apps.emplace_back(a, AppSize{a->default_size, a->default_iterations});
  }
  auto sizes = parse_app_sizes(opt.sizes);
  if (!sizes.ok()) return std::move(sizes).error();
  for (const auto& [name, s] : sizes.value()) {
    auto it = std::find_if(spec.apps.begin(), spec.apps.end(), [&](const auto& p) { return p.first->name == name; });
    if (it == spec.apps.end())
      return make_error(Errc::invalid_argument,
                        "--size " + name + "=...: this experiment runs jacobi and jacobi-sharpen");
    it->second = s;
  }
  const unsigned nproc = std::max(1u, std::thread::hardware_concurrency());
  spec.variants = variants.value();
  spec.profiles = opt.profiles;
  spec.threads = {opt.threads ? opt.threads : nproc};
  spec.repeats = opt.repeats;
  spec.dir = opt.dir;
  spec.tag = "placement";

  PlacementReport rep;
  rep.cpu_model = ::cairn::bench::cpu_model();
  rep.date = ::cairn::bench::utc_now();
  rep.nproc = nproc;
  rep.threads = spec.threads.front();
  rep.repeats = opt.repeats;
  for (const auto& a : spec.apps) rep.apps.push_back(a.first->name);
  for (const auto& v : spec.variants) rep.variants.push_back(v.name);
  rep.profiles = opt.profiles;
  rep.dir = opt.dir.empty() ? "/dev/shm" : opt.dir;
  rep.load_before = ::cairn::bench::load_average();
  auto rows = run_matrix(spec, log);
  if (!rows.ok()) return std::move(rows).error();
  rep.rows = std::move(rows.value());
  for (const auto& r : rep.rows) rep.failed_runs += r.runs - r.good_runs;
  rep.load_after = ::cairn::bench::load_average();
  rep.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return rep;
}

void print_placement_report(const PlacementReport& r, std::ostream& out) {
  out << "Machine: " << r.cpu_model << ", " << r.nproc << " hardware threads; " << r.date << "\n"
      << r.threads << " app threads; medians of " << r.repeats
      << " runs per row (repetitions interleaved across variants); pools in a scratch directory under " << r.dir
      << "; the persisting variants commit at every iteration.\n"
      << "Load average " << fmt("%.2f", r.load_before) << " before, " << fmt("%.2f", r.load_after)
      << " after; run time " << fmt("%.0f", r.elapsed_s) << " s\n";
  for (const auto& p : r.profiles)
    if (auto parsed = devices::parse_profile(p); parsed.ok())
      out << "Profile " << p << ": " << parsed.value().describe() << "\n";

  for (const auto& app : r.apps) {
    std::string describe;
    std::uint64_t iterations = 0;
    for (const auto& row : r.rows)
      if (row.app == app && !row.describe.empty()) {
        describe = row.describe;
        iterations = row.iterations;
      }
    out << "\n### " << app << ": " << describe << ", " << iterations << " iterations\n\n"
        << "| profile | variant | arrays live in | ms / iteration | of which commit | vs native |\n"
        << "|---|---|---|--:|--:|--:|\n";
    for (const auto& p : r.profiles)
      for (const auto& row : r.rows) {
        if (row.app != app || row.profile != p) continue;
        out << "| " << p << " | " << row.label << " | " << placement(app, row.variant) << " | ";
        if (row.good_runs == 0) {
          out << "FAILED | | |\n";
          continue;
        }
        out << fmt("%.2f", row.per_iteration_s * 1e3) << (row.good_runs < row.runs ? " [some runs failed]" : "")
            << " | " << fmt("%.2f", row.commit_per_iteration_s * 1e3) << " | "
            << (row.vs_baseline > 0 ? fmt("%.2fx", row.vs_baseline) : std::string("-")) << " |\n";
      }
    out << "\n" << seed_numbers(app) << "\n";
  }
  out << "\nRuns: " << (r.failed_runs == 0 ? std::string("all verified") : std::to_string(r.failed_runs) + " FAILED")
      << ", and every verified run ended with the same checksum as the others of its kernel.\n";
  for (const auto& row : r.rows)
    for (const auto& f : row.failures)
      out << "FAILED: " << row.profile << ", " << row.app << ", " << row.variant << ": " << f << "\n";
  out << "\nNotes: the pool is a file in " << r.dir
      << " (tmpfs, i.e. DRAM). The emulated device charges cairn's flushes and non-temporal stores and its bulk "
         "reads (restore), not the kernels' own loads and stores, so 'pool, no persistence' and the reads of the "
         "sharpen input in the pool run at DRAM speed under every profile: on this machine the rows measure the "
         "software cost of keeping the arrays in a pool and persisting them, and the device profile only the cost "
         "of writing them back. undo-log's libpmemobj is not charged by the emulated device.\n";
}

Result<void> write_placement_json(const PlacementReport& r, const std::string& path) {
  const Json doc = {{"benchmark", "placement"},
                    {"cpu_model", r.cpu_model},
                    {"date", r.date},
                    {"nproc", r.nproc},
                    {"threads", r.threads},
                    {"repeats", r.repeats},
                    {"load_before", r.load_before},
                    {"load_after", r.load_after},
                    {"elapsed_s", r.elapsed_s},
                    {"apps", r.apps},
                    {"variants", r.variants},
                    {"profiles", r.profiles},
                    {"failed_runs", r.failed_runs},
                    {"rows", matrix_rows_json(r.rows)}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench
