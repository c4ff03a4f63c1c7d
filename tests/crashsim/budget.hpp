// budget.hpp — the crash-state budget of the CI crash tests: CAIRN_CRASH_STATES
// (default 10^6; `make test` runs 10^5 under the sanitizers). Each test
// (suite_test.cpp, fs_crash_test.cpp, undo_log_crash_test.cpp) explores its
// own fraction of it.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace cairn::testing::crashsim {

inline std::uint64_t ci_crash_states() {
  const char* env = std::getenv("CAIRN_CRASH_STATES");
  if (env == nullptr || *env == '\0') return 1000000;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(env, &end, 10);
  return (end != nullptr && *end == '\0' && v > 0) ? v : 1000000;
}

}  // namespace cairn::testing::crashsim
