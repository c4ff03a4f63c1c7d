// dist_bench.cpp — `cairn bench dist` (see dist_bench.hpp).
#include "bench/dist_bench.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "bench/app_runner.hpp"
#include "bench/bench_util.hpp"
#include "dist/heartbeat.hpp"

extern char** environ;

namespace cairn::bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// ---- child processes

// A child whose standard output is read as it is printed, each line stamped with its arrival; its
// standard error goes to a file. It runs in its own process group.
struct Child {
  pid_t pid = -1;
  int out = -1;
  bool closed = false, exited = false;
  int status = 0;
  std::string pending, err_path;
  struct Line {
    Clock::time_point at;
    std::string text;
  };
  std::vector<Line> lines;

  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (out >= 0) ::close(out);
    if (pid > 0 && !exited) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }

  // Reads what has arrived, waiting up to `ms` for it.
  void pump(int ms) {
    if (closed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return;
    }
    pollfd p{out, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return;
    char buf[4096];
    const ssize_t n = ::read(out, buf, sizeof buf);
    if (n <= 0) {
      if (n == 0 || errno != EINTR) closed = true;
      return;
    }
    const auto now = Clock::now();
    pending.append(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1))
      lines.push_back({now, pending.substr(0, nl)});
  }
  bool poll_exit() {
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
    return exited;
  }
  // Reads to the end and reaps it; past `deadline` its process group is killed and what it started
  // elsewhere (mpirun makes its own group) no longer waited for.
  void finish(Clock::time_point deadline) {
    while (!closed || !poll_exit()) {
      pump(5);
      if (Clock::now() > deadline) {
        if (!exited) {
          ::kill(-pid, SIGKILL);
          ::waitpid(pid, &status, 0);
        }
        exited = closed = true;
      }
    }
    if (!pending.empty()) lines.push_back({Clock::now(), pending});
    pending.clear();
  }
  std::string output() const {
    std::string s;
    for (const auto& l : lines) s += l.text + "\n";
    return s;
  }
  std::string error_output() const {
    std::ifstream f(err_path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  bool succeeded() const { return exited && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  std::string describe() const {
    const std::string s = !exited               ? std::string("still running")
                          : WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                : "exit status " + std::to_string(WEXITSTATUS(status));
    std::string err = error_output();
    if (err.size() > 300) err = "..." + err.substr(err.size() - 300);
    return s + (err.empty() ? "" : ": " + err);
  }
};

Result<std::unique_ptr<Child>> start(const std::vector<std::string>& argv, const fs::path& err_path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return make_error(Errc::io_error, "pipe: " + std::string(std::strerror(errno)));
  auto c = std::make_unique<Child>();
  c->out = fds[0];
  c->err_path = err_path.string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, c->err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<std::string> store = argv;
  std::vector<char*> args;
  for (auto& s : store) args.push_back(s.data());
  args.push_back(nullptr);
  const int rc = ::posix_spawnp(&c->pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    c->pid = -1;
    return make_error(Errc::io_error, argv[0] + ": cannot start: " + std::strerror(rc));
  }
  return c;
}

// Processes with `word` among their arguments and, if `comm` is not empty, that name: a run's ranks
// (and its mpirun) are those whose command line names the run's unique storage directory.
std::vector<pid_t> processes_with_argument(const std::string& word, const std::string& comm) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(it->path() / "cmdline", std::ios::binary);
    std::string arg;
    bool found = false;
    while (!found && std::getline(f, arg, '\0')) found = arg == word;
    if (!found) continue;
    if (!comm.empty()) {
      std::ifstream c(it->path() / "comm");
      std::string line;
      std::getline(c, line);
      if (line != comm.substr(0, 15)) continue;
    }
    out.push_back(static_cast<pid_t>(std::atol(name.c_str())));
  }
  return out;
}

std::string environment_value(pid_t pid, const std::string& key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string kv;
  while (std::getline(f, kv, '\0'))
    if (kv.compare(0, key.size() + 1, key + "=") == 0) return kv.substr(key.size() + 1);
  return "";
}

// Whatever still runs of a run (a stopped rank, an orphaned mpirun) after a failure.
void kill_leftovers(const std::string& dir) {
  for (pid_t p : processes_with_argument(dir, "")) ::kill(p, SIGKILL);
}

// Every rank's heartbeat record (dist/heartbeat.hpp), present or not.
struct Beat : dist::detail::Heartbeat {
  bool present = false;
};
std::vector<Beat> read_beats(const fs::path& dir, int ranks) {
  std::vector<Beat> beats(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    if (const auto h = dist::detail::read_heartbeat(dist::detail::heartbeat_path(dir.string(), r)); h.ok())
      beats[static_cast<std::size_t>(r)] = {h.value(), true};
  return beats;
}

// ---- jacobi-mpi's output

struct JacobiOutput {
  bool complete = false;  // the result line and the timing line
  std::uint64_t iterations = 0, from = 0;
  std::string checksum;
  double compute_s = 0, commit_s = 0, local_us = 0, agree_us = 0;
  double restart_ms = -1;  // only after --resume
  double per_iteration() const {
    return iterations > from ? (compute_s + commit_s) / static_cast<double>(iterations - from) : 0;
  }
};

// The last run's lines (a launcher's output holds every attempt's).
JacobiOutput parse_jacobi(const std::string& out) {
  JacobiOutput j;
  const auto at = out.rfind(": iterations ");
  const auto timing = out.rfind("  compute ");
  if (at == std::string::npos || timing == std::string::npos || timing < at) return j;
  unsigned long long its = 0, from = 0;
  char sum[17] = {0};
  if (std::sscanf(out.c_str() + at, ": iterations %llu (from %llu)  checksum %16s", &its, &from, sum) != 3) return j;
  if (std::sscanf(out.c_str() + timing,
                  "  compute %lf s, commit %lf s (per commit, slowest rank: local %lf us, agreement %lf us)",
                  &j.compute_s, &j.commit_s, &j.local_us, &j.agree_us) != 4)
    return j;
  const auto eol = out.find('\n', timing);
  const auto restart = out.find(", restart ", timing);
  if (restart != std::string::npos && restart < eol)
    std::sscanf(out.c_str() + restart, ", restart %lf ms", &j.restart_ms);
  j.iterations = its, j.from = from, j.checksum = sum, j.complete = true;
  return j;
}

// ---- the runs

// What the experiments share: the scratch directory, the checksum every run of a size must end with.
struct Runner {
  const DistBenchOptions& options;
  std::string scratch;
  std::ostream* progress = nullptr;
  std::map<std::string, std::string> checksums;  // "N:ITERATIONS" -> the first good run's
  int serial = 0;

  // A fresh storage directory for one run.
  Result<fs::path> run_dir(const std::string& tag) {
    const fs::path d = fs::path(scratch) / (tag + "-" + std::to_string(serial++));
    std::error_code ec;
    fs::create_directories(d, ec);
    if (ec) return make_error(Errc::io_error, d.string() + ": " + ec.message());
    return d;
  }

  // mpirun -n RANKS jacobi-mpi --size N --iterations I --dir DIR ARGS, to the end.
  Result<std::unique_ptr<Child>> mpirun(int ranks, const DistSize& size, const fs::path& dir,
                                        const std::vector<std::string>& args) {
    std::vector<std::string> argv = {options.mpirun, "--oversubscribe", "-n", std::to_string(ranks),
                                     options.jacobi_mpi};
    const auto a = jacobi_args(size, dir);
    argv.insert(argv.end(), a.begin(), a.end());
    argv.insert(argv.end(), args.begin(), args.end());
    auto c = start(argv, fs::path(scratch) / "stderr.txt");
    if (!c.ok()) return c;
    c.value()->finish(Clock::now() + std::chrono::seconds(600));
    kill_leftovers(dir.string());
    return c;
  }

  std::vector<std::string> jacobi_args(const DistSize& size, const fs::path& dir) const {
    return {"--size", std::to_string(size.n), "--iterations", std::to_string(size.iterations), "--dir", dir.string()};
  }

  // "" if the run ended well with the checksum of every other run of its size; else what went wrong.
  std::string check(const Child& c, const JacobiOutput& j, const DistSize& size) {
    if (!c.succeeded()) return c.describe();
    if (!j.complete) return "no result in its output: " + c.output().substr(0, 300);
    const std::string key = std::to_string(size.n) + ":" + std::to_string(size.iterations);
    const auto [ref, fresh] = checksums.emplace(key, j.checksum);
    if (!fresh && ref->second != j.checksum)
      return "checksum " + j.checksum + " differs from the other runs' " + ref->second;
    return "";
  }

  void log(const std::string& line) {
    if (progress != nullptr) *progress << "dist " << line << std::endl;
  }
};

void remove_dir(const fs::path& d) {
  std::error_code ec;
  fs::remove_all(d, ec);
}

// The switches that put a run at redundancy level `level`.
std::vector<std::string> level_args(const std::string& level, int ranks_per_node) {
  return {"--redundancy", level, "--ranks-per-node", std::to_string(ranks_per_node)};
}

// ---- overhead

Result<void> run_overhead(const DistBenchOptions& o, Runner& run, DistReport& rep) {
  struct Mode {
    std::string name;  // none | local | collective
    std::string level;
  };
  for (int ranks : o.ranks)
    for (const auto& level : o.levels) {
      DistOverheadRow row;
      row.ranks = ranks, row.level = level;
      if (level != "local" && (ranks % o.ranks_per_node != 0 || ranks / o.ranks_per_node < 2))
        row.unavailable = "n/a (needs two nodes of --ranks-per-node ranks)";
      rep.overhead.push_back(row);
    }
  for (int round = 0; round < o.repeats; ++round)
    for (int ranks : o.ranks) {
      // none and local once per rank count (at level local), collective once per measured level; the
      // order turns with the round so that no mode always runs first.
      std::vector<Mode> modes = {{"none", "local"}, {"local", "local"}};
      for (const auto& row : rep.overhead)
        if (row.ranks == ranks && row.unavailable.empty()) modes.push_back({"collective", row.level});
      std::rotate(modes.begin(), modes.begin() + round % static_cast<int>(modes.size()), modes.end());
      for (const auto& m : modes) {
        auto d = run.run_dir("overhead");
        if (!d.ok()) return d.error();
        std::vector<std::string> args = {"--strategy", o.strategy, "--commit", m.name};
        const auto lv = level_args(m.level, o.ranks_per_node);
        args.insert(args.end(), lv.begin(), lv.end());
        auto c = run.mpirun(ranks, o.size, d.value(), args);
        remove_dir(d.value());
        if (!c.ok()) return c.error();
        const JacobiOutput j = parse_jacobi(c.value()->output());
        const std::string bad = run.check(*c.value(), j, o.size);
        for (auto& row : rep.overhead) {
          if (row.ranks != ranks || !row.unavailable.empty()) continue;
          // none and local are every level's baselines; collective is its level's own.
          if (m.name == "collective" && row.level != m.level) continue;
          if (m.name == "collective") ++row.runs;
          if (!bad.empty()) {
            if (row.error.empty()) row.error = m.name + " run: " + bad;
            continue;
          }
          auto& samples = m.name == "none" ? row.none_s : m.name == "local" ? row.local_s : row.collective_s;
          samples.push_back(j.per_iteration());
          const double commit = j.commit_s / static_cast<double>(o.size.iterations);
          if (m.name == "local") row.local_commit_s.push_back(commit);
          if (m.name == "collective") {
            row.collective_commit_s.push_back(commit);
            row.agree_s.push_back(j.agree_us * 1e-6);
          }
        }
        run.log("overhead " + std::to_string(ranks) + " ranks, " + m.name +
                (m.name == "collective" ? " (" + m.level + ")" : "") + ", round " + std::to_string(round + 1) + "/" +
                std::to_string(o.repeats) + ": " +
                (bad.empty() ? fmt("%.2f us/iteration", j.per_iteration() * 1e6) : bad));
      }
    }
  for (auto& row : rep.overhead) {
    row.none = median(row.none_s), row.local = median(row.local_s), row.collective = median(row.collective_s);
    row.agree = median(row.agree_s);
    row.local_commit = median(row.local_commit_s), row.collective_commit = median(row.collective_commit_s);
    row.good_runs = static_cast<int>(std::min({row.none_s.size(), row.local_s.size(), row.collective_s.size()}));
    if (row.unavailable.empty() && row.good_runs < o.repeats) rep.failed = true;
  }
  return {};
}

// ---- octree

Result<void> run_octree(const DistBenchOptions& o, Runner& run, DistReport& rep) {
  std::error_code ec;
  if (!fs::exists(o.amr_mpi, ec))
    return make_error(Errc::not_found, "no amr-mpi at " + o.amr_mpi + " (built only where MPI is found)");
  for (int ranks : o.ranks) rep.octree.push_back(DistOctreeRow{.ranks = ranks});
  const std::string size_key = "octree:" + std::to_string(o.octree_level) + ":" + std::to_string(o.octree_steps);
  for (int round = 0; round < o.repeats; ++round)
    for (auto& row : rep.octree) {
      // partner: the collective commit with a copy of each rank's changed
      // units on the next node; xor: with the XOR parity of every rank's
      // leaves over groups of up to four nodes (one rank per simulated node;
      // two ranks at least).
      std::vector<std::string> modes = {"none", "local", "collective"};
      if (row.ranks >= 2) modes.insert(modes.end(), {"partner", "xor"});
      std::rotate(modes.begin(), modes.begin() + round % static_cast<int>(modes.size()), modes.end());
      for (const auto& m : modes) {
        auto d = run.run_dir("octree");
        if (!d.ok()) return d.error();
        std::vector<std::string> argv = {o.mpirun,
                                         "--oversubscribe",
                                         "-n",
                                         std::to_string(row.ranks),
                                         o.amr_mpi,
                                         "--size",
                                         std::to_string(o.octree_level),
                                         "--steps",
                                         std::to_string(o.octree_steps),
                                         "--dir",
                                         d.value().string()};
        if (m == "partner" || m == "xor")
          argv.insert(argv.end(), {"--redundancy", m, "--ranks-per-node", "1"});
        else
          argv.insert(argv.end(), {"--commit", m});
        auto c = start(argv, fs::path(run.scratch) / "stderr.txt");
        if (!c.ok()) return c.error();
        c.value()->finish(Clock::now() + std::chrono::seconds(600));
        kill_leftovers(d.value().string());
        remove_dir(d.value());
        if (m == "collective") ++row.runs;
        if (m == "partner") ++row.partner_runs;
        if (m == "xor") ++row.xor_runs;
        // "amr-mpi: loop S s for N steps, commit C s (slowest rank), ..." and the checksum.
        const std::string& out = c.value()->output();
        const auto at = out.rfind("amr-mpi: loop ");
        const auto sum_at = out.rfind("checksum ");
        double loop = 0, commit = 0;
        unsigned long long steps = 0;
        char sum[17] = {0};
        std::string bad;
        if (!c.value()->succeeded())
          bad = c.value()->describe();
        else if (at == std::string::npos || sum_at == std::string::npos ||
                 std::sscanf(out.c_str() + at, "amr-mpi: loop %lf s for %llu steps, commit %lf s", &loop, &steps,
                             &commit) != 3 ||
                 std::sscanf(out.c_str() + sum_at, "checksum %16s", sum) != 1 || steps == 0)
          bad = "no result in its output: " + out.substr(0, 300);
        else if (const auto [ref, fresh] = run.checksums.emplace(size_key, sum); !fresh && ref->second != sum)
          bad = std::string("checksum ") + sum + " differs from the other runs' " + ref->second;
        if (!bad.empty()) {
          if (row.error.empty()) row.error = m + " run: " + bad;
        } else {
          const double per = loop / static_cast<double>(steps), per_commit = commit / static_cast<double>(steps);
          (m == "none"      ? row.none_s
           : m == "local"   ? row.local_s
           : m == "partner" ? row.partner_s
           : m == "xor"     ? row.xor_s
                            : row.collective_s)
              .push_back(per);
          if (m == "local") row.local_commit_s.push_back(per_commit);
          if (m == "collective") row.collective_commit_s.push_back(per_commit);
          if (m == "xor") row.xor_commit_s.push_back(per_commit);
          if (m == "partner") {
            row.partner_commit_s.push_back(per_commit);
            // "amr-mpi: partner copies: B bytes sent in all, U of O units sent"
            unsigned long long bytes = 0, sent = 0, owned = 0;
            const auto pc = out.rfind("amr-mpi: partner copies: ");
            if (pc != std::string::npos &&
                std::sscanf(out.c_str() + pc, "amr-mpi: partner copies: %llu bytes sent in all, %llu of %llu units",
                            &bytes, &sent, &owned) == 3 &&
                owned > 0)
              row.partner_units_share = static_cast<double>(sent) / static_cast<double>(owned);
          }
        }
        run.log("octree " + std::to_string(row.ranks) + " ranks, " + m + ", round " + std::to_string(round + 1) + "/" +
                std::to_string(o.repeats) + ": " +
                (bad.empty() ? fmt("%.3f ms/step", loop / static_cast<double>(steps) * 1e3) : bad));
      }
    }
  for (auto& row : rep.octree) {
    row.none = median(row.none_s), row.local = median(row.local_s), row.collective = median(row.collective_s);
    row.local_commit = median(row.local_commit_s), row.collective_commit = median(row.collective_commit_s);
    row.partner = median(row.partner_s), row.partner_commit = median(row.partner_commit_s);
    row.xor_ = median(row.xor_s), row.xor_commit = median(row.xor_commit_s);
    row.good_runs = static_cast<int>(std::min({row.none_s.size(), row.local_s.size(), row.collective_s.size()}));
    if (row.good_runs < o.repeats || static_cast<int>(row.partner_s.size()) < row.partner_runs ||
        static_cast<int>(row.xor_s.size()) < row.xor_runs)
      rep.failed = true;
  }
  return {};
}

// ---- recovery

// One `cairn launch` job with a fault: SIGKILL (kind kill) or SIGSTOP (kind hang) to the job's last
// rank once every rank has beaten half the iterations.
Result<void> measure_recovery(const DistBenchOptions& o, Runner& run, const std::string& storage_base,
                              DistRecoveryRow& row, int round) {
  const DistSize& size = o.recovery_size;
  const bool hang = row.kind == "hang", node = row.kind == "node", restart = row.kind == "restart";
  // kind node: two simulated nodes with partner copies; the last node's
  // ranks are killed and its directory deleted.
  const int per_node = std::max(1, o.job_ranks / 2);
  const fs::path dir =
      fs::path(storage_base) / ("recovery-" + row.kind + "-" + row.strategy + "-" + std::to_string(round));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(Errc::io_error, dir.string() + ": " + ec.message());
  std::vector<std::string> argv = {o.cairn,          "launch", "-n",       std::to_string(o.job_ranks),
                                   "--max-restarts", "2",      "--mpirun", o.mpirun};
  if (hang) argv.insert(argv.end(), {"--timeout", fmt("%g", o.hang_timeout)});
  argv.emplace_back("--");
  argv.push_back(o.jacobi_mpi);
  const auto a = run.jacobi_args(size, dir);
  argv.insert(argv.end(), a.begin(), a.end());
  argv.insert(argv.end(), {"--strategy", row.strategy});
  if (node) argv.insert(argv.end(), {"--redundancy", "partner", "--ranks-per-node", std::to_string(per_node)});
  // kind restart: supervised compute processes; the last rank's is killed
  // and replaced in place, the job never relaunched.
  if (restart) argv.emplace_back("--supervised");
  auto started = start(argv, fs::path(run.scratch) / "stderr.txt");
  if (!started.ok()) return started.error();
  Child& c = *started.value();
  ++row.runs;

  const std::uint64_t fault_at = std::max<std::uint64_t>(1, size.iterations / 2);
  const std::string comm = fs::path(o.jacobi_mpi).filename().string();
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  fs::path beats_dir;
  Clock::time_point t_fault{};
  std::uint64_t beaten = 0;
  std::string bad;
  while (bad.empty() && t_fault == Clock::time_point{}) {
    c.pump(5);
    if (c.poll_exit() || Clock::now() > deadline) {
      bad = "the job ended before version " + std::to_string(fault_at) + " (" + c.describe() + ")";
      break;
    }
    if (beats_dir.empty()) {
      for (pid_t p : processes_with_argument(dir.string(), comm))
        if (const std::string hb = environment_value(p, "CAIRN_HEARTBEAT_DIR"); !hb.empty()) beats_dir = hb;
      continue;
    }
    const auto beats = read_beats(beats_dir, o.job_ranks);
    std::uint64_t low = ~0ULL, high = 0;
    for (const auto& b : beats) low = std::min(low, b.present ? b.version : 0), high = std::max(high, b.version);
    if (low < fault_at) continue;
    const auto victim = static_cast<pid_t>(beats.back().pid);
    if (victim <= 0) continue;
    beaten = high;
    if (node) {
      for (std::size_t r = beats.size() - static_cast<std::size_t>(per_node); r < beats.size(); ++r)
        ::kill(static_cast<pid_t>(beats[r].pid), SIGKILL);
      fs::remove_all(dir / ("node" + std::to_string(o.job_ranks / per_node - 1)), ec);
    } else {
      ::kill(victim, hang ? SIGSTOP : SIGKILL);
    }
    t_fault = Clock::now();
  }
  // Restored: every rank of the relaunched job has beaten the version it restored (the first job's
  // beats carry none). Polled here every 2 ms, finer than the launcher's 20 ms, which may also miss a
  // resumed job that ends within its poll.
  Clock::time_point t_restored{};
  std::uint64_t restored = 0;
  while (bad.empty() && !(c.closed && c.poll_exit())) {
    c.pump(2);
    if (Clock::now() > deadline) {
      bad = "no recovery within 300 s";
      break;
    }
    if (t_restored != Clock::time_point{}) continue;
    const auto beats = read_beats(beats_dir, o.job_ranks);
    if (restart) {
      // The replacement beats once it restored; the other ranks never restore.
      if (beats.back().present && beats.back().restored > 0)
        t_restored = Clock::now(), restored = beats.back().restored;
    } else if (std::all_of(beats.begin(), beats.end(), [](const Beat& b) { return b.present && b.restored > 0; })) {
      t_restored = Clock::now(), restored = beats.front().restored;
    }
  }
  c.finish(deadline);
  kill_leftovers(dir.string());
  remove_dir(dir);

  double ended = -1, detect = -1, relaunch = -1;
  for (const auto& l : c.lines) {
    const double since = seconds(l.at - t_fault);
    if (ended < 0 && l.text.find("attempt 0 failed") != std::string::npos) ended = since;
    if (detect < 0 && l.text.find("attempt 0: no heartbeat") != std::string::npos) detect = since;
    unsigned long long v = 0;
    if (relaunch < 0)
      std::sscanf(l.text.c_str(), "cairn launch: attempt 1: all %*d ranks resumed at version %llu, %lf", &v, &relaunch);
  }
  const double total = seconds(t_restored - t_fault);
  JacobiOutput j = parse_jacobi(c.output());
  if (restart) {
    // The rank process's report: until the replacement's first agreement.
    const auto at = c.output().find("restarted rank=");
    if (at != std::string::npos)
      std::sscanf(c.output().c_str() + at, "restarted rank=%*d version=%*u restart_ms=%lf", &j.restart_ms);
    if (c.output().find("attempt 0 failed") != std::string::npos)
      bad = "the job was relaunched: " + c.output().substr(0, 400);
  }
  if (bad.empty()) bad = run.check(c, j, size);
  if (bad.empty() &&
      ((ended < 0 && !restart) || t_restored == Clock::time_point{} || (hang && detect < 0) || j.restart_ms < 0))
    bad = "no failure, detection or restore seen: " + c.output().substr(0, 400);
  if (bad.empty()) {
    ++row.good_runs;
    row.ended_s.push_back(ended);
    if (hang) row.detect_s.push_back(detect);
    if (relaunch >= 0) row.relaunch_s.push_back(relaunch);
    row.total_s.push_back(total);
    row.restore_ms.push_back(j.restart_ms);
    row.vs_beaten.push_back(static_cast<double>(restored) - static_cast<double>(beaten));
    row.restored_version = restored;
  } else if (row.error.empty()) {
    row.error = bad;
  }
  run.log("recovery " + row.kind + " " + row.strategy + ", round " + std::to_string(round + 1) + "/" +
          std::to_string(o.repeats) + ": " +
          (bad.empty() ? fmt("%.3f s from the fault to the restored version", total) : bad));
  return {};
}

Result<void> run_recovery(const DistBenchOptions& o, Runner& run, DistReport& rep) {
  // The file baseline's checkpoints go to --file-dir when given (a disk standing for the parallel file
  // system), else next to in-place's storage.
  std::unique_ptr<ScratchDir> file_scratch;
  if (!o.file_dir.empty()) {
    auto s = ScratchDir::create(o.file_dir, "dist-file");
    if (!s.ok()) return s.error();
    file_scratch = std::move(s.value());
  }
  // The checksum of the uninterrupted job: every recovered one must end with it.
  auto d = run.run_dir("recovery-reference");
  if (!d.ok()) return d.error();
  auto ref = run.mpirun(o.job_ranks, o.recovery_size, d.value(), {"--strategy", "in-place"});
  remove_dir(d.value());
  if (!ref.ok()) return ref.error();
  if (const std::string bad = run.check(*ref.value(), parse_jacobi(ref.value()->output()), o.recovery_size);
      !bad.empty())
    return make_error(Errc::io_error, "the uninterrupted recovery job failed: " + bad);
  for (const char* kind : {"kill", "hang", "node", "restart"})
    for (const char* strategy : {"in-place", "file"}) {
      // A node loss and an in-place restart against the kill of a rank
      // whose checkpoints are on the parallel file system (the file row of
      // kind kill).
      const std::string k = kind;
      if ((k == "node" || k == "restart") && std::string(strategy) == "file") continue;
      if (k == "node" && o.job_ranks < 2) continue;
      DistRecoveryRow row;
      row.kind = kind, row.strategy = strategy;
      row.storage = std::string(strategy) == "file" && file_scratch ? file_scratch->path() : run.scratch;
      rep.recovery.push_back(row);
    }
  for (int round = 0; round < o.repeats; ++round)
    for (std::size_t i = 0; i < rep.recovery.size(); ++i) {
      DistRecoveryRow& row = rep.recovery[(i + static_cast<std::size_t>(round)) % rep.recovery.size()];
      if (auto r = measure_recovery(o, run, row.storage, row, round); !r.ok()) return r;
    }
  for (auto& row : rep.recovery) {
    row.ended = median(row.ended_s), row.detect = median(row.detect_s), row.relaunch = median(row.relaunch_s);
    row.total = median(row.total_s), row.restore = median(row.restore_ms), row.vs_beaten_median = median(row.vs_beaten);
    if (row.good_runs < o.repeats) rep.failed = true;
  }
  return {};
}

// ---- timeout (seed 001 Figs. 11-12)

Result<void> run_timeout(const DistBenchOptions& o, Runner& run, DistReport& rep) {
  std::vector<std::string> names = {"none"};
  names.insert(names.end(), o.strategies.begin(), o.strategies.end());
  for (const auto& s : names) {
    DistTimeoutRow row;
    row.strategy = s;
    rep.timeout.push_back(row);
  }
  for (int round = 0; round < o.repeats; ++round)
    for (std::size_t i = 0; i < rep.timeout.size(); ++i) {
      DistTimeoutRow& row = rep.timeout[(i + static_cast<std::size_t>(round)) % rep.timeout.size()];
      const bool none = row.strategy == "none";
      auto d = run.run_dir("timeout");
      if (!d.ok()) return d.error();
      ++row.runs;
      // A fresh job to the end (T_checkpoint, T_compute), then the same job resumed (T_restart).
      auto c = run.mpirun(
          o.job_ranks, o.timeout_size, d.value(),
          none ? std::vector<std::string>{"--commit", "none"} : std::vector<std::string>{"--strategy", row.strategy});
      if (!c.ok()) return c.error();
      const JacobiOutput j = parse_jacobi(c.value()->output());
      std::string bad = run.check(*c.value(), j, o.timeout_size);
      JacobiOutput resumed;
      if (bad.empty() && !none) {
        auto r = run.mpirun(o.job_ranks, o.timeout_size, d.value(), {"--strategy", row.strategy, "--resume"});
        if (!r.ok()) return r.error();
        resumed = parse_jacobi(r.value()->output());
        bad = run.check(*r.value(), resumed, o.timeout_size);
        if (bad.empty() && (resumed.restart_ms < 0 || resumed.from != o.timeout_size.iterations))
          bad = "the resumed job did not restore version " + std::to_string(o.timeout_size.iterations);
      }
      remove_dir(d.value());
      const double its = static_cast<double>(o.timeout_size.iterations);
      if (bad.empty()) {
        ++row.good_runs;
        // T_i, the seed's "single iteration in the original version", is the whole loop of none.
        row.compute_s.push_back(none ? j.per_iteration() : j.compute_s / its);
        row.checkpoint_s.push_back(none ? 0 : j.commit_s / its);
        row.restart_s.push_back(none ? 0 : resumed.restart_ms * 1e-3);
      } else if (row.error.empty()) {
        row.error = bad;
      }
      run.log("timeout " + row.strategy + ", round " + std::to_string(round + 1) + "/" + std::to_string(o.repeats) +
              ": " + (bad.empty() ? fmt("%.3f ms per iteration", row.compute_s.back() * 1e3) : bad));
    }
  for (auto& row : rep.timeout) {
    row.checkpoint = median(row.checkpoint_s), row.restart = median(row.restart_s);
    row.compute = median(row.compute_s);
    if (row.good_runs < o.repeats) rep.failed = true;
  }
  // Eq. 1 with the seed's choices (§4.4): the monitor runs on this machine (T_hm = 0), a beat every
  // iteration (T_i), T_r = T_i / 5, T_w = T_i; Eq. 3 scales it by the resiliency interval.
  rep.t_i = rep.timeout.front().compute;
  rep.t_hm = 0, rep.t_r = rep.t_i / 5, rep.t_w = rep.t_i;
  const int intervals[2] = {1, 3};
  for (int k = 0; k < 2; ++k) rep.t_timeout[k] = (rep.t_hm + rep.t_i + rep.t_r + rep.t_w) * intervals[k];
  for (auto& row : rep.timeout)
    for (int k = 0; k < 2; ++k) {
      // Eq. 2, the k iterations since the last checkpoint recomputed.
      row.eq2[k] = row.checkpoint + row.restart + intervals[k] * row.compute;
      row.fits[k] = row.strategy != "none" && row.good_runs > 0 && row.eq2[k] < rep.t_timeout[k];
    }
  return {};
}

// ---- traffic

Result<void> run_traffic(const DistBenchOptions& o, Runner& run, DistReport& rep) {
  for (const char* level : {"local", "partner", "xor"})
    for (double changed : {1.0, 0.1, 0.01}) {
      DistTrafficRow row;
      row.level = level, row.changed = changed;
      rep.traffic.push_back(row);
    }
  std::error_code ec;
  if (o.job_ranks < 2 || !fs::exists(o.dist_worker, ec)) {
    for (auto& row : rep.traffic)
      row.error = o.job_ranks < 2 ? "needs --job-ranks 2 or more (one node each)"
                                  : "no dist_worker at " + o.dist_worker + " (a build tree's src/dist)";
    rep.failed = true;
    return {};
  }
  const std::uint64_t its = std::max<std::uint64_t>(o.traffic_iterations, 4);
  for (int round = 0; round < o.repeats; ++round)
    for (std::size_t i = 0; i < rep.traffic.size(); ++i) {
      DistTrafficRow& row = rep.traffic[(i + static_cast<std::size_t>(round)) % rep.traffic.size()];
      auto d = run.run_dir("traffic");
      if (!d.ok()) return d.error();
      const auto changing = static_cast<std::uint64_t>(static_cast<double>(o.traffic_words) * row.changed);
      std::vector<std::string> argv = {o.mpirun,
                                       "--oversubscribe",
                                       "-n",
                                       std::to_string(o.job_ranks),
                                       o.dist_worker,
                                       "--dir",
                                       d.value().string(),
                                       "--iterations",
                                       std::to_string(its),
                                       "--words",
                                       std::to_string(o.traffic_words),
                                       "--changing-words",
                                       std::to_string(row.changed >= 1 ? 0 : changing),
                                       "--redundancy",
                                       row.level,
                                       "--ranks-per-node",
                                       "1"};
      auto c = start(argv, fs::path(run.scratch) / "stderr.txt");
      if (!c.ok()) return c.error();
      c.value()->finish(Clock::now() + std::chrono::seconds(600));
      kill_leftovers(d.value().string());
      remove_dir(d.value());
      ++row.runs;
      // Rank 0's "done" line: per-commit times (us) and totals.
      const std::string out = c.value()->output();
      const auto at = out.find("done rank=0 ");
      unsigned long long version = 0, commits = 0, sent_blocks = 0, of_blocks = 0, sent_bytes = 0;
      int match = 0;
      double local_us = 0, redundancy_us = 0, agree_us = 0;
      const bool parsed =
          at != std::string::npos &&
          std::sscanf(out.c_str() + at,
                      "done rank=0 version=%llu match=%d commits=%llu local_us=%lf redundancy_us=%lf agree_us=%lf "
                      "sent_blocks=%llu of_blocks=%llu sent_bytes=%llu",
                      &version, &match, &commits, &local_us, &redundancy_us, &agree_us, &sent_blocks, &of_blocks,
                      &sent_bytes) == 9;
      std::string bad;
      if (!c.value()->succeeded())
        bad = c.value()->describe();
      else if (!parsed || match != 1 || commits != its)
        bad = "no matching result in its output: " + out.substr(0, 300);
      if (bad.empty()) {
        ++row.good_runs;
        // The state as the levels see it: the words and the 64-byte counter region, each padded to
        // 64 KiB blocks.
        const double payload = static_cast<double>((o.traffic_words * 8 + 65535) / 65536 + 1) * 65536;
        // Partner: each of the holder's two slots gets the whole state once; the steady state follows.
        const double first = row.level == "partner" ? 2 * payload : 0;
        const double steady_commits = static_cast<double>(commits) - (row.level == "partner" ? 2 : 0);
        row.bytes.push_back((static_cast<double>(sent_bytes) - first) / steady_commits);
        row.payload.push_back(row.level == "local" ? 0 : payload);
        row.commit_s.push_back((local_us + redundancy_us + agree_us) * 1e-6);
        row.redundancy_s.push_back(redundancy_us * 1e-6);
      } else if (row.error.empty()) {
        row.error = bad;
      }
      run.log("traffic " + row.level + " " + fmt("%.0f%%", row.changed * 100) + ", round " + std::to_string(round + 1) +
              "/" + std::to_string(o.repeats) + ": " +
              (bad.empty() ? fmt("%.0f bytes per commit", row.bytes.back()) : bad));
    }
  for (auto& row : rep.traffic) {
    row.sent = median(row.bytes), row.payload_bytes = median(row.payload);
    row.commit = median(row.commit_s), row.redundancy = median(row.redundancy_s);
    if (row.good_runs < o.repeats) rep.failed = true;
  }
  return {};
}

bool wants(const DistBenchOptions& o, const std::string& experiment) {
  return std::find(o.experiments.begin(), o.experiments.end(), experiment) != o.experiments.end();
}

}  // namespace

Result<DistSize> parse_dist_size(const std::string& text, const std::string& what) {
  DistSize s;
  char* end = nullptr;
  s.n = static_cast<int>(std::strtol(text.c_str(), &end, 10));
  if (*end == ':') s.iterations = std::strtoull(end + 1, &end, 10);
  if (*end != '\0' || s.n < 4 || s.iterations < 2)
    return make_error(Errc::invalid_argument,
                      what + " '" + text + "': write N:ITERATIONS, at least 4 points per side and 2 iterations");
  return s;
}

Result<DistReport> run_dist_bench(const DistBenchOptions& o, std::ostream* progress) {
  for (const auto& e : o.experiments)
    if (e != "overhead" && e != "recovery" && e != "timeout" && e != "traffic" && e != "octree")
      return make_error(Errc::invalid_argument,
                        "--experiments: unknown '" + e + "' (overhead, recovery, timeout, traffic, octree)");
  for (const auto& l : o.levels)
    if (l != "local" && l != "partner" && l != "xor")
      return make_error(Errc::invalid_argument, "--levels: unknown '" + l + "' (local, partner, xor)");
  if (o.repeats < 1 || o.ranks.empty() || o.job_ranks < 1 || o.ranks_per_node < 1)
    return make_error(Errc::invalid_argument, "--repeats, --ranks, --job-ranks and --ranks-per-node: at least 1");
  for (int r : o.ranks)
    if (r < 1) return make_error(Errc::invalid_argument, "--ranks: at least 1 each");
  for (const auto& s : o.strategies)
    if (s == "undo-log")
      return make_error(Errc::invalid_argument, "--strategies: dist refuses undo-log (include/cairn/dist.hpp)");
  std::error_code ec;
  if (!fs::exists(o.jacobi_mpi, ec))
    return make_error(Errc::not_found, "no jacobi-mpi at " + o.jacobi_mpi +
                                           " (built only where MPI is found: build the jacobi-mpi target)");
  // The ranks' environment, as the tests give it (tests/support/mpirun_env.hpp): Open MPI as root, more
  // ranks than cores; no heartbeat directory but the launcher's own. And a rank waiting in MPI yields its
  // core: Open MPI decides that by itself from the ranks it places per core, blind to the other jobs of
  // a shared machine, and a spinning rank starves the one it waits for (mpi_yield_when_idle=0 took 4
  // ranks of jacobi-mpi 512 from 0.3 to 10-30 ms per iteration here).
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  // Under AddressSanitizer, no leak report from the ranks: Open MPI leaks at
  // its end from components it has unloaded (this process read its own
  // ASAN_OPTIONS at start and keeps checking).
  const char* asan = std::getenv("ASAN_OPTIONS");
  ::setenv("ASAN_OPTIONS", ((asan && *asan ? std::string(asan) + ":" : std::string()) + "detect_leaks=0").c_str(), 1);
  ::unsetenv("CAIRN_HEARTBEAT_DIR");

  auto scratch = ScratchDir::create(o.dir, "dist");
  if (!scratch.ok()) return scratch.error();
  DistReport rep;
  rep.options = o;
  rep.cores = std::thread::hardware_concurrency();
  rep.machine =
      cpu_model() + ", " + std::to_string(rep.cores) + " cores, load " + fmt("%.2f", load_average()) + ", " + utc_now();
  Runner run{o, scratch.value()->path(), progress};
  if (wants(o, "overhead"))
    if (auto r = run_overhead(o, run, rep); !r.ok()) return r.error();
  if (wants(o, "recovery"))
    if (auto r = run_recovery(o, run, rep); !r.ok()) return r.error();
  if (wants(o, "timeout"))
    if (auto r = run_timeout(o, run, rep); !r.ok()) return r.error();
  if (wants(o, "traffic"))
    if (auto r = run_traffic(o, run, rep); !r.ok()) return r.error();
  if (wants(o, "octree"))
    if (auto r = run_octree(o, run, rep); !r.ok()) return r.error();
  return rep;
}

namespace {

std::string pct(double x) { return fmt("%+.1f%%", 100 * x); }
std::string pct_of(double part, double whole) { return fmt("%.1f%%", 100 * part / whole); }
// (b - a) / a, or "-" without both.
std::string change(double a, double b) { return a > 0 && b > 0 ? pct(b / a - 1) : "-"; }
// How much the collective commit adds to the local commit's overhead over none.
double added(const DistOverheadRow& r) { return (r.collective - r.local) / (r.local - r.none); }

}  // namespace

void print_dist_report(const DistReport& rep, std::ostream& out) {
  const auto& o = rep.options;
  char line[400];
  out << "dist: MPI jobs under mpirun (Open MPI, mpi_yield_when_idle=1; ULFM in-job recovery: "
      << (CAIRN_MPI_ULFM ? "yes" : "no, relaunch only") << "), medians of " << o.repeats << " interleaved rounds ("
      << rep.machine << ")\n";
  if (!rep.overhead.empty()) {
    out << "\noverhead: " << o.size.n << "x" << o.size.n << " grid, " << o.size.iterations << " iterations, "
        << o.strategy << "; loop time per iteration of rank 0 (us)\n";
    std::snprintf(line, sizeof line, "%6s %-8s %9s %9s %9s %9s %9s %10s %8s | %8s %8s %8s %8s\n", "ranks", "level",
                  "none", "local", "collect.", "local ov", "coll. ov", "coll/local", "added", "c.local", "c.coll.",
                  "c.added", "agree");
    out << line;
    for (const auto& r : rep.overhead) {
      const std::string ranks = std::to_string(r.ranks) + (r.ranks > static_cast<int>(rep.cores) ? "*" : "");
      if (!r.unavailable.empty()) {
        std::snprintf(line, sizeof line, "%6s %-8s %s\n", ranks.c_str(), r.level.c_str(), r.unavailable.c_str());
        out << line;
        continue;
      }
      const bool base = r.local > r.none && r.none > 0;
      std::snprintf(line, sizeof line, "%6s %-8s %9.1f %9.1f %9.1f %9s %9s %10s %8s | %8.1f %8.1f %8s %8.1f%s\n",
                    ranks.c_str(), r.level.c_str(), r.none * 1e6, r.local * 1e6, r.collective * 1e6,
                    change(r.none, r.local).c_str(), change(r.none, r.collective).c_str(),
                    r.local > 0 ? fmt("%.3f", r.collective / r.local).c_str() : "-", base ? pct(added(r)).c_str() : "-",
                    r.local_commit * 1e6, r.collective_commit * 1e6,
                    change(r.local_commit, r.collective_commit).c_str(), r.agree * 1e6,
                    r.good_runs < o.repeats ? "  FAILED" : "");
      out << line;
      if (!r.error.empty()) out << "  " << r.error << "\n";
    }
    out << "none: --commit none (two DRAM grids); local: each rank commits its lanes, no agreement (--commit local);\n"
           "collect.: dist::Context::commit. ov: against none. added: (collect. - local) / (local - none), what the\n"
           "agreement adds to the local commit's overhead in loop time. After the bar, rank 0's commit alone: c.local\n"
           "and c.coll. per iteration, c.added = c.coll. / c.local - 1 (the agreement's share, waits for slower\n"
           "ranks included: in local mode those show up in the next halo exchange instead); agree: the all-reduce\n"
           "per commit (slowest rank). * more ranks than the "
        << rep.cores << " cores: oversubscribed.\n";
    for (const auto& r : rep.overhead)
      if (r.ranks == 4 && r.level == "local" && r.unavailable.empty()) {
        const bool base = r.local > r.none && r.none > 0;
        out << "goal at 4 ranks, the collective commit adds at most 5 % to a local in-place commit's overhead: "
            << (!base              ? "undecided (local not slower than none: no overhead to compare with)"
                : added(r) <= 0.05 ? "met"
                                   : "missed")
            << (base ? " (" + pct(added(r)) + ")" : "") << "; loop time collect./local "
            << (r.local > 0 ? fmt("%.3f", r.collective / r.local) : "-") << ", commit time alone "
            << change(r.local_commit, r.collective_commit) << "\n";
      }
  }
  if (!rep.recovery.empty()) {
    out << "\nrecovery: " << o.job_ranks << " ranks under cairn launch, " << o.recovery_size.n << "x"
        << o.recovery_size.n << " grid, " << o.recovery_size.iterations << " iterations; rank " << o.job_ranks - 1
        << " SIGKILLed (kill), its compute process killed (restart), or SIGSTOPped (hang), or node 1 lost (node: its "
        << std::max(1, o.job_ranks / 2)
        << " ranks SIGKILLed and its directory deleted, the job rebuilding them from partner copies) once every "
           "rank has beaten version "
        << std::max<std::uint64_t>(1, o.recovery_size.iterations / 2) << "\n";
    std::snprintf(line, sizeof line, "%-7s %-9s %9s %9s %9s %10s %10s %11s %6s %8s\n", "kind", "strategy", "detect s",
                  "T_timeout", "ended s", "relaunch s", "restored s", "restore ms", "vs beat", "vs file");
    out << line;
    for (const auto& r : rep.recovery) {
      double file_total = 0;
      for (const auto& f : rep.recovery)
        if ((f.kind == r.kind || ((r.kind == "node" || r.kind == "restart") && f.kind == "kill")) &&
            f.strategy == "file")
          file_total = f.total;
      const bool hang = r.kind == "hang";
      std::snprintf(line, sizeof line, "%-7s %-9s %9s %9s %9s %10s %10.3f %11.3f %6.0f %8s%s\n", r.kind.c_str(),
                    r.strategy.c_str(), hang ? fmt("%.3f", r.detect).c_str() : "-",
                    hang ? fmt("%.3f", o.hang_timeout).c_str() : "-", r.ended >= 0 ? fmt("%.3f", r.ended).c_str() : "-",
                    r.relaunch_s.empty() ? "-" : fmt("%.3f", r.relaunch).c_str(), r.total, r.restore,
                    r.vs_beaten_median,
                    file_total > 0 && r.total > 0 ? fmt("%.2fx", file_total / r.total).c_str() : "-",
                    r.good_runs < o.repeats ? "  FAILED" : "");
      out << line;
      if (!r.error.empty()) out << "  " << r.error << "\n";
    }
    out << "Seconds from the fault. detect (hang): until the launcher declared the rank dead, its heartbeat file\n"
           "older than T_timeout (polled every 20 ms; the last beat precedes the stop by up to an iteration).\n"
           "ended: until the launcher reported attempt 0 ended (a kill: mpirun noticed the dead rank and ended\n"
           "the job; the launcher polls every 20 ms). relaunch: the launcher's own figure, relaunch until every\n"
           "rank beat (\"-\" if it missed it). restored: until every relaunched rank had beaten the version it\n"
           "restored (heartbeat files polled by the bench every 2 ms). restore ms: the resumed ranks' storage open\n"
           "and restore. vs beat: the version restored minus the newest beaten before the fault (>= 0: nothing lost;\n"
           "+1: a version was global before its beats were written). vs file: the file strategy's restored\n"
           "time over this row's (a relaunch from file checkpoints, measured in the same rounds; for node and\n"
           "restart, the kill row's: file checkpoints on the shared file system survive the node). restart:\n"
           "--supervised, the rank's compute process SIGKILLed and replaced in place (no relaunch); restored =\n"
           "the replacement's first beat, restore ms = the rank process's restart_ms (until its first agreement).\n";
    for (const auto& r : rep.recovery)
      if (r.strategy == "file" && r.kind == "kill") out << "file checkpoints in " << r.storage << "\n";
  }
  if (!rep.timeout.empty()) {
    out << "\ntimeout (seed 001 Figs. 11-12): " << o.job_ranks << " ranks, " << o.timeout_size.n << "x"
        << o.timeout_size.n << " grid, " << o.timeout_size.iterations << " iterations; milliseconds\n";
    out << "Eq. 1: T_timeout = T_hm + T_i + T_r + T_w = " << fmt("%.3f", rep.t_hm * 1e3) << " + "
        << fmt("%.3f", rep.t_i * 1e3) << " + " << fmt("%.3f", rep.t_r * 1e3) << " + " << fmt("%.3f", rep.t_w * 1e3)
        << " ms; Eq. 3 (x resiliency interval): " << fmt("%.3f", rep.t_timeout[0] * 1e3) << " ms at 1, "
        << fmt("%.3f", rep.t_timeout[1] * 1e3) << " ms at 3\n";
    std::snprintf(line, sizeof line, "%-11s %8s %8s %8s %10s %6s %10s %6s\n", "strategy", "T_ckpt", "T_rst", "T_comp",
                  "Eq.2 @1", "fits", "Eq.2 @3", "fits");
    out << line;
    for (const auto& r : rep.timeout) {
      const bool none = r.strategy == "none";
      std::snprintf(line, sizeof line, "%-11s %8s %8s %8.3f %10s %6s %10s %6s%s\n", r.strategy.c_str(),
                    none ? "-" : fmt("%.3f", r.checkpoint * 1e3).c_str(),
                    none ? "-" : fmt("%.3f", r.restart * 1e3).c_str(), r.compute * 1e3,
                    none ? "-" : fmt("%.3f", r.eq2[0] * 1e3).c_str(),
                    none        ? "(T_i)"
                    : r.fits[0] ? "yes"
                                : "no",
                    none ? "-" : fmt("%.3f", r.eq2[1] * 1e3).c_str(),
                    none        ? ""
                    : r.fits[1] ? "yes"
                                : "no",
                    r.good_runs < o.repeats ? "  FAILED" : "");
      out << line;
      if (!r.error.empty()) out << "  " << r.error << "\n";
    }
    out << "The seed's terms (§4.4): T_hm = 0 (monitor on the same machine), T_i = one iteration without\n"
           "persistence (row none: --commit none), T_r = T_i / 5, T_w = T_i. T_ckpt: the collective commit per\n"
           "iteration (rank 0); T_comp: one iteration's halo exchange and compute with the strategy; T_rst: the\n"
           "resumed job's storage open and restore of the global version (after MPI_Init; relaunching the job\n"
           "costs the recovery table's relaunch time on top). Eq. 2 at interval k: T_ckpt + T_rst + k x T_comp <\n"
           "T_timeout(k), the k iterations since the last checkpoint recomputed (the seed's Fig. 12 bars exceed\n"
           "Fig. 11's by about 2 T_i). The seed: T_i = 770 ms, T_timeout 1,694 ms and 5,082 ms.\n";
  }
  if (!rep.traffic.empty()) {
    out << "\ntraffic: " << o.job_ranks << " ranks of dist_worker, one per node, " << o.traffic_words * 8 / 1024
        << " KiB of state per rank, " << std::max<std::uint64_t>(o.traffic_iterations, 4)
        << " versions, in-place; per rank and commit\n";
    std::snprintf(line, sizeof line, "%-8s %8s %12s %10s %12s %12s %10s\n", "level", "changed", "sent KiB", "of state",
                  "copy us", "commit us", "vs local");
    out << line;
    for (const auto& r : rep.traffic) {
      double local = 0;
      for (const auto& l : rep.traffic)
        if (l.level == "local" && l.changed == r.changed) local = l.commit;
      std::snprintf(line, sizeof line, "%-8s %7.0f%% %12.1f %10s %12.1f %12.1f %10s%s\n", r.level.c_str(),
                    r.changed * 100, r.sent / 1024, r.payload_bytes > 0 ? pct_of(r.sent, r.payload_bytes).c_str() : "-",
                    r.redundancy * 1e6, r.commit * 1e6,
                    local > 0 && r.commit > 0 ? fmt("%.2fx", r.commit / local).c_str() : "-",
                    r.good_runs < o.repeats ? "  FAILED" : "");
      out << line;
      if (!r.error.empty()) out << "  " << r.error << "\n";
    }
    out << "sent: bytes this rank sent for redundancy per commit, after partner's first two (whole) copies; of\n"
           "state: against its state (regions padded to 64 KiB blocks). copy: the partner copy or parity, durable\n"
           "on its holder; commit: local commit + copy + agreements (rank 0); vs local: against level local with\n"
           "the same changes. xor reduce-scatters the whole state, (g-1)/g of it per member, changed or not.\n";
  }
  if (!rep.octree.empty()) {
    out << "\noctree: amr-mpi --size " << o.octree_level << ", " << o.octree_steps
        << " steps (the PM-octree partitioned by Morton ranges, pm_persistent every step); loop time per step "
           "(ms, slowest rank)\n";
    std::snprintf(line, sizeof line, "%6s %9s %9s %9s %9s %9s %10s %8s %9s %9s %9s %9s | %8s %8s %8s %7s %8s\n",
                  "ranks", "none", "local", "collect.", "local ov", "coll. ov", "coll/local", "added", "partner",
                  "part/coll", "xor", "xor/coll", "c.local", "c.coll.", "c.part.", "sent", "c.xor");
    out << line;
    for (const auto& r : rep.octree) {
      const std::string ranks = std::to_string(r.ranks) + (r.ranks > static_cast<int>(rep.cores) ? "*" : "");
      const bool base = r.local > r.none && r.none > 0;
      const bool partner = r.partner > 0 && r.collective > 0, xored = r.xor_ > 0 && r.collective > 0;
      std::snprintf(
          line, sizeof line, "%6s %9.3f %9.3f %9.3f %9s %9s %10s %8s %9s %9s %9s %9s | %8.3f %8.3f %8s %7s %8s%s\n",
          ranks.c_str(), r.none * 1e3, r.local * 1e3, r.collective * 1e3, change(r.none, r.local).c_str(),
          change(r.none, r.collective).c_str(), r.local > 0 ? fmt("%.3f", r.collective / r.local).c_str() : "-",
          base ? pct((r.collective - r.local) / (r.local - r.none)).c_str() : "-",
          partner ? fmt("%.3f", r.partner * 1e3).c_str() : "-",
          partner ? fmt("%.3f", r.partner / r.collective).c_str() : "-",
          xored ? fmt("%.3f", r.xor_ * 1e3).c_str() : "-", xored ? fmt("%.3f", r.xor_ / r.collective).c_str() : "-",
          r.local_commit * 1e3, r.collective_commit * 1e3, partner ? fmt("%.3f", r.partner_commit * 1e3).c_str() : "-",
          partner ? fmt("%.0f%%", 100 * r.partner_units_share).c_str() : "-",
          xored ? fmt("%.3f", r.xor_commit * 1e3).c_str() : "-", r.good_runs < o.repeats ? "  FAILED" : "");
      out << line;
      if (!r.error.empty()) out << "  " << r.error << "\n";
    }
    out << "none: the same PM-octree run with nothing persisted (--commit none); local: every rank's pm_persistent\n"
           "each step, no agreement (--commit local); collect.: pm_persistent and the all-reduce that makes the\n"
           "version global. ov: against none. added: (collect. - local) / (local - none). partner: collective with\n"
           "a copy of each rank's changed units on the next node (--redundancy partner, one rank per node); sent:\n"
           "the share of the owned units sent per commit. xor: collective with the XOR parity of every rank's\n"
           "leaves over groups of up to 4 nodes (--redundancy xor). c.local, c.coll., c.part., c.xor: the commit\n"
           "alone per step (slowest rank; collective: waits for slower ranks included).\n";
  }
}

Result<void> write_dist_json(const DistReport& rep, const std::string& path) {
  const auto& o = rep.options;
  Json overhead = Json::array();
  for (const auto& r : rep.overhead)
    overhead.push_back({{"ranks", r.ranks},
                        {"level", r.level},
                        {"size", o.size.n},
                        {"iterations", o.size.iterations},
                        {"strategy", o.strategy},
                        {"unavailable", r.unavailable},
                        {"none_s", r.none},
                        {"local_s", r.local},
                        {"collective_s", r.collective},
                        {"agree_s", r.agree},
                        {"local_commit_s", r.local_commit},
                        {"collective_commit_s", r.collective_commit},
                        {"runs", r.runs},
                        {"good_runs", r.good_runs},
                        {"none_samples", r.none_s},
                        {"local_samples", r.local_s},
                        {"collective_samples", r.collective_s},
                        {"error", r.error}});
  Json recovery = Json::array();
  for (const auto& r : rep.recovery)
    recovery.push_back({{"kind", r.kind},
                        {"strategy", r.strategy},
                        {"ranks", o.job_ranks},
                        {"size", o.recovery_size.n},
                        {"iterations", o.recovery_size.iterations},
                        {"storage", r.storage},
                        {"t_timeout_s", r.kind == "hang" ? o.hang_timeout : 0},
                        {"detect_s", r.kind == "hang" ? r.detect : r.ended},
                        {"ended_s", r.ended},
                        {"relaunch_s", r.relaunch},
                        {"restored_s", r.total},
                        {"restore_ms", r.restore},
                        {"restored_minus_beaten", r.vs_beaten_median},
                        {"restored_version", r.restored_version},
                        {"runs", r.runs},
                        {"good_runs", r.good_runs},
                        {"restored_samples", r.total_s},
                        {"error", r.error}});
  Json timeout_rows = Json::array();
  for (const auto& r : rep.timeout)
    timeout_rows.push_back({{"strategy", r.strategy},
                            {"t_checkpoint_s", r.checkpoint},
                            {"t_restart_s", r.restart},
                            {"t_compute_s", r.compute},
                            {"eq2_1_s", r.eq2[0]},
                            {"eq2_3_s", r.eq2[1]},
                            {"fits_1", r.fits[0]},
                            {"fits_3", r.fits[1]},
                            {"runs", r.runs},
                            {"good_runs", r.good_runs},
                            {"error", r.error}});
  Json traffic = Json::array();
  for (const auto& r : rep.traffic)
    traffic.push_back({{"level", r.level},
                       {"changed", r.changed},
                       {"sent_bytes", r.sent},
                       {"payload_bytes", r.payload_bytes},
                       {"redundancy_s", r.redundancy},
                       {"commit_s", r.commit},
                       {"runs", r.runs},
                       {"good_runs", r.good_runs},
                       {"error", r.error}});
  Json octree = Json::array();
  for (const auto& r : rep.octree)
    octree.push_back({{"ranks", r.ranks},
                      {"level", o.octree_level},
                      {"steps", o.octree_steps},
                      {"none_s", r.none},
                      {"local_s", r.local},
                      {"collective_s", r.collective},
                      {"local_commit_s", r.local_commit},
                      {"collective_commit_s", r.collective_commit},
                      {"partner_s", r.partner},
                      {"partner_commit_s", r.partner_commit},
                      {"partner_units_share", r.partner_units_share},
                      {"xor_s", r.xor_},
                      {"xor_commit_s", r.xor_commit},
                      {"runs", r.runs},
                      {"good_runs", r.good_runs},
                      {"error", r.error}});
  const Json doc = {{"machine", rep.machine},
                    {"cores", rep.cores},
                    {"repeats", o.repeats},
                    {"failed", rep.failed},
                    {"overhead", overhead},
                    {"recovery", recovery},
                    {"timeout",
                     {{"ranks", o.job_ranks},
                      {"size", o.timeout_size.n},
                      {"iterations", o.timeout_size.iterations},
                      {"t_hm_s", rep.t_hm},
                      {"t_i_s", rep.t_i},
                      {"t_r_s", rep.t_r},
                      {"t_w_s", rep.t_w},
                      {"t_timeout_1_s", rep.t_timeout[0]},
                      {"t_timeout_3_s", rep.t_timeout[1]},
                      {"rows", timeout_rows}}},
                    {"traffic", traffic},
                    {"octree", octree}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench
