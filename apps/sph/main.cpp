// main.cpp — the `sph` proxy application: a Fluidanimate-style SPH dam break
// (sph.hpp) whose particle/cell store is a linked list, a flat array or a
// blocked array (--layout), with any persistence strategy. Options: `sph
// --help`; framework: apps/common/app.hpp.
//
// Sample runs:
//   sph                                          simsmall (35K particles), blocked, native
//   sph --size simlarge --layout list --strategy nt-copy --threads 2
//   sph --size test --iterations 40 --strategy in-place --crash-at 17 ; sph ... --resume
//     (the final checksum equals that of the same run without --crash-at)
//   sph --layout array --strategy in-place --json out.json
//     (seed 001 Figs. 8-9: compare commit and restore times across --layout)
#include "apps/sph/sph.hpp"

int main(int argc, char** argv) {
  return cairn::apps::run_main(argc, argv, std::make_unique<cairn::apps::sph::SphApp>(),
                               "sph: a Fluidanimate-style SPH dam break with list, array or blocked particle storage");
}
