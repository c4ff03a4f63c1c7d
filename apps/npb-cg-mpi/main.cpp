// main.cpp — `npb-cg-mpi`: NPB CG (apps/npb/cg.hpp, the npb-cg app's kernel)
// with its rows distributed over MPI ranks, persisted every CG iteration as one
// global version with cairn::dist. It verifies zeta and ends with the same
// checksum, bit for bit, as `npb-cg --size C --iterations N` on one process,
// on any number of ranks up to the class's 256-row chunks (6 for class S, 55
// for A); it resumes after a kill and after the loss of a node.
//
// Sample runs:
//   mpirun -n 4 npb-cg-mpi --class A --dir /dev/shm/cg
//   mpirun -n 4 npb-cg-mpi --class A --dir /dev/shm/cg --crash-at 200 --crash-rank 2   (rank 2 SIGKILLed)
//   mpirun -n 4 npb-cg-mpi --class A --dir /dev/shm/cg --resume                        (continues at 200)
//   npb-cg --size A --quiet                                (the same checksum)
//   mpirun -n 4 npb-cg-mpi --class A --dir /dev/shm/cg --redundancy partner --ranks-per-node 2 --crash-at 200
//   rm -r /dev/shm/cg/node1                                (node 1 lost: ranks 2 and 3's storage)
//   mpirun -n 4 npb-cg-mpi --class A --dir /dev/shm/cg --redundancy partner --ranks-per-node 2 --resume
//     (ranks 2 and 3 rebuilt from their copies on node 0; the same checksum)
//   cairn launch -n 4 -- npb-cg-mpi --class S --dir /dev/shm/cg --crash-at 100   (relaunched with --resume)
//
// Decomposition: every rank builds the whole matrix (cg_make_matrix is
// deterministic) and owns a block of whole 256-row chunks, rank k of P chunks
// [C k / P, C (k+1) / P) of C. Its rows of x, z, r and p are dist dual regions
// (read() the global version, write() the next, every element written) and the
// scalars (rho, zeta, counters) a 40-byte dual region, equal on every rank.
// A CG iteration gathers p (MPI_Allgatherv) for A p, and every reduction
// gathers the per-chunk partial sums of all ranks, which each rank then adds
// in chunk order as one process does (CgExchange in cg.hpp): the same bits on
// any number of ranks. One version = one CG iteration, so the global version
// number is the number of CG iterations done.
//
// The checksum is the single-process app's: z, r, p, x (whole vectors,
// gathered on rank 0) and the scalars, chained in that order.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/dist_switches.hpp"
#include "apps/npb/cg.hpp"
#include "cairn/dist.hpp"
#include "util/hash.hpp"

namespace {

namespace npb = cairn::npb;

struct Args {
  std::string cls = "S";
  std::int64_t iterations = -1;  // default: the class's 25 x niter
  std::string strategy = "in-place", dir, name = "npb-cg-mpi";
  std::int64_t crash_at = -1;
  int crash_rank = 0;
  bool resume = false, quiet = false;
  cairn::apps::DistSwitches dist;
};

// Rank k's chunks of `chunks`: [chunks k / P, chunks (k+1) / P).
int first_chunk(int chunks, int rank, int ranks) { return chunks * rank / ranks; }

// The ranks' rows and chunks, exchanged over MPI.
class MpiExchange final : public npb::CgExchange {
 public:
  MpiExchange(MPI_Comm comm, int n, int ranks) : comm_(comm) {
    const int chunks = npb::cg_chunks(n);
    for (int k = 0; k < ranks; ++k) {
      const int c0 = first_chunk(chunks, k, ranks), c1 = first_chunk(chunks, k + 1, ranks);
      chunk_at_.push_back(c0);
      chunk_count_.push_back(c1 - c0);
      row_at_.push_back(std::min(n, c0 * npb::kCgChunk));
      row_count_.push_back(std::min(n, c1 * npb::kCgChunk) - row_at_.back());
    }
    MPI_Comm_rank(comm, &rank_);
  }
  void gather_rows(const double* mine, double* full) override {
    MPI_Allgatherv(mine, row_count_[static_cast<std::size_t>(rank_)], MPI_DOUBLE, full, row_count_.data(),
                   row_at_.data(), MPI_DOUBLE, comm_);
  }
  void gather_partials(double* partial, int stride) override {
    std::vector<int> count(chunk_count_.size()), at(chunk_at_.size());
    for (std::size_t k = 0; k < count.size(); ++k) {
      count[k] = stride * chunk_count_[k];
      at[k] = stride * chunk_at_[k];
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, partial, count.data(), at.data(), MPI_DOUBLE, comm_);
  }
  const std::vector<int>& row_count() const { return row_count_; }
  const std::vector<int>& row_at() const { return row_at_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  std::vector<int> chunk_at_, chunk_count_, row_at_, row_count_;
};

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "npb-cg-mpi rank %d: %s\n", rank, what.c_str());
  return 2;
}

int run(const Args& a, const npb::CgClass& cls) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int chunks = npb::cg_chunks(cls.na);
  if (ranks > chunks)
    return fail(rank, "class " + std::string(1, cls.name) + " has " + std::to_string(chunks) + " chunks of " +
                          std::to_string(npb::kCgChunk) + " rows: at most that many ranks");
  const auto t_start = std::chrono::steady_clock::now();
  MpiExchange exchange(MPI_COMM_WORLD, cls.na, ranks);
  npb::CgSolver solver(cls, first_chunk(chunks, rank, ranks), first_chunk(chunks, rank + 1, ranks), exchange);
  const std::uint64_t steps =
      a.iterations >= 0 ? static_cast<std::uint64_t>(a.iterations) : static_cast<std::uint64_t>(solver.total_steps());

  const cairn::dist::Options o = a.dist.options(a.strategy, a.dir, a.name);
  if (!a.resume)  // a fresh job starts on empty storage (an old job's versions would outrank it)
    if (auto r = cairn::dist::Context::remove_storage(o, rank, ranks); !r.ok()) return fail(rank, r.error().message);
  auto c = cairn::dist::Context::create(MPI_COMM_WORLD, o);
  if (!c.ok()) return fail(rank, c.error().message);
  auto& ctx = *c.value();
  const std::size_t bytes = solver.rows() * sizeof(double);
  cairn::dist::DualRegion* v[4];  // z, r, p, x: the single-process app's checksum order
  const char* names[4] = {"z", "r", "p", "x"};
  for (int i = 0; i < 4; ++i) {
    auto d = ctx.dual_region(names[i], bytes);
    if (!d.ok()) return fail(rank, d.error().message);
    v[i] = d.value();
  }
  auto sr = ctx.dual_region("scalars", sizeof(npb::CgScalars));
  if (!sr.ok()) return fail(rank, sr.error().message);
  cairn::dist::DualRegion& scalars = *sr.value();
  if (auto r = ctx.open(); !r.ok()) return fail(rank, r.error().message);
  const auto read = [&] {
    return npb::CgVectors{v[3]->read<double>(), v[0]->read<double>(), v[1]->read<double>(), v[2]->read<double>()};
  };
  const auto write = [&] {
    return npb::CgVectors{v[3]->write<double>(), v[0]->write<double>(), v[1]->write<double>(), v[2]->write<double>()};
  };
  const npb::LoopRunner loops = npb::serial_loops();

  std::uint64_t start = 0;
  double restore_ms = 0;
  if (a.resume) {
    auto g = ctx.restore();
    if (!g.ok()) return fail(rank, g.error().message);
    start = g.value();
    restore_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    const auto done = npb::CgSolver::steps_done(*scalars.read<npb::CgScalars>());
    if (done != static_cast<std::int64_t>(start))  // a version is one CG iteration: a mix would show here
      return fail(rank,
                  "version " + std::to_string(start) + " holds the state after CG iteration " + std::to_string(done));
    if (rank == 0) {
      std::printf("resumed at version %" PRIu64 ": restored from %s, %" PRIu64 " ranks rebuilt\n", start,
                  ctx.stats().restored_from.c_str(), ctx.stats().rebuilt_ranks);
      std::fflush(stdout);
    }
  } else {
    solver.init(read(), *scalars.read<npb::CgScalars>(), loops);
  }

  double compute_s = 0, commit_s = 0;
  for (std::uint64_t i = start; i < steps; ++i) {
    // Not in the first iteration of a resumed run: a relaunch with the same
    // switches (cairn launch) resumes at crash_at and must get past it.
    if (a.crash_at >= 0 && i == static_cast<std::uint64_t>(a.crash_at) && rank == a.crash_rank &&
        !(a.resume && i == start))
      raise(SIGKILL);
    const auto t0 = std::chrono::steady_clock::now();
    if (auto r = ctx.begin(); !r.ok()) return fail(rank, r.error().message);
    solver.step(read(), write(), *scalars.read<npb::CgScalars>(), *scalars.write<npb::CgScalars>(), loops);
    const auto t1 = std::chrono::steady_clock::now();
    if (auto r = ctx.commit(); !r.ok()) return fail(rank, r.error().message);
    compute_s += std::chrono::duration<double>(t1 - t0).count();
    commit_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  }

  // The checksum over the whole vectors, gathered on rank 0.
  const npb::CgScalars& s = *scalars.read<npb::CgScalars>();
  std::vector<double> whole(rank == 0 ? static_cast<std::size_t>(cls.na) : 0);
  std::uint64_t h = 0;
  for (auto* region : v) {
    MPI_Gatherv(region->read(), exchange.row_count()[static_cast<std::size_t>(rank)], MPI_DOUBLE, whole.data(),
                exchange.row_count().data(), exchange.row_at().data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) h = cairn::util::hash_bytes(whole.data(), whole.size() * sizeof(double), h);
  }
  h = cairn::util::hash_bytes(&s, sizeof s, h);
  const npb::CgResult res = solver.verify(s);  // the scalars are the same on every rank
  const auto& st = ctx.stats();
  const double per = st.commits ? 1e6 / static_cast<double>(st.commits) : 0;
  double worst[3] = {st.local_commit_seconds * per, st.redundancy_seconds * per, st.agree_seconds * per}, worst_all[3];
  MPI_Reduce(worst, worst_all, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("npb-cg-mpi %s ranks=%d: %s  zeta %.13f, relative error = %.3e (tolerance %.1e)  iterations %" PRIu64
                " (from %" PRIu64 ")  checksum %016" PRIx64 "\n",
                a.strategy.c_str(), ranks, res.verified ? "VERIFIED" : "FAILED", res.zeta, res.relative_error,
                npb::kCgTolerance, std::max(start, steps), start, h);
    if (!a.quiet)
      std::printf(
          "  class %c, na %d, %zu nonzeros, redundancy %s; compute %.6f s, commit %.6f s (per commit, "
          "slowest rank: local %.1f us, redundancy %.1f us, agreement %.1f us)%s\n",
          cls.name, cls.na, solver.nonzeros(), a.dist.redundancy.c_str(), compute_s, commit_s, worst_all[0],
          worst_all[1], worst_all[2], a.resume ? (", restart " + std::to_string(restore_ms) + " ms").c_str() : "");
    std::fflush(stdout);
  }
  return res.verified ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App cli("npb-cg-mpi: NPB CG with its rows across MPI ranks, persisted with cairn::dist");
  cli.add_option("--class,--size", a.cls, "NPB class: S, W, A, B or C");
  cli.add_option("--iterations,--steps", a.iterations, "CG iterations (default: the class's 25 x niter)");
  cli.add_option("--strategy", a.strategy, "persistence strategy of every rank");
  cli.add_option("--dir", a.dir, "directory of the ranks' storage");
  cli.add_option("--name", a.name, "name of the state");
  cli.add_option("--crash-at", a.crash_at, "SIGKILL rank --crash-rank at this iteration");
  cli.add_option("--crash-rank", a.crash_rank, "the rank --crash-at kills");
  cli.add_flag("--resume", a.resume, "continue from the global version");
  cli.add_flag("--quiet", a.quiet, "only the result line");
  a.dist.add_to(cli);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  std::optional<npb::CgClass> cls;
  if (a.cls.size() == 1) cls = npb::cg_class(static_cast<char>(std::toupper(static_cast<unsigned char>(a.cls[0]))));
  if (!cls) {
    std::fprintf(stderr, "npb-cg-mpi: --class '%s': S, W, A, B or C\n", a.cls.c_str());
    return 2;
  }
  MPI_Init(&argc, &argv);
  const int rc = run(a, *cls);
  if (rc > 1) MPI_Abort(MPI_COMM_WORLD, rc);  // an error on one rank; 1 (not verified) is the same on every rank
  MPI_Finalize();
  return rc;
}
