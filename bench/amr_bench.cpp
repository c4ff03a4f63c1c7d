// amr_bench.cpp — `cairn bench amr` (see amr_bench.hpp).
#include "bench/amr_bench.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench/bench_util.hpp"

namespace cairn::bench {

namespace amr = apps::amr;

namespace {

amr::Config base_config(const AmrBenchOptions& o, int size, const std::string& name) {
  amr::Config c;
  c.level_max = size;
  c.period = 3.0;
  c.step_limit = o.steps;
  c.pool = o.dir + "/cairn-bench-amr-" + name + "." + std::to_string(::getpid());
  c.level_min = o.level_min > 0 ? std::min(o.level_min, size) : std::max(2, size - 2);
  // Far more than the two versions need (0.6 MB each at level 6): the pool's
  // creation is part of every run's time, so it is kept small.
  c.pool_size = size <= 6 ? 64ull << 20 : 256ull << 20 << 2 * (size - 7);
  return c;
}

void remove_files(const amr::Config& c) {
  std::error_code ec;
  for (const char* suffix : {"", ".snapshot", "-lock"}) std::filesystem::remove(c.pool + suffix, ec);
}

Result<amr::Report> run_once(const amr::Config& c) {
  auto r = amr::run(c);
  remove_files(c);
  return r;
}

// The largest V(i) over the run: the base of the C0 budgets.
Result<std::uint64_t> tree_bytes(const AmrBenchOptions& o, int size, std::vector<amr::VersionSample>* samples) {
  amr::Config c = base_config(o, size, "size");
  c.track_versions = true;
  auto r = run_once(c);
  if (!r.ok()) return r.error();
  std::uint64_t most = 0;
  for (const auto& v : r.value().versions) most = std::max(most, v.single_bytes);
  if (samples != nullptr) *samples = r.value().versions;
  return most;
}

struct Variant {
  std::string label;
  amr::Config config;
};

// Runs every variant `repeats` times, interleaved; fills medians.
Result<std::vector<AmrRun>> measure(const std::vector<Variant>& variants, int size, int repeats, bool& equal,
                                    std::ostream* progress) {
  std::vector<AmrRun> rows;
  for (const auto& v : variants) rows.push_back({v.label, size, {}, 0, 0, 0, 0});
  for (int r = 0; r < repeats; ++r)
    for (std::size_t i = 0; i < variants.size(); ++i) {
      auto x = run_once(variants[i].config);
      if (!x.ok()) return make_error(x.error().code, variants[i].label + ": " + x.error().message);
      rows[i].seconds.push_back(x.value().seconds);
      rows[i].nvm_store_bytes = 64 * x.value().nvm_store_lines;
      rows[i].leaves = x.value().leaves;
      rows[i].checksum = x.value().checksum;
      if (x.value().checksum != rows.front().checksum) equal = false;
      if (progress != nullptr)
        *progress << "amr size " << size << " " << variants[i].label << " run " << (r + 1) << "/" << repeats << ": "
                  << fmt("%.3f", x.value().seconds) << " s\n";
    }
  for (auto& row : rows) row.median_s = median(row.seconds);
  return rows;
}

// A run SIGKILLed at the start of step crash_at, then resumed: seconds until
// the resumed run begins that step again.
Result<double> restart_once(amr::Config c, std::uint64_t crash_at) {
  c.crash_at = static_cast<std::int64_t>(crash_at);
  c.step_limit = crash_at + 1;
  const pid_t pid = ::fork();
  if (pid < 0) return make_error(Errc::io_error, "fork failed");
  if (pid == 0) {
    (void)amr::run(c);
    ::_exit(3);  // not reached: the run kills itself
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
    return make_error(Errc::io_error, "the run to kill ended without SIGKILL at step " + std::to_string(crash_at));
  c.crash_at = -1;
  c.resume = true;
  c.catch_up_step = static_cast<std::int64_t>(crash_at);
  auto r = run_once(c);
  if (!r.ok()) return r.error();
  if (r.value().catch_up_seconds < 0) return make_error(Errc::io_error, "the resumed run never reached the step");
  return r.value().catch_up_seconds;
}

}  // namespace

Result<AmrBenchReport> run_amr_bench(const AmrBenchOptions& o, std::ostream* progress) {
  AmrBenchReport rep;
  rep.options = o;
  rep.machine = cpu_model() + ", load " + fmt("%.2f", load_average()) + ", " + utc_now();
  const auto wants = [&](const char* e) {
    return std::find(o.experiments.begin(), o.experiments.end(), e) != o.experiments.end();
  };
  const std::string device = "emulated:" + o.profile;

  if (wants("versions") || wants("c0")) {
    auto b = tree_bytes(o, o.size, &rep.versions);
    if (!b.ok()) return b.error();
    rep.tree_bytes = b.value();
  }
  if (wants("c0")) {
    std::vector<Variant> v;
    amr::Config incore = base_config(o, o.size, "incore");
    incore.backend = amr::Backend::in_core;
    v.push_back({"in-core", incore});
    amr::Config lmdb = base_config(o, o.size, "lmdb");
    lmdb.backend = amr::Backend::lmdb;
    v.push_back({"out-of-core (lmdb)", lmdb});
    for (int div : {8, 4, 2, 1}) {
      amr::Config c = base_config(o, o.size, "c0-" + std::to_string(div));
      c.device = device;
      c.dram_budget = rep.tree_bytes / static_cast<std::uint64_t>(div);
      v.push_back({div == 1 ? "pm-octree C0 = all" : "pm-octree C0 = 1/" + std::to_string(div), c});
    }
    auto rows = measure(v, o.size, o.repeats, rep.checksums_equal, progress);
    if (!rows.ok()) return rows.error();
    rep.c0 = rows.value();
  }
  if (wants("transform")) {
    for (int size : o.sizes) {
      auto b = tree_bytes(o, size, nullptr);
      if (!b.ok()) return b.error();
      std::vector<Variant> v;
      for (bool on : {false, true}) {
        amr::Config c = base_config(o, size, on ? "tr-on" : "tr-off");
        c.device = device;
        c.dram_budget = b.value() / 8;
        c.transform = on;
        v.push_back({on ? "transformation on" : "transformation off", c});
      }
      auto rows = measure(v, size, o.repeats, rep.checksums_equal, progress);
      if (!rows.ok()) return rows.error();
      rep.transform.insert(rep.transform.end(), rows.value().begin(), rows.value().end());
    }
  }
  if (wants("restart")) {
    for (amr::Backend b : {amr::Backend::pm_octree, amr::Backend::in_core, amr::Backend::lmdb}) {
      AmrRun row{
          b == amr::Backend::in_core ? "in-core + snapshot every 10" : amr::backend_name(b), o.size, {}, 0, 0, 0, 0};
      for (int r = 0; r < o.repeats; ++r) {
        amr::Config c = base_config(o, o.size, std::string("restart-") + amr::backend_name(b));
        c.backend = b;
        c.step_limit = 0;
        auto s = restart_once(c, o.crash_at);
        remove_files(c);
        if (!s.ok()) return make_error(s.error().code, row.label + ": " + s.error().message);
        row.seconds.push_back(s.value());
        if (progress != nullptr)
          *progress << "amr restart " << row.label << " run " << (r + 1) << "/" << o.repeats << ": "
                    << fmt("%.4f", s.value()) << " s\n";
      }
      row.median_s = median(row.seconds);
      rep.restart.push_back(row);
    }
  }
  return rep;
}

void print_amr_report(const AmrBenchReport& rep, std::ostream& out) {
  const auto& o = rep.options;
  out << "amr (seed 000 §5): finest level " << o.size << ", " << o.steps << " steps per run, medians of " << o.repeats
      << " runs (" << rep.machine << ")\n";
  char line[256];
  if (!rep.versions.empty()) {
    std::vector<double> overlap;
    double factor_at_max = 0, best = -1;
    for (const auto& v : rep.versions) {
      overlap.push_back(v.overlap);
      if (v.overlap > best) best = v.overlap, factor_at_max = static_cast<double>(v.both_bytes) / v.single_bytes;
    }
    out << "\nFig. 3, two versions after each persist (every step):\n";
    std::snprintf(line, sizeof line, "%6s %9s %9s %16s %10s\n", "step", "octants", "overlap", "KB/1000 octants",
                  "vs 1 copy");
    out << line;
    const std::size_t n = rep.versions.size(), stride = std::max<std::size_t>(1, n / 15);
    for (std::size_t i = 0; i < n; i += stride) {
      const auto& v = rep.versions[i];
      std::snprintf(line, sizeof line, "%6llu %9llu %8.1f%% %16.2f %9.3fx\n", static_cast<unsigned long long>(v.step),
                    static_cast<unsigned long long>(v.octants), 100 * v.overlap,
                    static_cast<double>(v.both_bytes) / 1024.0 / (static_cast<double>(v.octants) / 1000.0),
                    static_cast<double>(v.both_bytes) / static_cast<double>(v.single_bytes));
      out << line;
    }
    std::sort(overlap.begin(), overlap.end());
    out << "overlap min " << fmt("%.1f", 100 * overlap.front()) << " %, median " << fmt("%.1f", 100 * median(overlap))
        << " %, max " << fmt("%.1f", 100 * overlap.back()) << " % (factor " << fmt("%.3f", factor_at_max)
        << "x there); seed: 39-99 %, 1.01x at 99.5 %\n";
  }
  const auto table = [&](const char* title, const std::vector<AmrRun>& rows, const AmrRun* base, bool writes) {
    if (rows.empty()) return;
    out << "\n" << title << "\n";
    std::snprintf(line, sizeof line, "%5s %-28s %10s %10s %14s\n", "size", "variant", "time s", "vs base",
                  writes ? "NVM writes MB" : "");
    out << line;
    for (const auto& r : rows) {
      const AmrRun* b = base != nullptr ? base : &r;
      if (base == nullptr)  // transform: the base is the "off" row of the same size
        for (const auto& x : rows)
          if (x.size == r.size && x.label == "transformation off") b = &x;
      std::snprintf(line, sizeof line, "%5d %-28s %10.4f %9.2fx %14s\n", r.size, r.label.c_str(), r.median_s,
                    b->median_s > 0 ? r.median_s / b->median_s : 0.0,
                    writes ? fmt("%.1f", static_cast<double>(r.nvm_store_bytes) / 1e6).c_str() : "");
      out << line;
    }
  };
  table(("Fig. 10, run time against C0 (tree " + fmt("%.2f", static_cast<double>(rep.tree_bytes) / 1e6) +
         " MB; NVM: " + o.profile + "; vs base = vs in-core):")
            .c_str(),
        rep.c0, rep.c0.empty() ? nullptr : &rep.c0.front(), true);
  table(("Fig. 11, layout transformation, C0 = 1/8 of the tree (NVM: " + o.profile + "; vs base = vs off):").c_str(),
        rep.transform, nullptr, true);
  if (!rep.restart.empty()) {
    out << "\n§5.6, SIGKILL at the start of step " << o.crash_at << ", time until the restarted run is there again:\n";
    for (const auto& r : rep.restart) {
      std::snprintf(line, sizeof line, "%-30s %10.4f s %10.1fx the pm-octree\n", r.label.c_str(), r.median_s,
                    rep.restart.front().median_s > 0 ? r.median_s / rep.restart.front().median_s : 0.0);
      out << line;
    }
  }
  out << (rep.checksums_equal ? "\nevery run of a size ends with the same checksum\n"
                              : "\nCHECKSUMS DIFFER between variants of one size\n");
}

Result<void> write_amr_json(const AmrBenchReport& rep, const std::string& path) {
  const auto& o = rep.options;
  Json versions = Json::array();
  for (const auto& v : rep.versions)
    versions.push_back({{"step", v.step},
                        {"octants", v.octants},
                        {"overlap", v.overlap},
                        {"both_bytes", v.both_bytes},
                        {"single_bytes", v.single_bytes}});
  // seconds: every repetition behind median_s, in the order they ran.
  const auto rows = [](const std::vector<AmrRun>& rs) {
    Json out = Json::array();
    for (const auto& r : rs)
      out.push_back({{"label", r.label},
                     {"size", r.size},
                     {"median_s", r.median_s},
                     {"nvm_store_bytes", r.nvm_store_bytes},
                     {"leaves", r.leaves},
                     {"seconds", r.seconds}});
    return out;
  };
  const Json doc = {{"machine", rep.machine},
                    {"profile", o.profile},
                    {"size", o.size},
                    {"steps", o.steps},
                    {"crash_at", o.crash_at},
                    {"repeats", o.repeats},
                    {"tree_bytes", rep.tree_bytes},
                    {"checksums_equal", rep.checksums_equal},
                    {"versions", versions},
                    {"c0", rows(rep.c0)},
                    {"transform", rows(rep.transform)},
                    {"restart", rows(rep.restart)}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench
