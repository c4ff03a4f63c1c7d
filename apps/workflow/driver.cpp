// driver.cpp — the workflow's driver: steps, couplings, processes, reruns,
// progress and the final checksum.
#include "apps/workflow/driver.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "apps/workflow/mesh.hpp"
#include "apps/workflow/progress.hpp"
#include "cairn/cairn.h"
#include "util/json.hpp"

extern char** environ;

namespace cairn::apps::workflow {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Step {
  int cycle;
  std::string component;
  bool per_part;
  int uniform_level = 0;
};

std::vector<Step> plan(const Config& c) {
  std::vector<Step> steps{{0, "rebalance", false, c.params.level_min}, {0, "preprocess", false}};
  for (int cycle = 0; cycle < c.cycles; ++cycle) {
    steps.push_back({cycle, "solve", true});
    if (cycle + 1 == c.cycles) break;
    steps.push_back({cycle, "sizefield", true});
    steps.push_back({cycle, "adapt", false});
    steps.push_back({cycle + 1, "rebalance", false});
    steps.push_back({cycle + 1, "preprocess", false});
  }
  return steps;
}

// What decides the result: a resumed run must have the same.
std::string signature(const Config& c) {
  const Params& p = c.params;
  char buf[200];
  std::snprintf(buf, sizeof buf, "cycles=%d parts=%d levels=%d-%d sweeps=%d tol=%.17g", c.cycles, p.parts, p.level_min,
                p.level_max, p.sweeps, p.tol);
  return buf;
}

// The fault to inject: which run of which component dies, and where.
struct Kill {
  int step = -1, part = 0;
  double fraction = 0;
};

Result<Kill> choose_kill(const Config& c, const std::vector<Step>& steps) {
  Kill k;
  if (c.kill.empty()) return k;
  if (c.kill != "random" && !is_component(c.kill))
    return make_error(
        Errc::invalid_argument,
        "--kill: '" + c.kill + "' is not a component (solve, sizefield, adapt, rebalance, preprocess, random)");
  std::mt19937_64 rng(c.seed);
  std::vector<int> candidates;
  for (std::size_t i = 0; i < steps.size(); ++i)
    if ((c.kill == "random" || steps[i].component == c.kill) && (c.kill_cycle < 0 || steps[i].cycle == c.kill_cycle))
      candidates.push_back(static_cast<int>(i));
  if (candidates.empty())
    return make_error(Errc::invalid_argument, "--kill: " + c.kill + " does not run at cycle " +
                                                  std::to_string(c.kill_cycle) + " of " + std::to_string(c.cycles));
  k.step = candidates[rng() % candidates.size()];
  k.part = steps[static_cast<std::size_t>(k.step)].per_part ? static_cast<int>(rng() % c.params.parts) : 0;
  k.fraction = 0.05 + 0.9 * std::uniform_real_distribution<double>(0, 1)(rng);
  return k;
}

std::string describe(const Step& s, int part) {
  std::string d = s.component;
  if (s.per_part) d += " part " + std::to_string(part);
  return d + " (cycle " + std::to_string(s.cycle) + ")";
}

// One component run: its times, or how it ended.
struct RunResult {
  bool ok = false;
  bool killed = false;  // ended by a signal: rerun it
  std::string error;
  Times times;
};

std::vector<std::string> arguments(const Step& s, const Params& p, int part) {
  std::vector<std::string> a = {"--cycle",     std::to_string(s.cycle),     "--part",      std::to_string(part),
                                "--parts",     std::to_string(p.parts),     "--level-min", std::to_string(p.level_min),
                                "--level-max", std::to_string(p.level_max), "--sweeps",    std::to_string(p.sweeps)};
  char tol[40];
  std::snprintf(tol, sizeof tol, "%.17g", p.tol);
  a.insert(a.end(), {"--tol", tol});
  if (s.uniform_level > 0) a.insert(a.end(), {"--uniform", std::to_string(s.uniform_level)});
  return a;
}

// A component process, started; its times come on its stdout.
struct Child {
  pid_t pid = -1;
  int out = -1;
  std::string error;
};

Child spawn(const std::string& exe, const std::vector<std::string>& args, const std::vector<std::string>& env) {
  Child c;
  int fds[2];
  if (::pipe(fds) != 0) {
    c.error = std::string("pipe: ") + std::strerror(errno);
    return c;
  }
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  const int rc = posix_spawn(&c.pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    c.error = "cannot start " + exe + ": " + std::strerror(rc) + " (is it built? --bin-dir names its directory)";
    c.pid = -1;
    return c;
  }
  c.out = fds[0];
  return c;
}

RunResult finish(Child& c, const std::string& what) {
  RunResult r;
  if (c.pid < 0) {
    r.error = c.error;
    return r;
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(c.out, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(c.out);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    r.killed = true;
    r.error = what + " was killed by signal " + std::to_string(WTERMSIG(status));
    return r;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.error = what + " failed (exit status " + std::to_string(WEXITSTATUS(status)) + "; its message is above)";
    return r;
  }
  const auto at = text.rfind("cairn-workflow-times ");
  unsigned long long in = 0, out = 0;
  if (at == std::string::npos ||
      std::sscanf(text.c_str() + at, "cairn-workflow-times read=%lf compute=%lf write=%lf in=%llu out=%llu",
                  &r.times.read_s, &r.times.compute_s, &r.times.write_s, &in, &out) != 5) {
    r.error = what + " did not report its times";
    return r;
  }
  r.times.bytes_in = in;
  r.times.bytes_out = out;
  r.ok = true;
  return r;
}

class Runner {
 public:
  Runner(const Config& c, const std::vector<std::string>& env) : c_(c) {
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string s(*e);
      if (!s.starts_with("CAIRN_STREAM_") && !s.starts_with("CAIRN_WORKFLOW_KILL")) env_.push_back(s);
    }
    env_.insert(env_.end(), env.begin(), env.end());
    bin_dir_ = c.bin_dir;
    if (bin_dir_.empty()) {
      std::error_code ec;
      bin_dir_ = fs::read_symlink("/proc/self/exe", ec).parent_path().string();
    }
  }

  // Runs every part of one step; a part killed by a signal is run again alone.
  Result<std::vector<Times>> run(const Step& s, const Kill* kill, Report& report) {
    const int parts = s.per_part ? c_.params.parts : 1;
    std::vector<RunResult> results(static_cast<std::size_t>(parts));
    if (c_.coupling == "mem") {
      std::vector<std::thread> threads;
      for (int p = 0; p < parts; ++p)
        threads.emplace_back([&, p] {
          Params params = c_.params;
          params.cycle = s.cycle, params.part = p, params.uniform_level = s.uniform_level;
          auto r = run_component(s.component, params);
          auto& out = results[static_cast<std::size_t>(p)];
          out.ok = r.ok();
          if (r.ok())
            out.times = r.value();
          else
            out.error = describe(s, p) + ": " + r.error().message;
        });
      for (auto& t : threads) t.join();
    } else {
      std::vector<Child> children;
      for (int p = 0; p < parts; ++p)
        children.push_back(start(s, p, kill != nullptr && kill->part == p ? kill : nullptr));
      for (int p = 0; p < parts; ++p) {
        auto& r = results[static_cast<std::size_t>(p)];
        r = finish(children[static_cast<std::size_t>(p)], describe(s, p));
        for (int attempt = 1; r.killed && attempt <= 3; ++attempt) {
          if (kill != nullptr && kill->part == p) report.killed = describe(s, p);
          if (c_.log != nullptr) *c_.log << "workflow: " << r.error << "; rerunning it alone\n";
          ++report.reruns;
          Child again = start(s, p, nullptr);
          r = finish(again, describe(s, p));
        }
      }
    }
    std::vector<Times> times;
    for (const auto& r : results) {
      if (!r.ok) return make_error(Errc::io_error, r.error);
      times.push_back(r.times);
    }
    return times;
  }

 private:
  Child start(const Step& s, int part, const Kill* kill) {
    std::vector<std::string> env = env_;
    if (kill != nullptr) env.push_back("CAIRN_WORKFLOW_KILL=" + std::to_string(kill->fraction));
    if (kill != nullptr && !c_.kill_wait.empty()) env.push_back("CAIRN_WORKFLOW_KILL_WAIT=" + c_.kill_wait);
    return spawn(bin_dir_ + "/workflow-" + s.component, arguments(s, c_.params, part), env);
  }

  const Config& c_;
  std::vector<std::string> env_;
  std::string bin_dir_;
};

// Progress: one record (progress.hpp), committed after every step.
Result<void> write_progress(const std::string& uri, int next, const std::string& sig) {
  std::FILE* f = cairn_stream_open(uri.c_str(), "w", 0);
  if (f == nullptr) return make_error(Errc::io_error, std::string("cannot record progress: ") + cairn_errormsg());
  const std::string record = format_progress(next, sig);
  std::fwrite(record.data(), 1, record.size(), f);
  if (std::fclose(f) != 0)
    return make_error(Errc::io_error, std::string("cannot record progress: ") + cairn_stream_errormsg());
  return {};
}

Result<int> read_progress(const std::string& uri, const std::string& sig) {
  std::FILE* f = cairn_stream_open(uri.c_str(), "r", 0);
  if (f == nullptr)
    return make_error(Errc::not_found, std::string("--resume: no progress to resume from: ") + cairn_errormsg() +
                                           " (run without --resume first)");
  // One byte more than a record may hold: a longer stream is refused, not cut.
  std::string text(kMaxProgressBytes + 1, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fclose(f);
  return parse_progress(text, sig, uri);
}

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

Result<void> summarize(const Config& c, const std::string& prefix, Report& r) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  std::vector<std::uint64_t> keys;
  for (int p = 0; p < c.params.parts; ++p) {
    auto sol = read_records(prefix + solution_stream(p), "solution", c.cycles - 1, p, c.params.parts);
    if (!sol.ok()) return sol.error();
    h = fnv1a(sol.value().data(), sol.value().size() * sizeof(Record), h);
    for (const Record& rec : sol.value()) {
      const double area = cell_size(unpack(rec.key).level) * cell_size(unpack(rec.key).level);
      r.integral += rec.value * area;
      r.max_value = std::max(r.max_value, rec.value);
      keys.push_back(rec.key);
    }
  }
  r.checksum = h;
  r.leaves = keys.size();
  r.mesh_error = check_mesh(keys);
  return {};
}

struct Place {
  std::string prefix, dir;
  std::vector<std::string> env;
  bool remove_dir = false;
};

Result<Place> place(const Config& c) {
  Place pl;
  if (c.coupling == "mem") {
    pl.prefix = "mem:";
    pl.env.push_back("CAIRN_STREAM_PREFIX=mem:");
    return pl;
  }
  pl.dir = c.dir;
  if (pl.dir.empty()) {
    pl.dir = (c.coupling == "file-disk" ? "/var/tmp" : "/dev/shm") + std::string("/cairn-workflow.") +
             std::to_string(::getpid());
    pl.remove_dir = true;
  }
  std::error_code ec;
  fs::create_directories(pl.dir, ec);
  if (ec) return make_error(Errc::io_error, "cannot create " + pl.dir + ": " + ec.message());
  if (c.coupling == "pmem") {
    const std::string pool = pl.dir + "/workflow.pool";
    pl.prefix = "pmem:" + pool + "#";
    if (!c.resume) fs::remove(pool, ec);  // a fresh run starts from an empty pool
    // The five kinds of stream hold the mesh once each (the parts share it);
    // twice (committed and being written), with the mesh refined to level_max
    // everywhere, is 10 meshes: 12 leaves room for ghosts and the arena's slack.
    const std::uint64_t finest = std::uint64_t{1} << (2 * c.params.level_max);
    const std::uint64_t size =
        c.pool_size > 0 ? c.pool_size : std::max<std::uint64_t>(64ull << 20, finest * sizeof(Record) * 12);
    pl.env.push_back("CAIRN_STREAM_POOL_SIZE=" + std::to_string(size));
  } else {
    pl.prefix = "file:" + pl.dir + "/";
    if (c.coupling == "file-disk") pl.env.push_back("CAIRN_STREAM_SYNC=1");
  }
  pl.env.push_back("CAIRN_STREAM_PREFIX=" + pl.prefix);
  return pl;
}

// Sets the environment of this process for the mem: coupling's in-process
// components, and puts it back.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::string>& vars) {
    for (const auto& v : vars) {
      const auto eq = v.find('=');
      const std::string name = v.substr(0, eq);
      const char* old = std::getenv(name.c_str());
      saved_.push_back({name, old != nullptr, old != nullptr ? old : ""});
      ::setenv(name.c_str(), v.c_str() + eq + 1, 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& s : saved_) {
      if (s.had)
        ::setenv(s.name.c_str(), s.value.c_str(), 1);
      else
        ::unsetenv(s.name.c_str());
    }
  }

 private:
  struct Saved {
    std::string name;
    bool had;
    std::string value;
  };
  std::vector<Saved> saved_;
};

}  // namespace

Result<Report> run_workflow(const Config& c) {
  if (std::find(std::begin(kCouplings), std::end(kCouplings), c.coupling) == std::end(kCouplings))
    return make_error(Errc::invalid_argument,
                      "--coupling: '" + c.coupling + "' is not one of file-tmpfs, file-disk, mem, pmem");
  if (c.cycles < 1 || c.cycles > 10000) return make_error(Errc::invalid_argument, "--cycles must be 1 to 10000");
  if (c.params.parts < 1 || c.params.parts > 256) return make_error(Errc::invalid_argument, "--parts must be 1 to 256");
  if (c.params.level_min < 1 || c.params.level_min > c.params.level_max || c.params.level_max > 14)
    return make_error(Errc::invalid_argument, "levels must satisfy 1 <= --level-min <= --level-max <= 14");
  if (c.params.sweeps < 0 || !(c.params.tol > 0))
    return make_error(Errc::invalid_argument, "--sweeps must be >= 0 and --tol > 0");
  if (c.coupling == "mem" && (c.resume || !c.kill.empty()))
    return make_error(Errc::invalid_argument,
                      "mem: streams live in this process: --resume and --kill need a process coupling (pmem)");

  if (!c.kill_wait.empty() && c.kill.empty())
    return make_error(Errc::invalid_argument, "--kill-wait names where the component of --kill waits: give --kill");
  const std::vector<Step> steps = plan(c);
  auto kill = choose_kill(c, steps);
  if (!kill.ok()) return kill.error();
  auto pl = place(c);
  if (!pl.ok()) return pl.error();
  const Place& where = pl.value();
  struct Cleanup {
    const Place& p;
    int parts;
    ~Cleanup() {
      std::error_code ec;
      if (p.remove_dir) fs::remove_all(p.dir, ec);
      if (p.prefix != "mem:") return;
      for (const std::string name : {"mesh", "balanced"}) (void)cairn_stream_remove(("mem:" + name).c_str());
      for (int q = 0; q < parts; ++q)
        for (const std::string name : {"part.", "solution.", "size."})
          (void)cairn_stream_remove(("mem:" + name + std::to_string(q)).c_str());
    }
  } cleanup{where, c.params.parts};

  ScopedEnv env(c.coupling == "mem" ? where.env : std::vector<std::string>{});
  const std::string progress = where.prefix + "workflow.progress";
  const std::string sig = signature(c);
  Report report;
  report.coupling = c.coupling;
  if (c.resume) {
    auto next = read_progress(progress, sig);
    if (!next.ok()) return next.error();
    report.first_step = std::min(next.value(), static_cast<int>(steps.size()));
  }

  Runner runner(c, where.env);
  if (c.coupling != "mem" && !c.resume) {
    // Setup, outside the measured loop: the progress record of a fresh run,
    // which for pmem: creates (and allocates) the pool, as a job script would.
    ScopedEnv pool_env(where.env);
    const auto s0 = Clock::now();
    if (auto w = write_progress(progress, 0, sig); !w.ok()) return w.error();
    report.setup_s = since(s0);
  }
  const auto t0 = Clock::now();
  for (int k = report.first_step; k < static_cast<int>(steps.size()); ++k) {
    const Step& s = steps[static_cast<std::size_t>(k)];
    const bool inject = kill.value().step == k;
    auto times = runner.run(s, inject ? &kill.value() : nullptr, report);
    if (!times.ok()) return times.error();
    double transfer = 0, compute = 0;
    ComponentTotals& tot = report.components[s.component];
    for (const Times& t : times.value()) {
      transfer = std::max(transfer, t.read_s + t.write_s);
      compute = std::max(compute, t.compute_s);
      ++tot.runs;
      tot.read_s += t.read_s, tot.compute_s += t.compute_s, tot.write_s += t.write_s;
      tot.bytes_in += t.bytes_in, tot.bytes_out += t.bytes_out;
    }
    report.transfer_s += transfer;
    report.compute_s += compute;
    ++report.steps_run;
    if (c.coupling != "mem")
      if (auto w = write_progress(progress, k + 1, sig); !w.ok()) return w.error();
  }
  report.total_s = since(t0);
  if (auto s = summarize(c, where.prefix, report); !s.ok()) return s.error();
  return report;
}

void print_report(const Report& r, std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof line, "%-11s %5s %10s %10s %10s %10s %10s\n", "component", "runs", "read s", "compute s",
                "write s", "MB in", "MB out");
  out << line;
  for (const auto& [name, t] : r.components) {
    std::snprintf(line, sizeof line, "%-11s %5d %10.4f %10.4f %10.4f %10.1f %10.1f\n", name.c_str(), t.runs, t.read_s,
                  t.compute_s, t.write_s, t.bytes_in / 1e6, t.bytes_out / 1e6);
    out << line;
  }
  std::snprintf(line, sizeof line,
                "total %.3f s: transfers %.3f s (%.1f %%), compute %.3f s, process start and waits %.3f s\n", r.total_s,
                r.transfer_s, r.total_s > 0 ? 100 * r.transfer_s / r.total_s : 0.0, r.compute_s, r.launch_s());
  out << line;
}

Result<void> write_report_json(const Report& r, const std::string& path) {
  char checksum[24];
  std::snprintf(checksum, sizeof checksum, "%016llx", static_cast<unsigned long long>(r.checksum));
  util::Json components = util::Json::object();
  for (const auto& [name, t] : r.components)
    components[name] = {{"runs", t.runs},       {"read_s", t.read_s},     {"compute_s", t.compute_s},
                        {"write_s", t.write_s}, {"bytes_in", t.bytes_in}, {"bytes_out", t.bytes_out}};
  const util::Json doc = {{"coupling", r.coupling},   {"checksum", checksum},       {"leaves", r.leaves},
                          {"integral", r.integral},   {"max", r.max_value},         {"verified", r.mesh_error.empty()},
                          {"steps_run", r.steps_run}, {"first_step", r.first_step}, {"reruns", r.reruns},
                          {"total_s", r.total_s},     {"transfer_s", r.transfer_s}, {"compute_s", r.compute_s},
                          {"launch_s", r.launch_s()}, {"components", components}};
  return util::write_json_file(doc, path);
}

}  // namespace cairn::apps::workflow
