// randlc.cpp — vector form of the NPB generator.
#include "apps/npb/randlc.hpp"

namespace cairn::npb {

void vranlc(std::size_t n, std::uint64_t& x, std::uint64_t a, double* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] = randlc(x, a);
}

}  // namespace cairn::npb
