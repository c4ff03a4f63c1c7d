// main.cpp — the `npb-cg` proxy application: NPB CG (inverse power iteration
// with 25 conjugate gradient iterations per outer step; apps/npb/cg.hpp) with
// any persistence strategy. Options: `npb-cg --help`; framework:
// apps/common/app.hpp.
//
// Sample runs:
//   npb-cg --size A                                       native, class A, verifies zeta
//   npb-cg --size A --strategy in-place --threads 2       p, r, z versioned in place every CG iteration
//   npb-cg --size S --strategy undo-log --crash-at 200 ; npb-cg --size S --strategy undo-log --resume
//     (the resumed run verifies and ends with the checksum of an uninterrupted run)
//   npb-cg --size W --strategy file --persist-every 25    one checkpoint per outer iteration
//
// Persisted state (seed 004 Table 2: CG's target objects are p, r and z):
//   z, r, p   dual fields: one iteration of the app is one CG iteration, which
//             reads the versions of the last one and writes all of the other
//             (in-place versioning, no copy)
//   x         plain: it changes only when an outer iteration ends (x = z/|z|)
//   scalars   dual: rho, zeta, ||r||, outer and inner iteration counts
// The sparse matrix is rebuilt (deterministically) at every start; it is read-only.
#include <memory>

#include "apps/npb/apps.hpp"

int main(int argc, char** argv) {
  return cairn::apps::run_main(argc, argv, cairn::apps::make_npb_cg(),
                               "npb-cg: the NAS Parallel Benchmarks CG kernel (classes S, W, A, B, C)");
}
