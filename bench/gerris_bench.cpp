// gerris_bench.cpp — `cairn bench gerris` (see gerris_bench.hpp).
#include "bench/gerris_bench.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/bench_util.hpp"

extern char** environ;

namespace cairn::bench {

namespace fs = std::filesystem;

namespace {

// ---- the cases: integrations/gerris/cases/{shear,solid}{2D,3D}.gfs at a chosen level and length, without
// their output events (Gerris shortens time steps to land on time-based events; every variant here adds
// only step-based ones, placed first after Time like the module's README asks for CairnPersist).

// Parallel cases (issue 38): "shear2D@N" is shear2D on the four boxes `gerris2D -s 1` splits it into
// (integrations/gerris/cases/shear4boxes2D.gfs), box k on process (k - 1) mod N, run by mpirun -np N (N = 1:
// serially, the same four boxes). Run time only (no restart rows).
int ranks_of(const GerrisCaseSize& c) {
  const auto at = c.name.find('@');
  return at == std::string::npos ? 0 : std::atoi(c.name.c_str() + at + 1);
}
bool is_parallel(const GerrisCaseSize& c) { return ranks_of(c) > 0; }

std::string case_text(const GerrisCaseSize& c, const std::string& module_line, const std::string& events, int steps) {
  std::ostringstream s;
  s << module_line;
  if (is_parallel(c)) {
    const int n = ranks_of(c);
    s << "4 4 GfsAdvection GfsBox GfsGEdge { rootlevel = 1 x = -0.25 y = -0.25 } {\n  Time { iend = " << steps << " }\n"
      << events << "  Refine " << c.level << "\n  VariableTracer T\n"
      << "  Init {} { T = exp(-100.*((x + 0.2)*(x + 0.2) + (y + .236338)*(y + .236338))) }\n"
      << "  VariableStreamFunction { istep = 1 } Psi (t < 0.25 ? 1. : -1.)*sin((x + 0.5)*M_PI)*sin((y + "
         "0.5)*M_PI)/M_PI\n"
      << "  AdaptError { istart = 1 istep = 1 } { cmax = 1e-3 maxlevel = " << c.level << " } T\n}\n";
    const double xy[4][2] = {{-0.25, -0.25}, {-0.25, 0.25}, {0.25, 0.25}, {0.25, -0.25}};
    for (int k = 0; k < 4; ++k)
      s << "GfsBox { id = " << (k + 1) << " pid = " << (k % n) << " x = " << xy[k][0] << " y = " << xy[k][1] << " }\n";
    s << "1 4 right\n2 1 bottom\n2 3 right\n3 4 bottom\n";
  } else if (c.name == "shear2D") {
    s << "1 0 GfsAdvection GfsBox GfsGEdge {} {\n  Time { iend = " << steps << " }\n"
      << events << "  Refine " << c.level << "\n  VariableTracer T\n"
      << "  Init {} { T = exp(-100.*((x + 0.2)*(x + 0.2) + (y + .236338)*(y + .236338))) }\n"
      << "  VariableStreamFunction { istep = 1 } Psi (t < 0.25 ? 1. : -1.)*sin((x + 0.5)*M_PI)*sin((y + "
         "0.5)*M_PI)/M_PI\n"
      << "  AdaptError { istart = 1 istep = 1 } { cmax = 1e-3 maxlevel = " << c.level << " } T\n}\nGfsBox {}\n";
  } else if (c.name == "shear3D") {
    s << "1 0 GfsAdvection GfsBox GfsGEdge {} {\n  Time { iend = " << steps << " }\n"
      << events << "  Refine " << (c.level - 1) << "\n  VariableTracer T\n"
      << "  Init {} { T = exp(-100.*((x + 0.2)*(x + 0.2) + (y + .236338)*(y + .236338))) }\n"
      << "  Init { istep = 1 } {\n    U = (t < 0.25 ? 1. : -1.)*sin((x + 0.5)*M_PI)*cos((y + 0.5)*M_PI)\n"
      << "    V = -(t < 0.25 ? 1. : -1.)*cos((x + 0.5)*M_PI)*sin((y + 0.5)*M_PI)\n  }\n"
      << "  AdaptError { istart = 1 istep = 1 } { cmax = 1e-3 maxlevel = " << c.level << " } T\n}\nGfsBox {}\n";
  } else {  // solid2D, solid3D
    s << "1 0 GfsSimulation GfsBox GfsGEdge {} {\n  Time { iend = " << steps << " }\n"
      << events << "  Refine " << (c.level - 1) << "\n  Solid "
      << (c.name == "solid3D" ? "(x*x + y*y + z*z - 0.25*0.25)" : "(ellipse (0, 0, 0.125, 0.125))") << "\n"
      << "  SourceViscosity 1e-3\n  Init {} { U = 1 }\n"
      << "  AdaptVorticity { istep = 1 } { maxlevel = " << c.level << " cmax = 1e-2 }\n}\n"
      << "GfsBox {\n  left = Boundary { BcDirichlet U 1 BcDirichlet V 0 }\n  right = BoundaryOutflow\n}\n";
  }
  return s.str();
}

// cairn-octree: octree mode as a .gfs gets it (each persist written beside the next step);
// cairn-octree-sync: with async = 0 (each persist durable before Gerris goes on).
const std::vector<std::string> kRunVariants = {"none",         "snapshot-text", "snapshot-binary",
                                               "cairn-stream", "cairn-octree",  "cairn-octree-sync"};
// startup: an empty simulation (one box, no variable, no step): the fixed cost of a gerris2D process
// (loading, MPI_Init, glib), paid by every restart before it reads the .gfs or a snapshot.
const std::vector<std::string> kRestartVariants = {"startup", "snapshot-text", "snapshot-binary", "cairn-stream",
                                                   "cairn-octree"};

// A parallel case: no persistence, Gerris's own (parallel) binary snapshots every --snapshot-every
// steps, CairnPersist in octree mode every step (stream mode is serial only).
const std::vector<std::string> kParallelRunVariants = {"none", "snapshot-binary", "cairn-octree"};
const std::vector<std::string> kNoVariants;

bool is_cairn(const std::string& variant) { return variant.rfind("cairn-", 0) == 0; }
bool is_octree(const std::string& variant) { return variant.rfind("cairn-octree", 0) == 0; }
bool is_3d(const GerrisCaseSize& c) { return c.name.size() > 2 && c.name.compare(c.name.size() - 2, 2, "3D") == 0; }
// The Gerris executable of the case's dimension.
const std::string& gerris_of(const GerrisBenchOptions& o, const GerrisCaseSize& c) {
  return is_3d(c) ? o.gerris3d : o.gerris;
}

// The events and GModule line of one variant, writing into `run_dir`.
std::string variant_events(const std::string& variant, const fs::path& run_dir, int snapshot_every) {
  if (variant == "snapshot-text" || variant == "snapshot-binary")
    return "  OutputSimulation { istep = " + std::to_string(snapshot_every) + " } " +
           (run_dir / "snap-%ld.gfs").string() + (variant == "snapshot-binary" ? " { binary = 1 }" : "") + "\n";
  if (is_cairn(variant))
    return "  CairnPersist { istep = 1 } { dir = " + run_dir.string() + " name = bench mode = " +
           (variant == "cairn-octree-sync" ? std::string("octree async = 0") : variant.substr(6)) + " }\n";
  return "";
}

// ---- one child process

struct Child {
  int status = 0;
  double wall_s = 0;
  double maxrss_kb = 0;
  std::string err;  // its stderr
};

// Runs argv[0] (PATH lookup) with the environment plus `extra`, stdout to /dev/null, stderr to a file
// in `dir`; waits for it with wait4 so that the rusage is this child's alone.
Result<Child> run_child(const std::vector<std::string>& argv, const std::vector<std::string>& extra,
                        const fs::path& dir) {
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    bool overridden = false;
    for (const auto& x : extra)
      if (kv.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0) overridden = true;
    if (!overridden) env_store.push_back(kv);
  }
  for (const auto& x : extra) env_store.push_back(x);
  std::vector<char*> envp, args;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_store = argv;
  for (auto& s : argv_store) args.push_back(s.data());
  args.push_back(nullptr);

  const std::string err_path = (dir / "stderr.txt").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  pid_t pid = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return make_error(Errc::io_error, argv[0] + ": cannot start: " + std::strerror(rc));
  Child c;
  struct rusage ru {};
  if (wait4(pid, &c.status, 0, &ru) < 0)
    return make_error(Errc::io_error, "wait4: " + std::string(std::strerror(errno)));
  c.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  c.maxrss_kb = static_cast<double>(ru.ru_maxrss);
  std::ifstream f(err_path);
  std::stringstream ss;
  ss << f.rdbuf();
  c.err = ss.str();
  return c;
}

bool exited_ok(const Child& c) { return WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0; }
bool killed(const Child& c) { return WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL; }

std::string describe(const Child& c) {
  std::string s = WIFSIGNALED(c.status) ? "killed by signal " + std::to_string(WTERMSIG(c.status))
                                        : "exit status " + std::to_string(WEXITSTATUS(c.status));
  const std::string tail = c.err.size() > 400 ? c.err.substr(c.err.size() - 400) : c.err;
  return s + (tail.empty() ? "" : ": " + tail);
}

// The module's CAIRN_GERRIS_STATS lines.
struct Stats {
  double persists = 0, bytes = 0, cells = 0, ms = 0, restore_s = -1;
};
Stats parse_stats(const std::string& err) {
  Stats s;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line)) {
    char mode[16];
    unsigned long long n = 0;
    double b = 0, c = 0, ms = 0, t = 0, r = 0;
    unsigned step = 0;
    if (std::sscanf(line.c_str(),
                    "CairnPersist: %15s mode: %llu persists, %lf bytes/persist, %lf cells/persist, %lf ms/persist",
                    mode, &n, &b, &c, &ms) == 5)
      s.persists = static_cast<double>(n), s.bytes = b, s.cells = c, s.ms = ms;
    else if (std::sscanf(line.c_str(), "CairnPersist: resumed at step %u t = %lf in %lf s", &step, &t, &r) == 3)
      s.restore_s = r;
  }
  return s;
}

void record_failure(GerrisRow& row, const std::string& what) {
  if (row.error.empty()) row.error = what;
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
}

std::vector<std::string> gerris_env(const std::vector<std::string>& more) {
  // Debian's gerris calls MPI_Init even when serial (integrations/gerris/README.md).
  std::vector<std::string> env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_pml=ob1",
                                  "OMPI_MCA_btl=self,vader"};
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

GerrisRow* find_row(std::vector<GerrisRow>& rows, const std::string& c, const std::string& kind, const std::string& v) {
  for (auto& r : rows)
    if (r.case_name == c && r.kind == kind && r.variant == v) return &r;
  return nullptr;
}
const GerrisRow* find_row(const std::vector<GerrisRow>& rows, const std::string& c, const std::string& kind,
                          const std::string& v) {
  for (const auto& r : rows)
    if (r.case_name == c && r.kind == kind && r.variant == v) return &r;
  return nullptr;
}

// An empty directory at d (whatever was there removed).
Result<void> fresh_dir(const fs::path& d) {
  std::error_code ec;
  fs::remove_all(d, ec);
  fs::create_directories(d, ec);
  if (ec) return make_error(Errc::io_error, d.string() + ": " + ec.message());
  return {};
}

// The command running gerris on a case: mpirun for a parallel case of more than one process
// (oversubscribed where the machine has fewer cores).
std::vector<std::string> gerris_command(const GerrisBenchOptions& o, const GerrisCaseSize& c, const std::string& gfs) {
  if (ranks_of(c) <= 1) return {gerris_of(o, c), gfs};
  return {"mpirun", "--oversubscribe", "-np", std::to_string(ranks_of(c)), gerris_of(o, c), gfs};
}

// One measured run of `variant` (kind "run"), in a fresh directory removed afterwards.
Result<void> measure_run(const GerrisBenchOptions& o, const GerrisCaseSize& c, const std::string& module_line,
                         GerrisRow& row, std::ostream* progress, int round) {
  const fs::path d = fs::path(o.dir) / (c.name + "-" + row.variant);
  if (auto r = fresh_dir(d); !r.ok()) return r;
  std::error_code ec;
  const bool cairn = is_cairn(row.variant);
  write_file(d / "case.gfs",
             case_text(c, cairn ? module_line : "", variant_events(row.variant, d, o.snapshot_every), c.steps));
  auto child =
      run_child(gerris_command(o, c, "case.gfs"),
                gerris_env(cairn ? std::vector<std::string>{"CAIRN_GERRIS_STATS=1"} : std::vector<std::string>{}), d);
  if (!child.ok()) return child.error();
  const Child& x = child.value();
  if (!exited_ok(x)) {
    record_failure(row, describe(x));
  } else {
    ++row.verified_runs;
    row.wall_s.push_back(x.wall_s);
    row.maxrss_kb.push_back(x.maxrss_kb);
    if (cairn) {
      const Stats s = parse_stats(x.err);
      row.persists = s.persists, row.bytes_per_persist = s.bytes, row.cells_per_persist = s.cells,
      row.ms_per_persist = s.ms;
    } else if (row.variant != "none") {
      double bytes = 0, n = 0;
      for (const auto& e : fs::directory_iterator(d, ec))
        if (e.path().filename().string().rfind("snap-", 0) == 0) bytes += static_cast<double>(e.file_size()), ++n;
      row.persists = n, row.bytes_per_persist = n > 0 ? bytes / n : 0;
    }
  }
  fs::remove_all(d, ec);
  if (progress != nullptr)
    *progress << "gerris " << c.name << " " << row.variant << " run " << (round + 1) << "/" << o.repeats << ": "
              << fmt("%.3f", x.wall_s) << " s" << (exited_ok(x) ? "" : " FAILED") << "\n";
  return {};
}

// One measured restart of `variant` (kind "restart").
Result<void> measure_restart(const GerrisBenchOptions& o, const GerrisCaseSize& c, const std::string& module_line,
                             GerrisRow& row, std::ostream* progress, int round) {
  const fs::path d = fs::path(o.dir) / (c.name + "-restart-" + row.variant);
  if (auto r = fresh_dir(d); !r.ok()) return r;
  std::error_code ec;
  const bool cairn = is_cairn(row.variant);
  const int k = o.kill_at;
  Child restart;
  bool ok = false;
  if (row.variant == "startup") {
    write_file(d / "case.gfs", "1 0 GfsSimulation GfsBox GfsGEdge {} {\n  Time { iend = 0 }\n}\nGfsBox {}\n");
    auto r = run_child({gerris_of(o, c), "case.gfs"}, gerris_env({}), d);
    if (!r.ok()) return r.error();
    restart = r.value();
    if (!exited_ok(restart))
      record_failure(row, "startup: " + describe(restart));
    else
      ok = true;
  } else if (cairn) {
    // Killed at step K before its persist; the resumed run restores step K - 1, recomputes one step and
    // persists step K as it ends (the .gfs ends at K: the same file both times, as resume requires).
    write_file(d / "case.gfs", case_text(c, module_line, variant_events(row.variant, d, o.snapshot_every), k));
    auto crash = run_child({gerris_of(o, c), "case.gfs"}, gerris_env({"CAIRN_GERRIS_KILL_AT=" + std::to_string(k)}), d);
    if (!crash.ok()) return crash.error();
    if (!killed(crash.value())) {
      record_failure(row,
                     "the run to be killed at step " + std::to_string(k) + " ended with " + describe(crash.value()));
    } else {
      auto r =
          run_child({gerris_of(o, c), "case.gfs"}, gerris_env({"CAIRN_GERRIS_RESUME=1", "CAIRN_GERRIS_STATS=1"}), d);
      if (!r.ok()) return r.error();
      restart = r.value();
      const Stats s = parse_stats(restart.err);
      if (!exited_ok(restart) || s.restore_s < 0) {
        record_failure(row, "resume: " + describe(restart));
      } else {
        row.restore_s.push_back(s.restore_s);
        ok = true;
      }
    }
  } else {
    // The run reaches step K; its snapshots are those a run killed at K would have left. Gerris then
    // restarts from the last one, re-reads it and recomputes the steps since.
    write_file(d / "case.gfs", case_text(c, "", variant_events(row.variant, d, o.snapshot_every), k));
    auto crash = run_child({gerris_of(o, c), "case.gfs"}, gerris_env({}), d);
    if (!crash.ok()) return crash.error();
    const int last = (k - 1) / o.snapshot_every * o.snapshot_every;
    const fs::path snap = d / ("snap-" + std::to_string(last) + ".gfs");
    if (!exited_ok(crash.value()) || !fs::exists(snap)) {
      record_failure(row, "no snapshot " + snap.string() + " (" + describe(crash.value()) + ")");
    } else {
      auto r = run_child({gerris_of(o, c), snap.string()}, gerris_env({}), d);
      if (!r.ok()) return r.error();
      restart = r.value();
      if (!exited_ok(restart))
        record_failure(row, "restart from " + snap.string() + ": " + describe(restart));
      else
        ok = true;
    }
  }
  if (ok) {
    ++row.verified_runs;
    row.wall_s.push_back(restart.wall_s);
    row.maxrss_kb.push_back(restart.maxrss_kb);
  }
  fs::remove_all(d, ec);
  if (progress != nullptr)
    *progress << "gerris " << c.name << " restart " << row.variant << " run " << (round + 1) << "/" << o.repeats << ": "
              << (ok ? fmt("%.3f", restart.wall_s) + " s" : std::string("FAILED"))
              << (ok && cairn ? ", restore " + fmt("%.4f", row.restore_s.back()) + " s" : "") << "\n";
  return {};
}

}  // namespace

std::vector<std::string> gerris_case_names() { return {"shear2D", "solid2D", "shear3D", "solid3D"}; }

Result<std::vector<GerrisCaseSize>> parse_gerris_sizes(const std::string& text) {
  std::vector<GerrisCaseSize> out;
  const auto names = gerris_case_names();
  for (const auto& item : split_list(text)) {
    GerrisCaseSize c;
    const auto eq = item.find('=');
    const auto colon = item.find(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq)
      return make_error(Errc::invalid_argument, "--size: '" + item + "' is not CASE=LEVEL:STEPS");
    c.name = item.substr(0, eq);
    c.level = std::atoi(item.substr(eq + 1, colon - eq - 1).c_str());
    c.steps = std::atoi(item.substr(colon + 1).c_str());
    bool known = false;
    for (const auto& n : names) known = known || n == c.name;
    const auto at = c.name.find('@');
    if (at != std::string::npos) {  // shear2D@N: four boxes on N processes
      const int n = std::atoi(c.name.c_str() + at + 1);
      known = c.name.compare(0, at, "shear2D") == 0 && n >= 1 && n <= 4 && c.name.substr(at + 1) == std::to_string(n);
    }
    if (!known)
      return make_error(Errc::invalid_argument, "--size: unknown case '" + c.name +
                                                    "' (shear2D, solid2D, shear3D, solid3D; shear2D@N, N = 1 to 4: "
                                                    "shear2D on four boxes and N processes)");
    if (c.level < 3 || c.level > 12 || c.steps < 1)
      return make_error(Errc::invalid_argument, "--size: " + item + ": level 3 to 12, at least one step");
    out.push_back(c);
  }
  if (out.empty()) return make_error(Errc::invalid_argument, "--size: no case");
  return out;
}

namespace {
const std::vector<std::string>& run_variants(const GerrisCaseSize& c) {
  return is_parallel(c) ? kParallelRunVariants : kRunVariants;
}
const std::vector<std::string>& restart_variants(const GerrisCaseSize& c) {
  return is_parallel(c) ? kNoVariants : kRestartVariants;
}
}  // namespace

Result<GerrisReport> run_gerris_bench(const GerrisBenchOptions& o, std::ostream* progress) {
  if (o.kill_at < 2 || o.kill_at % o.snapshot_every == 0)
    return make_error(Errc::invalid_argument, "--kill-at must be at least 2 and not a multiple of " +
                                                  std::to_string(o.snapshot_every) +
                                                  " (else the snapshot restart recomputes nothing)");
  if (o.module.empty() || o.module3d.empty())
    return make_error(Errc::invalid_argument, "no CairnPersist module (--module, --module3d)");
  if (auto d = create_bench_dir(o.dir); !d.ok()) return d.error();
  GerrisReport rep;
  rep.options = o;
  rep.machine = cpu_model() + ", load " + fmt("%.2f", load_average()) + ", " + utc_now();
  const auto module_line = [&o](const GerrisCaseSize& c) {
    return "GModule " + (is_3d(c) ? o.module3d : o.module) + "\n";
  };
  for (const auto& c : o.cases) {
    for (const auto* kind : {"run", "restart"})
      for (const auto& v : std::string(kind) == "run" ? run_variants(c) : restart_variants(c)) {
        GerrisRow row;
        row.case_name = c.name, row.kind = kind, row.variant = v;
        rep.rows.push_back(row);
      }
  }
  // Round r starts at variant r (mod their number): no variant always runs first, right after the
  // previous case's restarts or a cold start.
  for (int round = 0; round < o.repeats; ++round)
    for (const auto& c : o.cases) {
      const auto& runs = run_variants(c);
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto& v = runs[(i + static_cast<std::size_t>(round)) % runs.size()];
        if (auto r = measure_run(o, c, module_line(c), *find_row(rep.rows, c.name, "run", v), progress, round); !r.ok())
          return r.error();
      }
      const auto& restarts = restart_variants(c);
      for (std::size_t i = 0; i < restarts.size(); ++i) {
        const auto& v = restarts[(i + static_cast<std::size_t>(round)) % restarts.size()];
        if (auto r = measure_restart(o, c, module_line(c), *find_row(rep.rows, c.name, "restart", v), progress, round);
            !r.ok())
          return r.error();
      }
    }
  std::error_code ec;
  fs::remove(o.dir, ec);  // only if empty: every run removed its own directory
  for (auto& r : rep.rows) {
    r.wall_median = median(r.wall_s), r.maxrss_median = median(r.maxrss_kb), r.restore_median = median(r.restore_s);
    if (r.verified_runs < o.repeats) rep.failed = true;
  }
  for (auto& r : rep.rows) {
    const GerrisRow* none = find_row(rep.rows, r.case_name, "run", "none");
    if (r.kind != "run" || none == nullptr || none->wall_median <= 0) continue;
    r.overhead_pct = 100 * (r.wall_median - none->wall_median) / none->wall_median;
    r.persist_pct = 100 * r.persists * r.ms_per_persist / 1e3 / none->wall_median;
  }
  return rep;
}

namespace {
std::string ratio(double base, double x) { return base > 0 && x > 0 ? fmt("%.1fx", base / x) : "-"; }
}  // namespace

void print_gerris_report(const GerrisReport& rep, std::ostream& out) {
  const auto& o = rep.options;
  bool any3d = false;
  for (const auto& c : o.cases) any3d = any3d || is_3d(c);
  out << "gerris: " << o.gerris << " with " << o.module;
  if (any3d) out << ", " << o.gerris3d << " with " << o.module3d;
  out << "; medians of " << o.repeats << " interleaved runs (" << rep.machine << ")\n";
  char line[320];
  for (const auto& c : o.cases) {
    out << "\n" << c.name << ", finest level " << c.level << ", " << c.steps << " steps: run time\n";
    std::snprintf(line, sizeof line, "%-18s %9s %9s %9s %12s %12s %10s %10s %10s\n", "variant", "wall s", "overhead",
                  "persists", "bytes/pers.", "cells/pers.", "ms/pers.", "in persist", "maxrss MB");
    out << line;
    std::vector<const GerrisRow*> octrees;
    for (const auto& r : rep.rows) {
      if (r.case_name != c.name || r.kind != "run") continue;
      if (is_octree(r.variant)) octrees.push_back(&r);
      std::snprintf(line, sizeof line, "%-18s %9.3f %8.1f%% %9.0f %12.0f %12s %10s %10s %10.1f%s\n", r.variant.c_str(),
                    r.wall_median, r.overhead_pct, r.persists, r.bytes_per_persist,
                    is_octree(r.variant) ? fmt("%.0f", r.cells_per_persist).c_str() : "-",
                    is_cairn(r.variant) ? fmt("%.3f", r.ms_per_persist).c_str() : "-",
                    is_cairn(r.variant) ? fmt("%.1f%%", r.persist_pct).c_str() : "-", r.maxrss_median / 1024,
                    r.error.empty() ? "" : "  FAILED");
      out << line;
    }
    for (const GerrisRow* octree : octrees)
      if (octree->cells_per_persist > 0)
        out << octree->variant.substr(6) << ": " << fmt("%.0f", octree->bytes_per_persist / octree->cells_per_persist)
            << " bytes per changed cell written; goal overhead <= 5 %: "
            << (octree->overhead_pct <= 5 ? "met" : "missed") << " (" << fmt("%.1f", octree->overhead_pct) << " %; "
            << fmt("%.1f", octree->persist_pct) << " % of the run inside the persists)\n";

    if (is_parallel(c)) {
      out << c.name << ": four boxes, "
          << (ranks_of(c) > 1 ? "mpirun --oversubscribe -np " + std::to_string(ranks_of(c)) : std::string("serially"))
          << "; maxrss is mpirun's there, ms/pers. one process's; no restart rows\n";
      continue;
    }
    out << c.name << ": restart to step " << o.kill_at << " (snapshots every " << o.snapshot_every << " steps)\n";
    std::snprintf(line, sizeof line, "%-16s %10s %10s %10s %11s %11s %12s %12s %10s\n", "variant", "restart s",
                  "-startup s", "restore s", "text/rst", "binary/rst", "text/restore", "bin/restore", "maxrss MB");
    out << line;
    const GerrisRow* text = find_row(rep.rows, c.name, "restart", "snapshot-text");
    const GerrisRow* bin = find_row(rep.rows, c.name, "restart", "snapshot-binary");
    const GerrisRow* startup = find_row(rep.rows, c.name, "restart", "startup");
    const double tw = text != nullptr ? text->wall_median : 0, bw = bin != nullptr ? bin->wall_median : 0;
    const double s0 = startup != nullptr ? startup->wall_median : 0;
    for (const auto& r : rep.rows) {
      if (r.case_name != c.name || r.kind != "restart") continue;
      const bool cairn = is_cairn(r.variant);
      std::snprintf(line, sizeof line, "%-16s %10.4f %10.4f %10s %11s %11s %12s %12s %10.1f%s\n", r.variant.c_str(),
                    r.wall_median, r.wall_median - s0, cairn ? fmt("%.5f", r.restore_median).c_str() : "-",
                    ratio(tw, r.wall_median).c_str(), ratio(bw, r.wall_median).c_str(),
                    cairn ? ratio(tw, r.restore_median).c_str() : "-",
                    cairn ? ratio(bw, r.restore_median).c_str() : "-", r.maxrss_median / 1024,
                    r.error.empty() ? "" : "  FAILED");
      out << line;
      if (!r.error.empty()) out << "  " << r.error << "\n";
    }
    const GerrisRow* oct = find_row(rep.rows, c.name, "restart", "cairn-octree");
    if (oct != nullptr && bw > 0) {
      const double fastest_snapshot = tw > 0 ? std::min(tw, bw) : bw;
      out << "goal restart >= 100x faster than the faster snapshot restart: restore "
          << (oct->restore_median > 0 && fastest_snapshot / oct->restore_median >= 100 ? "met" : "missed") << " ("
          << ratio(fastest_snapshot, oct->restore_median) << "), whole resuming process "
          << (oct->wall_median > 0 && fastest_snapshot / oct->wall_median >= 100 ? "met" : "missed") << " ("
          << ratio(fastest_snapshot, oct->wall_median)
          << "); snapshot restart minus start-up against restore: " << ratio(fastest_snapshot - s0, oct->restore_median)
          << "\n";
    }
  }
}

Result<void> write_gerris_json(const GerrisReport& rep, const std::string& path) {
  std::ofstream f(path);
  if (!f) return make_error(Errc::io_error, path + ": cannot write the JSON report");
  const auto& o = rep.options;
  f << "{\"machine\": " << json_str(rep.machine) << ", \"gerris\": " << json_str(o.gerris)
    << ", \"module\": " << json_str(o.module) << ", \"gerris3d\": " << json_str(o.gerris3d)
    << ", \"module3d\": " << json_str(o.module3d) << ", \"repeats\": " << o.repeats << ", \"kill_at\": " << o.kill_at
    << ", \"snapshot_every\": " << o.snapshot_every << ", \"failed\": " << (rep.failed ? "true" : "false")
    << ", \"rows\": [";
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    const auto& r = rep.rows[i];
    int level = 0, steps = 0;
    for (const auto& c : o.cases)
      if (c.name == r.case_name) level = c.level, steps = c.steps;
    f << (i ? ", " : "") << "{\"case\": " << json_str(r.case_name) << ", \"level\": " << level
      << ", \"steps\": " << steps << ", \"kind\": " << json_str(r.kind) << ", \"variant\": " << json_str(r.variant)
      << ", \"wall_s\": " << json_num(r.wall_median) << ", \"maxrss_kb\": " << json_num(r.maxrss_median)
      << ", \"verified_runs\": " << r.verified_runs;
    if (r.kind == "run")
      f << ", \"overhead_pct\": " << json_num(r.overhead_pct) << ", \"persists\": " << json_num(r.persists)
        << ", \"bytes_per_persist\": " << json_num(r.bytes_per_persist)
        << ", \"cells_per_persist\": " << json_num(r.cells_per_persist)
        << ", \"ms_per_persist\": " << json_num(r.ms_per_persist) << ", \"persist_pct\": " << json_num(r.persist_pct);
    else if (is_cairn(r.variant))
      f << ", \"restore_s\": " << json_num(r.restore_median);
    if (!r.error.empty()) f << ", \"error\": " << json_str(r.error);
    f << ", \"runs_wall_s\": [";
    for (std::size_t k = 0; k < r.wall_s.size(); ++k) f << (k ? ", " : "") << json_num(r.wall_s[k]);
    f << "]}";
  }
  f << "]}\n";
  if (!f) return make_error(Errc::io_error, path + ": write failed");
  return {};
}

}  // namespace cairn::bench
