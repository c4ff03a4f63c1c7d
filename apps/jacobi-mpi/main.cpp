// main.cpp — `jacobi-mpi`: seed 003's stream-function Jacobi solver (the
// jacobi app's default kernel, same problem, same arithmetic) decomposed
// across MPI ranks by blocks of rows with a halo exchange, persisted every
// iteration as one global version with cairn::dist. It ends with the same
// checksum as `jacobi --size N --iterations I` on one process, resumes after
// a kill, and resumes on another number of ranks (--from-ranks).
//
// Sample runs:
//   mpirun -n 4 jacobi-mpi --size 256 --iterations 500 --dir /dev/shm/j
//   mpirun -n 4 jacobi-mpi --size 256 --iterations 500 --dir /dev/shm/j --crash-at 200   (rank 0 SIGKILLed)
//   mpirun -n 4 jacobi-mpi --size 256 --iterations 500 --dir /dev/shm/j --resume         (continues at 200)
//   mpirun -n 3 jacobi-mpi --size 256 --iterations 500 --dir /dev/shm/j --resume --from-ranks 4
//   jacobi --size 256 --iterations 500                   (the same checksum)
//   cairn launch -n 4 -- jacobi-mpi --size 256 --iterations 500 --dir /dev/shm/j --crash-at 200
//     (relaunched with --resume; --stop-at 200 and `cairn launch --timeout 1` for a hung rank)
//   mpirun -n 4 jacobi-mpi --size 256 --iterations 500 --dir /dev/shm/j --redundancy partner --ranks-per-node 2
//     (two simulated nodes in /dev/shm/j/node0 and node1; delete one, --resume rebuilds it)
//   mpirun -n 4 jacobi-mpi --size 256 --iterations 500 --dir /dev/shm/j --supervised --crash-at 200
//     (rank 0's compute process dies and is restarted in place; the job goes on, never relaunched)
//   mpirun --with-ft ulfm -n 5 jacobi-mpi --size 256 --iterations 500 --dir /dev/shm/j --spares 1 --progress
//     (ULFM builds, the ulfm preset: 4 ranks compute, 1 waits; SIGKILL a rank
//     (its pid is printed) and the spare takes its place, the job goes on in
//     the same mpirun: "recovered version=G")
//   mpirun -n 4 jacobi-mpi --size 256 --iterations 500 --dir /dev/shm/j --commit local   (or none)
//     (`cairn bench dist`'s baselines: each rank commits its lanes without the
//     agreement, or nothing is persisted; the same checksum)
//
// Decomposition: the (n+2) x (n+2) grid, boundary rows included, is cut into
// P blocks of rows, rank r owning [w r / P, w (r+1) / P); each rank's block
// is one dist dual region "psi" (w doubles per row). Every iteration a rank
// sends its first and last rows of read() to its neighbours (the halo), then
// computes its rows into write() exactly as the single-process kernel does
// (0.25 * (up + down + left + right), same order), so the grids agree bit for
// bit. The checksum is computed on rank 0 over the gathered grid cut into the
// single-process app's row blocks (fields psi.0, psi.1, ...), as its driver
// chains them.
//
// Restart on another number of ranks: the new ranks read the old job's ranks
// (new rank i reads old ranks i, i+P, ...), agree on the newest version every
// old rank holds, assemble the grid (an all-reduce of bitwise OR: each row
// comes from exactly one rank, the others contribute zero bits), commit it as
// that same version in their own storage (n<P>) and only then remove the old
// job's storage.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "apps/common/dist_switches.hpp"
#include "cairn/dist.hpp"
#include "util/hash.hpp"

namespace {

struct Args {
  std::size_t n = 256;
  std::uint64_t iterations = 2000;
  std::string strategy = "in-place", dir, name = "jacobi-mpi";
  std::int64_t crash_at = -1, stop_at = -1;
  int crash_rank = 0;
  bool resume = false, quiet = false;
  int from_ranks = 0;
  int spares = 0;
  double hang_timeout = 0;
  bool progress = false;
  std::string commit = "collective";  // | local | none
  cairn::apps::SuperviseSwitches supervise;
  cairn::apps::DistSwitches dist;
};

struct Mode {
  std::size_t p, q;
  double amplitude;
};

class Grid {
 public:
  Grid(std::size_t n, int rank, int ranks) : n_(n), w_(n + 2), h_(1.0 / static_cast<double>(n + 1)) {
    modes_ = {{1, 1, 0.5}, {3, 2, 0.25}, {n, n, 0.125}};
    lo_ = first_row(rank, ranks);
    hi_ = first_row(rank + 1, ranks);
  }
  std::size_t first_row(int rank, int ranks) const {
    return w_ * static_cast<std::size_t>(rank) / static_cast<std::size_t>(ranks);
  }
  std::size_t w() const { return w_; }
  std::size_t lo() const { return lo_; }
  std::size_t hi() const { return hi_; }
  std::size_t block_bytes() const { return (hi_ - lo_) * w_ * sizeof(double); }

  // The jacobi app's initial state (apps/jacobi/stream_function.cpp).
  void initialize(double* block) const {
    for (std::size_t r = lo_; r < hi_; ++r) {
      double* row = block + (r - lo_) * w_;
      for (std::size_t c = 0; c < w_; ++c) {
        double v = exact(c, r);
        if (r > 0 && r <= n_ && c > 0 && c <= n_)
          for (const Mode& m : modes_) v += m.amplitude * mode_factor(m.p, c) * mode_factor(m.q, r);
        row[c] = v;
      }
    }
  }
  // One Jacobi step of this rank's rows; up/down are the halo rows (row lo-1
  // and row hi), unused at the grid's edges.
  void step(const double* in, double* out, const double* up_halo, const double* down_halo) const {
    for (std::size_t r = lo_; r < hi_; ++r) {
      const double* mid = in + (r - lo_) * w_;
      double* o = out + (r - lo_) * w_;
      if (r == 0 || r == n_ + 1) {
        std::copy(mid, mid + w_, o);
        continue;
      }
      const double* up = r == lo_ ? up_halo : mid - w_;
      const double* down = r + 1 == hi_ ? down_halo : mid + w_;
      o[0] = mid[0];
      for (std::size_t c = 1; c <= n_; ++c) o[c] = 0.25 * (up[c] + down[c] + mid[c - 1] + mid[c + 1]);
      o[n_ + 1] = mid[n_ + 1];
    }
  }
  // The single-process app's checksum: its row blocks, chained.
  std::uint64_t checksum(const double* grid) const {
    const std::size_t blocks = std::clamp<std::size_t>(w_ / 8, 1, 8);
    std::uint64_t h = 0;
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t r0 = w_ * b / blocks, r1 = w_ * (b + 1) / blocks;
      h = cairn::util::hash_bytes(grid + r0 * w_, (r1 - r0) * w_ * sizeof(double), h);
    }
    return h;
  }

 private:
  double exact(std::size_t c, std::size_t r) const {
    const double x = static_cast<double>(c) * h_, y = static_cast<double>(r) * h_;
    return x * x - y * y;
  }
  double mode_factor(std::size_t p, std::size_t i) const {
    const std::size_t k = (p * i) % (2 * (n_ + 1));
    return std::sin(std::numbers::pi * static_cast<double>(k) * h_);
  }
  std::size_t n_, w_;
  double h_;
  std::vector<Mode> modes_;
  std::size_t lo_ = 0, hi_ = 0;
};

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "jacobi-mpi rank %d: %s\n", rank, what.c_str());
  return 2;
}

// Reads the old job of `old_ranks` ranks into `grid` (every rank gets the whole
// grid) and returns the version it holds; 0 and a message on failure.
std::uint64_t read_old_job(const Args& a, const cairn::persist::Options& base, int rank, int ranks,
                           std::vector<double>& grid, std::string& error) {
  const Grid shape(a.n, 0, 1);
  const std::size_t w = shape.w();
  grid.assign(w * w, 0.0);
  std::vector<std::unique_ptr<cairn::dist::RankStore>> stores;
  std::vector<cairn::dist::DualRegion*> psi;
  std::uint64_t newest_min = ~0ULL, newest_max = 0;
  bool ok = true;
  for (int j = rank; j < a.from_ranks; j += ranks) {
    const Grid old(a.n, j, a.from_ranks);
    auto s = cairn::dist::RankStore::create(base, j, a.from_ranks);
    if (!s.ok()) {
      error = s.error().message;
      ok = false;
      break;
    }
    auto d = s.value()->dual_region("psi", old.block_bytes());
    auto o = d.ok() ? s.value()->open() : cairn::Result<void>(d.error());
    auto held = o.ok() ? s.value()->scan() : cairn::Result<std::array<std::uint64_t, 2>>(o.error());
    if (!held.ok()) {
      error = "old rank " + std::to_string(j) + ": " + held.error().message;
      ok = false;
      break;
    }
    const std::uint64_t newest = std::max(held.value()[0], held.value()[1]);
    newest_min = std::min(newest_min, newest);
    newest_max = std::max(newest_max, newest);
    psi.push_back(d.value());
    stores.push_back(std::move(s.value()));
  }
  if (!cairn::dist::all_ok(MPI_COMM_WORLD, ok)) {
    if (error.empty()) error = "another rank could not read the old job";
    return 0;
  }
  std::uint64_t g = 0, top = 0;
  MPI_Allreduce(&newest_min, &g, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&newest_max, &top, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  bool selected = g > 0 && top <= g + 1;
  for (std::size_t k = 0; selected && k < stores.size(); ++k) selected = stores[k]->select(g).ok();
  if (!cairn::dist::all_ok(MPI_COMM_WORLD, selected)) {
    error = "the old job of " + std::to_string(a.from_ranks) + " ranks holds no version every rank has (newest " +
            std::to_string(g) + " to " + std::to_string(top) + ")";
    return 0;
  }
  for (std::size_t k = 0; k < stores.size(); ++k) {
    const Grid old(a.n, stores[k]->rank(), a.from_ranks);
    std::memcpy(grid.data() + old.lo() * w, psi[k]->read(), old.block_bytes());
  }
  // Each row comes from exactly one rank: OR with zero bits elsewhere is exact.
  MPI_Allreduce(MPI_IN_PLACE, grid.data(), static_cast<int>(w * w), MPI_UINT64_T, MPI_BOR, MPI_COMM_WORLD);
  return g;
}

int solve(const Args& a, const Grid& grid, const cairn::dist::Options& o, cairn::dist::Context& ctx,
          std::chrono::steady_clock::time_point t_start);

std::int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// --spares K: the last K ranks of MPI_COMM_WORLD wait; the job is the others.
int run_with_spares(const Args& a, std::chrono::steady_clock::time_point t_start) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (a.supervise.supervised || a.from_ranks > 0 || a.commit != "collective")
    return fail(rank, "--spares recovers inside the job: not with --supervised, --from-ranks or --commit");
  const int job = ranks - a.spares;
  if (job < 1) return fail(rank, "--spares " + std::to_string(a.spares) + " leaves no rank of the job");
  cairn::dist::Options o = a.dist.options(a.strategy, a.dir, a.name);
  o.spares = a.spares;
  o.hang_timeout = a.hang_timeout;
  if (!a.resume && rank < job)  // a fresh job starts on empty storage; spares own none yet
    if (auto r = cairn::dist::Context::remove_storage(o, rank, job); !r.ok()) return fail(rank, r.error().message);
  auto c = cairn::dist::Context::create(MPI_COMM_WORLD, o);
  if (!c.ok()) return fail(rank, c.error().message);
  cairn::dist::Context& ctx = *c.value();
  if (ctx.released()) return 0;  // the job ended without needing this spare
  const Grid grid(a.n, ctx.rank(), ctx.size());
  if (grid.w() < static_cast<std::size_t>(ctx.size())) return fail(rank, "more ranks than grid rows");
  return solve(a, grid, o, ctx, t_start);
}

int run(const Args& a) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const Grid grid(a.n, rank, ranks);
  if (grid.w() < static_cast<std::size_t>(ranks)) return fail(rank, "more ranks than grid rows");
  const auto t_start = std::chrono::steady_clock::now();
  if (a.spares > 0) return run_with_spares(a, t_start);
  // --commit none: the grid in two DRAM arrays swapped every iteration and
  // nothing persisted (the storage is opened but never written).
  if (a.commit == "none" && a.resume) return fail(rank, "--commit none persists nothing to resume from");

  const cairn::dist::Options o = a.dist.options(a.strategy, a.dir, a.name);
  if (a.from_ranks > 0 && a.dist.ranks_per_node > 0)
    return fail(rank, "--from-ranks reads the old job's ranks in --dir itself: not with --ranks-per-node");
  if (!a.resume)  // a fresh job starts on empty storage (an old job's versions would outrank it)
    if (auto r = cairn::dist::Context::remove_storage(o, rank, ranks); !r.ok()) return fail(rank, r.error().message);
  if (a.supervise.supervised && (a.from_ranks > 0 || a.commit != "collective"))
    return fail(rank, "--supervised runs collective commits on the job's own ranks: not with --from-ranks or --commit");
  auto body = [&](cairn::dist::Context& ctx) { return solve(a, grid, o, ctx, t_start); };
  if (a.supervise.supervised) return cairn::dist::supervise(MPI_COMM_WORLD, o, body, a.supervise.max_restarts);
  auto c = cairn::dist::Context::create(MPI_COMM_WORLD, o);
  if (!c.ok()) return fail(rank, c.error().message);
  return body(*c.value());
}

// Everything after the Context exists: in a supervised compute process no
// MPI call but through ctx (its rank process relays them).
int solve(const Args& a, const Grid& grid, const cairn::dist::Options& o, cairn::dist::Context& ctx,
          std::chrono::steady_clock::time_point t_start) {
  const int rank = ctx.rank(), ranks = ctx.size();
  const bool persisting = a.commit != "none";
  if (a.progress && ctx.joined()) {
    std::printf("joined rank=%d pid=%d\n", rank, static_cast<int>(getpid()));
    std::fflush(stdout);
  }
  // --progress: rank 0 prints every rank's pid, in its own output stream
  // (the one the kill tests read), before its first commit and after each
  // recovery. Collective: the joining spare calls it after its restore, the
  // survivors after recover().
  auto report_pids = [&]() {
    if (!a.progress) return;
    const std::uint64_t mine = static_cast<std::uint64_t>(getpid());
    std::vector<std::uint64_t> pids(static_cast<std::size_t>(ranks));
    ctx.allgather(&mine, 1, pids.data());
    for (int r = 0; rank == 0 && !ctx.failed() && r < ranks; ++r)
      std::printf("pid rank=%d pid=%" PRIu64 "\n", r, pids[static_cast<std::size_t>(r)]);
    std::fflush(stdout);
  };
  std::vector<double> plain[2];
  auto psi_r = ctx.dual_region("psi", grid.block_bytes());
  if (!psi_r.ok()) return fail(rank, psi_r.error().message);
  cairn::dist::DualRegion& psi = *psi_r.value();
  if (auto r = ctx.open(); !r.ok()) return fail(rank, r.error().message);

  std::uint64_t start = 0;
  double restore_ms = 0;
  // A replacement compute process (supervised) always restores; the
  // version may be none if its predecessor died before the first commit.
  // A spare that replaces a dead rank restores with the survivors (their recover()).
  const bool resuming = a.resume || ctx.restarted() || ctx.joined();
  auto restored = resuming ? ctx.restore() : cairn::Result<std::uint64_t>(std::uint64_t{0});
  const bool fresh =
      !restored.ok() && (ctx.restarted() || ctx.joined()) && restored.error().code == cairn::Errc::no_version;
  if (resuming && !fresh) {
    auto& g = restored;
    if (g.ok()) {
      start = g.value();
    } else if (g.error().code == cairn::Errc::no_version && a.from_ranks > 0 && a.from_ranks != ranks) {
      std::vector<double> whole;
      std::string error;
      const std::uint64_t v = read_old_job(a, o.persist, rank, ranks, whole, error);
      if (v == 0) return fail(rank, error);
      // Version v again, in this job's storage; then the old job's can go.
      ctx.adopt(v - 1);
      if (auto r = ctx.begin(); !r.ok()) return fail(rank, r.error().message);
      std::memcpy(psi.write(), whole.data() + grid.lo() * grid.w(), grid.block_bytes());
      if (auto r = ctx.commit(); !r.ok()) return fail(rank, r.error().message);
      for (int j = rank; j < a.from_ranks; j += ranks)
        if (auto r = cairn::dist::RankStore::remove_storage(o.persist, j, a.from_ranks); !r.ok())
          return fail(rank, r.error().message);
      start = v;
      if (rank == 0) {
        std::printf("repartitioned version %" PRIu64 " from %d ranks to %d\n", v, a.from_ranks, ranks);
        std::fflush(stdout);
      }
    } else {
      return fail(rank, g.error().message);
    }
    restore_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
  } else if (persisting) {
    grid.initialize(psi.read<double>());
  } else {
    for (auto& p : plain) p.resize(grid.block_bytes() / sizeof(double));
    grid.initialize(plain[0].data());
  }

  const std::size_t w = grid.w();
  std::vector<double> up(w), down(w);
  const int above = grid.lo() > 0 ? rank - 1 : MPI_PROC_NULL;
  const int below = grid.hi() < w ? rank + 1 : MPI_PROC_NULL;
  double compute_s = 0, commit_s = 0;
  if (a.progress && resuming && rank == 0) {
    std::printf("restored version=%" PRIu64 " t=%" PRId64 "\n", start, realtime_ns());
    std::fflush(stdout);
  }
  report_pids();
  // In-job recovery (--spares): a rank died; every rank goes on from the
  // global version recover() agreed on, a spare in the dead rank's place.
  std::uint64_t i = start;
  auto recover = [&]() -> int {
    auto g = ctx.recover();
    if (!g.ok() && g.error().code == cairn::Errc::no_version) {  // died before the first global version
      grid.initialize(psi.read<double>());
      i = 0;
    } else if (!g.ok()) {
      return fail(rank, g.error().message);
    } else {
      i = g.value();
    }
    if (rank == 0) {
      std::printf("recovered version=%" PRIu64 " recover_ms=%.3f from=%s t=%" PRId64 "\n", i,
                  ctx.stats().recover_seconds * 1e3, ctx.stats().restored_from.c_str(), realtime_ns());
      std::fflush(stdout);
    }
    report_pids();  // a failure in it is found by the next operation
    return 0;
  };
  std::size_t most = 0;
  for (int r = 0; r < ranks; ++r) {
    const Grid g(a.n, r, ranks);
    most = std::max(most, g.hi() - g.lo());
  }
  std::vector<std::uint64_t> mine(most * w, 0), all(most * w * static_cast<std::size_t>(ranks));
  std::vector<std::uint64_t> gathered(2 * static_cast<std::size_t>(ranks));
  for (;;) {
    if (i >= a.iterations) {
      // The grid on rank 0 for the checksum: each rank's rows padded to the
      // largest block (an all-gather of words, which a supervisor can relay).
      std::memcpy(mine.data(), persisting ? psi.read<double>() : plain[0].data(), grid.block_bytes());
      ctx.allgather(mine.data(), static_cast<int>(mine.size()), all.data());
      // --crash-at ITERATIONS: between the two gathers of the end (a
      // supervised replacement must not gather the grid a second time).
      if (a.crash_at >= 0 && static_cast<std::uint64_t>(a.crash_at) == a.iterations && rank == a.crash_rank &&
          !resuming)
        raise(SIGKILL);
      // The slowest rank's commit times, in nanoseconds.
      const auto& s = ctx.stats();
      const double per = s.commits ? 1e9 / static_cast<double>(s.commits) : 0;
      const std::uint64_t times[2] = {static_cast<std::uint64_t>(s.local_commit_seconds * per),
                                      static_cast<std::uint64_t>(s.agree_seconds * per)};
      ctx.allgather(times, 2, gathered.data());
      if (!ctx.failed()) break;
      if (int rc = recover(); rc != 0) return rc;
      continue;
    }
    // Not in the first iteration of a resumed run: a relaunch with the same
    // switches (cairn launch) resumes at crash_at and must get past it.
    if (a.crash_at >= 0 && i == static_cast<std::uint64_t>(a.crash_at) && rank == a.crash_rank &&
        !(resuming && i == start))
      raise(SIGKILL);
    // A hung rank (the heartbeat monitor's case).
    if (a.stop_at >= 0 && i == static_cast<std::uint64_t>(a.stop_at) && rank == a.crash_rank &&
        !(resuming && i == start))
      raise(SIGSTOP);
    const auto t0 = std::chrono::steady_clock::now();
    if (persisting)
      if (auto r = ctx.begin(); !r.ok()) return fail(rank, r.error().message);
    const double* in = persisting ? psi.read<double>() : plain[0].data();
    const std::size_t rows = grid.hi() - grid.lo();
    // Halo: my first row goes up, my last row goes down.
    ctx.sendrecv(in, w * sizeof(double), above, down.data(), w * sizeof(double), below);
    ctx.sendrecv(in + (rows - 1) * w, w * sizeof(double), below, up.data(), w * sizeof(double), above);
    if (ctx.failed()) {
      if (int rc = recover(); rc != 0) return rc;
      continue;
    }
    grid.step(in, persisting ? psi.write<double>() : plain[1].data(), up.data(), down.data());
    const auto t1 = std::chrono::steady_clock::now();
    if (a.commit == "none") {
      plain[0].swap(plain[1]);
    } else if (a.commit == "local") {
      // No agreement: each rank's lanes advance on their own.
      auto r = ctx.store().commit_local();
      if (!r.ok()) return fail(rank, r.error().message);
      ctx.store().advance();
    } else if (auto r = ctx.commit(); !r.ok()) {
      if (!ctx.failed()) return fail(rank, r.error().message);
      if (int rc = recover(); rc != 0) return rc;
      continue;
    }
    ++i;
    if (a.progress && rank == 0) {
      std::printf("committed version=%" PRIu64 " t=%" PRId64 "\n", i, realtime_ns());
      std::fflush(stdout);
    }
    compute_s += std::chrono::duration<double>(t1 - t0).count();
    commit_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  }

  std::vector<double> whole(rank == 0 ? w * w : 0);
  for (int r = 0; rank == 0 && r < ranks; ++r) {
    const Grid g(a.n, r, ranks);
    std::memcpy(whole.data() + g.lo() * w, all.data() + static_cast<std::size_t>(r) * most * w,
                (g.hi() - g.lo()) * w * sizeof(double));
  }
  double worst_all[2] = {0, 0};
  for (std::size_t k = 0; k < gathered.size(); ++k)
    worst_all[k % 2] = std::max(worst_all[k % 2], static_cast<double>(gathered[k]) * 1e-3);
  if (rank == 0) {
    std::printf("jacobi-mpi %s ranks=%d%s: iterations %" PRIu64 " (from %" PRIu64 ")  checksum %016" PRIx64 "\n",
                persisting ? a.strategy.c_str() : "none", ranks, a.commit == "local" ? " commit=local" : "",
                std::max(start, a.iterations), start, grid.checksum(whole.data()));
    if (!a.quiet)
      std::printf("  compute %.6f s, commit %.6f s (per commit, slowest rank: local %.1f us, agreement %.1f us)%s\n",
                  compute_s, commit_s, worst_all[0], worst_all[1],
                  a.resume ? (", restart " + std::to_string(restore_ms) + " ms").c_str() : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App cli("jacobi-mpi: the stream-function Jacobi solver across MPI ranks, persisted with cairn::dist");
  cli.add_option("--size", a.n, "interior points per side")->check(CLI::Range(4, 65536));
  cli.add_option("--iterations", a.iterations, "Jacobi iterations");
  cli.add_option("--strategy", a.strategy, "persistence strategy of every rank");
  cli.add_option("--dir", a.dir, "directory of the ranks' storage");
  cli.add_option("--name", a.name, "name of the state");
  cli.add_option("--crash-at", a.crash_at,
                 "SIGKILL rank --crash-rank at this iteration (= --iterations: between the two gathers of the end)");
  cli.add_option("--stop-at", a.stop_at, "stop (exit 0) at this iteration");
  cli.add_option("--crash-rank", a.crash_rank, "the rank --crash-at kills");
  cli.add_flag("--resume", a.resume, "continue from the global version");
  cli.add_option("--from-ranks", a.from_ranks, "--resume: the number of ranks that wrote it (repartition)");
  cli.add_flag("--quiet", a.quiet, "only the result line");
  cli.add_option("--commit", a.commit,
                 "collective (default) | local: each rank commits without the agreement | none: nothing persisted "
                 "(benchmark baselines)")
      ->check(CLI::IsMember({"collective", "local", "none"}));
  a.dist.add_to(cli);
  a.supervise.add_to(cli);
  cli.add_option("--spares", a.spares,
                 "ULFM builds: the last K ranks wait as spares; a rank that dies is replaced by one inside the job")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--hang-timeout", a.hang_timeout,
                 "--spares: a rank that has not run for this many seconds (SIGSTOP) is killed and replaced")
      ->check(CLI::NonNegativeNumber);
  cli.add_flag("--progress", a.progress,
               "rank 0 prints every rank's pid ('pid rank=R pid=P', again after a recovery) and "
               "'committed version=V t=NS' after each commit: what kill tests act on");
  cli.footer(std::string("In-job recovery (--spares): ") +
             (cairn::dist::ulfm_available()
                  ? "available: this build's MPI has ULFM (run under mpirun --with-ft ulfm)."
                  : "not in this build: its MPI has no ULFM (build the ulfm preset, README)."));
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  // With spares, under Open MPI 5.0.11 with ULFM: MPI_Finalize's fence over
  // every process of the job, the dead ones included, sometimes never ends
  // after a recovery (the job's results out, mpirun never returns). dist's
  // Context ends with a barrier of every live process; the fence after it
  // adds nothing, so it is skipped (an MCA variable: other MPIs ignore it).
  if (a.spares > 0) setenv("OMPI_MCA_async_mpi_finalize", "1", 0);
  MPI_Init(&argc, &argv);
  int rc = run(a);
  // With spares, MPI_Abort after a failure sometimes leaves Open MPI 5.0.11's
  // launcher waiting forever; a process that exits is a failure the others
  // see (they end too: no spare, or the one left finds this death), and
  // mpirun ends with a non-zero status once every process has.
  if (rc != 0 && a.spares > 0) {
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
  return rc;
}
