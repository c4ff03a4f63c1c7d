// dist_worker.cpp — the MPI program behind dist_kill_test: every rank keeps a
// state that is a known function of (rank, version), commits it through
// dist::Context every iteration, dies when told to, and on --resume checks
// that the version it restored is the global one, bit for bit.
//
//   mpirun -n 4 dist_worker --dir /dev/shm/t --iterations 200
//   mpirun -n 4 dist_worker --dir /dev/shm/t --iterations 200 --kill-rank 1 --kill-at 50 --kill-when after-local
//   mpirun -n 4 dist_worker --dir /dev/shm/t --iterations 200 --resume
//
// Output, one line per rank and event (parsed by the test):
//   restored rank=R version=G lanes=A,B match=1
//   done rank=R version=T match=1
// Files in --dir for a test that kills ranks from outside: pid.R (the
// compute process, once its storage is open) and, with --progress-at V,
// progress.R once the rank committed V. With --await-kill R, rank R's first
// compute process does not commit the last version: it waits there to be
// killed, so a kill sent on the progress file lands inside the run whatever
// the machine's load.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/common/dist_switches.hpp"
#include "cairn/dist.hpp"
#include "util/hash.hpp"

namespace {

struct Args {
  std::string dir, strategy = "in-place";
  std::uint64_t iterations = 100, words = 4096, sleep_us = 0;
  bool resume = false;
  int kill_rank = -1;
  std::uint64_t kill_at = 0;
  std::string kill_when = "compute";  // compute | before-local | after-local | rebuilt | protected
  std::uint64_t stall_others_ms = 0;  // the other ranks wait this long before their local commit of kill_at
  cairn::apps::DistSwitches dist;
  std::uint64_t changing_words = 0;  // 0: every word changes every version; else only the first this many
  cairn::apps::SuperviseSwitches supervise;
  int kill_signal = SIGKILL;
  std::uint64_t progress_at = 0;  // 0: no progress file
  std::vector<int> await_kill;    // ranks whose first compute process waits to be killed before the last version
  int lag_rank = -1;              // this rank flushes no version after lag_after (its flushes lag)
  std::uint64_t lag_after = 0;
  std::uint64_t slow_every = 0,
                slow_ms = 0;  // iterations of versions that are multiples of slow_every take slow_ms more
};

// Version v of rank r's state, from version v-1 (version 0: the initial state).
void initial(std::vector<std::uint64_t>& x, int rank) {
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = cairn::util::mix64(static_cast<std::uint64_t>(rank) << 40 | i);
}
void step(const std::uint64_t* in, std::uint64_t* out, std::size_t n, std::size_t changing, std::uint64_t v, int rank) {
  const std::size_t m = changing ? std::min(changing, n) : n;
  for (std::size_t i = 0; i < m; ++i) out[i] = cairn::util::mix64(in[i] ^ (v * 0x9E3779B97F4A7C15ULL + rank));
  if (m < n) std::memcpy(out + m, in + m, (n - m) * 8);
}
std::uint64_t counter_after(std::uint64_t v) { return v * (v + 1) / 2; }

int compute(const Args& a, cairn::dist::Context& ctx);

int run(const Args& a) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  cairn::dist::Options o = a.dist.options(a.strategy, a.dir, "worker");
  const bool killer = rank == a.kill_rank;
  if (killer && a.kill_when == "before-local")
    o.before_local_commit = [&](std::uint64_t v) {
      if (v == a.kill_at) raise(SIGKILL);
    };
  if (killer && a.kill_when == "after-local")
    o.after_local_commit = [&](std::uint64_t v) {
      if (v == a.kill_at) raise(SIGKILL);
    };
  if (killer && (a.kill_when == "rebuilt" || a.kill_when == "protected"))
    o.restore_stage = [&](const std::string& stage) {
      if (stage == a.kill_when) raise(SIGKILL);
    };
  if (!killer && a.stall_others_ms)
    o.before_local_commit = [&](std::uint64_t v) {
      if (v == a.kill_at) std::this_thread::sleep_for(std::chrono::milliseconds(a.stall_others_ms));
    };
  if (rank == a.lag_rank && !a.resume) o.skip_flush = [&](std::uint64_t v) { return v > a.lag_after; };
  // A fresh job starts on empty storage: an old job's versions would outrank it.
  if (!a.resume) cairn::dist::Context::remove_storage(o, rank, size).value();
  auto body = [&](cairn::dist::Context& ctx) {
    try {
      return compute(a, ctx);
    } catch (const std::exception& e) {  // in a supervised compute process: no MPI_Abort from here
      std::fprintf(stderr, "dist_worker: rank %d: %s\n", rank, e.what());
      return 2;
    }
  };
  if (a.supervise.supervised) return cairn::dist::supervise(MPI_COMM_WORLD, o, body, a.supervise.max_restarts);
  auto ctx = cairn::dist::Context::create(MPI_COMM_WORLD, o).value();
  return body(*ctx);
}

int compute(const Args& a, cairn::dist::Context& ctx_ref) {
  cairn::dist::Context* ctx = &ctx_ref;
  const int rank = ctx->rank();
  const bool killer = rank == a.kill_rank;
  auto* x = ctx->dual_region("x", a.words * 8).value();
  auto* count = ctx->region("count", 64).value();
  ctx->open().value();
  // Storage is open: the test's random kill may start counting.
  { std::ofstream(a.dir + "/pid." + std::to_string(rank)) << getpid() << "\n"; }

  // The expected state, recomputed in DRAM alongside.
  std::vector<std::uint64_t> ref(a.words), tmp(a.words);
  initial(ref, rank);
  std::uint64_t ref_version = 0;
  auto advance_ref = [&](std::uint64_t to) {
    for (; ref_version < to; ++ref_version) {
      step(ref.data(), tmp.data(), a.words, a.changing_words, ref_version + 1, rank);
      ref.swap(tmp);
    }
  };
  auto matches = [&](std::uint64_t v) {
    advance_ref(v);
    const auto* c = count->as<std::uint64_t>();
    return std::memcmp(x->read(), ref.data(), a.words * 8) == 0 && c[0] == counter_after(v) &&
           c[1] == static_cast<std::uint64_t>(rank);
  };

  std::uint64_t start = 0;
  auto g = a.resume || ctx->restarted() ? ctx->restore() : cairn::Result<std::uint64_t>(0);
  // Nothing committed yet (the first process died or hung before version 1):
  // a resume starts from the beginning.
  const bool fresh = !g.ok() && g.error().code == cairn::Errc::no_version;
  if (fresh && a.resume) {
    std::printf("restored rank=%d version=0 match=1 from=none (nothing committed yet: from the beginning)\n", rank);
    std::fflush(stdout);
  }
  if ((a.resume || ctx->restarted()) && !fresh) {
    if (!g.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, g.error().message.c_str());
      return 2;
    }
    start = g.value();
    const auto& held = ctx->store().held();
    std::printf("restored rank=%d version=%llu lanes=%llu,%llu match=%d restore_ms=%.3f from=%s rebuilt=%llu\n", rank,
                static_cast<unsigned long long>(start), static_cast<unsigned long long>(held[0]),
                static_cast<unsigned long long>(held[1]), matches(start) ? 1 : 0, ctx->stats().restore_seconds * 1e3,
                ctx->stats().restored_from.c_str(), static_cast<unsigned long long>(ctx->stats().rebuilt_ranks));
    std::fflush(stdout);
  } else {
    initial(ref, rank);
    std::memcpy(x->read(), ref.data(), a.words * 8);
    auto* c = count->as<std::uint64_t>();
    std::memset(c, 0, 64);
    c[1] = static_cast<std::uint64_t>(rank);
  }

  const bool awaits_kill =
      !ctx->restarted() && std::find(a.await_kill.begin(), a.await_kill.end(), rank) != a.await_kill.end();
  for (std::uint64_t v = start + 1; v <= a.iterations; ++v) {
    // SIGSTOP (a hung rank) only in the first launch: the relaunch gets past it.
    if (killer && a.kill_when == "compute" && v == a.kill_at && !ctx->restarted() &&
        !(a.resume && a.kill_signal == SIGSTOP))
      raise(a.kill_signal);
    if (awaits_kill && v == a.iterations) {
      std::fprintf(stderr, "dist_worker: rank %d: waiting to be killed before version %llu (--await-kill)\n", rank,
                   static_cast<unsigned long long>(v));
      ::alarm(600);  // a kill that never comes ends the job rather than hangs it
      for (;;) ::pause();
    }
    if (killer && a.kill_when == "node-loss" && v == a.kill_at && !a.resume) {
      // The whole node goes: its directory with it, then this rank (mpirun
      // ends the others, its node neighbours included).
      std::filesystem::remove_all(ctx->storage_dir());
      raise(SIGKILL);
    }
    ctx->begin().value();
    step(x->read<std::uint64_t>(), x->write<std::uint64_t>(), a.words, a.changing_words, v, rank);
    count->as<std::uint64_t>()[0] += v;
    if (a.sleep_us) std::this_thread::sleep_for(std::chrono::microseconds(a.sleep_us));
    if (a.slow_every && v % a.slow_every == 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.slow_ms));
    ctx->commit().value();
    if (v == a.progress_at) std::ofstream(a.dir + "/progress." + std::to_string(rank)) << v << "\n";
  }
  const std::uint64_t end = std::max(start, a.iterations);
  const auto& s = ctx->stats();
  const double per = s.commits ? 1e6 / static_cast<double>(s.commits) : 0.0;
  std::printf(
      "done rank=%d version=%llu match=%d commits=%llu local_us=%.2f redundancy_us=%.2f agree_us=%.2f "
      "sent_blocks=%llu of_blocks=%llu sent_bytes=%llu pfs_flushes=%llu pfs_wait_us=%.2f\n",
      rank, static_cast<unsigned long long>(ctx->version()), ctx->version() == end && matches(end) ? 1 : 0,
      static_cast<unsigned long long>(s.commits), s.local_commit_seconds * per, s.redundancy_seconds * per,
      s.agree_seconds * per, static_cast<unsigned long long>(s.redundancy_blocks_sent),
      static_cast<unsigned long long>(s.redundancy_blocks), static_cast<unsigned long long>(s.redundancy_bytes_sent),
      static_cast<unsigned long long>(s.pfs_flushes), s.pfs_copy_seconds * per);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App cli("dist_worker: ranks that commit a deterministic state every iteration and die on demand");
  cli.add_option("--dir", a.dir, "directory of the ranks' storage")->required();
  cli.add_option("--strategy", a.strategy, "persistence strategy");
  cli.add_option("--iterations", a.iterations, "versions to commit");
  cli.add_option("--words", a.words, "64-bit words of state per rank");
  cli.add_option("--sleep-us", a.sleep_us, "sleep per iteration");
  cli.add_flag("--resume", a.resume, "restore the global version and check it");
  cli.add_option("--kill-rank", a.kill_rank, "the rank that SIGKILLs itself");
  cli.add_option("--kill-at", a.kill_at, "at this version");
  cli.add_option("--kill-when", a.kill_when,
                 "compute | before-local | after-local | rebuilt | protected (restore) | node-loss")
      ->check(CLI::IsMember({"compute", "before-local", "after-local", "rebuilt", "protected", "node-loss"}));
  cli.add_option("--stall-others-ms", a.stall_others_ms, "the other ranks wait this long before committing --kill-at");
  a.dist.add_to(cli);
  cli.add_option("--changing-words", a.changing_words, "only the first N words change each version (0: all)");
  a.supervise.add_to(cli);
  cli.add_option("--progress-at", a.progress_at, "each rank creates progress.RANK in --dir once it committed this");
  cli.add_option("--await-kill", a.await_kill, "this rank waits to be killed before its last version (repeatable)");
  cli.add_option("--lag-rank", a.lag_rank, "this rank flushes no version after --lag-after (a lagging flusher)");
  cli.add_option("--lag-after", a.lag_after, "the last version --lag-rank flushes");
  std::string signal_name = "KILL";
  cli.add_option("--kill-signal", signal_name, "KILL | SEGV | BUS | STOP (--kill-when compute; STOP: not on --resume)")
      ->check(CLI::IsMember({"KILL", "SEGV", "BUS", "STOP"}));
  cli.add_option("--slow-every", a.slow_every, "iterations of versions that are multiples of this take --slow-ms more");
  cli.add_option("--slow-ms", a.slow_ms, "see --slow-every");
  try {
    cli.parse(argc, argv);
    a.kill_signal = signal_name == "SEGV"   ? SIGSEGV
                    : signal_name == "BUS"  ? SIGBUS
                    : signal_name == "STOP" ? SIGSTOP
                                            : SIGKILL;
    if (a.kill_signal == SIGSEGV || a.kill_signal == SIGBUS) {  // no core file for a crash on purpose
      const rlimit none{0, 0};
      setrlimit(RLIMIT_CORE, &none);
    }
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  MPI_Init(&argc, &argv);
  int rc = 2;
  try {
    rc = run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_worker: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}
