// main.cpp — jacobi-auto: jacobi's stream-function kernel compiled through
// the in-place versioning pass (jacobi_auto.c, upstream style plus the two
// marks of cairn/versioned.h). Prints the final grid's checksum computed as
// the jacobi app computes it (its row blocks psi.0, psi.1, ... chained), so a
// run compares bit for bit with `jacobi --strategy in-place` of the same size
// and iteration count. jacobi-auto-native is the same source without the pass
// (-DCAIRN_VERSIONING_OFF): the baseline of `cairn bench overhead`.
//
// Sample runs:
//   jacobi-auto --size 256 --iterations 200
//   jacobi-auto --size 256 --iterations 200 --progress      (kill it on a line)
//   CAIRN_RESUME=1 jacobi-auto --size 256 --iterations 200   (resumes; same checksum)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "util/hash.hpp"

extern "C" void jacobi_auto_run(std::size_t n, long iterations, int progress, double* result);

namespace {

[[noreturn]] void usage(const std::string& what) {
  std::fprintf(stderr,
               "jacobi-auto: %s\nusage: jacobi-auto [--size N (4..65536, default 256)] [--iterations K (default "
               "2000)] [--progress]\n",
               what.c_str());
  std::exit(2);
}

unsigned long long number(const char* s, const char* flag, unsigned long long lo, unsigned long long hi) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (!*s || *end || v < lo || v > hi)
    usage(std::string(flag) + " '" + s + "': an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 256;
  long iterations = 2000;
  int progress = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--size" && i + 1 < argc)
      n = number(argv[++i], "--size", 4, 65536);
    else if (a == "--iterations" && i + 1 < argc)
      iterations = static_cast<long>(number(argv[++i], "--iterations", 0, 1000000000));
    else if (a == "--progress")
      progress = 1;
    else
      usage("unknown option '" + a + "'");
  }
  const std::size_t w = n + 2;
  std::vector<double> grid(w * w);
  const auto t0 = std::chrono::steady_clock::now();
  jacobi_auto_run(n, iterations, progress, grid.data());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The jacobi app's row blocks (stream_function.cpp: at least 8 rows, at most 8 blocks).
  const std::size_t blocks = std::clamp<std::size_t>(w / 8, 1, 8);
  std::uint64_t h = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t r0 = w * b / blocks, r1 = w * (b + 1) / blocks;
    h = cairn::util::hash_bytes(grid.data() + r0 * w, (r1 - r0) * w * sizeof(double), h);
  }
  std::printf("jacobi-auto: %zux%zu, %ld iterations: checksum %016llx  %.3f s\n", n, n, iterations,
              static_cast<unsigned long long>(h), seconds);
  return 0;
}
