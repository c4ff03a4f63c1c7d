// parallel.hpp — how the NPB kernels run their loops on threads.
//
// A LoopRunner calls body(lo, hi) on disjoint ranges that cover [0, n),
// concurrently or not, and returns when all are done. The kernels never let a
// result depend on how the range is cut: every reduction sums fixed chunks
// (rows of a matrix, planes of a grid) into a partial-sum array and adds the
// partials in index order. So a run gives the same bits on any number of
// threads, and a resumed run the same bits as an uninterrupted one.
//
// The apps pass their thread team (apps/common/app.hpp's Team::parallel_for);
// tests and tools may use serial_loops().
#pragma once

#include <cstddef>
#include <functional>

namespace cairn::npb {

using LoopBody = std::function<void(std::size_t lo, std::size_t hi)>;
using LoopRunner = std::function<void(std::size_t n, const LoopBody& body)>;

inline LoopRunner serial_loops() {
  return [](std::size_t n, const LoopBody& body) {
    if (n > 0) body(0, n);
  };
}

}  // namespace cairn::npb
