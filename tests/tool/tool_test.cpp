// tool_test.cpp — runs the built `cairn` binary on real pool files and checks exit codes and output.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cairn/extended/pool.hpp"
#include "cairn/stream.hpp"
#include "tests/support/run_app.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn {
namespace {

using pool::kHeaderCopy0;
using pool::kHeaderCopy1;
using pool::kRootTable0;
using pool::kRootTable1;
using pool::kSelectorOffset;
using testing::TempDir;

using testing::Outcome;

// Runs the tool with `args`; as user `uid` if not negative.
Outcome cairn_tool(const std::vector<std::string>& args, int uid = -1) {
  return testing::run_program(CAIRN_TOOL_PATH, args, uid);
}

bool has(const Outcome& r, const std::string& needle) { return r.output.find(needle) != std::string::npos; }

#define EXPECT_OUT(run, needle) EXPECT_TRUE(has(run, needle)) << "missing \"" << (needle) << "\" in:\n" << (run).output

void poke(const std::string& path, std::size_t off, const void* data, std::size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, data, n, static_cast<off_t>(off)), static_cast<ssize_t>(n));
  ::close(fd);
}

void damage(const std::string& path, std::size_t off) {
  const std::uint64_t junk = 0x0badc0ffee0ddf00ULL;
  poke(path, off, &junk, sizeof junk);
}

std::string make_pool(const TempDir& dir, const std::string& name, const std::string& size = "2M") {
  const std::string path = dir.file(name);
  const Outcome r = cairn_tool({"pool", "create", path, "--size", size});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return path;
}

// The table the selector names: bit 0 of either form (a bare 0 or 1, or the
// self-checking word every publish stores).
std::uint64_t selector_of(const std::string& path) {
  std::uint64_t sel = 99;
  std::ifstream in(path, std::ios::binary);
  in.seekg(kSelectorOffset);
  in.read(reinterpret_cast<char*>(&sel), sizeof sel);
  return sel == 99 ? sel : sel & 1;
}

TEST(ToolPool, CreateThenInfo) {
  TempDir dir;
  const std::string path = dir.file("a.pool");
  const Outcome c = cairn_tool({"pool", "create", path, "--size", "4M", "--flush", "cpu"});
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_OUT(c, "created " + path);
  EXPECT_OUT(c, "4194304 bytes");
  EXPECT_EQ(std::filesystem::file_size(path), 4u << 20);

  // Give the pool an allocation and two roots through the library.
  std::uint64_t off = 0;
  {
    auto p = pool::Pool::open(path);
    ASSERT_TRUE(p.ok()) << p.error().message;
    p.value()->arena().reset_empty();
    off = p.value()->arena().alloc(3 * 4096).value();
    ASSERT_TRUE(p.value()->publish_root(3, off, 42).ok());
    ASSERT_TRUE(p.value()->publish_root(15, off, 7).ok());
  }

  const Outcome i = cairn_tool({"pool", "info", path});
  ASSERT_EQ(i.exit_code, 0) << i.output;
  EXPECT_OUT(i, "0x4c4f4f504e524941 \"AIRNPOOL\"");
  EXPECT_OUT(i, "layout version   2");
  EXPECT_OUT(i, "size             4194304 bytes (4 MiB)");
  EXPECT_OUT(i, " UTC");
  EXPECT_OUT(i, "1008 blocks of 4096 bytes");
  EXPECT_OUT(i, "high-water mark  3 blocks (12288 bytes");
  EXPECT_OUT(i, "upper bound");
  EXPECT_OUT(i, "generation 3");
  EXPECT_OUT(i, "slot 3: offset " + std::to_string(off) + ", version 42");
  EXPECT_OUT(i, "slot 15: offset " + std::to_string(off) + ", version 7");
  EXPECT_FALSE(has(i, "slot 0:")) << i.output;
  EXPECT_OUT(i, "real pmem        no");  // tmpfs or a disk file in tests
  EXPECT_OUT(i, "header copies    0 ok, 1 ok");

  const Outcome j = cairn_tool({"pool", "info", path, "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const auto doc = util::Json::parse(j.output, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(doc.is_object()) << j.output;
  EXPECT_EQ(doc.at("pool_size"), 4194304);
  EXPECT_EQ(doc.at("layout_version"), 2);
  EXPECT_EQ(doc.at("block_size"), 4096);
  EXPECT_EQ(doc.at("arena_high_water_blocks"), 3);
  EXPECT_EQ(doc.at("root_generation"), 3);
  const util::Json want_roots = {{{"slot", 3}, {"offset", off}, {"version", 42}},
                                 {{"slot", 15}, {"offset", off}, {"version", 7}}};
  EXPECT_EQ(doc.at("roots"), want_roots);
  EXPECT_EQ(doc.at("is_pmem"), false);
  EXPECT_EQ(doc.at("header_copies_ok"), util::Json({true, true}));
  EXPECT_TRUE(doc.at("problems").is_array() && doc.at("problems").empty()) << doc.at("problems");
}

TEST(ToolPool, CreateOptions) {
  TempDir dir;
  const Outcome a = cairn_tool({"pool", "create", dir.file("b"), "--size", "3m", "--block-size", "64K"});
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(std::filesystem::file_size(dir.file("b")), 3u << 20);
  const Outcome i = cairn_tool({"pool", "info", dir.file("b")});
  EXPECT_OUT(i, "blocks of 65536 bytes");
  const Outcome m = cairn_tool({"pool", "create", dir.file("m"), "--size", "1048576", "--flush", "msync"});
  ASSERT_EQ(m.exit_code, 0) << m.output;
  EXPECT_OUT(m, "flush mode msync");
  // Never overwrites.
  const Outcome again = cairn_tool({"pool", "create", dir.file("b"), "--size", "2M"});
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_OUT(again, "already exists");
  EXPECT_EQ(std::filesystem::file_size(dir.file("b")), 3u << 20);
}

TEST(ToolPool, BadSizesAreCleanErrors) {
  TempDir dir;
  const std::string path = dir.file("x");
  for (const char* size : {"abc", "0", "12Q", "1.5G", "99999999999999999999", "20000000000T", "K", ""}) {
    const Outcome r = cairn_tool({"pool", "create", path, "--size", size});
    EXPECT_TRUE(r.exited()) << size;
    EXPECT_EQ(r.exit_code, 2) << size << ": " << r.output;
    EXPECT_OUT(r, "--size");
    EXPECT_FALSE(std::filesystem::exists(path)) << size;
  }
  const Outcome small = cairn_tool({"pool", "create", path, "--size", "4K"});
  EXPECT_EQ(small.exit_code, 2) << small.output;
  EXPECT_OUT(small, "below the minimum");
  const Outcome block = cairn_tool({"pool", "create", path, "--size", "2M", "--block-size", "1000"});
  EXPECT_EQ(block.exit_code, 2) << block.output;
  EXPECT_OUT(block, "power of two");
  const Outcome flush = cairn_tool({"pool", "create", path, "--size", "2M", "--flush", "sometimes"});
  EXPECT_EQ(flush.exit_code, 2) << flush.output;
  EXPECT_OUT(flush, "sometimes");
  const Outcome negative = cairn_tool({"pool", "create", path, "--size=-5"});
  EXPECT_TRUE(negative.exited());
  EXPECT_NE(negative.exit_code, 0) << negative.output;
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(ToolCheck, CleanPoolIsZero) {
  TempDir dir;
  const std::string path = make_pool(dir, "p");
  const Outcome r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_OUT(r, "ok: both header copies and both root tables are valid");
  EXPECT_FALSE(has(r, "problem")) << r.output;
}

TEST(ToolCheck, OneDamagedHeaderCopyIsNamed) {
  for (int copy = 0; copy < 2; ++copy) {
    TempDir dir;
    const std::string path = make_pool(dir, "p");
    damage(path, (copy == 0 ? kHeaderCopy0 : kHeaderCopy1) + offsetof(pool::PoolHeader, pool_size));
    const Outcome r = cairn_tool({"pool", "check", path});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_OUT(r, "problem: header copy " + std::to_string(copy) + " is damaged (checksum mismatch)");
    EXPECT_OUT(r, "1 problem found; the pool still opens");
    // info still works and says so too.
    const Outcome i = cairn_tool({"pool", "info", path});
    EXPECT_EQ(i.exit_code, 0) << i.output;
    EXPECT_OUT(i, "DAMAGED");
  }
}

TEST(ToolCheck, BothHeaderCopiesDamagedIsProblemsFound) {
  TempDir dir;
  const std::string path = make_pool(dir, "p");
  damage(path, kHeaderCopy0 + 40);
  damage(path, kHeaderCopy1 + 40);
  const Outcome r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "header copy 0 is damaged");
  EXPECT_OUT(r, "header copy 1 is damaged");
  EXPECT_OUT(r, "cannot be opened");
  const Outcome i = cairn_tool({"pool", "info", path});
  EXPECT_EQ(i.exit_code, 2) << i.output;
  EXPECT_OUT(i, "both copies");
}

TEST(ToolCheck, EveryProblemIsReported) {
  // Both header copies and the live root table: all three are listed.
  TempDir dir;
  const std::string path = make_pool(dir, "p");
  damage(path, kHeaderCopy0 + 40);
  damage(path, kHeaderCopy1);  // the magic itself
  ASSERT_EQ(selector_of(path), 0u);
  damage(path, kRootTable0 + 24);
  const Outcome r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "header copy 0 is damaged (checksum mismatch)");
  EXPECT_OUT(r, "header copy 1 is damaged (bad magic");
  EXPECT_OUT(r, "root table 0 fails its checksum");
  EXPECT_OUT(r, "3 problems found");
}

TEST(ToolCheck, DamagedRootTables) {
  TempDir dir;
  const std::string path = make_pool(dir, "p");
  {
    auto p = pool::Pool::open(path);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p.value()->publish_root(0, pool::kArenaOffset, 1).ok());  // table 1 live
  }
  ASSERT_EQ(selector_of(path), 1u);
  damage(path, kRootTable0 + 40);  // the older table
  Outcome r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "root table 0 fails its checksum");
  EXPECT_OUT(r, "the pool still opens");

  damage(path, kRootTable1 + 40);  // now the live one too
  r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "root table 0 fails its checksum");
  EXPECT_OUT(r, "root table 1 fails its checksum (it is the one the selector names)");
  EXPECT_OUT(r, "cannot be opened");
}

// The live table damaged: refused where the selector checks itself (it names
// the live table for certain); a pool of earlier cairn, whose bare selector
// could itself be the damaged part, falls back to the other table.
TEST(ToolCheck, DamagedLiveRootTableIsRefusedOrFallsBack) {
  TempDir dir;
  const std::string path = make_pool(dir, "p");
  ASSERT_EQ(selector_of(path), 0u);
  damage(path, kRootTable0 + 40);
  Outcome r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "the live one, fails its checksum");
  const std::uint64_t zero = 0;
  poke(path, kSelectorOffset, &zero, sizeof zero);
  r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "root table 0 named by the selector is damaged");
}

TEST(ToolCheck, BadSelectorAndRootOutsideArena) {
  TempDir dir;
  const std::string path = make_pool(dir, "p");
  const std::uint64_t seven = 7;
  poke(path, kSelectorOffset, &seven, sizeof seven);
  Outcome r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "selector holds 7");

  // A well-formed table (valid checksum) whose root points into the header.
  const std::uint64_t zero = 0;
  poke(path, kSelectorOffset, &zero, sizeof zero);
  pool::RootTable t{};
  t.generation = 5;
  t.slots[2] = {100, 1};
  t.checksum = pool::checksum64(&t, offsetof(pool::RootTable, checksum));
  poke(path, kRootTable0, &t, sizeof t);
  r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "root slot 2 holds offset 100, outside the arena");
}

TEST(ToolCheck, TruncatedPoolIsProblemsFound) {
  TempDir dir;
  const std::string path = make_pool(dir, "p", "4M");
  ASSERT_EQ(::truncate(path.c_str(), 1u << 20), 0);
  Outcome r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "truncated");
  EXPECT_OUT(r, "4194304");
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);  // the magic survives
  r = cairn_tool({"pool", "check", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUT(r, "the file ends at 100 bytes");
}

TEST(ToolCheck, CannotReadIsTwo) {
  TempDir dir;
  const Outcome missing = cairn_tool({"pool", "check", dir.file("nope")});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_OUT(missing, dir.file("nope") + ": no such file");

  const Outcome directory = cairn_tool({"pool", "check", dir.path()});
  EXPECT_EQ(directory.exit_code, 2) << directory.output;
  EXPECT_OUT(directory, "is a directory");

  const std::string random = dir.file("random");
  {
    std::ofstream out(random, std::ios::binary);
    std::uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < (2 << 20) / 8; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      out.write(reinterpret_cast<const char*>(&x), sizeof x);
    }
  }
  const Outcome rnd = cairn_tool({"pool", "check", random});
  EXPECT_EQ(rnd.exit_code, 2) << rnd.output;
  EXPECT_OUT(rnd, "not a cairn pool");

  { std::ofstream(dir.file("short")) << "hello"; }
  const Outcome shrt = cairn_tool({"pool", "check", dir.file("short")});
  EXPECT_EQ(shrt.exit_code, 2) << shrt.output;
  EXPECT_OUT(shrt, "not a cairn pool");

  { std::ofstream(dir.file("empty")); }
  const Outcome empty = cairn_tool({"pool", "check", dir.file("empty")});
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_OUT(empty, "empty");

  // Another layout version: a valid header this cairn cannot read.
  const std::string path = make_pool(dir, "v2");
  pool::PoolHeader h{};
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(&h), sizeof h);
  }
  h.layout_version = pool::kLayoutVersion + 1;
  h.checksum = pool::checksum64(&h, offsetof(pool::PoolHeader, checksum));
  poke(path, kHeaderCopy0, &h, sizeof h);
  poke(path, kHeaderCopy1, &h, sizeof h);
  const Outcome v2 = cairn_tool({"pool", "check", path});
  EXPECT_EQ(v2.exit_code, 2) << v2.output;
  EXPECT_OUT(v2, "layout version 3");

  // A FIFO would block an open(); a character device has no size.
  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0600), 0);
  for (const std::string& p : {dir.file("fifo"), std::string("/dev/null")}) {
    const Outcome f = cairn_tool({"pool", "check", p});
    EXPECT_EQ(f.exit_code, 2) << p << ": " << f.output;
    EXPECT_OUT(f, "not a regular file");
  }

  // info on what it cannot read: 2, no crash.
  for (const std::string& p : {dir.file("nope"), random, dir.file("short"), dir.path(), dir.file("fifo")}) {
    const Outcome i = cairn_tool({"pool", "info", p});
    EXPECT_TRUE(i.exited()) << p;
    EXPECT_EQ(i.exit_code, 2) << p << ": " << i.output;
  }
}

TEST(ToolCheck, PermissionDeniedIsTwo) {
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);
  const std::string path = make_pool(dir, "p");
  ::chmod(path.c_str(), 0600);
  // Root reads anything: run the tool as nobody then.
  const int uid = geteuid() == 0 ? 65534 : -1;
  if (uid < 0) ::chmod(path.c_str(), 0000);
  const Outcome r = cairn_tool({"pool", "check", path}, uid);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_OUT(r, "permission denied");
}

TEST(ToolHelp, EveryCommandHasHelpAndUsageErrorsDoNotCrash) {
  for (const char* cmd : {"create", "info", "check"}) {
    const Outcome h = cairn_tool({"pool", cmd, "--help"});
    EXPECT_EQ(h.exit_code, 0) << cmd << ": " << h.output;
    EXPECT_OUT(h, "Exit status");
    const Outcome none = cairn_tool({"pool", cmd});  // PATH missing
    EXPECT_TRUE(none.exited()) << cmd;
    EXPECT_NE(none.exit_code, 0) << cmd;
    EXPECT_OUT(none, "path is required");
  }
  const Outcome check_help = cairn_tool({"pool", "check", "--help"});
  EXPECT_OUT(check_help, "cairn magic");
  const Outcome bare = cairn_tool({"pool"});
  EXPECT_TRUE(bare.exited());
  EXPECT_NE(bare.exit_code, 0);
  const Outcome unknown = cairn_tool({"pool", "frobnicate"});
  EXPECT_TRUE(unknown.exited());
  EXPECT_NE(unknown.exit_code, 0);
}

// Every usage error exits 2, the status the apps give bad options (not
// CLI11's own codes: 106 for a missing subcommand or required option);
// --help exits 0.
TEST(ToolHelp, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> usage_errors = {
      {},                                         // no subcommand
      {"frobnicate"},                             // no such subcommand
      {"pool"},                                   // no pool subcommand
      {"pool", "info"},                           // PATH missing
      {"pool", "create", "x.pool", "--no-such"},  // unknown option
      {"launch", "--", "true"},                   // -n missing
      {"launch", "-n", "0", "--", "true"},        // -n out of range
      {"run"},                                    // no application
      {"run", "no-such-app"},                     // not found
  };
  for (const auto& args : usage_errors) {
    std::string line = "cairn";
    for (const auto& a : args) line += " " + a;
    const Outcome r = cairn_tool(args);
    EXPECT_TRUE(r.exited()) << line;
    EXPECT_EQ(r.exit_code, 2) << line << ":\n" << r.output;
  }
  const std::vector<std::vector<std::string>> helps = {{"--help"}, {"launch", "--help"}, {"run", "--help"}};
  for (const auto& args : helps) {
    const Outcome r = cairn_tool(args);
    EXPECT_EQ(r.exit_code, 0) << args.front() << ":\n" << r.output;
  }
}

// `cairn run APP ...`: every word after APP is the application's, --help and
// words that name cairn's own options or subcommands included; the exit
// status is the application's.
TEST(ToolRun, EverythingAfterTheAppGoesToTheApp) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("apps"));
  const std::string app = dir.file("apps/echo-args");
  {
    std::ofstream script(app);
    script << "#!/bin/sh\necho \"args: $*\"\nexit 7\n";
  }
  ASSERT_EQ(::chmod(app.c_str(), 0755), 0);
  ::setenv("CAIRN_APPS_DIR", dir.file("apps").c_str(), 1);
  const Outcome help = cairn_tool({"run", "echo-args", "--help"});
  const Outcome words = cairn_tool({"run", "echo-args", "--size", "3", "--list", "pool", "--", "x"});
  const Outcome list = cairn_tool({"run", "--list"});
  ::unsetenv("CAIRN_APPS_DIR");
  EXPECT_EQ(help.exit_code, 7) << help.output;
  EXPECT_OUT(help, "args: --help\n");
  EXPECT_EQ(words.exit_code, 7) << words.output;
  EXPECT_OUT(words, "args: --size 3 --list pool -- x\n");
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_OUT(list, "echo-args");
}

// Two separately built executables coupled through a pmem: stream: this test
// writes, the `cairn` binary reads (cat), lists, stages out and back in.
TEST(ToolStream, AnotherExecutableReadsListsAndStagesWhatThisOneCommitted) {
  TempDir dir;
  const std::string pool = dir.file("run.pool");
  ::setenv("CAIRN_STREAM_POOL_SIZE", "16M", 1);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += std::to_string(i) + " " + std::to_string(i * 0.25) + "\n";
  {
    auto s = stream::Stream::open("pmem:" + pool + "#fields/part-0", stream::Mode::write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    std::fputs(text.c_str(), s.value()->file());
    ASSERT_TRUE(s.value()->close().ok());
  }
  const Outcome cat = cairn_tool({"stream", "cat", "pmem:" + pool + "#fields/part-0"});
  ASSERT_EQ(cat.exit_code, 0) << cat.output;
  EXPECT_EQ(cat.output, text);
  const Outcome ls = cairn_tool({"stream", "ls", pool});
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_OUT(ls, "fields/part-0");
  EXPECT_OUT(ls, std::to_string(text.size()));
  const Outcome out = cairn_tool({"stage", "out", "pmem:" + pool, dir.file("pfs"), "-t", "2"});
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_OUT(out, "staged");
  EXPECT_OUT(out, "1 item(s)");
  std::ifstream f(dir.file("pfs/fields/part-0"));
  const std::string staged((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(staged, text);
  const Outcome in = cairn_tool({"stage", "in", dir.file("pfs"), "pmem:" + dir.file("back.pool"), "-q"});
  ASSERT_EQ(in.exit_code, 0) << in.output;
  const Outcome back = cairn_tool({"stream", "cat", "pmem:" + dir.file("back.pool") + "#fields/part-0"});
  EXPECT_EQ(back.output, text);
  const Outcome missing = cairn_tool({"stream", "cat", "pmem:" + pool + "#nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_OUT(missing, "not_found");
  EXPECT_OUT(missing, "nope");
}

}  // namespace
}  // namespace cairn
