// mpirun_env.hpp — the environment the tests give the mpirun jobs they start.
#pragma once

#include <cstdlib>
#include <string>

namespace cairn::testing {

// Open MPI as root, more ranks than cores; and, under AddressSanitizer, no
// leak report from the ranks: Open MPI's end-of-run leaks come from
// components it has dlclose'd by then ("<unknown module>" frames, which no
// suppression can name). This test process read its own ASAN_OPTIONS at
// start, so its leak checking stays on.
inline void set_mpirun_environment() {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  const char* asan = std::getenv("ASAN_OPTIONS");
  setenv("ASAN_OPTIONS", ((asan && *asan ? std::string(asan) + ":" : std::string()) + "detect_leaks=0").c_str(), 1);
}

}  // namespace cairn::testing
