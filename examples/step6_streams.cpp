// step6_streams.cpp — two components coupled through memory instead of a file
// (the C version, step6_streams.c, says more). The solver writes with an
// ostream and the adapter reads with an istream, as they would a file; run the
// program twice: the first run is the solver, the second the adapter.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "cairn/cairn.h"
#include "cairn/stream.hpp"

namespace cs = cairn::stream;

int solver(const std::string& name) {
  auto s = cs::Stream::open(name, cs::Mode::write);  // was: std::ofstream out(name)
  if (!s.ok()) {
    std::cerr << "solver: " << s.error().message << "\n";
    return 1;
  }
  std::ostream& out = s.value()->ios();
  out.precision(17);
  out << 100 << "\n";
  for (int i = 0; i < 100; ++i) out << i << " " << 0.01 * i * i << "\n";
  if (auto r = s.value()->close(); !r.ok()) {  // the commit
    std::cerr << "solver: nothing committed: " << r.error().message << "\n";
    return 1;
  }
  std::cout << "solver: wrote 100 values to " << name << "\n";
  return 0;
}

int adapter(const std::string& name) {
  auto s = cs::Stream::open(name, cs::Mode::read);  // was: std::ifstream in(name)
  if (!s.ok()) {
    std::cerr << "adapter: " << s.error().message << "\n";
    return 1;
  }
  std::istream& in = s.value()->ios();
  int n = 0;
  double sum = 0;
  in >> n;
  for (int k = 0; k < n; ++k) {
    int i;
    double u;
    in >> i >> u;
    sum += u;
  }
  std::cout << "adapter: read " << n << " values from " << name << ", sum " << sum << " (expected 3283.5)\n";
  return in && sum > 3283.49 && sum < 3283.51 ? 0 : 1;
}

int main() {
  std::filesystem::create_directories(cairn_default_pool_dir());
  const std::string pool = std::string(cairn_default_pool_dir()) + "/step6.pool";
  setenv("CAIRN_STREAM_PREFIX", ("pmem:" + pool + "#").c_str(), 0);  // a prefix set by the user wins
  // The first run finds no pool and solves; the second must find the solution.
  return std::filesystem::exists(pool) ? adapter("solution.dat") : solver("solution.dat");
}
