// main.cpp — the `npb-mg` proxy application: NPB MG (V-cycle multigrid for a
// periodic 3D Poisson problem; apps/npb/mg.hpp) with any persistence strategy.
// Options: `npb-mg --help`; framework: apps/common/app.hpp.
//
// Sample runs:
//   npb-mg --size A                                       native, class A, verifies the residual norm
//   npb-mg --size A --strategy in-place --threads 2       u and r versioned in place every V-cycle
//   npb-mg --size S --strategy shadow --crash-at 2 ; npb-mg --size S --strategy shadow --resume
//     (the resumed run verifies and ends with the checksum of an uninterrupted run)
//   npb-mg --size B --strategy nt-copy --json mg-b.json
//
// Persisted state: one app iteration is one V-cycle plus the residual update.
//   u, r      dual fields, the finest level with its periodic ghosts. A
//             V-cycle reads r only to restrict it, then writes every point of
//             u and r afresh, so in-place versioning needs no carry-over
//             (seed 004 Table 2 lists MG's r as non-uniformly updated; in this
//             formulation it is not)
//   scalars   dual: V-cycles done, the last residual norms
// The right-hand side v (zran3) is regenerated at every start; it is read-only.
// The coarse levels are scratch inside the kernel.
#include <memory>

#include "apps/npb/apps.hpp"

int main(int argc, char** argv) {
  return cairn::apps::run_main(argc, argv, cairn::apps::make_npb_mg(),
                               "npb-mg: the NAS Parallel Benchmarks MG kernel (classes S, W, A, B, C)");
}
