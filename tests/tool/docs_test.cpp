// docs_test.cpp — README and ARCHITECTURE list what exists: every subcommand
// of the built `cairn` tool, every `cairn bench` experiment and every public
// header. A new command or header that the documents do not name fails here.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/run_app.hpp"

namespace cairn {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The names CLI11 lists under "Subcommands:" in `cairn ARGS --help`.
std::vector<std::string> subcommands(const std::vector<std::string>& args) {
  std::vector<std::string> with_help = args;
  with_help.push_back("--help");
  const auto out = testing::run_program(CAIRN_TOOL_PATH, with_help);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  std::vector<std::string> names;
  std::istringstream lines(out.output);
  bool listed = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Subcommands:", 0) == 0) {
      listed = true;
      continue;
    }
    if (!listed || line.size() < 3 || line[0] != ' ' || line[1] != ' ' || line[2] == ' ') continue;
    names.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  EXPECT_FALSE(names.empty()) << out.output;
  return names;
}

// The line of ARCHITECTURE's layer table whose first cell is `cell`.
std::string table_row(const std::string& text, const std::string& cell) {
  const auto at = text.find("\n| " + cell + " |");
  EXPECT_NE(at, std::string::npos) << "no row '" << cell << "' in ARCHITECTURE.md";
  return at == std::string::npos ? std::string() : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

bool names_word(const std::string& text, const std::string& word) {
  for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const auto ok = [](char c) { return !(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'); };
    if ((at == 0 || ok(text[at - 1])) && (at + word.size() == text.size() || ok(text[at + word.size()]))) return true;
  }
  return false;
}

TEST(Docs, ReadmeAndArchitectureNameEveryToolCommand) {
  const std::string readme = read_text(CAIRN_SOURCE_DIR "/README.md");
  const std::string tool_row = table_row(read_text(CAIRN_SOURCE_DIR "/ARCHITECTURE.md"), "tool");
  for (const auto& name : subcommands({})) {
    EXPECT_TRUE(names_word(readme, "cairn " + name)) << "README.md never shows `cairn " << name << "`";
    EXPECT_TRUE(names_word(tool_row, name)) << "ARCHITECTURE.md's tool row does not list " << name;
  }
}

TEST(Docs, ReadmeAndArchitectureNameEveryBenchmark) {
  const std::string readme = read_text(CAIRN_SOURCE_DIR "/README.md");
  const std::string bench_row = table_row(read_text(CAIRN_SOURCE_DIR "/ARCHITECTURE.md"), "8. bench");
  for (const auto& name : subcommands({"bench"})) {
    EXPECT_TRUE(names_word(readme, "cairn bench " + name)) << "README.md never shows `cairn bench " << name << "`";
    EXPECT_TRUE(names_word(bench_row, name)) << "ARCHITECTURE.md's bench row does not list " << name;
  }
}

TEST(Docs, ArchitectureNamesEveryPublicHeader) {
  const std::string arch = read_text(CAIRN_SOURCE_DIR "/ARCHITECTURE.md");
  int headers = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(CAIRN_SOURCE_DIR "/include/cairn")) {
    if (!e.is_regular_file()) continue;
    ++headers;
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(names_word(arch, name)) << "ARCHITECTURE.md does not name the public header " << name;
  }
  EXPECT_GE(headers, 10);
}

}  // namespace
}  // namespace cairn
