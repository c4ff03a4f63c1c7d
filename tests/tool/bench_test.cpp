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
#include "tests/support/temp_dir.hpp"

namespace cairn {
namespace {

struct ToolRun {
  int code = -1;  // exit status, or minus the signal that killed it
  std::string out;
};

ToolRun cairn_tool(const std::vector<std::string>& args) {
  int fds[2];
  ToolRun r;
  if (pipe(fds) != 0) return r;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    static char tool[] = CAIRN_TOOL_PATH;
    std::vector<char*> argv{tool};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(tool, argv.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  return r;
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
  const ToolRun r =
      cairn_tool({"bench", "strategies", "--size", "4M", "--repeats", "1", "--json", json, "--dir", pools, "--quiet"});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("| profile | strategy | commit ms |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Goals: "), std::string::npos) << r.out;

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
  }
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
  const ToolRun size = cairn_tool({"bench", "strategies", "--size", "12X", "--dir", dir.path()});
  EXPECT_EQ(size.code, 2) << size.out;
  EXPECT_NE(size.out.find("is not a size"), std::string::npos) << size.out;
  const ToolRun strategy = cairn_tool({"bench", "strategies", "--strategies", "nope", "--dir", dir.path()});
  EXPECT_EQ(strategy.code, 2) << strategy.out;
  EXPECT_NE(strategy.out.find("unknown strategy 'nope'"), std::string::npos) << strategy.out;
  const ToolRun profile = cairn_tool({"bench", "strategies", "--profiles", "warp-drive", "--dir", dir.path()});
  EXPECT_EQ(profile.code, 2) << profile.out;
  const ToolRun bare = cairn_tool({"bench"});
  EXPECT_NE(bare.code, 0) << bare.out;
}

}  // namespace
}  // namespace cairn
