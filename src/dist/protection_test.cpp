// protection_test.cpp — the pieces of dist's redundancy that need no MPI:
// slot files (partner copies, parity segments) and the flushed versions.
#include "dist/protection.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "tests/support/syscall_faults.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using cairn::Errc;
using cairn::dist::detail::PfsFlusher;
using cairn::dist::detail::SlotFile;
using cairn::testing::TempDir;

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 17) & 0xff);
  return v;
}

std::uint64_t checksum_of(const std::vector<std::byte>& v) {
  return cairn::dist::detail::payload_checksum(cairn::dist::detail::block_hashes(v.data(), v.size()));
}

constexpr std::size_t kBytes = 3 * cairn::dist::RankStore::kBlock;

TEST(SlotFile, TwoVersionsSurviveReopenAndVerify) {
  TempDir dir;
  const std::string path = dir.file("copy.pool");
  const auto v5 = pattern(kBytes, 5), v6 = pattern(kBytes, 6);
  {
    auto f = SlotFile::open(path, SlotFile::Kind::partner, 2, 1, 4, kBytes).value();
    EXPECT_EQ(f->held(0), 0u);
    EXPECT_EQ(f->held(1), 0u);
    for (const auto* v : {&v5, &v6}) {
      const std::uint64_t version = v == &v5 ? 5 : 6;
      ASSERT_TRUE(f->begin(version).ok());
      std::memcpy(f->data(static_cast<int>(version % 2)), v->data(), kBytes);
      ASSERT_TRUE(f->publish(version, checksum_of(*v)).ok());
    }
  }
  auto f = SlotFile::open(path, SlotFile::Kind::partner, 2, 1, 4, kBytes).value();
  EXPECT_EQ(f->held(1), 5u);
  EXPECT_EQ(f->held(0), 6u);
  EXPECT_TRUE(f->verify(0));
  EXPECT_TRUE(f->verify(1));
  EXPECT_EQ(std::memcmp(f->data(1), v5.data(), kBytes), 0);
  EXPECT_EQ(std::memcmp(f->data(0), v6.data(), kBytes), 0);
}

// Writing version 7 into slot 1 empties it first: a crash before publish
// leaves version 6 and an empty slot, never half of 5 and half of 7.
TEST(SlotFile, ASlotBeingRewrittenHoldsNoVersion) {
  TempDir dir;
  const std::string path = dir.file("copy.pool");
  const auto v = pattern(kBytes, 1);
  {
    auto f = SlotFile::open(path, SlotFile::Kind::parity, 0, 0, 2, kBytes).value();
    for (std::uint64_t version : {5, 6}) {
      ASSERT_TRUE(f->begin(version).ok());
      std::memcpy(f->data(static_cast<int>(version % 2)), v.data(), kBytes);
      ASSERT_TRUE(f->publish(version, checksum_of(v)).ok());
    }
    ASSERT_TRUE(f->begin(7).ok());
    std::memset(f->data(1), 0xab, kBytes / 2);  // and the process dies here
  }
  auto f = SlotFile::open(path, SlotFile::Kind::parity, 0, 0, 2, kBytes).value();
  EXPECT_EQ(f->held(0), 6u);
  EXPECT_EQ(f->held(1), 0u);
}

TEST(SlotFile, DamagedBytesFailTheChecksum) {
  TempDir dir;
  const std::string path = dir.file("copy.pool");
  const auto v = pattern(kBytes, 3);
  {
    auto f = SlotFile::open(path, SlotFile::Kind::partner, 1, 0, 2, kBytes).value();
    ASSERT_TRUE(f->begin(4).ok());
    std::memcpy(f->data(0), v.data(), kBytes);
    ASSERT_TRUE(f->publish(4, checksum_of(v)).ok());
    f->data(0)[kBytes - 1] ^= std::byte{1};  // one bit, in the last block
  }
  auto f = SlotFile::open(path, SlotFile::Kind::partner, 1, 0, 2, kBytes).value();
  EXPECT_EQ(f->held(0), 4u);
  EXPECT_FALSE(f->verify(0));
}

TEST(SlotFile, AnotherJobsFileIsRefusedByName) {
  TempDir dir;
  const std::string path = dir.file("copy.pool");
  ASSERT_TRUE(SlotFile::open(path, SlotFile::Kind::partner, 1, 0, 2, kBytes).ok());
  for (auto [kind, source, nranks, bytes] :
       {std::tuple{SlotFile::Kind::parity, 0, 2, kBytes}, std::tuple{SlotFile::Kind::partner, 3, 2, kBytes},
        std::tuple{SlotFile::Kind::partner, 0, 4, kBytes}, std::tuple{SlotFile::Kind::partner, 0, 2, 2 * kBytes}}) {
    auto f = SlotFile::open(path, kind, 1, source, nranks, bytes);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.error().code, Errc::corrupted);
    EXPECT_NE(f.error().message.find(path), std::string::npos) << f.error().message;
    EXPECT_NE(f.error().message.find("remove it to start over"), std::string::npos) << f.error().message;
  }
  std::ofstream(dir.file("junk.pool")) << "not a pool";
  EXPECT_FALSE(SlotFile::open(dir.file("junk.pool"), SlotFile::Kind::partner, 1, 0, 2, kBytes).ok());
}

TEST(PfsFlusher, KeepsTheTwoNewestCompleteVersions) {
  TempDir dir;
  PfsFlusher f(dir.path(), "job", 1, 3);
  for (std::uint64_t v : {10, 20, 30}) {
    ASSERT_TRUE(f.start(v, pattern(kBytes + 5, static_cast<unsigned>(v))).ok());
    ASSERT_TRUE(f.wait().ok());
  }
  EXPECT_EQ(f.versions(), (std::vector<std::uint64_t>{30, 20}));
  std::vector<std::byte> back(kBytes + 5);
  ASSERT_TRUE(f.read(20, back).ok());
  EXPECT_EQ(back, pattern(kBytes + 5, 20));
  // An unfinished flush (its temporary file) is not a version.
  std::ofstream(f.file(40) + ".tmp") << "partial";
  EXPECT_EQ(f.versions(), (std::vector<std::uint64_t>{30, 20}));
  // Another rank's files are not this rank's.
  PfsFlusher other(dir.path(), "job", 2, 3);
  EXPECT_TRUE(other.versions().empty());
}

TEST(PfsFlusher, DamagedTruncatedOrForeignFilesAreCorrupted) {
  TempDir dir;
  PfsFlusher f(dir.path(), "job", 0, 2);
  ASSERT_TRUE(f.start(7, pattern(kBytes, 7)).ok());
  ASSERT_TRUE(f.wait().ok());
  std::vector<std::byte> back(kBytes);
  {
    std::fstream io(f.file(7), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(64 + 1000);
    io.put('x');
  }
  auto r = f.read(7, back);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::corrupted);
  EXPECT_NE(r.error().message.find("checksum"), std::string::npos) << r.error().message;
  std::filesystem::resize_file(f.file(7), 64 + kBytes / 2);
  r = f.read(7, back);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
  std::vector<std::byte> other_size(kBytes * 2);
  EXPECT_EQ(f.read(7, other_size).error().code, Errc::corrupted);
}

// A flush is written atomically (util::write_file_atomically): a flushed
// version whose directory cannot be opened for its fsync, or whose directory
// fsync fails, is reported failed (the flusher once skipped the fsync when
// the open failed); a failed write leaves no temporary and no new version.
TEST(PfsFlusher, AFlushNotMadeDurableFailsNamingTheDirectory) {
  using cairn::testing::Syscall;
  using cairn::testing::SyscallFault;
  TempDir dir;
  {
    PfsFlusher f(dir.path(), "job", 0, 2);
    ASSERT_TRUE(f.start(1, pattern(kBytes, 1)).ok());
    ASSERT_TRUE(f.wait().ok());
    SyscallFault fault(Syscall::open_dir, 1, EACCES);
    ASSERT_TRUE(f.start(2, pattern(kBytes, 2)).ok());
    auto r = f.wait();
    ASSERT_TRUE(fault.delivered());
    ASSERT_FALSE(r.ok()) << "a flush whose directory was never fsynced was reported durable";
    EXPECT_EQ(r.error().code, Errc::permission_denied) << r.error().message;
    EXPECT_NE(r.error().message.find(dir.path() + ": "), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("flushed version 2"), std::string::npos) << r.error().message;
    // The failure is reported again to the next flush, which does not start.
    EXPECT_FALSE(f.start(3, pattern(kBytes, 3)).ok());
  }
  {
    PfsFlusher f(dir.path(), "job", 1, 2);
    SyscallFault fault(Syscall::fsync, 2, EIO);  // the file's, then the directory's
    ASSERT_TRUE(f.start(3, pattern(kBytes, 3)).ok());
    auto r = f.wait();
    ASSERT_TRUE(fault.delivered());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::io_error) << r.error().message;
    EXPECT_NE(r.error().message.find("fsync of the directory"), std::string::npos) << r.error().message;
  }
  {
    PfsFlusher f(dir.path(), "other", 0, 2);
    SyscallFault fault(Syscall::fsync, 1, EIO);
    ASSERT_TRUE(f.start(4, pattern(kBytes, 4)).ok());
    auto r = f.wait();
    ASSERT_TRUE(fault.delivered());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(f.file(4) + ".tmp"), std::string::npos) << r.error().message;
    EXPECT_FALSE(std::filesystem::exists(f.file(4) + ".tmp"));
    EXPECT_FALSE(std::filesystem::exists(f.file(4)));
    EXPECT_TRUE(f.versions().empty());
  }
}

}  // namespace

// "{numa}" in a storage directory. This machine may have one NUMA node; the
// relaunch onto another node is reached through $CAIRN_NUMA_NODE where the
// machine has more than one.
TEST(NumaDir, TheTokenBecomesTheRanksNodeAndAFileElsewhereIsFound) {
  using cairn::dist::detail::numa_dir;
  using cairn::dist::detail::numa_dirs;
  TempDir dir;
  cairn::dist::detail::Topology t;
  ::unsetenv("CAIRN_NUMA_NODE");
  const auto plain = numa_dir(dir.file("pm"), t, "job.n1.r0.");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain.value(), dir.file("pm"));
  EXPECT_EQ(numa_dirs(dir.file("pm")), std::vector<std::string>{dir.file("pm")});

  // The node of the CPU the test runs on (it may move between nodes, so any
  // node's directory will do, with every token replaced alike).
  const auto all = numa_dirs(dir.file("pm{numa}/x{numa}"));
  ASSERT_FALSE(all.empty());
  const auto here = numa_dir(dir.file("pm{numa}/x{numa}"), t, "job.n1.r0.");
  ASSERT_TRUE(here.ok());
  EXPECT_NE(std::find(all.begin(), all.end(), here.value()), all.end()) << here.value();
  unsigned cpu = 0, node = 0;
  ASSERT_EQ(::getcpu(&cpu, &node), 0);
  EXPECT_NE(std::find(all.begin(), all.end(), dir.file("pm" + std::to_string(node) + "/x" + std::to_string(node))),
            all.end());

  // Simulated nodes: the node directory goes below the NUMA one.
  t.simulated = true;
  t.node = 1;
  const auto nodes = numa_dirs(dir.file("pm{numa}"));
  ::setenv("CAIRN_NUMA_NODE", nodes.back().substr(dir.file("pm").size()).c_str(), 1);
  const std::string last = nodes.back();
  const auto sim = numa_dir(dir.file("pm{numa}"), t, "job.n2.r1.");
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ(sim.value(), last);
  // The rank's files already under another node's directory are used there.
  if (nodes.size() > 1) {
    std::filesystem::create_directories(nodes.front() + "/node1");
    std::ofstream(nodes.front() + "/node1/job.n2.r1.a.pool") << "x";
    EXPECT_EQ(numa_dir(dir.file("pm{numa}"), t, "job.n2.r1.").value(), nodes.front());
    EXPECT_EQ(numa_dir(dir.file("pm{numa}"), t, "job.n2.r0.").value(), last);  // another rank's: its own node
  }

  ::setenv("CAIRN_NUMA_NODE", "9999", 1);
  const auto bad = numa_dir(dir.file("pm{numa}"), t, "job.n2.r1.");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::invalid_argument);
  EXPECT_NE(bad.error().message.find("CAIRN_NUMA_NODE=9999"), std::string::npos);
  ::setenv("CAIRN_NUMA_NODE", "0x", 1);
  EXPECT_FALSE(numa_dir(dir.file("pm{numa}"), t, "job.n2.r1.").ok());
  ::unsetenv("CAIRN_NUMA_NODE");
}
