// dist_program.cpp — the install test's MPI program, built out of the tree
// against an installed cairn: every rank adds rank + 1 to each element of its
// state per iteration, three iterations per run, each a collective commit.
//   mpirun -n 2 dist_program DIR VERSION
// resumes from the global version in DIR, if any, and exits 0 when the run
// ends at global version VERSION with every element equal to
// VERSION * (rank + 1), else 1.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "cairn/dist.hpp"

namespace {

constexpr std::size_t kElements = 64;
constexpr int kIterations = 3;

int run(const char* dir, std::uint64_t expected) {
  cairn::dist::Options options;
  options.persist.strategy = "in-place";
  options.persist.name = "install";
  options.persist.dir = dir;
  auto ctx = cairn::dist::Context::create(MPI_COMM_WORLD, options).value();
  auto* u = ctx->dual_region("u", kElements * sizeof(double)).value();
  ctx->open().value();
  if (!ctx->restore().ok()) {
    for (std::size_t i = 0; i < kElements; ++i) u->read<double>()[i] = 0.0;
  }
  const double step = ctx->rank() + 1;
  for (int it = 0; it < kIterations; ++it) {
    ctx->begin().value();
    for (std::size_t i = 0; i < kElements; ++i) u->write<double>()[i] = u->read<double>()[i] + step;
    ctx->commit().value();
  }
  bool ok = ctx->version() == expected;
  for (std::size_t i = 0; i < kElements; ++i) ok = ok && u->read<double>()[i] == static_cast<double>(expected) * step;
  std::printf("rank %d of %d: version %llu, %s\n", ctx->rank(), ctx->size(),
              static_cast<unsigned long long>(ctx->version()), ok ? "as expected" : "WRONG");
  return cairn::dist::all_ok(MPI_COMM_WORLD, ok) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DIR VERSION\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const int rc = run(argv[1], std::strtoull(argv[2], nullptr, 10));
  MPI_Finalize();
  return rc;
}
