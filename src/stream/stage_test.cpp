// stage_test.cpp — staging's durability and refusals: stage out writes a
// temporary, fsyncs it, renames it into place and fsyncs the directory (never
// truncating a destination in place, leaving it as it was when a step
// fails); stage in commits only a whole, unchanged copy of a file. System
// calls fail on demand (tests/support/syscall_faults), and a read hook
// changes a source file between the reads of a stage.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cairn/stream.hpp"
#include "stream/testing.hpp"
#include "tests/support/syscall_faults.hpp"
#include "tests/support/temp_dir.hpp"

namespace cs = cairn::stream;
namespace fs = std::filesystem;
using cairn::Errc;
using cairn::testing::Syscall;
using cairn::testing::SyscallFault;

namespace {

std::string text_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void put_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

void write_stream(const std::string& uri, const std::string& text) {
  auto s = cs::Stream::open(uri, cs::Mode::write);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), s.value()->file()), text.size());
  ASSERT_TRUE(s.value()->close().ok());
}

std::string read_stream(const std::string& uri) {
  auto s = cs::Stream::open(uri, cs::Mode::read);
  if (!s.ok()) return "<" + s.error().message + ">";
  const auto v = s.value()->view();
  return std::string(reinterpret_cast<const char*>(v.data()), v.size());
}

// Files under `dir` whose name ends in ".tmp".
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->path().extension() == ".tmp") out.push_back(it->path().string());
  return out;
}

class Staging : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("CAIRN_STREAM_POOL_SIZE", "16M", 1); }
  void TearDown() override { cs::detail::set_stage_read_hook({}); }
  std::string pool() const { return dir_.file("s.pool"); }
  std::string uri(const std::string& name) const { return "pmem:" + pool() + "#" + name; }
  cairn::testing::TempDir dir_;
};

// The destination is replaced by a new file (a reader of the old one keeps
// it), never truncated and rewritten in place.
TEST_F(Staging, StageOutReplacesTheDestinationByRename) {
  write_stream(uri("mesh/part-0"), "new contents");
  const std::string dest = dir_.file("pfs/mesh/part-0");
  put_file(dest, "old contents, longer than the new");
  const int old_fd = ::open(dest.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(old_fd, 0);
  auto out = cs::stage_out("pmem:" + pool(), dir_.file("pfs"));
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(text_of(dest), "new contents");
  char buf[64] = {};
  EXPECT_EQ(::pread(old_fd, buf, sizeof buf - 1, 0), 33);
  EXPECT_STREQ(buf, "old contents, longer than the new") << "the destination was rewritten in place";
  ::close(old_fd);
  EXPECT_TRUE(temporaries(dir_.file("pfs")).empty());
}

// A stage whose copy cannot be made durable replaces nothing.
TEST_F(Staging, AFailedFsyncLeavesEveryDestinationAsItWas) {
  write_stream(uri("a"), "new a");
  write_stream(uri("b"), "new b");
  put_file(dir_.file("pfs/a"), "old a");
  put_file(dir_.file("pfs/b"), "old b");
  SyscallFault fault(Syscall::fsync, 2, EIO);  // b's copy
  auto out = cs::stage_out("pmem:" + pool(), dir_.file("pfs"));
  ASSERT_TRUE(fault.delivered());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, Errc::io_error) << out.error().message;
  EXPECT_NE(out.error().message.find(dir_.file("pfs/b")), std::string::npos) << out.error().message;
  EXPECT_EQ(text_of(dir_.file("pfs/a")), "old a");
  EXPECT_EQ(text_of(dir_.file("pfs/b")), "old b");
  EXPECT_TRUE(temporaries(dir_.file("pfs")).empty());
}

// The renames are made durable by the directory's fsync; a directory that
// cannot be opened for it is reported, not skipped.
TEST_F(Staging, ADirectoryThatCannotBeSyncedIsReported) {
  write_stream(uri("x"), "x");
  SyscallFault fault(Syscall::open_dir, 1, EACCES);
  auto out = cs::stage_out("pmem:" + pool(), dir_.file("pfs"));
  ASSERT_TRUE(fault.delivered()) << "stage out never opened the directory to fsync it";
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, Errc::permission_denied) << out.error().message;
  EXPECT_NE(out.error().message.find(dir_.file("pfs")), std::string::npos) << out.error().message;
}

// A file that shrinks while it is staged in: refused, the stream keeps its
// version.
TEST_F(Staging, StageInRefusesAFileThatShrinks) {
  write_stream(uri("f"), "version 1");
  const std::string src = dir_.file("in/f");
  put_file(src, std::string(100000, 'x'));
  cs::detail::set_stage_read_hook([&](const std::string& path, std::uint64_t off) {
    if (path == src && off == 0) (void)!::truncate(src.c_str(), 1000);  // as another process would
  });
  auto in = cs::stage_in(src, uri("f"));
  ASSERT_FALSE(in.ok()) << "a truncated file was committed";
  EXPECT_EQ(in.error().code, Errc::truncated) << in.error().message;
  EXPECT_NE(in.error().message.find(src), std::string::npos) << in.error().message;
  EXPECT_EQ(read_stream(uri("f")), "version 1");
}

// A file that grows while it is staged in (still being written): refused.
TEST_F(Staging, StageInRefusesAFileThatGrows) {
  write_stream(uri("g"), "version 1");
  const std::string src = dir_.file("in/g");
  put_file(src, std::string(5000, 'y'));
  cs::detail::set_stage_read_hook([&](const std::string& path, std::uint64_t off) {
    if (path == src && off == 5000) std::ofstream(src, std::ios::app) << "more";
  });
  auto in = cs::stage_in(src, uri("g"));
  ASSERT_FALSE(in.ok()) << "the first part of a growing file was committed";
  EXPECT_EQ(in.error().code, Errc::busy) << in.error().message;
  EXPECT_EQ(read_stream(uri("g")), "version 1");
  // Once it stops changing it stages in.
  cs::detail::set_stage_read_hook({});
  ASSERT_TRUE(cs::stage_in(src, uri("g")).ok());
  EXPECT_EQ(read_stream(uri("g")), std::string(5000, 'y') + "more");
}

// A file whose size does not tell its contents (procfs reports 0 bytes)
// is not committed as an empty stream.
TEST_F(Staging, StageInRefusesAFileWhoseSizeIsNotItsContents) {
  if (!fs::exists("/proc/self/status")) GTEST_SKIP() << "no /proc";
  auto in = cs::stage_in("/proc/self/status", uri("status"));
  ASSERT_FALSE(in.ok()) << "committed " << read_stream(uri("status")).size() << " bytes";
  EXPECT_EQ(in.error().code, Errc::busy) << in.error().message;
}

// Into a directory, the same checks, and a destination left as it was.
TEST_F(Staging, StageInToADirectoryRefusesAFileThatShrinks) {
  const std::string src = dir_.file("in/h");
  put_file(src, std::string(20000, 'z'));
  put_file(dir_.file("out/h"), "old h");
  cs::detail::set_stage_read_hook([&](const std::string& path, std::uint64_t off) {
    if (path == src && off == 0) (void)!::truncate(src.c_str(), 10);
  });
  auto in = cs::stage_in(dir_.file("in"), dir_.file("out"));
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.error().code, Errc::truncated) << in.error().message;
  EXPECT_EQ(text_of(dir_.file("out/h")), "old h");
  EXPECT_TRUE(temporaries(dir_.file("out")).empty());
}

}  // namespace
