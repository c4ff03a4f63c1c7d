// cmd_launch.cpp — `cairn launch -n N [--max-restarts R] [--timeout T] -- APP
// ARGS`: runs an MPI application under mpirun and, when the job dies (a rank
// killed, the job aborted) or a rank stops beating (hung, SIGSTOP), relaunches
// it with the resume switch, so that it continues at the global version its
// ranks agreed on (cairn::dist), up to R times; prints each failure and
// recovery with timings.
//
// Heartbeat (seed 001 §3.3, Eqs. 1-3): the job gets $CAIRN_HEARTBEAT_DIR, where
// every dist::Context writes heartbeat.<rank> (its version) after restore
// and every commit. With --timeout T (T_timeout = T_hm + T_i + T_r + T_w, times the
// resiliency interval; `--timeout auto` computes it so, T_i from the interval
// the ranks write into their beats, 30 s until then), a rank whose file has not changed for T seconds is
// declared dead and the job is ended (every rank whose beat gave its pid gets
// SIGKILL, mpirun SIGTERM, its process group SIGKILL after 3 s) and
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
  double auto_start = 30;  // T_timeout until T_i is measured
  double floor = 1;        // lowest T_timeout: the monitor's polling and the ranks' scheduling jitter
  std::string resume_flag = "--resume";
  std::string mpirun = "mpirun";
  std::vector<std::string> command;
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// heartbeat.<rank> files: age of the oldest beat (seconds), newest version,
// and how many ranks have beaten since `since`.
struct Beats {
  int ranks_seen = 0, ranks_fresh = 0;
  double oldest_age = 0;
  std::uint64_t version = 0, restored = 0;
  std::vector<std::pair<int, double>> ages;  // rank, seconds since its last beat
  std::vector<pid_t> pids;                   // the ranks' processes, from their beats
  double interval = 0;                       // the slowest rank's seconds between its last two beats
};

Beats read_beats(const fs::path& dir, int ranks, fs::file_time_type since) {
  Beats b;
  const auto now = fs::file_time_type::clock::now();
  for (int r = 0; r < ranks; ++r) {
    std::error_code ec;
    const std::string p = dist::detail::heartbeat_path(dir.string(), r);
    const auto t = fs::last_write_time(p, ec);
    if (ec) continue;
    // A file the rank has created but not yet written is no beat. A damaged
    // or foreign one gives nothing either (above all no pid to kill), but
    // its age still counts: the rank writes it again at its next commit.
    const auto beat = dist::detail::read_heartbeat(p);
    if (!beat.ok() && beat.error().code != Errc::corrupted && beat.error().code != Errc::foreign_file &&
        beat.error().code != Errc::truncated && beat.error().code != Errc::wrong_version)
      continue;
    if (beat.ok()) {
      b.interval = std::max(b.interval, static_cast<double>(beat.value().interval_ns) * 1e-9);
      b.version = std::max(b.version, beat.value().version);
      b.restored = std::max(b.restored, beat.value().restored);
      b.pids.push_back(static_cast<pid_t>(beat.value().pid));
    }
    ++b.ranks_seen;
    if (t >= since) ++b.ranks_fresh;
    const double age = std::chrono::duration<double>(now - t).count();
    b.oldest_age = std::max(b.oldest_age, age);
    b.ages.emplace_back(r, age);
  }
  return b;
}

// An app name built in this tree (apps/NAME/NAME), else the word as given.
std::string resolve(const std::string& app) {
  if (app.find('/') != std::string::npos) return app;
  const fs::path built = apps_dir() / app / app;
  std::error_code ec;
  return fs::exists(built, ec) ? built.string() : app;
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
    double timeout = o.timeout_auto ? o.auto_start : o.timeout;
    double reported_t_i = 0;
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
      if (o.timeout_auto && b.interval > 0 && !declared_dead) {
        const double t_i = b.interval / static_cast<double>(o.resiliency_interval);
        const double eq3 = (o.t_hm + t_i + t_i / 5 + t_i) * o.resiliency_interval;
        timeout = std::max(eq3, o.floor);
        if (reported_t_i == 0 || t_i > 2 * reported_t_i || t_i < reported_t_i / 2) {
          std::printf(
              "cairn launch: attempt %d: T_i %.4f s per iteration: T_timeout = (T_hm %.4f + T_i %.4f + T_r %.4f + "
              "T_w %.4f) x %d = %.4f s%s; declaring ranks dead after %.3f s\n",
              attempt, t_i, o.t_hm, t_i, t_i / 5, t_i, o.resiliency_interval, eq3,
              eq3 < o.floor ? " (below --timeout-floor)" : "", timeout);
          std::fflush(stdout);
          reported_t_i = t_i;
        }
      }
      if (timeout > 0 && !declared_dead && b.ranks_seen == o.ranks && b.oldest_age > timeout) {
        // Ranks blocked in MPI behind a hung one stop beating too: all are listed.
        std::string silent;
        for (const auto& [r, age] : b.ages)
          if (age > timeout) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
        std::printf(
            "cairn launch: attempt %d: no heartbeat for %.3f s (T_timeout %.3f s) from rank(s) %s: declared dead, "
            "ending the job\n",
            attempt, b.oldest_age, timeout, silent.c_str());
        std::fflush(stdout);
        declared_dead = true;
        killed_at = Clock::now();
        // A stopped rank acts on no signal but SIGKILL, and mpirun may have
        // put its ranks in their own process groups: kill them by pid, then
        // mpirun sees its ranks die and ends the job.
        for (pid_t p : b.pids) ::kill(p, SIGKILL);
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
    std::printf("cairn launch: relaunching with %s (restart %d of %d)\n", o.resume_flag.c_str(), attempt + 1,
                o.max_restarts);
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
