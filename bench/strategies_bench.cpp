// strategies_bench.cpp — every persistence strategy on one state, per device profile (see strategies_bench.hpp).
#include "bench/strategies_bench.hpp"

#include <linux/magic.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "bench/bench_util.hpp"
#include "cairn/extended/pool.hpp"
#include "cairn/extended/profile.hpp"
#include "cairn/persist.hpp"
#include "persist/strategy.hpp"
#include "util/thread_pool.hpp"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr int kVerifySamples = 1024;  // bytes checked after every restore

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

using persist::detail::BenchTraits;

// The registry's record of a strategy (the names were checked against it).
const persist::detail::Registration& record_of(const std::string& strategy) {
  return *persist::detail::find_registration(strategy);
}

// Scratch storage of this run: whatever any strategy (or the baseline's pool)
// created under `name`. Best effort: a file left behind is only a scratch file.
void remove_storage(const std::string& dir, const std::string& name) {
  persist::Options o;
  o.dir = dir;
  o.name = name;
  (void)persist::remove_storage(o);
}

std::string gib(double bytes) { return fmt("%.1f GiB", bytes / kGiB); }

// Why a strategy cannot run at this size here, or "" if it can: the pool
// files (plus, on tmpfs, their memory) and the DRAM working set must fit.
std::string space_problem(const std::string& dir, const BenchTraits& t, std::size_t size) {
  const double files = static_cast<double>(t.file_factor) * static_cast<double>(size) + 64.0 * kMiB;
  const double dram = static_cast<double>(t.dram_factor) * static_cast<double>(size);
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) == 0) {
    const double free_bytes = static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize);
    if (files > 0.95 * free_bytes)
      return "needs about " + gib(files) + " of storage in " + dir + ", " + gib(free_bytes) + " free";
  }
  struct statfs fs {};
  const bool tmpfs = ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  const double memory = dram + (tmpfs ? files : 0.0);
  const auto avail = static_cast<double>(memory_available());
  if (avail > 0 && memory > 0.9 * avail)
    return "needs about " + gib(memory) + " of memory (" + (tmpfs ? "tmpfs storage + " : "") + "DRAM working set), " +
           gib(avail) + " available";
  return "";
}

Error in_phase(const std::string& phase, const Error& e) { return make_error(e.code, phase + ": " + e.message); }

// One registered state: a Context with one region (or one DualRegion).
struct State {
  std::unique_ptr<persist::Context> ctx;
  persist::Region* plain = nullptr;
  persist::DualRegion* dual = nullptr;
  // What this iteration writes, and the latest version.
  std::byte* target() const { return static_cast<std::byte*>(dual ? dual->write() : plain->data()); }
  const std::byte* latest() const { return static_cast<const std::byte*>(dual ? dual->read() : plain->data()); }
};

Result<State> open_state(const persist::Options& o, std::size_t size, bool dual, double& open_s) {
  State s;
  auto c = persist::Context::create(o);
  if (!c.ok()) return in_phase("create", c.error());
  s.ctx = std::move(c.value());
  if (dual) {
    auto d = s.ctx->dual_region("state", size);
    if (!d.ok()) return in_phase("dual_region", d.error());
    s.dual = d.value();
  } else {
    auto r = s.ctx->region("state", size);
    if (!r.ok()) return in_phase("region", r.error());
    s.plain = r.value();
  }
  const auto t0 = Clock::now();
  auto r = s.ctx->open();
  open_s = seconds_since(t0);
  if (!r.ok()) return in_phase("open", r.error());
  return s;
}

struct Run {
  std::string dir;
  std::size_t size = 0;
  unsigned threads = 0;  // resolved, for the benchmark's own writes and the baseline
  unsigned option_threads = 0;
  int repeats = 0;
  unsigned stride = 10;  // a partial update writes every stride-th page
  std::ostream* log = nullptr;
};

// The application's iteration: every byte of the state becomes v.
void write_full(const Run& run, State& s, std::byte v) {
  std::byte* p = s.target();
  util::parallel_ranges(run.size, run.threads,
                        [&](std::size_t off, std::size_t len) { std::memset(p + off, static_cast<int>(v), len); });
}

// A partial iteration: every stride-th page becomes v, the rest stays. In a
// DualRegion the rest must be carried over from read() (write() holds the
// version before last): seed 004's non-uniform update case.
void write_partial(const Run& run, State& s, std::byte v) {
  std::byte* p = s.target();
  util::parallel_ranges(run.size, run.threads, [&](std::size_t off, std::size_t len) {
    for (std::size_t pg = off / kPage; pg * kPage < off + len; ++pg) {
      const std::size_t b = pg * kPage, n = std::min(kPage, run.size - b);
      if (pg % run.stride == 0)
        std::memset(p + b, static_cast<int>(v), n);
      else if (s.dual)
        s.dual->carry_over(b, n);
    }
  });
}

// Checks sampled bytes of the latest version against `v`.
bool holds(const Run& run, const State& s, std::byte v) {
  const std::byte* p = s.latest();
  for (int i = 0; i < kVerifySamples; ++i) {
    const std::size_t at = run.size / kVerifySamples * static_cast<std::size_t>(i) + static_cast<std::size_t>(i) % 64;
    if (p[std::min(at, run.size - 1)] != v) return false;
  }
  return p[run.size - 1] == v;
}

// begin(), the state writes, commit(); the seconds spent in begin() and
// commit() (and, if asked, in the writes).
Result<double> iterate(State& s, const std::function<void()>& write, double* write_s = nullptr) {
  auto t0 = Clock::now();
  auto b = s.ctx->begin();
  double t = seconds_since(t0);
  if (!b.ok()) return in_phase("begin", b.error());
  t0 = Clock::now();
  write();
  if (write_s) *write_s = seconds_since(t0);
  t0 = Clock::now();
  auto c = s.ctx->commit();
  t += seconds_since(t0);
  if (!c.ok()) return in_phase("commit", c.error());
  return t;
}

class ValueSeq {
 public:
  std::byte next() {
    v_ = v_ % 251 + 1;  // never 0: a zeroed (never written) state does not pass for a version
    return std::byte{v_};
  }

 private:
  std::uint8_t v_ = 0;
};

Result<void> measure_strategy(const Run& run, const std::string& name, StrategyRow& row) {
  const BenchTraits& t = record_of(row.strategy).bench;
  persist::Options o;
  o.strategy = row.strategy;
  o.name = name;
  o.dir = run.dir;
  o.device = row.profile;
  o.threads = run.option_threads;
  auto say = [&](const std::string& what) {
    if (run.log) *run.log << "  " << row.profile << " / " << row.strategy << ": " << what << std::endl;
  };
  ValueSeq values;
  std::byte committed{0};
  double open_s = 0;

  {  // Full commits, then rollbacks, in one Context.
    say("full commits");
    auto st = open_state(o, run.size, t.dual, open_s);
    if (!st.ok()) return std::move(st).error();
    State& s = st.value();
    // Two untimed commits first: the first write of every page of the state
    // and of both slots (page faults, tmpfs allocation) is not a commit cost.
    std::byte v{0};
    for (int i = 0; i < 2; ++i) {
      v = values.next();
      auto warm = iterate(s, [&] { write_full(run, s, v); });
      if (!warm.ok()) return in_phase("warm-up", warm.error());
    }
    committed = v;
    const persist::Stats before_full = s.ctx->stats();
    for (int i = 0; i < run.repeats; ++i) {
      v = values.next();
      auto c = iterate(s, [&] { write_full(run, s, v); });
      if (!c.ok()) return std::move(c).error();
      row.commit_samples.push_back(c.value());
      committed = v;
    }
    const persist::Stats& after_full = s.ctx->stats();
    row.nvm_per_commit =
        static_cast<double>(after_full.nvm_bytes_written - before_full.nvm_bytes_written) / run.repeats;
    row.syncs_per_commit = static_cast<double>(after_full.sync_calls - before_full.sync_calls) / run.repeats;
    row.synced_per_commit = static_cast<double>(after_full.synced_bytes - before_full.synced_bytes) / run.repeats;

    say("rollbacks");
    for (int i = 0; i < run.repeats; ++i) {
      if (auto b = s.ctx->begin(); !b.ok()) return in_phase("begin", b.error());
      write_full(run, s, values.next());
      const auto t0 = Clock::now();
      auto r = s.ctx->restore();
      row.rollback_samples.push_back(seconds_since(t0));
      if (!r.ok()) return in_phase("rollback restore", r.error());
      if (!holds(run, s, committed))
        return make_error(Errc::corrupted, "rollback restore did not bring back the committed bytes");
    }
  }

  say("restarts");
  row.verified = true;
  for (int i = 0; i < run.repeats; ++i) {
    auto st = open_state(o, run.size, t.dual, open_s);
    if (!st.ok()) return in_phase("restart", st.error());
    State& s = st.value();
    row.open_samples.push_back(open_s);
    const auto t0 = Clock::now();
    auto r = s.ctx->restore();
    row.restore_samples.push_back(seconds_since(t0));
    if (!r.ok()) return in_phase("restart restore", r.error());
    if (!holds(run, s, committed)) row.verified = false;
  }
  if (!row.verified) return make_error(Errc::corrupted, "a restart restore did not bring back the committed bytes");

  // Partial iterations: with incremental tracking, and (strategies that have
  // it) the same iterations without it first, as the same run's baseline.
  for (const bool incremental : {false, true}) {
    if (!incremental && !row.incremental) continue;
    say(incremental ? "partial commits" : "partial commits without incremental");
    o.incremental = incremental;
    auto st = open_state(o, run.size, t.dual, open_s);
    if (!st.ok()) return in_phase("partial", st.error());
    State& s = st.value();
    if (auto r = s.ctx->restore(); !r.ok()) return in_phase("partial restore", r.error());
    for (int i = 0; i < 2; ++i) {  // tracking knows a slot's pages after two intervals
      const std::byte v = values.next();
      auto c = iterate(s, [&] { write_partial(run, s, v); });
      if (!c.ok()) return in_phase("partial warm-up", c.error());
    }
    const persist::Stats before = s.ctx->stats();
    for (int i = 0; i < run.repeats; ++i) {
      const std::byte v = values.next();
      double write_s = 0;
      auto c = iterate(
          s, [&] { write_partial(run, s, v); }, &write_s);
      if (!c.ok()) return in_phase("partial", c.error());
      (incremental ? row.partial_samples : row.partial_full_samples).push_back(c.value());
      (incremental ? row.partial_write_samples : row.partial_write_untracked_samples).push_back(write_s);
    }
    if (!incremental) continue;
    const persist::Stats& after = s.ctx->stats();
    row.nvm_per_partial = static_cast<double>(after.nvm_bytes_written - before.nvm_bytes_written) / run.repeats;
    row.saved_per_partial =
        static_cast<double>(after.incremental_bytes_saved - before.incremental_bytes_saved) / run.repeats;
  }
  return {};
}

// Bandwidths of copying `size` bytes into a pool under `profile`.
Result<CopyBaseline> measure_baseline(const Run& run, const std::string& profile, const std::string& name) {
  CopyBaseline b;
  b.profile = profile;
  auto device = devices::make_device(profile);
  if (!device.ok()) return in_phase("device '" + profile + "'", device.error());
  const std::string path = run.dir + "/" + name + ".pool";
  pool::CreateOptions co;
  co.size = pool::kArenaOffset + (run.size + kPage - 1) / kPage * kPage + kMiB;
  co.device = std::move(device.value());
  auto created = pool::Pool::create(path, std::move(co));
  if (!created.ok()) return in_phase("baseline pool", created.error());
  struct Remove {  // the pool file goes when the pool does
    std::string path;
    std::unique_ptr<pool::Pool> p;
    ~Remove() {
      p.reset();
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } scratch{path, std::move(created.value())};
  pool::Pool& p = *scratch.p;
  std::byte* dst = p.at(pool::kArenaOffset);
  const std::size_t n = run.size;
  std::unique_ptr<std::byte[]> mem(new std::byte[n + 64]);
  auto* src = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(mem.get()) + 63) & ~std::uintptr_t{63});
  util::parallel_ranges(n, run.threads, [&](std::size_t off, std::size_t len) {
    for (std::size_t i = off; i < off + len; ++i) src[i] = static_cast<std::byte>(i * 131);
    std::memset(dst + off, 0, len);  // fault the destination in before timing
  });
  auto time = [](const std::function<void()>& f) {
    const auto t0 = Clock::now();
    f();
    return seconds_since(t0);
  };
  std::vector<double> m1, mn, nt1, ntn;
  for (int rep = 0; rep < run.repeats; ++rep) {
    m1.push_back(n / time([&] { std::memcpy(dst, src, n); }));
    mn.push_back(n / time([&] {
                   util::parallel_ranges(n, run.threads, [&](std::size_t off, std::size_t len) {
                     std::memcpy(dst + off, src + off, len);
                   });
                 }));
    nt1.push_back(n / time([&] { p.memcpy_persist(dst, src, n); }));
    ntn.push_back(n / time([&] { p.memcpy_persist_mt(dst, src, n, run.threads); }));
  }
  b.memcpy_1 = median(m1);
  b.memcpy_n = median(mn);
  b.nt_1 = median(nt1);
  b.nt_n = median(ntn);
  return b;
}

// The better of two measurements of the same profile, figure by figure.
CopyBaseline better_of(const Run& run, const CopyBaseline& before, const CopyBaseline& after) {
  CopyBaseline b = before;
  b.memcpy_1 = std::max(before.memcpy_1, after.memcpy_1);
  b.memcpy_n = std::max(before.memcpy_n, after.memcpy_n);
  b.nt_1 = std::max(before.nt_1, after.nt_1);
  b.nt_n = std::max(before.nt_n, after.nt_n);
  b.best_nt = std::max(b.nt_1, b.nt_n);
  b.best_nt_before = std::max(before.nt_1, before.nt_n);
  b.best_nt_after = std::max(after.nt_1, after.nt_n);
  b.best_nt_what = b.nt_n >= b.nt_1 ? "memcpy_persist_mt, " + std::to_string(run.threads) + " threads"
                                    : std::string("memcpy_persist, 1 thread");
  return b;
}

std::string safe_name(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return o.substr(0, 40);
}

void finish_row(const Run& run, const CopyBaseline* base, StrategyRow& r) {
  r.commit_s = median(r.commit_samples);
  r.partial_commit_s = median(r.partial_samples);
  r.partial_full_commit_s = median(r.partial_full_samples);
  r.partial_write_s = median(r.partial_write_samples);
  r.partial_write_untracked_s = median(r.partial_write_untracked_samples);
  r.restore_s = median(r.restore_samples);
  r.rollback_s = median(r.rollback_samples);
  r.open_s = median(r.open_samples);
  if (r.status != "ok") return;
  r.commit_bw = r.commit_s > 0 ? static_cast<double>(run.size) / r.commit_s : 0;
  r.pct_of_nt = base && base->best_nt > 0 ? 100.0 * r.commit_bw / base->best_nt : 0;
  if (r.restore_goal) r.goal_restore = r.restore_s <= 1e-3 ? Goal::met : Goal::missed;
  if (r.copy_based && base && base->best_nt > 0) r.goal_bw = r.pct_of_nt >= 80.0 ? Goal::met : Goal::missed;
  if (r.incremental) r.goal_incremental = r.partial_commit_s <= r.partial_full_commit_s ? Goal::met : Goal::missed;
}

const char* goal_word(Goal g) { return g == Goal::met ? "met" : g == Goal::missed ? "NOT met" : "-"; }

}  // namespace

const CopyBaseline* StrategiesReport::baseline(const std::string& profile) const {
  for (const auto& b : baselines)
    if (b.profile == profile) return &b;
  return nullptr;
}

Result<StrategiesReport> run_strategies_bench(const StrategiesBenchOptions& opt, std::ostream* log) {
  const auto t_start = Clock::now();
  if (opt.size < kPage)
    return make_error(Errc::invalid_argument, "--size must be at least 4K (one page), got " + std::to_string(opt.size));
  if (opt.repeats < 1) return make_error(Errc::invalid_argument, "--repeats must be at least 1");
  if (opt.partial_pct < 1 || opt.partial_pct > 100)
    return make_error(Errc::invalid_argument, "--partial must be a percentage from 1 to 100");
  const auto known = persist::strategy_names();
  std::vector<std::string> strategies = opt.strategies.empty() ? known : opt.strategies;
  for (const auto& s : strategies)
    if (std::find(known.begin(), known.end(), s) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return make_error(Errc::invalid_argument, "unknown strategy '" + s + "'; choose from: " + list);
    }
  if (opt.profiles.empty()) return make_error(Errc::invalid_argument, "no device profile given");
  for (const auto& p : opt.profiles)  // "real": the real device itself, no emulation wrapper
    if (p != "real")
      if (auto parsed = devices::parse_profile(p); !parsed.ok()) return parsed.error();

  Run run;
  run.dir = opt.dir.empty() ? pool::default_pool_dir() : opt.dir;
  run.size = opt.size;
  run.option_threads = opt.threads;
  run.threads = opt.threads ? opt.threads : util::default_threads();
  run.repeats = opt.repeats;
  run.stride = std::max(1u, (100 + opt.partial_pct / 2) / opt.partial_pct);
  run.log = log;
  if (auto made = create_bench_dir(run.dir); !made.ok()) return std::move(made).error();

  StrategiesReport r;
  r.cpu_model = cpu_model();
  r.date = utc_now();
  r.pool_dir = run.dir;
  r.nproc = std::max(1u, std::thread::hardware_concurrency());
  r.threads = run.threads;
  r.repeats = run.repeats;
  r.partial_pct = opt.partial_pct;
  r.partial_stride = run.stride;
  r.size = run.size;
  r.load_before = load_average();

  const std::string prefix = "strategies-bench-" + std::to_string(::getpid());
  for (const auto& profile : opt.profiles) {
    const std::string base_name = prefix + "-baseline-" + safe_name(profile);
    auto baseline = [&]() -> Result<CopyBaseline> {
      if (log) *log << "profile " << profile << ": non-temporal copy baseline" << std::endl;
      auto b = measure_baseline(run, profile, base_name);
      remove_storage(run.dir, base_name);
      return b;
    };
    auto before = baseline();
    if (!before.ok()) return std::move(before).error();

    for (const auto& strategy : strategies) {
      StrategyRow row;
      row.profile = profile;
      row.strategy = strategy;
      const auto& rec = record_of(strategy);
      const BenchTraits& t = rec.bench;
      row.note = t.note;
      row.copy_based = t.copy_based;
      row.restore_goal = rec.restore_cost == persist::detail::RestoreCost::constant;
      row.incremental = rec.incremental;
      if (std::string why = space_problem(run.dir, t, run.size); !why.empty()) {
        row.status = "skipped";
        row.reason = why;
        if (log) *log << "  " << profile << " / " << strategy << ": skipped, " << why << std::endl;
      } else {
        const std::string name = prefix + "-" + safe_name(strategy) + "-" + safe_name(profile);
        remove_storage(run.dir, name);
        auto m = measure_strategy(run, name, row);
        remove_storage(run.dir, name);
        if (!m.ok()) {
          row.status = "failed";
          row.reason = std::string(errc_name(m.error().code)) + ": " + m.error().message;
          if (log) *log << "  " << profile << " / " << strategy << ": FAILED, " << row.reason << std::endl;
        }
      }
      r.rows.push_back(std::move(row));
    }
    auto after = baseline();
    if (!after.ok()) return std::move(after).error();
    r.baselines.push_back(better_of(run, before.value(), after.value()));
  }

  for (auto& row : r.rows) finish_row(run, r.baseline(row.profile), row);
  for (auto& row : r.rows) {
    if (row.status != "ok") continue;
    for (const auto& u : r.rows)
      if (u.profile == row.profile && u.strategy == "undo-log" && u.status == "ok") {
        row.vs_undo_log = row.commit_s > 0 ? u.commit_s / row.commit_s : 0;
        row.vs_undo_partial = row.partial_commit_s > 0 ? u.partial_commit_s / row.partial_commit_s : 0;
      }
  }
  r.load_after = load_average();
  r.elapsed_s = seconds_since(t_start);
  return r;
}

void print_strategies_report(const StrategiesReport& r, std::ostream& out) {
  out << "Machine: " << r.cpu_model << ", " << r.nproc << " hardware threads; " << r.date << "\n"
      << "State: " << fmt("%.0f", static_cast<double>(r.size) / kMiB) << " MiB (" << r.size << " bytes), one region; "
      << r.threads << " threads; medians of " << r.repeats << "; partial update = every " << r.partial_stride
      << "th 4 KiB page (" << fmt("%.0f", 100.0 / r.partial_stride) << " %); storage in " << r.pool_dir << "\n"
      << "Load average " << fmt("%.2f", r.load_before) << " before, " << fmt("%.2f", r.load_after)
      << " after; run time " << fmt("%.0f", r.elapsed_s) << " s\n\n";

  out << "| profile | nt-copy 1 thread | nt-copy " << r.threads << " threads | memcpy 1 thread (reference) | memcpy "
      << r.threads << " threads (reference) | best nt-copy | before / after |\n|---|--:|--:|--:|--:|--:|--:|\n";
  for (const auto& b : r.baselines)
    out << "| " << b.profile << " | " << fmt("%.2f", b.nt_1 / kGB) << " GB/s | " << fmt("%.2f", b.nt_n / kGB)
        << " GB/s | " << fmt("%.2f", b.memcpy_1 / kGB) << " GB/s | " << fmt("%.2f", b.memcpy_n / kGB) << " GB/s | "
        << fmt("%.2f", b.best_nt / kGB) << " GB/s | " << fmt("%.2f", b.best_nt_before / kGB) << " / "
        << fmt("%.2f", b.best_nt_after / kGB) << " |\n";
  out << "Baselines: copies of the state size into a pool under the profile, medians of " << r.repeats << " before and "
      << r.repeats << " after the profile's strategies, the better of the two.\n\n";

  out << "| profile | strategy | commit ms | partial commit ms | partial, full copy ms | saved MiB/partial | partial "
         "writes ms (tracked / not) | restore ms | rollback ms | open ms | NVM MiB/commit | GB/s | % of nt-copy bw | "
         "x vs undo-log | goals |\n"
      << "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";
  auto ms = [](double s) { return fmt(s < 0.01 ? "%.3f" : s < 1 ? "%.2f" : "%.1f", s * 1e3); };
  for (const auto& w : r.rows) {
    out << "| " << w.profile << " | " << w.strategy << " | ";
    if (w.status != "ok") {
      out << w.status << ": " << w.reason << " | | | | | | | | | | | | |\n";
      continue;
    }
    std::string goals;
    if (w.goal_restore != Goal::none) goals += std::string("restore <= 1 ms ") + goal_word(w.goal_restore);
    if (w.goal_bw != Goal::none) goals += std::string(goals.empty() ? "" : "; ") + ">= 80 % bw " + goal_word(w.goal_bw);
    if (w.goal_incremental != Goal::none)
      goals += std::string(goals.empty() ? "" : "; ") + "incremental <= full " + goal_word(w.goal_incremental);
    const bool inc = w.incremental;
    out << ms(w.commit_s) << " | " << ms(w.partial_commit_s) << " | " << (inc ? ms(w.partial_full_commit_s) : "-")
        << " | " << fmt("%.1f", w.saved_per_partial / kMiB) << " | "
        << (inc ? ms(w.partial_write_s) + " / " + ms(w.partial_write_untracked_s) : "-") << " | " << ms(w.restore_s)
        << " | " << ms(w.rollback_s) << " | " << ms(w.open_s) << " | " << fmt("%.1f", w.nvm_per_commit / kMiB) << " | "
        << fmt("%.2f", w.commit_bw / kGB) << " | " << fmt("%.0f", w.pct_of_nt) << " | "
        << (w.vs_undo_log > 0 ? fmt("%.2f", w.vs_undo_log) : std::string("-")) << " | " << (goals.empty() ? "-" : goals)
        << " |\n";
  }

  int met = 0, missed = 0;
  std::string missed_list;
  for (const auto& w : r.rows)
    for (Goal g : {w.goal_restore, w.goal_bw, w.goal_incremental}) {
      if (g == Goal::met) ++met;
      if (g == Goal::missed) {
        ++missed;
        missed_list += (missed_list.empty() ? "" : ", ") + w.profile + "/" + w.strategy;
      }
    }
  out << "\nGoals: " << met << " met, " << missed << " not met" << (missed ? " (" + missed_list + ")" : "") << ".\n";
  for (const auto& w : r.rows)
    if (w.status != "ok")
      out << "Not measured: " << w.profile << "/" << w.strategy << " (" << w.status << "): " << w.reason << "\n";
  out << "\nColumns: commit = begin() + commit() after writing the whole state (the writes are not timed); partial "
         "= the same after writing the partial update, with Options::incremental (saved = bytes incremental commit "
         "did not copy; partial, full copy = the same iterations without incremental, in the same run; partial "
         "writes = the application's partial update itself, with incremental's write tracking and without); restore = "
         "restore() in a fresh Context on the committed storage, as after a restart (open "
         "= its open(), timed apart); rollback = restore() in the same Context after an uncommitted full write; "
         "GB/s = state bytes / commit time; % of nt-copy bw = that against the profile's best non-temporal copy "
         "above; x vs undo-log = undo-log's commit time / this commit time.\n"
         "Goals: restore <= 1 ms for shadow and in-place; >= 80 % of nt-copy bandwidth for the copy-based commits "
         "(shadow, dram-cache, nt-copy); an incremental commit no slower than the full one.\nNotes:\n";
  std::vector<std::string> seen;
  for (const auto& w : r.rows)
    if (!w.note.empty() && std::find(seen.begin(), seen.end(), w.strategy) == seen.end()) {
      seen.push_back(w.strategy);
      out << "- " << w.strategy << ": " << w.note << ".\n";
    }
}

Result<void> write_strategies_json(const StrategiesReport& r, const std::string& path) {
  auto ms_array = [](const std::vector<double>& seconds) {
    Json ms = Json::array();
    for (const double s : seconds) ms.push_back(s * 1e3);
    return ms;
  };
  auto goal = [](Goal g) { return g == Goal::none ? Json(nullptr) : Json(g == Goal::met); };
  Json baselines = Json::array();
  for (const auto& b : r.baselines)
    baselines.push_back({{"profile", b.profile},
                         {"memcpy_1_bytes_per_s", b.memcpy_1},
                         {"memcpy_n_bytes_per_s", b.memcpy_n},
                         {"nt_1_bytes_per_s", b.nt_1},
                         {"nt_n_bytes_per_s", b.nt_n},
                         {"best_nt_bytes_per_s", b.best_nt},
                         {"best_nt_before_bytes_per_s", b.best_nt_before},
                         {"best_nt_after_bytes_per_s", b.best_nt_after},
                         {"best_nt_what", b.best_nt_what}});
  Json rows = Json::array();
  for (const auto& w : r.rows)
    rows.push_back({{"profile", w.profile},
                    {"strategy", w.strategy},
                    {"status", w.status},
                    {"reason", w.reason},
                    {"commit_ms", w.commit_s * 1e3},
                    {"partial_commit_ms", w.partial_commit_s * 1e3},
                    {"partial_full_commit_ms", w.partial_full_commit_s * 1e3},
                    {"partial_write_ms", w.partial_write_s * 1e3},
                    {"partial_write_untracked_ms", w.partial_write_untracked_s * 1e3},
                    {"restore_ms", w.restore_s * 1e3},
                    {"rollback_ms", w.rollback_s * 1e3},
                    {"open_ms", w.open_s * 1e3},
                    {"syncs_per_commit", w.syncs_per_commit},
                    {"synced_bytes_per_commit", w.synced_per_commit},
                    {"nvm_bytes_per_commit", w.nvm_per_commit},
                    {"nvm_bytes_per_partial_commit", w.nvm_per_partial},
                    {"incremental_bytes_saved_per_partial_commit", w.saved_per_partial},
                    {"commit_bytes_per_s", w.commit_bw},
                    {"pct_of_nt_copy_bw", w.pct_of_nt},
                    {"x_vs_undo_log", w.vs_undo_log},
                    {"x_vs_undo_log_partial", w.vs_undo_partial},
                    {"copy_based", w.copy_based},
                    {"restore_verified", w.verified},
                    {"goal_restore_1ms", goal(w.goal_restore)},
                    {"goal_80pct_nt_bw", goal(w.goal_bw)},
                    {"note", w.note},
                    {"commit_samples_ms", ms_array(w.commit_samples)},
                    {"partial_samples_ms", ms_array(w.partial_samples)},
                    {"restore_samples_ms", ms_array(w.restore_samples)},
                    {"rollback_samples_ms", ms_array(w.rollback_samples)}});
  const Json doc = {
      {"benchmark", "strategies"}, {"cpu_model", r.cpu_model},     {"date", r.date},
      {"nproc", r.nproc},          {"threads", r.threads},         {"repeats", r.repeats},
      {"size_bytes", r.size},      {"partial_pct", r.partial_pct}, {"partial_page_stride", r.partial_stride},
      {"pool_dir", r.pool_dir},    {"load_before", r.load_before}, {"load_after", r.load_after},
      {"elapsed_s", r.elapsed_s},  {"baselines", baselines},       {"rows", rows}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench
