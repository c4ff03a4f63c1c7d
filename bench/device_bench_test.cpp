// device_bench_test.cpp — the device benchmark behind `cairn device bench` runs at a small size and
// fills both of its tables; a bad size is an error.
#include "bench/device_bench.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "tests/support/temp_dir.hpp"

namespace cairn::bench {
namespace {

using cairn::testing::TempDir;

TEST(DeviceBench, SmallRunFillsBothTables) {
  TempDir dir;
  DeviceBenchOptions o;
  o.dir = dir.path();
  o.size = 4u << 20;
  o.reps = 1;
  o.threads = 2;
  o.profiles = {"dram", "write_ns=200,drain_ns=300,write_gbps=1,read_ns=100,read_gbps=2"};
  auto r = run_device_bench(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().primitives.size(), 10u);
  for (const auto& row : r.value().primitives) EXPECT_GT(row.value, 0) << row.operation;
  EXPECT_GT(r.value().best_copy_bw, 0);
  // dram: flush extra; numeric: flush, drain, write 1T, write 2T, read ns, read GB/s.
  EXPECT_EQ(r.value().fidelity.size(), 7u);
  std::ostringstream out;
  print_device_report(r.value(), out);
  EXPECT_NE(out.str().find("| write_ns=200"), std::string::npos);
  const auto json = dir.file("r.json");
  ASSERT_TRUE(write_device_report_json(r.value(), json).ok());
  EXPECT_TRUE(std::filesystem::file_size(json) > 100);
  EXPECT_FALSE(run_device_bench([] {
                 DeviceBenchOptions bad;
                 bad.size = 12345;
                 return bad;
               }())
                   .ok());
}

}  // namespace
}  // namespace cairn::bench
