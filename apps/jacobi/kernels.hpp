// kernels.hpp — the two kernels of the jacobi app (seed 003, EPCC): the
// stream-function Jacobi solver and the image-sharpening stencil.
//
// Sample runs:
//   jacobi --size 512 --iterations 2000                    native (DRAM)
//   jacobi --size 512 --strategy in-place --crash-at 700   killed at iteration 700
//   jacobi --size 512 --strategy in-place --resume         continues at 700
//   jacobi --kernel sharpen --size 1024 --strategy file --persist-every 4
#pragma once

#include <memory>

#include "apps/common/app.hpp"

namespace cairn::apps::jacobi {

// How the stream-function kernel writes its new grid: `streaming` computes
// each row into a cached buffer and writes it out with non-temporal stores
// (Field::stream: nothing for in-place to write back at commit, no
// read-for-ownership of the destination); `cached` stores into the grid
// directly. Native and persistent runs run the same kernel either way.
enum class Stores { streaming, cached };

std::unique_ptr<Simulation> make_stream_function(Stores stores = Stores::streaming);
std::unique_ptr<Simulation> make_sharpen();

}  // namespace cairn::apps::jacobi
