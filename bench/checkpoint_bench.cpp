// checkpoint_bench.cpp — seed 001 §4 (Table 4, Figs. 8-10, the heartbeat equations) on sph (see checkpoint_bench.hpp).
#include "bench/checkpoint_bench.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "apps/sph/sph.hpp"
#include "bench/app_runner.hpp"
#include "bench/bench_util.hpp"
#include "cairn/extended/profile.hpp"
#include "cairn/persist.hpp"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kRestoreGoal = 100.0;  // issue 5: in-place / shadow restore >= 100x faster than file
constexpr int kMaxInterval = 100;       // resiliency intervals tried
// Restores timed per commit run: each a --resume of a fresh app and Context
// (the first one's caches are no colder than the others': the storage is in
// /dev/shm); the median is the run's sample.
constexpr int kResumes = 3;

const std::vector<std::string>& all_parts() {
  static const std::vector<std::string> p = {"table4", "layouts", "threads", "heartbeat"};
  return p;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Result<sph::Layout> parse_layout(const std::string& s) {
  if (s == "list") return sph::Layout::list;
  if (s == "array") return sph::Layout::array;
  if (s == "blocked") return sph::Layout::blocked;
  return make_error(Errc::invalid_argument, "--layout '" + s + "': use list, array or blocked");
}

// sph with a given layout, for run_matrix (the app table's sph is blocked).
AppSpec sph_spec(sph::Layout layout) {
  return {"sph", [layout] { return std::make_unique<sph::SphApp>(layout); }, "simsmall", std::nullopt,
          std::string("sph, layout ") + sph::layout_name(layout)};
}

// The samples of one row before the medians are taken.
struct Samples {
  std::vector<double> checkpoint, restore, open, compute, loop, nvm;
};

// One measurement of a row: a fresh run that commits at every iteration and,
// for a strategy, kResumes --resume runs of a fresh SphApp in the same storage
// (a new Context attaches and restores, as after a restart; the loop has
// nothing left to do, so the storage is unchanged). Its storage is removed
// afterwards.
struct PairResult {
  std::string bad;  // empty: good
  Report run;
  double restore_s = 0, open_s = 0;  // medians over the resumes
};

PairResult run_pair(sph::Layout layout, const std::string& strategy, const CheckpointOptions& o, unsigned threads,
                    std::uint64_t iterations, const std::string& dir, const std::string& name) {
  PairResult out;
  RunOptions ro;
  ro.strategy = strategy;
  ro.device = strategy.empty() ? std::string() : o.profile;
  ro.threads = threads;
  ro.size = o.size;
  ro.iterations = iterations;
  ro.dir = dir;
  ro.name = name;
  ro.quiet = true;
  {
    sph::SphApp app(layout);
    auto r = run_simulation(app, ro);
    if (!r.ok()) {
      out.bad = std::string("error: ") + errc_name(r.error().code) + ": " + r.error().message;
    } else {
      out.run = r.value();
      if (!out.run.verification.passed)
        out.bad = "verification FAILED: " + out.run.verification.quantity + " " + out.run.verification.detail;
    }
  }
  std::vector<double> restore, open;
  ro.resume = true;
  for (int k = 0; k < kResumes && out.bad.empty() && !strategy.empty(); ++k) {
    sph::SphApp app(layout);
    auto r = run_simulation(app, ro);
    if (!r.ok()) {
      out.bad = std::string("resume error: ") + errc_name(r.error().code) + ": " + r.error().message;
    } else if (!r.value().verification.passed) {
      out.bad = "verification after the restore FAILED: " + r.value().verification.quantity;
    } else if (r.value().checksum != out.run.checksum) {
      out.bad = "the restored state differs from the committed one (checksum)";
    } else if (r.value().start_iteration != iterations) {
      out.bad = "the resume did not start after the last iteration";
    } else {
      restore.push_back(r.value().restore_seconds);
      open.push_back(r.value().open_seconds);
    }
  }
  out.restore_s = median(restore);
  out.open_s = median(open);
  remove_storage(dir, name);
  return out;
}

double per(double total, std::uint64_t n) { return n ? total / static_cast<double>(n) : 0; }

void add_sample(Samples& s, const PairResult& p) {
  const Report& r = p.run;
  const std::uint64_t its = r.iterations - r.start_iteration;
  s.compute.push_back(per(r.compute_seconds, its));
  s.loop.push_back(per(r.compute_seconds + r.commit_seconds, its));
  if (r.commits) {
    s.checkpoint.push_back(per(r.commit_seconds, r.commits));
    s.nvm.push_back(per(static_cast<double>(r.nvm_bytes_written), r.commits));
    s.restore.push_back(p.restore_s);
    s.open.push_back(p.open_s);
  }
}

void finish(CheckpointRow& row, const Samples& s) {
  row.checkpoint_s = median(s.checkpoint);
  row.restore_s = median(s.restore);
  row.open_s = median(s.open);
  row.compute_s = median(s.compute);
  row.loop_s = median(s.loop);
  row.nvm_bytes_per_commit = median(s.nvm);
  row.checkpoint_samples_s = s.checkpoint;
  row.restore_samples_s = s.restore;
}

// Runs every row of `rows` (layout, variant and threads set) `repeats` times,
// interleaved, and fills in the medians. The checksum of every run of a
// layout must equal the first good one's (the app is bit-identical across
// strategies and thread counts).
void measure_rows(std::vector<CheckpointRow>& rows, const CheckpointOptions& o, std::uint64_t iterations,
                  const std::string& dir, const std::string& part, std::map<std::string, std::uint64_t>& reference,
                  std::ostream* log) {
  std::vector<Samples> samples(rows.size());
  static int serial = 0;
  const std::size_t total = rows.size() * static_cast<std::size_t>(o.repeats);
  std::size_t done = 0;
  for (int rep = 0; rep < o.repeats; ++rep)
    for (std::size_t k = 0; k < rows.size(); ++k) {
      CheckpointRow& row = rows[k];
      const std::string strategy = row.variant == "native" ? std::string() : row.variant;
      const std::string name = "s001-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
      PairResult p = run_pair(parse_layout(row.layout).value(), strategy, o, row.threads, iterations, dir, name);
      ++row.runs;
      ++done;
      const std::string key = row.layout + "/" + o.size + "/" + std::to_string(iterations);
      if (p.bad.empty())
        if (auto ref = reference.find(key); ref != reference.end() && ref->second != p.run.checksum)
          p.bad = "checksum differs from the other runs of this layout (verified, but not bit-identical)";
      if (p.bad.empty()) {
        reference.emplace(key, p.run.checksum);
        ++row.good_runs;
        row.iterations = p.run.iterations - p.run.start_iteration;
        row.commits = p.run.commits;
        row.state_bytes = p.run.state_bytes;
        row.describe = p.run.describe;
        add_sample(samples[k], p);
      } else {
        row.failures.push_back("repetition " + std::to_string(rep + 1) + ": " + p.bad);
      }
      if (log) {
        *log << "[" << part << " " << done << "/" << total << "] sph " << o.size << " " << row.layout << ", "
             << row.threads << " thread" << (row.threads == 1 ? "" : "s") << ", " << row.variant << " (repetition "
             << rep + 1 << "/" << o.repeats << "): ";
        if (!p.bad.empty())
          *log << p.bad;
        else if (strategy.empty())
          *log << fmt("compute %.2f ms/iteration", samples[k].compute.back() * 1e3);
        else
          *log << fmt("checkpoint %.3f ms, ", samples[k].checkpoint.back() * 1e3)
               << fmt("restore %.3f ms, ", samples[k].restore.back() * 1e3)
               << fmt("compute %.2f ms/iteration", samples[k].compute.back() * 1e3);
        *log << std::endl;
      }
    }
  for (std::size_t k = 0; k < rows.size(); ++k) finish(rows[k], samples[k]);
}

const CheckpointRow* find_row(const std::vector<CheckpointRow>& rows, const std::string& layout,
                              const std::string& variant) {
  for (const auto& r : rows)
    if (r.layout == layout && r.variant == variant && r.good_runs > 0) return &r;
  return nullptr;
}

std::string ms(double s) {
  const double v = s * 1e3;
  return fmt(v < 0.1 ? "%.4f" : v < 10 ? "%.3f" : "%.1f", v);
}
std::string mib(double bytes) { return fmt("%.2f", bytes / 1048576.0); }
std::string gbs(double bytes, double s) { return s > 0 ? fmt("%.2f", bytes / s / 1e9) : std::string("-"); }
std::string ratio(double a, double b) {
  if (!(b > 0) || !(a > 0)) return "-";
  const double r = a / b;
  return fmt(r < 10 ? "%.2fx" : "%.0fx", r);
}

}  // namespace

const std::vector<std::string>& checkpoint_strategies() {
  static const std::vector<std::string> s = persist::strategy_names();
  return s;
}

Result<CheckpointReport> run_checkpoint_bench(const CheckpointOptions& opt, std::ostream* log) {
  const auto t0 = Clock::now();
  if (opt.repeats < 1) return make_error(Errc::invalid_argument, "--repeats must be at least 1");
  if (opt.threads < 1 || opt.threads > 256)
    return make_error(Errc::invalid_argument, "--threads: give a thread count from 1 to 256");
  if (opt.iterations && *opt.iterations == 0)
    return make_error(Errc::invalid_argument, "--iterations must be at least 1");
  auto layout = parse_layout(opt.layout);
  if (!layout.ok()) return layout.error();
  auto setup = sph::make_setup(opt.size);
  if (!setup.ok()) return setup.error();
  CheckpointOptions o = opt;
  if (o.profile == "none" || o.profile == "real") o.profile.clear();
  if (!o.profile.empty())
    if (auto p = devices::parse_profile(o.profile); !p.ok()) return p.error();
  std::vector<std::string> parts = o.parts.empty() ? all_parts() : o.parts;
  for (const auto& p : parts)
    if (!has(all_parts(), p))
      return make_error(Errc::invalid_argument, "--parts: unknown part '" + p +
                                                    "'; choose from table4, layouts, "
                                                    "threads, heartbeat");
  std::vector<std::string> strategies = o.strategies.empty() ? checkpoint_strategies() : o.strategies;
  for (const auto& s : strategies)
    if (!has(checkpoint_strategies(), s))
      return make_error(Errc::invalid_argument,
                        "--strategies: unknown strategy '" + s +
                            "'; choose from undo-log, shadow, file, dram-cache, nt-copy, in-place");
  for (unsigned t : o.scaling_threads)
    if (t < 1 || t > 256) return make_error(Errc::invalid_argument, "Fig. 10 thread counts must be 1 to 256");
  const std::uint64_t iterations = o.iterations.value_or(kCheckpointIterations);

  CheckpointReport rep;
  rep.cpu_model = ::cairn::bench::cpu_model();
  rep.date = ::cairn::bench::utc_now();
  rep.nproc = std::max(1u, std::thread::hardware_concurrency());
  rep.repeats = o.repeats;
  rep.size = setup.value().size;
  rep.layout = o.layout;
  rep.profile = o.profile.empty() ? "real" : o.profile;
  rep.threads = o.threads;
  rep.iterations = iterations;
  rep.particles = setup.value().particles;
  rep.parts = parts;
  rep.strategies = strategies;
  rep.load_before = ::cairn::bench::load_average();

  auto scratch = ScratchDir::create(o.dir, "checkpoint");
  if (!scratch.ok()) return std::move(scratch).error();
  const std::string dir = scratch.value()->path();
  rep.dir = dir;
  std::map<std::string, std::uint64_t> reference;

  // Table 4 (and the heartbeat, which is computed from it).
  if (has(parts, "table4") || has(parts, "heartbeat")) {
    std::vector<std::string> variants{"native"};
    variants.insert(variants.end(), strategies.begin(), strategies.end());
    for (const auto& v : variants) {
      CheckpointRow row;
      row.layout = o.layout;
      row.variant = v;
      row.threads = o.threads;
      rep.table4.push_back(row);
    }
    measure_rows(rep.table4, o, iterations, dir, "table4", reference, log);
    if (const CheckpointRow* b = find_row(rep.table4, o.layout, "native")) rep.baseline_s = b->compute_s;
    const CheckpointRow* file = find_row(rep.table4, o.layout, "file");
    for (const std::string v : {"in-place", "shadow"}) {
      CheckpointReport::Goal g;
      g.variant = v;
      const CheckpointRow* r = find_row(rep.table4, o.layout, v);
      if (file && r && r->restore_s > 0) {
        g.measured = true;
        g.ratio = file->restore_s / r->restore_s;
        g.ratio_with_open = (file->restore_s + file->open_s) / (r->restore_s + r->open_s);
        g.met = g.ratio >= kRestoreGoal;
      }
      if (has(strategies, v)) rep.goals.push_back(g);
    }
    // §4.4: eq. 1 with T_hm = 0, T_w = T_i, T_r = T_i / 5.
    const double ti = rep.baseline_s;
    rep.t_timeout = 0 + ti + ti / 5 + ti;
    for (const auto& row : rep.table4) {
      if (row.variant == "native" || row.good_runs == 0 || ti <= 0) continue;
      CheckpointHeartbeat h;
      h.variant = row.variant;
      h.t_checkpoint = row.checkpoint_s;
      h.t_restart = row.open_s + row.restore_s;
      h.t_compute = row.compute_s;
      h.sum = h.t_checkpoint + h.t_restart + h.t_compute;
      h.fits = h.sum < rep.t_timeout;
      for (int r = 1; r <= kMaxInterval && !h.interval; ++r)
        if (h.t_checkpoint + h.t_restart + r * h.t_compute < r * rep.t_timeout) h.interval = r;
      rep.heartbeat.push_back(h);
    }
  }

  // Figs. 8-9.
  if (has(parts, "layouts")) {
    for (const char* l : {"list", "array", "blocked"})
      for (const char* s : {"file", "nt-copy"}) {
        CheckpointRow row;
        row.layout = l;
        row.variant = s;
        row.threads = o.threads;
        rep.layouts.push_back(row);
      }
    measure_rows(rep.layouts, o, iterations, dir, "layouts", reference, log);
  }

  // Fig. 10, through the shared matrix runner (interleaved repetitions, the
  // checksum of every run against the first native one).
  if (has(parts, "threads")) {
    const AppSpec spec = sph_spec(layout.value());
    MatrixSpec m;
    m.apps.emplace_back(&spec, AppSize{o.size, iterations});
    m.variants.push_back({"native", "", false, false, "native"});
    for (const auto& s : strategies) m.variants.push_back({s, s, false, false, s});
    m.profiles = {o.profile.empty() ? std::string("real") : o.profile};
    m.threads = o.scaling_threads;
    m.repeats = o.repeats;
    m.dir = dir;
    m.tag = "checkpoint-threads";
    auto rows = run_matrix(m, log);
    if (!rows.ok()) return std::move(rows).error();
    for (const auto& r : rows.value()) {
      CheckpointScaling s;
      s.threads = r.threads;
      s.variant = r.variant;
      s.loop_s = r.per_iteration_s;
      s.throughput = r.good_runs && r.per_iteration_s > 0 ? static_cast<double>(rep.particles) / r.per_iteration_s : 0;
      s.oversubscribed = r.threads > rep.nproc;
      s.runs = r.runs;
      s.good_runs = r.good_runs;
      s.failures = r.failures;
      rep.scaling.push_back(s);
    }
  }

  for (const auto* rows : {&rep.table4, &rep.layouts})
    for (const auto& r : *rows) rep.failed_runs += r.runs - r.good_runs;
  for (const auto& s : rep.scaling) rep.failed_runs += s.runs - s.good_runs;
  rep.load_after = ::cairn::bench::load_average();
  rep.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return rep;
}

void print_checkpoint_report(const CheckpointReport& r, std::ostream& out) {
  out << "Machine: " << r.cpu_model << ", " << r.nproc << " hardware threads; " << r.date << "\n"
      << "Load average " << fmt("%.2f", r.load_before) << " before, " << fmt("%.2f", r.load_after)
      << " after; run time " << fmt("%.0f", r.elapsed_s) << " s\n"
      << "sph " << r.size << " (" << r.particles << " particles), " << r.iterations
      << " frames per run, a commit after every frame; device " << r.profile << "; medians of " << r.repeats
      << " runs per row (repetitions interleaved); storage in a scratch directory under "
      << r.dir.substr(0, r.dir.rfind('/')) << "\n";

  const bool t4 = has(r.parts, "table4") && !r.table4.empty();
  if (t4) {
    out << "\n### Table 4: checkpoint, restore and computation time per strategy (layout " << r.layout << ", "
        << r.threads << " threads)\n\n"
        << "checkpoint = commit time / commits; restore = Context::restore() + the app's after_restore() in a "
           "--resume run of a fresh app in the same storage; attach = opening the storage in that run (not part of "
           "restore); compute = time in the steps per frame. Ratios against the baseline (native) frame time "
           "T_i = "
        << ms(r.baseline_s) << " ms.\n\n"
        << "| variant | checkpoint (ms) | restore (ms) | attach (ms) | compute (ms/frame) | checkpoint / T_i | "
           "restore / T_i | compute / T_i | runs |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n";
    for (const auto& row : r.table4) {
      out << "| " << row.variant << " |";
      if (row.good_runs == 0) {
        out << " FAILED | | | | | | | 0/" << row.runs << " |\n";
        continue;
      }
      const bool native = row.variant == "native";
      out << " " << (native ? "-" : ms(row.checkpoint_s)) << " | " << (native ? "-" : ms(row.restore_s)) << " | "
          << (native ? "-" : ms(row.open_s)) << " | " << ms(row.compute_s) << " | "
          << (native ? "-" : fmt("%.3f", row.checkpoint_s / r.baseline_s)) << " | "
          << (native ? "-" : fmt("%.4f", row.restore_s / r.baseline_s)) << " | "
          << fmt("%.3f", row.compute_s / r.baseline_s) << " | " << row.good_runs << "/" << row.runs << " |\n";
    }
    if (!r.table4.empty() && r.table4.front().good_runs)
      out << "\nPersisted state: " << mib(static_cast<double>(r.table4.front().state_bytes)) << " MiB ("
          << r.table4.front().describe << ")\n";
    out << "\nGoal (issue 5): restore from in-place and from shadow >= 100x faster than from file (same state):\n";
    for (const auto& g : r.goals) {
      if (!g.measured) {
        out << "- " << g.variant << ": not measured (file or " << g.variant << " missing or failed)\n";
        continue;
      }
      out << "- " << g.variant << ": file restore / " << g.variant << " restore = " << fmt("%.0fx", g.ratio) << ": "
          << (g.met ? "met" : "NOT met") << " (with attaching the storage included: " << fmt("%.1fx", g.ratio_with_open)
          << ")\n";
    }
  }

  if (has(r.parts, "layouts") && !r.layouts.empty()) {
    out << "\n### Figs. 8-9: save and restore time per checkpoint by layout (" << r.threads << " threads)\n\n"
        << "saved = bytes of the persisted fields (list: the walked copy; array: every slot of every cell; blocked: "
           "the 2 MB chunks); save = commit time per commit (list: includes walking the lists into the field); "
           "restore = restore + after_restore (list: includes rebuilding the lists); bandwidth = saved bytes / "
           "time.\n\n"
        << "| layout | strategy | saved (MiB) | written / commit (MiB) | save (ms) | restore (ms) | save + restore "
           "(ms) | save GB/s | restore GB/s | compute (ms/frame) | runs |\n"
        << "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
    for (const auto& row : r.layouts) {
      out << "| " << row.layout << " | " << row.variant << " |";
      if (row.good_runs == 0) {
        out << " FAILED | | | | | | | | 0/" << row.runs << " |\n";
        continue;
      }
      const double b = static_cast<double>(row.state_bytes);
      out << " " << mib(b) << " | " << mib(row.nvm_bytes_per_commit) << " | " << ms(row.checkpoint_s) << " | "
          << ms(row.restore_s) << " | " << ms(row.checkpoint_s + row.restore_s) << " | " << gbs(b, row.checkpoint_s)
          << " | " << gbs(b, row.restore_s) << " | " << ms(row.compute_s) << " | " << row.good_runs << "/" << row.runs
          << " |\n";
    }
    out << "\nRatios between layouts (seed 001: the array's bandwidth 7.6x the list's but its save + restore time "
           "only 19 % lower, 4.8 GB vs 225 MB saved; the blocked array 6.3x less time than the list):\n\n"
        << "| strategy | saved array / list | saved blocked / list | save+restore list / array | save+restore list "
           "/ blocked | save bandwidth array / list | save bandwidth blocked / list |\n"
        << "|---|--:|--:|--:|--:|--:|--:|\n";
    for (const char* s : {"file", "nt-copy"}) {
      const CheckpointRow* l = find_row(r.layouts, "list", s);
      const CheckpointRow* a = find_row(r.layouts, "array", s);
      const CheckpointRow* b = find_row(r.layouts, "blocked", s);
      auto bytes = [](const CheckpointRow* x) { return x ? static_cast<double>(x->state_bytes) : 0.0; };
      auto time = [](const CheckpointRow* x) { return x ? x->checkpoint_s + x->restore_s : 0.0; };
      auto bw = [&](const CheckpointRow* x) { return x && x->checkpoint_s > 0 ? bytes(x) / x->checkpoint_s : 0.0; };
      out << "| " << s << " | " << ratio(bytes(a), bytes(l)) << " | " << ratio(bytes(b), bytes(l)) << " | "
          << ratio(time(l), time(a)) << " | " << ratio(time(l), time(b)) << " | " << ratio(bw(a), bw(l)) << " | "
          << ratio(bw(b), bw(l)) << " |\n";
    }
  }

  if (has(r.parts, "threads") && !r.scaling.empty()) {
    std::vector<std::string> variants;
    std::vector<unsigned> threads;
    for (const auto& s : r.scaling) {
      if (!has(variants, s.variant)) variants.push_back(s.variant);
      if (std::find(threads.begin(), threads.end(), s.threads) == threads.end()) threads.push_back(s.threads);
    }
    auto cell = [&](unsigned t, const std::string& v) -> const CheckpointScaling* {
      for (const auto& s : r.scaling)
        if (s.threads == t && s.variant == v) return &s;
      return nullptr;
    };
    out << "\n### Fig. 10: throughput vs threads (layout " << r.layout << ")\n\n"
        << "Million particle updates per second = particles x frames / loop time (compute + commit), and the "
           "percentage of native at the same thread count. More threads than the "
        << r.nproc
        << " hardware threads: oversubscribed. cairn copies and flushes on all app threads (and "
           "in-place's helper thread), unlike the seed's single-threaded persistence.\n\n| threads |";
    for (const auto& v : variants) out << " " << v << " |";
    out << "\n|---|";
    for (std::size_t i = 0; i < variants.size(); ++i) out << "--:|";
    out << "\n";
    for (unsigned t : threads) {
      out << "| " << t << (t > r.nproc ? " (oversubscribed)" : "") << " |";
      const CheckpointScaling* nat = cell(t, "native");
      for (const auto& v : variants) {
        const CheckpointScaling* s = cell(t, v);
        if (!s || s->good_runs == 0) {
          out << " FAILED |";
          continue;
        }
        out << " " << fmt("%.3f", s->throughput / 1e6);
        if (v != "native" && nat && nat->throughput > 0)
          out << " (" << fmt("%.0f %%", 100 * s->throughput / nat->throughput) << ")";
        if (s->good_runs < s->runs) out << " [" << s->good_runs << "/" << s->runs << " runs]";
        out << " |";
      }
      out << "\n";
    }
    if (threads.size() > 1) {
      out << "| speed-up " << threads.front() << " -> " << threads[1] << " |";
      for (const auto& v : variants) {
        const CheckpointScaling* a = cell(threads.front(), v);
        const CheckpointScaling* b = cell(threads[1], v);
        out << " " << (a && b ? ratio(b->throughput, a->throughput) : std::string("-")) << " |";
      }
      out << "\n";
    }
  }

  if (has(r.parts, "heartbeat") && !r.heartbeat.empty()) {
    out << "\n### §4.4: restart within the heartbeat timeout (layout " << r.layout << ", " << r.threads
        << " threads)\n\n"
        << "Eq. 1: T_timeout = T_hm + T_i + T_r + T_w with T_hm = 0, T_i = T_w = " << ms(r.baseline_s)
        << " ms (the native frame), T_r = T_i / 5: T_timeout = " << ms(r.t_timeout)
        << " ms. Eq. 2: T_checkpoint + T_restart + T_compute < T_timeout, with T_restart = attach + restore of "
           "Table 4 and T_compute that strategy's frame. Eq. 3 (resiliency interval r, the timeout scaled by r, up "
           "to r frames recomputed after a restart): the smallest r in 1..100 with T_checkpoint + T_restart + r "
           "T_compute < r T_timeout.\n\n"
        << "| strategy | T_checkpoint (ms) | T_restart (ms) | T_compute (ms) | sum (ms) | sum / T_timeout | fits (eq. "
           "2) "
           "| smallest r (eq. 3) |\n|---|--:|--:|--:|--:|--:|---|--:|\n";
    for (const auto& h : r.heartbeat)
      out << "| " << h.variant << " | " << ms(h.t_checkpoint) << " | " << ms(h.t_restart) << " | " << ms(h.t_compute)
          << " | " << ms(h.sum) << " | " << fmt("%.2f", h.sum / r.t_timeout) << " | " << (h.fits ? "yes" : "no")
          << " | " << (h.interval ? std::to_string(h.interval) : std::string("none <= 100")) << " |\n";
  }

  out << "\nRuns: " << (r.failed_runs == 0 ? std::string("all verified") : std::to_string(r.failed_runs) + " FAILED")
      << "; every run of a layout ended with the same checksum, and every restored state equalled the committed "
         "one.\n";
  for (const auto* rows : {&r.table4, &r.layouts})
    for (const auto& row : *rows)
      for (const auto& f : row.failures)
        out << "FAILED: " << row.layout << ", " << row.threads << " threads, " << row.variant << ": " << f << "\n";
  for (const auto& s : r.scaling)
    for (const auto& f : s.failures) out << "FAILED: " << s.threads << " threads, " << s.variant << ": " << f << "\n";
}

Result<void> write_checkpoint_json(const CheckpointReport& r, const std::string& path) {
  auto ms_array = [](const std::vector<double>& seconds) {
    Json ms = Json::array();
    for (const double s : seconds) ms.push_back(s * 1e3);
    return ms;
  };
  auto rows_json = [&](const std::vector<CheckpointRow>& rows) {
    Json out = Json::array();
    for (const auto& x : rows)
      out.push_back({{"layout", x.layout},
                     {"variant", x.variant},
                     {"threads", x.threads},
                     {"iterations", x.iterations},
                     {"commits", x.commits},
                     {"state_bytes", x.state_bytes},
                     {"checkpoint_ms", x.checkpoint_s * 1e3},
                     {"restore_ms", x.restore_s * 1e3},
                     {"attach_ms", x.open_s * 1e3},
                     {"compute_ms", x.compute_s * 1e3},
                     {"loop_ms", x.loop_s * 1e3},
                     {"nvm_bytes_per_commit", x.nvm_bytes_per_commit},
                     {"runs", x.runs},
                     {"verified_runs", x.good_runs},
                     {"failures", x.failures},
                     {"checkpoint_samples_ms", ms_array(x.checkpoint_samples_s)},
                     {"restore_samples_ms", ms_array(x.restore_samples_s)}});
    return out;
  };
  Json goals = Json::array();
  for (const auto& g : r.goals)
    goals.push_back({{"variant", g.variant},
                     {"goal", "file restore / restore >= 100"},
                     {"ratio", g.measured ? Json(g.ratio) : Json(nullptr)},
                     {"ratio_with_attach", g.measured ? Json(g.ratio_with_open) : Json(nullptr)},
                     {"met", g.met}});
  Json scaling = Json::array();
  for (const auto& s : r.scaling)
    scaling.push_back({{"threads", s.threads},
                       {"variant", s.variant},
                       {"throughput", s.throughput},
                       {"oversubscribed", s.oversubscribed},
                       {"loop_ms", s.loop_s * 1e3},
                       {"runs", s.runs},
                       {"verified_runs", s.good_runs}});
  Json heartbeat = Json::array();
  for (const auto& h : r.heartbeat)
    heartbeat.push_back({{"variant", h.variant},
                         {"t_checkpoint_ms", h.t_checkpoint * 1e3},
                         {"t_restart_ms", h.t_restart * 1e3},
                         {"t_compute_ms", h.t_compute * 1e3},
                         {"sum_ms", h.sum * 1e3},
                         {"fits", h.fits},
                         {"interval", h.interval ? Json(h.interval) : Json(nullptr)}});
  const Json doc = {
      {"benchmark", "checkpoint"},
      {"cpu_model", r.cpu_model},
      {"date", r.date},
      {"nproc", r.nproc},
      {"repeats", r.repeats},
      {"load_before", r.load_before},
      {"load_after", r.load_after},
      {"elapsed_s", r.elapsed_s},
      {"app", "sph"},
      {"size", r.size},
      {"particles", r.particles},
      {"layout", r.layout},
      {"threads", r.threads},
      {"iterations", r.iterations},
      {"profile", r.profile},
      {"parts", r.parts},
      {"strategies", r.strategies},
      {"failed_runs", r.failed_runs},
      {"table4", {{"baseline_compute_ms", r.baseline_s * 1e3}, {"goals", goals}, {"rows", rows_json(r.table4)}}},
      {"layouts", {{"rows", rows_json(r.layouts)}}},
      {"fig10",
       {{"title", "seed 001 Fig. 10 on sph " + r.size + " (" + r.layout + " layout)"},
        {"unit", "particle updates per second (particles x frames / (compute + commit) seconds)"},
        {"rows", scaling}}},
      {"heartbeat",
       {{"formula",
         "T_timeout = T_hm + T_i + T_r + T_w, T_hm = 0, T_i = T_w = baseline frame, T_r = T_i/5; fits: T_checkpoint + "
         "T_restart + T_compute < T_timeout; interval: smallest r with T_checkpoint + T_restart + r*T_compute < "
         "r*T_timeout"},
        {"t_i_ms", r.baseline_s * 1e3},
        {"t_timeout_ms", r.t_timeout * 1e3},
        {"rows", heartbeat}}}};
  return write_json_file(doc, path);
}

void add_checkpoint_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("checkpoint",
                                   "Seed 001 §4 on sph: Table 4 (checkpoint / restore / compute per strategy), "
                                   "Figs. 8-9 (list vs array vs blocked), Fig. 10 (throughput vs threads), §4.4 "
                                   "(heartbeat timeout and resiliency interval)");
  cmd->footer(
      "Runs sph in-process (quiet, a fresh pool per run in a scratch directory under /dev/shm), committing after\n"
      "every frame. table4: per strategy the checkpoint time per commit, the restore time of a --resume run of\n"
      "a fresh app in the same storage, and the compute time per frame, against native's frame time; goal:\n"
      "restore from in-place and shadow >= 100x faster than from file. layouts: list, array and blocked with\n"
      "file and nt-copy: save and restore time, bytes, bandwidth. threads: particle updates per second at 1, 2,\n"
      "4 and 8 threads (above the hardware threads: oversubscribed). heartbeat: eq. 1-3 from table4's numbers.\n"
      "Medians of --repeats runs, interleaved. Every run must verify; runs of a layout must agree bit for bit,\n"
      "and every restored state must equal the committed one. Default: simsmall, 20 frames, 5-8 minutes.\n"
      "Exit status: 0 measured, 1 some run failed (error, verification or checksum), 2 bad option.");
  struct Args {
    std::string size = "simsmall", layout = "blocked", strategies, profile, parts, dir, json;
    unsigned threads = 2;
    std::uint64_t iterations = kCheckpointIterations;
    int repeats = 3;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--size", args->size, "sph size: test, simsmall, simmedium, simlarge, native (default simsmall)");
  cmd->add_option("--layout", args->layout,
                  "Table 4's, Fig. 10's and §4.4's layout: list, array, blocked (default "
                  "blocked)");
  cmd->add_option("--threads,-t", args->threads, "App threads of Table 4 and the layouts (default 2)");
  cmd->add_option("--strategies", args->strategies,
                  "Comma-separated strategies (default all: undo-log, shadow, file, dram-cache, nt-copy, in-place)");
  cmd->add_option("--repeats,-r", args->repeats, "Runs per row; medians are reported (default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--iterations", args->iterations, "Frames per run (default 20)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--profile", args->profile, "Device profile of the pools (default: the real device)");
  cmd->add_option("--parts", args->parts,
                  "Comma-separated parts (default all): table4, layouts, threads, heartbeat (heartbeat runs table4)");
  cmd->add_option("--dir", args->dir, "Base directory for the scratch pools (default /dev/shm)");
  cmd->add_option("--json", args->json, "Also write the results as JSON to this file");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    // The tool's exit status is set by throwing CLI::RuntimeError(code):
    // its main() returns app.exit(e), which is the code for a RuntimeError.
    auto fail = [](const Error& e, int code) {
      std::cerr << "cairn bench checkpoint: " << e.message << "\n";
      throw CLI::RuntimeError(code);
    };
    CheckpointOptions o;
    o.size = args->size;
    o.layout = args->layout;
    o.threads = args->threads;
    o.strategies = ::cairn::bench::split_list(args->strategies);
    o.repeats = args->repeats;
    o.iterations = args->iterations;
    o.profile = args->profile;
    o.parts = ::cairn::bench::split_list(args->parts);
    o.dir = args->dir;
    auto report = run_checkpoint_bench(o, args->quiet ? nullptr : &std::cerr);
    if (!report.ok()) fail(report.error(), 2);
    print_checkpoint_report(report.value(), std::cout);
    if (!args->json.empty())
      if (auto w = write_checkpoint_json(report.value(), args->json); !w.ok()) fail(w.error(), 2);
    if (report.value().failed_runs) throw CLI::RuntimeError(1);
  });
}

}  // namespace cairn::bench
