// bench_test.cpp — smoke test of `cairn bench strategies`: runs end to end at a tiny size and writes
// well-formed JSON with one measured row per strategy and profile. Asserts no time beyond "positive".
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cairn/persist.hpp"
#include "tests/support/run_app.hpp"
#include "tests/support/temp_dir.hpp"
#include "util/json.hpp"

namespace cairn {
namespace {

testing::Outcome cairn_tool(const std::vector<std::string>& args) {
  return testing::run_program(CAIRN_TOOL_PATH, args);
}

TEST(BenchStrategies, RunsEndToEndAtATinySize) {
  testing::TempDir dir;
  const std::string json = dir.file("out.json");
  const std::string pools = dir.file("pools");
  const testing::Outcome r =
      cairn_tool({"bench", "strategies", "--size", "4M", "--repeats", "1", "--json", json, "--dir", pools, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| profile | strategy | commit ms |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Goals: "), std::string::npos) << r.output;

  auto read = util::read_json_file(json);
  ASSERT_TRUE(read.ok()) << read.error().message;
  const util::Json& doc = read.value();
  EXPECT_EQ(doc.at("size_bytes"), 4194304);
  EXPECT_TRUE(doc.at("baselines").is_array());

  std::map<std::string, int> seen;  // "profile/strategy" → rows
  for (const auto& row : doc.at("rows")) {
    const std::string key = row.at("profile").get<std::string>() + "/" + row.at("strategy").get<std::string>();
    ++seen[key];
    EXPECT_EQ(row.at("status"), "ok") << key << ": " << row.at("reason");
    for (const char* t : {"commit_ms", "partial_commit_ms", "restore_ms", "rollback_ms", "open_ms"})
      EXPECT_GT(row.at(t).get<double>(), 0.0) << key << " " << t;
    EXPECT_GT(row.at("nvm_bytes_per_commit").get<double>(), 0.0) << key;
    EXPECT_EQ(row.at("restore_verified"), true) << key;
    // One repetition: its commit sample is the median.
    ASSERT_EQ(row.at("commit_samples_ms").size(), 1u) << key;
    EXPECT_DOUBLE_EQ(row.at("commit_samples_ms")[0].get<double>(), row.at("commit_ms").get<double>()) << key;
    // The incremental strategies measure the same partial iterations
    // without incremental, and the application's writes both ways.
    const std::string strategy = row.at("strategy");
    if (strategy == "nt-copy" || strategy == "dram-cache") {
      for (const char* t : {"partial_full_commit_ms", "partial_write_ms", "partial_write_untracked_ms"}) {
        EXPECT_GT(row.at(t).get<double>(), 0.0) << key << " " << t;
      }
    }
  }
  EXPECT_NE(r.output.find("incremental <= full"), std::string::npos) << r.output;
  std::size_t expected = 0;
  for (const char* profile : {"dram", "optane-dcpmm"})
    for (const auto& s : persist::strategy_names()) {
      ++expected;
      EXPECT_EQ(seen[std::string(profile) + "/" + s], 1) << profile << "/" << s;
    }
  EXPECT_EQ(seen.size(), expected);

  // The benchmark removes its pools and checkpoint files.
  std::size_t left = 0;
  for (const auto& e : std::filesystem::directory_iterator(pools)) {
    ADD_FAILURE() << "left behind: " << e.path();
    ++left;
  }
  EXPECT_EQ(left, 0u);
}

TEST(BenchStrategies, BadOptionsAreCleanErrors) {
  testing::TempDir dir;
  const testing::Outcome size = cairn_tool({"bench", "strategies", "--size", "12X", "--dir", dir.path()});
  EXPECT_EQ(size.exit_code, 2) << size.output;
  EXPECT_NE(size.output.find("is not a size"), std::string::npos) << size.output;
  const testing::Outcome strategy = cairn_tool({"bench", "strategies", "--strategies", "nope", "--dir", dir.path()});
  EXPECT_EQ(strategy.exit_code, 2) << strategy.output;
  EXPECT_NE(strategy.output.find("unknown strategy 'nope'"), std::string::npos) << strategy.output;
  const testing::Outcome profile = cairn_tool({"bench", "strategies", "--profiles", "warp-drive", "--dir", dir.path()});
  EXPECT_EQ(profile.exit_code, 2) << profile.output;
  const testing::Outcome bare = cairn_tool({"bench"});
  EXPECT_NE(bare.exit_code, 0) << bare.output;
}

}  // namespace
}  // namespace cairn
