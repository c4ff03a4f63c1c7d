// protection_test.cpp — the pieces of dist's redundancy that need no MPI:
// slot files (partner copies, parity segments) and the flushed versions.
#include "dist/protection.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <tuple>

#include "cairn/extended/device.hpp"
#include "dist/heartbeat.hpp"
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
  PfsFlusher f(dir.path(), "job", 0, 1);
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

// Retention is coordinated through the directory: rank 2 of 3 lags (it
// completed version 10 only), so ranks 0 and 1 keep every version from 10 on
// however many they flush after it; once rank 2 catches up, the versions
// before the one preceding the newest common one go. (Each rank once kept its
// own two newest: ranks 0 and 1 deleted 10 and no version was complete on
// every rank.)
TEST(PfsFlusher, ALaggingRankMakesTheOthersKeepTheNewestCommonVersion) {
  TempDir dir;
  PfsFlusher r0(dir.path(), "job", 0, 3), r1(dir.path(), "job", 1, 3), r2(dir.path(), "job", 2, 3);
  auto flush = [](PfsFlusher& f, std::uint64_t v) {
    ASSERT_TRUE(f.start(v, pattern(100, static_cast<unsigned>(v))).ok());
    ASSERT_TRUE(f.wait().ok());
  };
  for (std::uint64_t v : {10, 20, 30, 40, 50}) {
    flush(r0, v);
    flush(r1, v);
    if (v == 10) flush(r2, v);
  }
  EXPECT_EQ(r0.complete_everywhere(), std::vector<std::uint64_t>{10});
  EXPECT_EQ(r0.versions(), (std::vector<std::uint64_t>{50, 40, 30, 20, 10}));
  EXPECT_EQ(r1.versions(), (std::vector<std::uint64_t>{50, 40, 30, 20, 10}));
  EXPECT_EQ(r2.versions(), std::vector<std::uint64_t>{10});
  std::vector<std::byte> back(100);
  for (auto* f : {&r0, &r1, &r2}) EXPECT_TRUE(f->read(10, back).ok());
  // Rank 2 catches up with 40 and 50: 40 is the version before the newest
  // common one, so every rank keeps 40 and 50 (rank 2 deletes 10 after its
  // flush of 50, ranks 0 and 1 their older ones after their next flush).
  flush(r2, 40);
  EXPECT_EQ(r2.versions(), (std::vector<std::uint64_t>{40, 10}));
  flush(r2, 50);
  EXPECT_EQ(r0.complete_everywhere(), (std::vector<std::uint64_t>{50, 40}));
  EXPECT_EQ(r2.versions(), (std::vector<std::uint64_t>{50, 40}));
  flush(r0, 60);
  EXPECT_EQ(r0.versions(), (std::vector<std::uint64_t>{60, 50, 40}));
  // A version that is no longer complete on every rank (a file removed) is
  // not counted, and an unfinished flush is no file of a version.
  std::ofstream(r1.file(60) + ".tmp") << "partial";
  EXPECT_EQ(r0.complete_everywhere(), (std::vector<std::uint64_t>{50, 40}));
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

// ---- hostile and damaged files: a typed error or the identical state ----

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spill(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Damage {
  std::size_t byte = 0;
  int bit = -1;  // -1: a truncation to `byte` bytes
  std::string what() const {
    return bit >= 0 ? "bit " + std::to_string(bit) + " of byte " + std::to_string(byte)
                    : "truncation to " + std::to_string(byte) + " bytes";
  }
};

// `flips` single-bit flips of non-zero bytes of `image` (a fixed xorshift
// sequence) and the truncations `cuts`.
std::vector<Damage> sample_damage(const std::vector<char>& image, int flips, const std::vector<std::size_t>& cuts) {
  std::vector<std::size_t> nonzero;
  for (std::size_t i = 0; i < image.size(); ++i)
    if (image[i] != 0) nonzero.push_back(i);
  std::vector<Damage> out;
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  for (int i = 0; i < flips && !nonzero.empty(); ++i)
    out.push_back({nonzero[next() % nonzero.size()], static_cast<int>(next() % 8)});
  for (std::size_t c : cuts) out.push_back({c, -1});
  return out;
}

// Writes each damaged copy of `image` to `path` and runs `check` in a child:
// it returns 10 (the identical state), 12 (a typed error) or 11 (a silently
// different state). A signal, a hang (30 s) or 11 fails the test.
void sweep(const std::string& path, const std::vector<char>& image, const std::vector<Damage>& cases,
           const std::function<int()>& check, const char* format) {
  int identical = 0, typed = 0;
  for (const Damage& d : cases) {
    std::vector<char> damaged = image;
    if (d.bit >= 0)
      damaged[d.byte] = static_cast<char>(damaged[d.byte] ^ (1 << d.bit));
    else
      damaged.resize(d.byte);
    spill(path, damaged);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::alarm(30);
      ::_exit(check());
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_FALSE(WIFSIGNALED(status)) << d.what() << ": signal " << WTERMSIG(status);
    ASSERT_TRUE(WIFEXITED(status)) << d.what();
    EXPECT_NE(WEXITSTATUS(status), 11) << d.what() << ": silently different state";
    EXPECT_TRUE(WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 12 || WEXITSTATUS(status) == 11)
        << d.what() << ": exit " << WEXITSTATUS(status);
    identical += WEXITSTATUS(status) == 10;
    typed += WEXITSTATUS(status) == 12;
  }
  std::cout << format << " bit-flip sweep: " << cases.size() << " cases, " << identical << " identical, " << typed
            << " typed errors\n";
}

// A typed error names the file: 12, else 13 (an error without its file).
int typed(const cairn::Error& e, const std::string& path) {
  return e.code != Errc::ok && e.message.find(path) != std::string::npos ? 12 : 13;
}

TEST(SlotFile, BitFlipSweepGivesATypedErrorOrTheIdenticalCopy) {
  TempDir dir;
  const std::string path = dir.file("copy.pool");
  constexpr std::size_t kSmall = 5000;
  const auto v5 = pattern(kSmall, 5), v6 = pattern(kSmall, 6);
  {
    auto f = SlotFile::open(path, SlotFile::Kind::partner, 1, 0, 2, kSmall).value();
    for (const auto* v : {&v5, &v6}) {
      const std::uint64_t version = v == &v5 ? 5 : 6;
      ASSERT_TRUE(f->begin(version).ok());
      std::memcpy(f->data(static_cast<int>(version % 2)), v->data(), kSmall);
      ASSERT_TRUE(f->publish(version, checksum_of(*v)).ok());
    }
  }
  const auto image = slurp(path);
  // A rebuild uses a slot only when it holds the version and verifies:
  // a slot that fails verify() is damage detected.
  auto check = [&] {
    auto f = SlotFile::open(path, SlotFile::Kind::partner, 1, 0, 2, kSmall);
    if (!f.ok()) return typed(f.error(), path);
    bool detected = false;
    for (int slot = 0; slot < 2; ++slot) {
      const std::uint64_t want = slot == 0 ? 6 : 5;
      const auto& bytes = slot == 0 ? v6 : v5;
      if (f.value()->held(slot) != want) return 11;
      if (!f.value()->verify(slot)) {
        detected = true;
        continue;
      }
      if (std::memcmp(f.value()->data(slot), bytes.data(), kSmall) != 0) return 11;
    }
    return detected ? 12 : 10;
  };
  sweep(path, image, sample_damage(image, 150, {0, 100, 4096, 65536, 70000, image.size() / 2, image.size() - 4096}),
        check, "slot file");
}

TEST(PfsFlusher, BitFlipSweepGivesATypedErrorOrTheIdenticalPayload) {
  TempDir dir;
  PfsFlusher f(dir.path(), "job", 1, 2);
  const auto payload = pattern(3000, 9);
  ASSERT_TRUE(f.start(4, std::vector<std::byte>(payload)).ok());
  ASSERT_TRUE(f.wait().ok());
  const std::string path = f.file(4);
  const auto image = slurp(path);
  ASSERT_EQ(image.size(), 64 + payload.size());
  auto check = [&] {
    // Both ways of reading: the size known (dist) and recorded (amr-mpi).
    bool error = false;
    for (const bool sized : {true, false}) {
      std::vector<std::byte> back(sized ? payload.size() : 0);
      auto r = f.read(4, back);
      if (!r.ok()) {
        if (typed(r.error(), path) != 12) return 13;
        error = true;
        continue;
      }
      if (back != payload) return 11;
    }
    return error ? 12 : 10;
  };
  std::vector<Damage> cases = sample_damage(image, 150, {0, 8, 63, 64, 65, 1000, image.size() - 1});
  for (std::size_t i = 0; i < 64; ++i) cases.push_back({i, static_cast<int>(i % 8)});  // the header, every byte
  sweep(path, image, cases, check, "flushed version");
}

TEST(PfsFlusher, AForeignOrOlderFileIsTypedAndAHugeVersionNameIsSkipped) {
  TempDir dir;
  PfsFlusher f(dir.path(), "job", 0, 2);
  ASSERT_TRUE(f.start(3, pattern(100, 3)).ok());
  ASSERT_TRUE(f.wait().ok());
  auto image = slurp(f.file(3));
  std::vector<std::byte> back;
  image[12] ^= 1;  // rank
  spill(f.file(3), image);
  EXPECT_EQ(f.read(3, back).error().code, Errc::corrupted);
  EXPECT_TRUE(back.empty());
  image[12] ^= 1;
  image[8] = 2;  // format
  spill(f.file(3), image);
  EXPECT_EQ(f.read(3, back).error().code, Errc::wrong_version);
  image[0] ^= 0x40;  // magic
  spill(f.file(3), image);
  EXPECT_EQ(f.read(3, back).error().code, Errc::foreign_file);
  spill(f.file(3), std::vector<char>(10, 'x'));
  EXPECT_EQ(f.read(3, back).error().code, Errc::truncated);
  // A version number no integer holds is no version (std::stoull threw).
  std::ofstream(dir.file("job.n2.r0.v99999999999999999999999.ckpt")) << "x";
  EXPECT_EQ(f.versions(), std::vector<std::uint64_t>{3});
}

// Partner copies and parity on the fault device: a failed flush, drain or
// copy while version 7 is written must fail begin or publish, later
// publishes too (poisoned), and a fresh open must find version 6 bit for bit
// (and slot 1 empty or holding 5, never 7).
void sweep_slot_faults(const char* kind) {
  TempDir dir;
  constexpr std::size_t kSmall = 3 * 4096 + 100;
  const auto v5 = pattern(kSmall, 5), v6 = pattern(kSmall, 6), v7 = pattern(kSmall, 7);
  int failed = 0;
  for (std::uint64_t n = 1; n < 1000; ++n) {
    const std::string path = dir.file(std::string(kind) + std::to_string(n) + ".pool");
    {
      auto f = SlotFile::open(path, SlotFile::Kind::parity, 0, 0, 2, kSmall).value();
      for (const auto* v : {&v5, &v6}) {
        const std::uint64_t version = v == &v5 ? 5 : 6;
        ASSERT_TRUE(f->begin(version).ok());
        std::memcpy(f->data(static_cast<int>(version % 2)), v->data(), kSmall);
        ASSERT_TRUE(f->publish(version, checksum_of(*v)).ok());
      }
    }
    auto injector = std::make_shared<cairn::devices::FaultInjector>();
    bool tripped = false;
    {
      auto f =
          SlotFile::open(path, SlotFile::Kind::parity, 0, 0, 2, kSmall, cairn::devices::make_fault_device(injector));
      ASSERT_TRUE(f.ok()) << f.error().message;
      cairn::devices::FaultPlan plan;
      (std::string(kind) == "flush" ? plan.flush : std::string(kind) == "drain" ? plan.drain : plan.copy) = n;
      injector->arm(plan);
      auto r = f.value()->begin(7);
      if (r.ok()) {
        std::memcpy(f.value()->data(1), v7.data(), kSmall);
        r = f.value()->publish(7, checksum_of(v7));
      }
      tripped = injector->counts().failed > 0;
      if (!tripped) {
        ASSERT_TRUE(r.ok()) << r.error().message;
        if (n > 1) break;  // the sweep is past the calls that writing 7 makes
      } else {
        ++failed;
        ASSERT_FALSE(r.ok()) << kind << " call " << n << " failed, yet version 7 was published";
        EXPECT_TRUE(r.error().code == Errc::poisoned || r.error().code == Errc::io_error) << r.error().message;
        injector->arm({});
        EXPECT_FALSE(f.value()->publish(7, checksum_of(v7)).ok()) << "a publish after a failed write-back";
      }
    }
    auto f = SlotFile::open(path, SlotFile::Kind::parity, 0, 0, 2, kSmall);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f.value()->held(0), 6u);
    EXPECT_TRUE(f.value()->verify(0));
    EXPECT_EQ(std::memcmp(f.value()->data(0), v6.data(), kSmall), 0);
    if (tripped) {
      EXPECT_NE(f.value()->held(1), 7u) << kind << " call " << n;
      if (f.value()->held(1) == 5) {
        EXPECT_TRUE(f.value()->verify(1));
      }
    } else {
      EXPECT_EQ(f.value()->held(1), 7u);
      EXPECT_EQ(std::memcmp(f.value()->data(1), v7.data(), kSmall), 0);
    }
  }
  std::cout << kind << ": " << failed << " failed write-backs, each failing the slot's commit\n";
  EXPECT_GT(failed, 0) << "no " << kind << " call was reached";
}

TEST(SlotFile, AFailedFlushFailsThePublishAndTheOldVersionStays) { sweep_slot_faults("flush"); }
TEST(SlotFile, AFailedDrainFailsThePublishAndTheOldVersionStays) { sweep_slot_faults("drain"); }

// The flushed versions are files: a failed write, fsync or rename of version
// 3 fails the flush and leaves version 2 readable bit for bit.
TEST(PfsFlusher, AFailedFlushLeavesThePreviousVersionBitForBit) {
  using cairn::testing::Syscall;
  using cairn::testing::SyscallFault;
  for (const auto& [call, nth] : {std::pair{Syscall::fsync, 1}, std::pair{Syscall::rename, 1}}) {
    TempDir dir;
    PfsFlusher f(dir.path(), "job", 0, 2);
    ASSERT_TRUE(f.start(2, pattern(5000, 2)).ok());
    ASSERT_TRUE(f.wait().ok());
    {
      SyscallFault fault(call, nth, EIO);
      ASSERT_TRUE(f.start(3, pattern(5000, 3)).ok());
      EXPECT_FALSE(f.wait().ok());
      EXPECT_TRUE(fault.delivered());
    }
    PfsFlusher fresh(dir.path(), "job", 0, 2);
    EXPECT_EQ(fresh.versions(), std::vector<std::uint64_t>{2});
    std::vector<std::byte> back;
    ASSERT_TRUE(fresh.read(2, back).ok());
    EXPECT_EQ(back, pattern(5000, 2));
  }
}

// ---- heartbeat files ----

using cairn::dist::detail::Heartbeat;
using cairn::dist::detail::heartbeat_record;
using cairn::dist::detail::parse_heartbeat;

std::vector<std::byte> record_bytes(const Heartbeat& h) {
  const auto r = heartbeat_record(h);
  std::vector<std::byte> out(sizeof r);
  std::memcpy(out.data(), &r, sizeof r);
  return out;
}

TEST(Heartbeat, WrittenAndReadBack) {
  TempDir dir;
  ::setenv("CAIRN_HEARTBEAT_DIR", dir.path().c_str(), 1);
  {
    cairn::dist::detail::HeartbeatWriter w(3);
    auto none = cairn::dist::detail::read_heartbeat(cairn::dist::detail::heartbeat_path(dir.path(), 3));
    EXPECT_EQ(none.error().code, Errc::no_version);  // created, not written yet
    w.beat(12, 11);
  }
  ::unsetenv("CAIRN_HEARTBEAT_DIR");
  auto h = cairn::dist::detail::read_heartbeat(cairn::dist::detail::heartbeat_path(dir.path(), 3));
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h.value().version, 12u);
  EXPECT_EQ(h.value().restored, 11u);
  EXPECT_EQ(h.value().pid, static_cast<std::uint64_t>(::getpid()));
  EXPECT_EQ(cairn::dist::detail::read_heartbeat(dir.file("heartbeat.9")).error().code, Errc::not_found);
}

// Every single-bit flip and every truncation of a beat: a typed error or the
// same beat. The launcher kills the pids beats name, so this is the line
// between a damaged file and SIGKILL to another process (a pid of -1 is
// every process the launcher may signal).
TEST(Heartbeat, EveryBitFlipAndTruncationGivesATypedErrorOrTheSameBeat) {
  const Heartbeat beat{41, 4242, 40, 125000000};
  const auto bytes = record_bytes(beat);
  int typed_errors = 0, same = 0;
  for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
    for (int bit = -1; bit < static_cast<int>(8 * cut); ++bit) {
      std::vector<std::byte> d(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
      if (bit >= 0) d[static_cast<std::size_t>(bit / 8)] ^= std::byte(1u << (bit % 8));
      auto r = parse_heartbeat(d, "hb");
      if (!r.ok()) {
        EXPECT_NE(r.error().message.find("hb"), std::string::npos);
        ++typed_errors;
        continue;
      }
      ASSERT_EQ(cut, bytes.size()) << "a truncated beat was read";
      EXPECT_EQ(std::memcmp(&r.value(), &beat, sizeof beat), 0) << "bit " << bit << ": a different beat";
      ++same;
    }
  }
  EXPECT_EQ(same, 1);  // only the undamaged record
  std::cout << "heartbeat: " << typed_errors << " damaged beats, each a typed error\n";
}

TEST(Heartbeat, AnOldOrHostileBeatNamesNoProcess) {
  std::vector<std::byte> old(sizeof(Heartbeat));
  EXPECT_EQ(parse_heartbeat(old, "hb").error().code, Errc::wrong_version);
  // Checksums that match: a beat forged, not damaged.
  for (const Heartbeat& h : {Heartbeat{1, 0xFFFFFFFFull, 0, 0}, Heartbeat{1, 0, 0, 0}, Heartbeat{3, 7, 4, 0},
                             Heartbeat{1, (1ull << 22) + 1, 0, 0}})
    EXPECT_EQ(parse_heartbeat(record_bytes(h), "hb").error().code, Errc::corrupted) << h.pid;
  EXPECT_EQ(parse_heartbeat(std::vector<std::byte>(48, std::byte{7}), "hb").error().code, Errc::foreign_file);
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
