// io_test.cpp — the atomic file write (util/io.hpp): every step's failure is
// typed, names the file and the step, leaves no temporary and the old file
// as it was; failures after the rename (the directory's open and fsync) are
// reported, never skipped. System calls fail on demand through
// tests/support/syscall_faults.
#include "util/io.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/syscall_faults.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::util {
namespace {

using cairn::testing::Syscall;
using cairn::testing::SyscallFault;
using cairn::testing::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void put(const std::string& path, const std::string& s) { std::ofstream(path, std::ios::binary) << s; }

std::span<const std::byte> bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::vector<std::string> names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(AtomicFile, ReplacesTheFileAndLeavesNoTemporary) {
  TempDir d;
  const std::string p = d.file("f");
  put(p, "old contents");
  WriteStep step = WriteStep::fsync;
  AtomicFileOptions o;
  o.mode = 0600;
  auto r = write_file_atomically(p, bytes("new"), o, &step);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(step, WriteStep::done);
  EXPECT_EQ(slurp(p), "new");
  EXPECT_EQ(names(d.path()), std::vector<std::string>{"f"});
  EXPECT_EQ(std::filesystem::status(p).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST(AtomicFile, AStaleTemporaryIsOverwritten) {
  TempDir d;
  put(d.file("f.tmp"), "a longer stale temporary from a crash");
  ASSERT_TRUE(write_file_atomically(d.file("f"), bytes("x")).ok());
  EXPECT_EQ(slurp(d.file("f")), "x");
  EXPECT_EQ(names(d.path()), std::vector<std::string>{"f"});
}

// A failure before the rename: typed, names the file, the step and what to do;
// the old file is intact and no temporary is left.
struct Before {
  WriteStep step;
  Errc code;
  const char* names_file;  // "tmp" or "path"
  const char* says;
};
void PrintTo(const Before& b, std::ostream* os) { *os << write_step_name(b.step); }

class AtomicFileBefore : public ::testing::TestWithParam<Before> {};

TEST_P(AtomicFileBefore, FailsTypedAndLeavesTheOldFile) {
  const Before b = GetParam();
  TempDir d;
  std::string p = d.file("f");
  put(p, "old");
  FillFd fill = [](int fd) { return pwrite_full(fd, "new", 3, 0); };
  std::unique_ptr<SyscallFault> fault;
  switch (b.step) {
    case WriteStep::create: p = d.file("missing/f"); break;
    case WriteStep::write: fill = [](int) { return ENOSPC; }; break;
    case WriteStep::fsync: fault = std::make_unique<SyscallFault>(Syscall::fsync, 1, EIO); break;
    case WriteStep::rename:
      // A non-empty directory cannot be replaced by a file.
      p = d.file("sub");
      std::filesystem::create_directory(p);
      put(p + "/x", "old");
      break;
    default: FAIL();
  }
  AtomicFileOptions o;
  o.what = "test version 7";
  WriteStep step = WriteStep::done;
  auto r = write_file_atomically(p, fill, o, &step);
  ASSERT_FALSE(r.ok());
  if (fault) {
    EXPECT_TRUE(fault->delivered());
  }
  EXPECT_EQ(step, b.step);
  EXPECT_EQ(r.error().code, b.code) << r.error().message;
  const std::string& m = r.error().message;
  EXPECT_TRUE(contains(m, std::string(b.names_file) == "tmp" ? p + ".tmp" : p)) << m;
  EXPECT_TRUE(contains(m, b.says)) << m;
  EXPECT_TRUE(contains(m, "test version 7")) << m;
  EXPECT_TRUE(contains(m, "is unchanged")) << m;
  EXPECT_FALSE(std::filesystem::exists(p + ".tmp"));
  if (b.step != WriteStep::create && b.step != WriteStep::rename) {
    EXPECT_EQ(slurp(p), "old");
  }
  for (const auto& n : names(d.path())) EXPECT_FALSE(contains(n, ".tmp")) << n << " left behind";
}

INSTANTIATE_TEST_SUITE_P(Steps, AtomicFileBefore,
                         ::testing::Values(Before{WriteStep::create, Errc::not_found, "tmp", "creating"},
                                           Before{WriteStep::write, Errc::device_full, "tmp", "free space"},
                                           Before{WriteStep::fsync, Errc::io_error, "tmp", "fsync of"},
                                           Before{WriteStep::rename, Errc::is_directory, "path", "renaming"}),
                         [](const ::testing::TestParamInfo<Before>& p) { return write_step_name(p.param.step); });

// After the rename: the new file is in place, and the failure to make the
// rename durable is reported, not skipped.
TEST(AtomicFile, ADirectoryThatCannotBeOpenedIsReported) {
  TempDir d;
  SyscallFault fault(Syscall::open_dir, 1, EACCES);
  WriteStep step = WriteStep::done;
  auto r = write_file_atomically(d.file("f"), bytes("new"), {}, &step);
  ASSERT_TRUE(fault.delivered());
  ASSERT_FALSE(r.ok()) << "a directory fsync that never happened was reported durable";
  EXPECT_EQ(step, WriteStep::open_dir);
  EXPECT_EQ(r.error().code, Errc::permission_denied);
  EXPECT_TRUE(contains(r.error().message, d.path() + ":")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "may not survive a power failure")) << r.error().message;
  EXPECT_EQ(slurp(d.file("f")), "new");
  EXPECT_EQ(names(d.path()), std::vector<std::string>{"f"});
}

TEST(AtomicFile, AFailedDirectoryFsyncIsReported) {
  TempDir d;
  SyscallFault fault(Syscall::fsync, 2, EIO);  // the temporary's, then the directory's
  WriteStep step = WriteStep::done;
  auto r = write_file_atomically(d.file("f"), bytes("new"), {}, &step);
  ASSERT_TRUE(fault.delivered());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(step, WriteStep::fsync_dir);
  EXPECT_EQ(r.error().code, Errc::io_error);
  EXPECT_TRUE(contains(r.error().message, "fsync of the directory")) << r.error().message;
}

TEST(AtomicFile, AGivenDirectoryDescriptorIsUsedAndLeftOpen) {
  TempDir d;
  const int dfd = ::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  AtomicFileOptions o;
  o.dir_fd = dfd;
  SyscallFault fault(Syscall::open_dir, 1, EACCES);  // would fail the write if the directory were opened
  ASSERT_TRUE(write_file_atomically(d.file("f"), bytes("new"), o).ok());
  EXPECT_FALSE(fault.delivered());
  EXPECT_EQ(::fsync(dfd), 0);
  ::close(dfd);
}

TEST(AtomicFile, TheCallersAdviceIsAppended) {
  TempDir d;
  AtomicFileOptions o;
  o.advice = [](Errc c) { return c == Errc::device_full ? std::string("lower --keep") : std::string(); };
  auto r = write_file_atomically(
      d.file("f"), [](int) { return ENOSPC; }, o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "; lower --keep")) << r.error().message;
}

TEST(AtomicFile, ByNameFillsThenSyncsAndRenames) {
  TempDir d;
  put(d.file("f"), "old");
  auto ok = write_file_atomically_by_name(d.file("f"), [](const std::string& tmp) -> Result<void> {
    put(tmp, "new");
    return {};
  });
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(slurp(d.file("f")), "new");
  // A failed fill: its own error, the temporary removed, the old file intact.
  WriteStep step = WriteStep::done;
  auto bad = write_file_atomically_by_name(
      d.file("f"),
      [](const std::string& tmp) -> Result<void> {
        put(tmp, "half");
        return make_error(Errc::io_error, tmp + ": the library failed");
      },
      {}, &step);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(step, WriteStep::write);
  EXPECT_EQ(bad.error().message, d.file("f.tmp") + ": the library failed");
  EXPECT_EQ(slurp(d.file("f")), "new");
  EXPECT_EQ(names(d.path()), std::vector<std::string>{"f"});
  // A failed fsync of what the library wrote.
  SyscallFault fault(Syscall::fsync, 1, EIO);
  auto unsynced = write_file_atomically_by_name(
      d.file("f"),
      [](const std::string& tmp) -> Result<void> {
        put(tmp, "newer");
        return {};
      },
      {}, &step);
  ASSERT_TRUE(fault.delivered());
  ASSERT_FALSE(unsynced.ok());
  EXPECT_EQ(step, WriteStep::fsync);
  EXPECT_EQ(slurp(d.file("f")), "new");
  EXPECT_EQ(names(d.path()), std::vector<std::string>{"f"});
}

}  // namespace
}  // namespace cairn::util
