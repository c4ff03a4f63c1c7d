// cmd_launch.cpp — `cairn launch -n N [--max-restarts R] [--timeout T] -- APP
// ARGS`: runs an MPI application under mpirun and, when the job dies (a rank
// killed, the job aborted) or a rank stops beating (hung, SIGSTOP), relaunches
// it with the resume switch, so that it continues at the global version its
// ranks agreed on (cairn::dist), up to R times; prints each failure and
// recovery with timings.
//
// Heartbeat (seed 001 §3.3, Eqs. 1-3): the job gets $CAIRN_HEARTBEAT_DIR, where
// every dist::Context writes heartbeat.<rank> (its version) after restore
// and every commit. With --timeout T (T_timeout = T_hm + T_i + T_r + T_w, times
// the resiliency interval; `--timeout auto` computes it so, T_i the longest
// interval any rank has written into its beats in this job, 30 s until one is
// measured), a rank whose file has not changed for T seconds is declared dead;
// so is a rank that has not beaten --start-timeout seconds after the
// (re)launch (hung before its first commit, or never started). The job is then
// ended (every rank whose beat gave the pid of one of this job's processes
// gets SIGKILL, mpirun SIGTERM, its process group SIGKILL after 3 s) and
// relaunched.
//
// Sample runs:
//   cairn launch -n 4 -- jacobi-mpi --size 256 --iterations 5000 --dir /dev/shm/j
//   cairn launch -n 4 --max-restarts 5 --timeout 2 -- ./my-app --dir /dev/shm/s
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "dist/heartbeat.hpp"

namespace cairn::tool {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct LaunchOptions {
  int ranks = 1;
  int max_restarts = 3;
  double timeout = 0;  // seconds without a heartbeat; 0: no monitor
  // --timeout auto: Eq. 3 with T_i measured from the beats.
  bool timeout_auto = false;
  double t_hm = 0;  // seconds for a beat to reach the monitor (0: same machine)
  int resiliency_interval = 1;
  double auto_start = 30;     // T_timeout until T_i is measured
  double floor = 1;           // lowest T_timeout: the monitor's polling and the ranks' scheduling jitter
  double start_timeout = 30;  // seconds a rank may take from the (re)launch to its first beat
  std::string resume_flag = "--resume";
  std::string mpirun = "mpirun";
  std::vector<std::string> command;
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// heartbeat.<rank> files. A rank has beaten once its file holds a beat (a
// damaged or foreign one counts: the rank writes it again at its next commit,
// but it names no pid); its age is the file's. A rank without a beat (no file,
// or the empty file a Context creates before its first beat) is aged from
// `since`, the (re)launch.
struct Beats {
  int ranks_fresh = 0;  // ranks that have beaten since `since`
  std::uint64_t version = 0, restored = 0;
  struct Rank {
    int rank;
    bool beaten;
    double age;  // seconds since its last beat, or since the launch if it has none
  };
  std::vector<Rank> ranks;
  std::vector<pid_t> pids;  // the ranks' processes, from their beats
  double interval = 0;      // the longest interval between two beats of one rank, in the beats read now
};

Beats read_beats(const fs::path& dir, int ranks, fs::file_time_type since) {
  Beats b;
  const auto now = fs::file_time_type::clock::now();
  for (int r = 0; r < ranks; ++r) {
    const std::string p = dist::detail::heartbeat_path(dir.string(), r);
    std::error_code ec;
    const auto t = fs::last_write_time(p, ec);
    const auto beat =
        ec ? Result<dist::detail::Heartbeat>(make_error(Errc::not_found, p)) : dist::detail::read_heartbeat(p);
    const bool beaten = beat.ok() || beat.error().code == Errc::corrupted || beat.error().code == Errc::foreign_file ||
                        beat.error().code == Errc::truncated || beat.error().code == Errc::wrong_version;
    if (beat.ok()) {
      b.interval = std::max(b.interval, static_cast<double>(beat.value().interval_ns) * 1e-9);
      b.version = std::max(b.version, beat.value().version);
      b.restored = std::max(b.restored, beat.value().restored);
      b.pids.push_back(static_cast<pid_t>(beat.value().pid));
    }
    if (beaten && t >= since) ++b.ranks_fresh;
    b.ranks.push_back({r, beaten, std::chrono::duration<double>(now - (beaten ? t : since)).count()});
  }
  return b;
}

// Whether `pid` is `ancestor` or one of its descendants (its parent chain in
// /proc). A beat names the process that wrote it, which may have ended since
// (a supervised compute process replaced) and its pid gone to an unrelated
// process, or run on another node: only this job's processes are killed.
bool descends_from(pid_t pid, pid_t ancestor) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    if (pid == ancestor) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    const auto close = line.rfind(')');
    if (close == std::string::npos) return false;
    std::istringstream rest(line.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if (!(rest >> state >> ppid)) return false;
    pid = static_cast<pid_t>(ppid);
  }
  return false;
}

// An app name built in this tree (apps/NAME/NAME) or installed beside the
// tool (apps_dir()/NAME), else the word as given.
std::string resolve(const std::string& app) {
  if (app.find('/') != std::string::npos) return app;
  std::error_code ec;
  for (const fs::path& p : {apps_dir() / app / app, apps_dir() / app})
    if (fs::is_regular_file(p, ec)) return p.string();
  return app;
}

pid_t spawn(const LaunchOptions& o, const std::vector<std::string>& command) {
  std::vector<std::string> words{o.mpirun, "--oversubscribe"};
  if (::geteuid() == 0) words.push_back("--allow-run-as-root");
  words.insert(words.end(), {"-n", std::to_string(o.ranks)});
  words.insert(words.end(), command.begin(), command.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "cairn launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  if (pid > 0) ::setpgid(pid, pid);
  return pid;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + ::strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

int launch(const LaunchOptions& o) {
  if (o.command.empty()) {
    std::fprintf(stderr, "cairn launch: nothing to run: cairn launch -n N -- APP [ARGS]\n");
    return 2;
  }
  std::string tmpl =
      (fs::exists("/dev/shm") ? std::string("/dev/shm") : fs::temp_directory_path().string()) + "/cairn-launch-XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    std::fprintf(stderr, "cairn launch: cannot create a heartbeat directory: %s\n", std::strerror(errno));
    return 2;
  }
  const fs::path hb = tmpl;
  ::setenv("CAIRN_HEARTBEAT_DIR", hb.c_str(), 1);
  // When a rank dies, Open MPI's launcher waits odls_base_sigkill_timeout
  // (1 s) between asking the other ranks to end and killing them; their
  // state is durable at every commit, so nothing is gained by waiting.
  ::setenv("OMPI_MCA_odls_base_sigkill_timeout", "0", 0);
  std::vector<std::string> command = o.command;
  command[0] = resolve(command[0]);
  const auto t_start = Clock::now();
  // T_i (Eq. 3): the longest interval between two beats any rank has written
  // in this job, over every attempt. The last interval alone would make one
  // iteration 2.2 times slower than the one before a false death, and a
  // relaunch's first short interval one at every relaunch.
  double t_i = 0, reported_t_i = 0;
  // Each heartbeat death doubles T_timeout for the rest of the job: an
  // iteration slower than Eq. 3 allows (a false death) then costs a few
  // relaunches, not every one, and a hung rank is still found.
  double backoff = 1;
  int rc = 1;
  for (int attempt = 0;; ++attempt) {
    for (int r = 0; r < o.ranks; ++r) fs::remove(hb / ("heartbeat." + std::to_string(r)));
    const auto t0 = Clock::now();
    const auto since = fs::file_time_type::clock::now();
    const pid_t pid = spawn(o, command);
    if (pid < 0) {
      std::fprintf(stderr, "cairn launch: fork: %s\n", std::strerror(errno));
      rc = 2;
      break;
    }
    int status = 0;
    bool recovered_reported = attempt == 0, declared_dead = false;
    Clock::time_point killed_at{};
    // Eq. 1 and 3 (seed 001 §4.4): T_timeout = (T_hm + T_i + T_r + T_w) x
    // resiliency interval, with T_r = T_i / 5 and T_w = T_i as in Noor's
    // extended heartbeat; T_i is the slowest rank's time per iteration, from
    // the interval between its last two beats (one beat per commit, one
    // commit per resiliency interval), so it follows the job as it runs.
    double timeout = (o.timeout_auto ? o.auto_start : o.timeout) * backoff;
    for (;;) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const Beats b = read_beats(hb, o.ranks, since);
      if (!recovered_reported && b.ranks_fresh == o.ranks) {
        std::printf("cairn launch: attempt %d: all %d ranks resumed at version %llu, %.3f s after the relaunch\n",
                    attempt, o.ranks, static_cast<unsigned long long>(b.restored), seconds(Clock::now() - t0));
        std::fflush(stdout);
        recovered_reported = true;
      }
      t_i = std::max(t_i, b.interval / static_cast<double>(o.resiliency_interval));
      if (o.timeout_auto && t_i > 0 && !declared_dead) {
        const double eq3 = (o.t_hm + t_i + t_i / 5 + t_i) * o.resiliency_interval;
        timeout = std::max(eq3, o.floor) * backoff;
        if (reported_t_i == 0 || t_i > 1.5 * reported_t_i) {
          std::printf(
              "cairn launch: attempt %d: T_i %.4f s per iteration: T_timeout = (T_hm %.4f + T_i %.4f + T_r %.4f + "
              "T_w %.4f) x %d = %.4f s%s; declaring ranks dead after %.3f s\n",
              attempt, t_i, o.t_hm, t_i, t_i / 5, t_i, o.resiliency_interval, eq3,
              eq3 < o.floor ? " (below --timeout-floor)" : "", timeout);
          std::fflush(stdout);
          reported_t_i = t_i;
        }
      }
      // Every rank is judged, those that have not beaten yet too (against
      // --start-timeout from the launch): a rank that hangs before its first
      // commit holds the others in MPI, and none of them beats either.
      std::string silent;
      double oldest = 0;
      const double start_limit = std::max(timeout, o.start_timeout * backoff);
      if (timeout > 0 && !declared_dead)
        for (const auto& r : b.ranks)
          if (r.age > (r.beaten ? timeout : start_limit)) {
            silent += (silent.empty() ? "" : ", ") + std::to_string(r.rank) + (r.beaten ? "" : " (never beat)");
            oldest = std::max(oldest, r.age);
          }
      if (!silent.empty()) {
        // Ranks blocked in MPI behind a hung one stop beating too: all are listed.
        std::printf(
            "cairn launch: attempt %d: no heartbeat for %.3f s (T_timeout %.3f s, --start-timeout %.3f s) from "
            "rank(s) %s: declared dead, ending the job\n",
            attempt, oldest, timeout, start_limit, silent.c_str());
        declared_dead = true;
        backoff *= 2;
        killed_at = Clock::now();
        // A stopped rank acts on no signal but SIGKILL, and mpirun may have
        // put its ranks in their own process groups: kill them by pid, then
        // mpirun sees its ranks die and ends the job.
        for (pid_t p : b.pids)
          if (descends_from(p, pid))
            ::kill(p, SIGKILL);
          else
            std::printf("cairn launch: attempt %d: pid %d, named by a beat, is not a process of this job: not killed\n",
                        attempt, static_cast<int>(p));
        std::fflush(stdout);
        ::kill(pid, SIGTERM);
      }
      if (declared_dead && seconds(Clock::now() - killed_at) > 3) ::kill(-pid, SIGKILL);
    }
    const double ran = seconds(Clock::now() - t0);
    if (!declared_dead && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      std::printf("cairn launch: job finished after %d restart%s; last attempt %.3f s, total %.3f s\n", attempt,
                  attempt == 1 ? "" : "s", ran, seconds(Clock::now() - t_start));
      rc = 0;
      break;
    }
    const Beats b = read_beats(hb, o.ranks, since);
    std::printf("cairn launch: attempt %d failed after %.3f s (%s%s); last version beaten: %llu\n", attempt, ran,
                describe(status).c_str(), declared_dead ? ", heartbeat lost" : "",
                static_cast<unsigned long long>(b.version));
    if (attempt >= o.max_restarts) {
      std::printf("cairn launch: giving up after %d restart%s\n", attempt, attempt == 1 ? "" : "s");
      rc = 1;
      break;
    }
    if (std::find(command.begin(), command.end(), o.resume_flag) == command.end()) command.push_back(o.resume_flag);
    std::printf("cairn launch: relaunching with %s (restart %d of %d)", o.resume_flag.c_str(), attempt + 1,
                o.max_restarts);
    if (declared_dead) std::printf("; timeouts x%g from now on", backoff);
    std::printf("\n");
    std::fflush(stdout);
  }
  std::error_code ec;
  fs::remove_all(hb, ec);
  return rc;
}

}  // namespace

void add_launch_commands(CLI::App& app) {
  auto opts = std::make_shared<LaunchOptions>();
  auto* cmd =
      app.add_subcommand("launch", "Run an MPI job under mpirun and relaunch it at its global version when it dies");
  cmd->add_option("-n,--ranks", opts->ranks, "Number of ranks")->required()->check(CLI::Range(1, 4096));
  cmd->add_option("--max-restarts", opts->max_restarts, "Relaunch at most this many times (default 3)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option_function<std::string>(
      "--timeout",
      [opts](const std::string& v) {
        opts->timeout_auto = v == "auto";
        if (opts->timeout_auto) return;
        std::size_t used = 0;
        double t = -1;
        try {
          t = std::stod(v, &used);
        } catch (const std::exception&) {
        }
        if (used != v.size() || !(t >= 0 && t <= 86400))
          throw CLI::ValidationError("--timeout", "'" + v + "' is neither seconds (0 to 86400) nor auto");
        opts->timeout = t;
      },
      "T_timeout in seconds: a rank without a heartbeat for this long is declared dead (0: off); auto: Eq. 3, "
      "(T_hm + T_i + T_i/5 + T_i) x resiliency interval with T_i measured from the beats");
  cmd->add_option("--t-hm", opts->t_hm, "--timeout auto: T_hm, seconds for a beat to reach the monitor (default 0)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--timeout-floor", opts->floor,
                  "--timeout auto: never declare a rank dead sooner than this (default 1 s: polling every 20 ms, "
                  "ranks descheduled on a busy machine)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--start-timeout", opts->start_timeout,
                  "With --timeout: a rank that has not beaten this many seconds after the (re)launch is declared dead "
                  "(hung before its first commit or restore; default 30)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--resiliency-interval", opts->resiliency_interval,
                  "--timeout auto: the application commits every this many iterations (Eq. 3; default 1)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--resume-flag", opts->resume_flag, "Switch added to the command on relaunch (default --resume)");
  cmd->add_option("--mpirun", opts->mpirun, "The MPI launcher (default mpirun)");
  cmd->add_option("command", opts->command, "APP [ARGS...] after --")->required();
  cmd->footer(CAIRN_MPI_ULFM ? "In-job recovery (ULFM): available, this build's MPI has it: a job started with spare "
                               "ranks replaces a dead rank without a relaunch (jacobi-mpi --spares)."
                             : "In-job recovery (ULFM): not available, this build's MPI has no ULFM: a dead rank "
                               "ends the job and it is relaunched. The ulfm build (README) has it.");
  cmd->callback([opts]() { exit_code() = launch(*opts); });
}

}  // namespace cairn::tool
