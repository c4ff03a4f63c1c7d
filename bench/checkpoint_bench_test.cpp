// checkpoint_bench_test.cpp — `cairn bench checkpoint` at the test size: every part runs, every run verifies,
// the numbers are positive and consistent, the JSON has Fig. 10's rows, and bad options exit with 2.
#include "bench/checkpoint_bench.hpp"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>

#include "tests/support/temp_dir.hpp"
#include "util/json.hpp"

namespace cairn::bench {
namespace {

TEST(CheckpointBench, EveryPartRunsAndVerifies) {
  CheckpointOptions o;
  o.size = "test";
  o.iterations = 3;
  o.repeats = 1;
  o.scaling_threads = {1, 2};
  auto rep = run_checkpoint_bench(o, nullptr);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  const CheckpointReport& r = rep.value();
  EXPECT_EQ(r.failed_runs, 0);

  ASSERT_EQ(r.table4.size(), 1 + checkpoint_strategies().size());
  EXPECT_EQ(r.table4.front().variant, "native");
  EXPECT_GT(r.baseline_s, 0);
  for (const auto& row : r.table4) {
    SCOPED_TRACE(row.variant);
    EXPECT_EQ(row.good_runs, 1);
    EXPECT_EQ(row.iterations, 3u);
    EXPECT_GT(row.compute_s, 0);
    if (row.variant == "native") continue;
    EXPECT_EQ(row.commits, 3u);
    EXPECT_GT(row.checkpoint_s, 0);
    EXPECT_GT(row.restore_s, 0);
    EXPECT_GT(row.state_bytes, 0u);
  }
  // Which restore is faster is the benchmark's finding, not a test's: at this
  // size in-place's restore checks the version's checksums at once (under
  // 4 MiB), which can take longer than reading a small checkpoint file.
  ASSERT_EQ(r.goals.size(), 2u);
  for (const auto& g : r.goals) EXPECT_TRUE(g.measured) << g.variant;

  ASSERT_EQ(r.layouts.size(), 6u);
  std::uint64_t list_bytes = 0, array_bytes = 0;
  for (const auto& row : r.layouts) {
    SCOPED_TRACE(row.layout + " " + row.variant);
    EXPECT_EQ(row.good_runs, 1);
    EXPECT_GT(row.checkpoint_s, 0);
    EXPECT_GT(row.restore_s, 0);
    if (row.layout == "list") list_bytes = row.state_bytes;
    if (row.layout == "array") array_bytes = row.state_bytes;
  }
  // The array layout persists every slot of every cell: more than the list's packed copy.
  EXPECT_GT(array_bytes, list_bytes);

  ASSERT_EQ(r.scaling.size(), 2 * (1 + checkpoint_strategies().size()));
  for (const auto& s : r.scaling) {
    EXPECT_EQ(s.good_runs, 1) << s.threads << " " << s.variant;
    EXPECT_GT(s.throughput, 0);
  }

  EXPECT_GT(r.t_timeout, 2 * r.baseline_s);
  ASSERT_EQ(r.heartbeat.size(), checkpoint_strategies().size());
  for (const auto& h : r.heartbeat) {
    EXPECT_NEAR(h.sum, h.t_checkpoint + h.t_restart + h.t_compute, 1e-12);
    if (h.fits) {
      EXPECT_EQ(h.interval, 1) << h.variant;
    }
  }

  std::ostringstream table;
  print_checkpoint_report(r, table);
  EXPECT_NE(table.str().find("Table 4"), std::string::npos);
  EXPECT_NE(table.str().find("Fig. 10"), std::string::npos);

  const cairn::testing::TempDir dir;
  const std::string path = dir.file("checkpoint.json");
  ASSERT_TRUE(write_checkpoint_json(r, path).ok());
  auto doc = util::read_json_file(path);
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  const auto& fig10 = doc.value().at("fig10").at("rows");
  ASSERT_EQ(fig10.size(), r.scaling.size());
  bool in_place_at_2 = false;
  for (const auto& row : fig10)
    if (row.at("threads") == 2 && row.at("variant") == "in-place") {
      in_place_at_2 = true;
      EXPECT_GT(row.at("throughput").get<double>(), 0);
    }
  EXPECT_TRUE(in_place_at_2);
  // Table 4's rows carry every repetition behind their medians.
  const auto& table4 = doc.value().at("table4").at("rows");
  ASSERT_EQ(table4.size(), r.table4.size());
  for (std::size_t i = 0; i < table4.size(); ++i) {
    EXPECT_EQ(table4[i].at("variant"), r.table4[i].variant);
    if (r.table4[i].variant == "native") continue;
    ASSERT_EQ(table4[i].at("restore_samples_ms").size(), 1u);
    EXPECT_DOUBLE_EQ(table4[i].at("restore_samples_ms")[0].get<double>(), r.table4[i].restore_s * 1e3);
  }
}

TEST(CheckpointBench, BadOptionsAreErrors) {
  CheckpointOptions o;
  o.size = "test";
  o.parts = {"bogus"};
  EXPECT_FALSE(run_checkpoint_bench(o, nullptr).ok());
  o.parts = {};
  o.layout = "tree";
  EXPECT_FALSE(run_checkpoint_bench(o, nullptr).ok());
  o.layout = "list";
  o.strategies = {"nope"};
  EXPECT_FALSE(run_checkpoint_bench(o, nullptr).ok());
}

TEST(CheckpointBench, CommandExitsWithTwoOnABadOption) {
  CLI::App app;
  auto* bench = app.add_subcommand("bench");
  add_checkpoint_command(*bench);
  const char* argv[] = {"cairn", "bench", "checkpoint", "--size", "huge", "--quiet"};
  try {
    app.parse(6, const_cast<char**>(argv));
    FAIL() << "no error";
  } catch (const CLI::ParseError& e) {
    EXPECT_EQ(app.exit(e), 2);
  }
}

}  // namespace
}  // namespace cairn::bench
