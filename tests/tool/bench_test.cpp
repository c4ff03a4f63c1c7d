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

namespace cairn {
namespace {

testing::Outcome cairn_tool(const std::vector<std::string>& args) {
  return testing::run_program(CAIRN_TOOL_PATH, args);
}

// The value of "key": in one JSON line: a string without its quotes, or a number's text.
std::string field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\": ";
  const auto at = line.find(k);
  if (at == std::string::npos) return "<missing>";
  auto b = at + k.size();
  if (line[b] == '"') {
    const auto e = line.find('"', b + 1);
    return line.substr(b + 1, e - b - 1);
  }
  const auto e = line.find_first_of(",}", b);
  return line.substr(b, e - b);
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

  std::ifstream in(json);
  ASSERT_TRUE(in) << json;
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  EXPECT_EQ(text.front(), '{');
  EXPECT_NE(text.find("\"size_bytes\": 4194304"), std::string::npos);
  EXPECT_NE(text.find("\"baselines\": ["), std::string::npos);

  std::map<std::string, int> seen;  // "profile/strategy" → rows
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("\"strategy\": ") == std::string::npos) continue;
    const std::string key = field(line, "profile") + "/" + field(line, "strategy");
    ++seen[key];
    EXPECT_EQ(field(line, "status"), "ok") << key << ": " << field(line, "reason");
    for (const char* t : {"commit_ms", "partial_commit_ms", "restore_ms", "rollback_ms", "open_ms"})
      EXPECT_GT(std::strtod(field(line, t).c_str(), nullptr), 0.0) << key << " " << t;
    EXPECT_GT(std::strtod(field(line, "nvm_bytes_per_commit").c_str(), nullptr), 0.0) << key;
    EXPECT_EQ(field(line, "restore_verified"), "true") << key;
    // The incremental strategies measure the same partial iterations
    // without incremental, and the application's writes both ways.
    const std::string strategy = field(line, "strategy");
    if (strategy == "nt-copy" || strategy == "dram-cache") {
      for (const char* t : {"partial_full_commit_ms", "partial_write_ms", "partial_write_untracked_ms"}) {
        EXPECT_GT(std::strtod(field(line, t).c_str(), nullptr), 0.0) << key << " " << t;
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
