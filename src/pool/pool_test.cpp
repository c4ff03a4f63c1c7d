// pool_test.cpp — pool create/open, roots, arena, primitives and every open error.
#include "cairn/extended/pool.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "tests/support/temp_dir.hpp"

namespace cairn::pool {
namespace {

using testing::TempDir;

std::unique_ptr<Pool> make_pool(const std::string& path, std::uint64_t size = 4u << 20) {
  CreateOptions o;
  o.size = size;
  auto p = Pool::create(path, std::move(o));
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? std::move(p.value()) : nullptr;
}

void write_bytes(const std::string& path, std::size_t off, const void* data, std::size_t n) {
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, data, n, static_cast<off_t>(off)), static_cast<ssize_t>(n));
  ::close(fd);
}

TEST(Pool, CreateThenOpenKeepsHeaderAndRoots) {
  TempDir dir;
  const auto path = dir.file("a.pool");
  std::uint8_t uuid[16];
  {
    auto pool = make_pool(path);
    ASSERT_TRUE(pool);
    EXPECT_EQ(pool->size(), 4u << 20);
    EXPECT_EQ(pool->header().magic, kMagic);
    EXPECT_EQ(pool->flush_mode(), devices::FlushMode::cpu);  // tmpfs
    std::memcpy(uuid, pool->header().uuid, 16);
    auto off = pool->arena().alloc(10000);
    ASSERT_TRUE(off.ok());
    auto* data = reinterpret_cast<std::uint64_t*>(pool->at(off.value()));
    for (int i = 0; i < 1000; ++i) data[i] = static_cast<std::uint64_t>(i) * 7;
    pool->persist(data, 8000);
    ASSERT_TRUE(pool->publish_root(3, off.value(), 42).ok());
    EXPECT_EQ(pool->root(3).offset, off.value());
  }
  auto opened = Pool::open(path);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  auto& pool = *opened.value();
  EXPECT_EQ(std::memcmp(pool.header().uuid, uuid, 16), 0);
  EXPECT_EQ(pool.root(3).version, 42u);
  auto* data = reinterpret_cast<std::uint64_t*>(pool.at(pool.root(3).offset));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(data[i], static_cast<std::uint64_t>(i) * 7);
  EXPECT_EQ(pool.root(0).offset, 0u);
  EXPECT_TRUE(pool.health().problems.empty());
}

long minor_faults_of_this_thread() {
  rusage ru{};
  ::getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt;
}

// prefault maps a range's pages at once, so writing them afterwards takes no
// page faults (a fresh range takes one per page), and it changes no byte.
TEST(Pool, PrefaultTakesTheFirstTouchFaultsAndKeepsTheBytes) {
  TempDir dir;
  auto pool = make_pool(dir.file("a.pool"), 16u << 20);
  ASSERT_TRUE(pool);
  constexpr std::size_t kBytes = 4u << 20, kPages = kBytes / 4096;
  auto a = pool->arena().alloc(kBytes), b = pool->arena().alloc(kBytes);
  ASSERT_TRUE(a.ok() && b.ok());
  auto* pa = pool->at(a.value());
  auto* pb = pool->at(b.value());
  const std::uint64_t marker = 0x5eed5eed5eed5eedULL;
  std::memcpy(pa + 4096 * 7 + 8, &marker, 8);

  EXPECT_EQ(pool->prefault(pa, kBytes), kPages);
  std::uint64_t back = 0;
  std::memcpy(&back, pa + 4096 * 7 + 8, 8);
  EXPECT_EQ(back, marker);
  long before = minor_faults_of_this_thread();
  for (std::size_t p = 0; p < kPages; ++p) pa[p * 4096 + 64] = std::byte{1};
  const long prefaulted = minor_faults_of_this_thread() - before;

  before = minor_faults_of_this_thread();
  for (std::size_t p = 0; p < kPages; ++p) pb[p * 4096 + 64] = std::byte{1};
  const long fresh = minor_faults_of_this_thread() - before;
  // Sanitizers add faults of their shadow memory to both loops alike (ASan a
  // page per eight written, TSan two per page): compare the difference.
  EXPECT_GE(fresh - prefaulted, static_cast<long>(kPages / 2))
      << fresh << " faults fresh, " << prefaulted << " after prefault";

  // Under msync populating would dirty every page for the next msync.
  CreateOptions msync;
  msync.size = 4u << 20;
  msync.flush_mode = devices::FlushMode::msync;
  auto m = Pool::create(dir.file("m.pool"), std::move(msync));
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto mo = m.value()->arena().alloc(1u << 20);
  ASSERT_TRUE(mo.ok());
  EXPECT_EQ(m.value()->prefault(m.value()->at(mo.value()), 1u << 20), 0u);

  EXPECT_EQ(pool->prefault(pa, 0), 0u);
  EXPECT_EQ(pool->prefault(pool->at(0) + pool->size() - 4096, 8192), 0u);  // beyond the pool
}

// On tmpfs, pool space that was reserved but never written is a hole to
// mincore; written_prefix finds where the written pages end, and
// copy_through_file fills fresh pages with pwrite, the bytes then seen
// through the mapping. Elsewhere (msync here) neither does anything.
TEST(Pool, FreshSpaceOnTmpfsIsFoundAndWrittenThroughTheFile) {
  TempDir dir;
  auto pool = make_pool(dir.file("f.pool"), 16u << 20);
  ASSERT_TRUE(pool);
  if (!pool->copies_through_file())
    GTEST_SKIP() << "the test directory is not on a tmpfs of 4 KiB pages ($CAIRN_TEST_DIR)";
  constexpr std::size_t kBytes = 1u << 20, kHead = 256u << 10;
  auto a = pool->arena().alloc(kBytes);
  ASSERT_TRUE(a.ok());
  std::byte* pa = pool->at(a.value());
  std::vector<std::byte> src(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) src[i] = static_cast<std::byte>((i * 7 + i / 4096) & 0xff);

  EXPECT_EQ(pool->written_prefix(pa, kBytes), 0u);
  pool->memcpy_persist(pa, src.data(), kHead);  // through the mapping
  EXPECT_EQ(pool->written_prefix(pa, kBytes), kHead);
  EXPECT_EQ(pool->written_prefix(pa + 4096, kBytes - 4096), kHead - 4096);
  ASSERT_TRUE(pool->copy_through_file(pa + kHead, src.data() + kHead, kBytes - kHead));
  EXPECT_EQ(pool->written_prefix(pa, kBytes), kBytes);
  EXPECT_EQ(0, std::memcmp(pa, src.data(), kBytes));
  EXPECT_FALSE(pool->copy_through_file(pool->at(0) + pool->size() - 4096, src.data(), 8192));  // beyond the pool

  CreateOptions msync;
  msync.size = 4u << 20;
  msync.flush_mode = devices::FlushMode::msync;
  auto m = Pool::create(dir.file("m.pool"), std::move(msync));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_FALSE(m.value()->copies_through_file());
  auto mo = m.value()->arena().alloc(kBytes);
  ASSERT_TRUE(mo.ok());
  EXPECT_EQ(m.value()->written_prefix(m.value()->at(mo.value()), kBytes), kBytes);
  EXPECT_FALSE(m.value()->copy_through_file(m.value()->at(mo.value()), src.data(), kBytes));
}

TEST(Pool, PublishAlternatesTablesAndCountsGenerations) {
  TempDir dir;
  auto pool = make_pool(dir.file("p"));
  const auto g0 = pool->root_generation();
  for (std::uint64_t v = 1; v <= 5; ++v) ASSERT_TRUE(pool->publish_root(0, kArenaOffset, v).ok());
  EXPECT_EQ(pool->root_generation(), g0 + 5);
  EXPECT_EQ(pool->root(0).version, 5u);
  EXPECT_EQ(pool->stats().roots_published, 5u);
  EXPECT_FALSE(pool->publish_root(kRootSlots, kArenaOffset, 1).ok());
  EXPECT_EQ(pool->publish_root(1, 17, 1).error().code, Errc::invalid_argument);
}

// The live table damaged: a pool whose selector checks itself knows which
// table was live and refuses (the other holds older roots); a pool of earlier
// cairn (a bare 0 or 1, which could itself be the damaged part) falls back to
// the other copy and says so.
TEST(Pool, DamagedLiveTableIsRefusedOrFallsBackToOtherCopy) {
  TempDir dir;
  const auto path = dir.file("p");
  {
    auto pool = make_pool(path);
    ASSERT_TRUE(pool->publish_root(0, kArenaOffset, 1).ok());
    ASSERT_TRUE(pool->publish_root(0, kArenaOffset, 2).ok());
  }
  std::uint64_t sel = 0;
  {
    std::ifstream in(path, std::ios::binary);
    in.seekg(kSelectorOffset);
    in.read(reinterpret_cast<char*>(&sel), 8);
  }
  const std::size_t live_at = (sel & 1) == 0 ? kRootTable0 : kRootTable1;  // bit 0 names the table
  std::uint64_t junk = 0xdeadbeef;
  write_bytes(path, live_at + 16 + 8, &junk, 8);  // corrupt slot 0's version
  auto refused = Pool::open(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Errc::corrupted) << refused.error().message;
  const std::uint64_t legacy = sel & 1;
  write_bytes(path, kSelectorOffset, &legacy, 8);
  auto opened = Pool::open(path);
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(opened.value()->root(0).version, 1u);  // the older table
  EXPECT_FALSE(opened.value()->health().problems.empty());
  auto health = Pool::inspect(path);
  ASSERT_TRUE(health.ok());
  EXPECT_FALSE((sel & 1) == 0 ? health->table0_ok : health->table1_ok);
}

// Every single flipped bit of the selector word is corrected (the same roots,
// with a problem noted) or refused with a typed error: never the other,
// older table's roots. Pools of earlier cairn (a bare 0 or 1) still open.
TEST(Pool, EverySelectorBitFlipIsCorrectedOrRefused) {
  TempDir dir;
  const auto path = dir.file("p");
  {
    auto pool = make_pool(path);
    for (std::uint64_t v = 1; v <= 3; ++v) ASSERT_TRUE(pool->publish_root(0, kArenaOffset, v).ok());
  }
  std::uint64_t sel = 0;
  {
    std::ifstream in(path, std::ios::binary);
    in.seekg(kSelectorOffset);
    in.read(reinterpret_cast<char*>(&sel), 8);
  }
  ASSERT_GT(sel, 1u) << "a publish stores the self-checking form";
  int corrected = 0;
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t damaged = sel ^ (std::uint64_t{1} << bit);
    write_bytes(path, kSelectorOffset, &damaged, 8);
    auto opened = Pool::open(path);
    if (!opened.ok()) {
      EXPECT_EQ(opened.error().code, Errc::corrupted) << "bit " << bit << ": " << opened.error().message;
      continue;
    }
    EXPECT_EQ(opened.value()->root(0).version, 3u) << "bit " << bit << " reopened the pool at older roots";
    EXPECT_FALSE(opened.value()->health().problems.empty()) << "bit " << bit;
    ++corrected;
  }
  EXPECT_GE(corrected, 60) << "single flipped bits are corrected";
  // The form of earlier cairn: the bare index of the live table.
  const std::uint64_t legacy = sel & 1;
  write_bytes(path, kSelectorOffset, &legacy, 8);
  auto opened = Pool::open(path);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  EXPECT_EQ(opened.value()->root(0).version, 3u);
  EXPECT_TRUE(opened.value()->health().problems.empty());
  ASSERT_TRUE(opened.value()->publish_root(0, kArenaOffset, 4).ok());
  opened.value().reset();
  auto again = Pool::open(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value()->root(0).version, 4u);
}

// inspect() reads every part on its own: a truncated pool is still described
// (open's verdict in open_error, every part's problem listed), and nothing
// is written to the file.
TEST(Pool, InspectDescribesAPoolThatCannotOpen) {
  TempDir dir;
  const auto path = dir.file("short.pool");
  make_pool(path, 1u << 20).reset();
  ASSERT_EQ(::truncate(path.c_str(), kRootTable1), 0);  // root table 1 is gone
  auto health = Pool::inspect(path);
  ASSERT_TRUE(health.ok()) << health.error().message;
  EXPECT_EQ(health->open_error.code, Errc::truncated) << health->open_error.message;
  EXPECT_TRUE(health->header0_ok && health->header1_ok);
  EXPECT_TRUE(health->table_read[0]);
  EXPECT_FALSE(health->table_read[1]);
  EXPECT_EQ(health->file_size, kRootTable1);
  ASSERT_FALSE(health->problems.empty());
  EXPECT_NE(health->problems.back().find("root table 1"), std::string::npos) << health->problems.back();
  EXPECT_EQ(std::filesystem::file_size(path), kRootTable1);
  EXPECT_EQ(Pool::open(path).error().code, Errc::truncated);
}

TEST(Pool, ArenaAllocFreeAndOutOfSpace) {
  TempDir dir;
  auto pool = make_pool(dir.file("p"), 1u << 20);
  auto& a = pool->arena();
  const auto total = a.block_count();
  EXPECT_EQ(total, ((1u << 20) - kArenaOffset) / kDefaultBlockSize);
  auto x = a.alloc(1);
  auto y = a.alloc(3 * kDefaultBlockSize);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(y.value(), x.value() + kDefaultBlockSize);
  EXPECT_EQ(a.blocks_in_use(), 4u);
  auto big = a.alloc(total * kDefaultBlockSize);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, Errc::out_of_space);
  a.free(x.value(), 1);
  EXPECT_EQ(a.blocks_in_use(), 3u);
  auto z = a.alloc(100);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z.value(), x.value());  // reused
}

std::uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

// reserve_as_used: the file is sparse past its first 16 MiB and grows with
// the arena's allocations, in this process and after reopening.
TEST(Pool, ReserveAsUsedGrowsWithTheArena) {
  TempDir dir;
  const auto path = dir.file("p");
  CreateOptions o;
  o.size = 256ull << 20;
  o.reserve_as_used = true;
  auto p = Pool::create(path, std::move(o));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(std::filesystem::file_size(path), 256ull << 20);
  const std::uint64_t first = allocated_bytes(path);
  EXPECT_GE(first, kArenaOffset);
  EXPECT_LE(first, kArenaOffset + kReserveStep + (1u << 20));
  auto x = p.value()->arena().alloc(40ull << 20);
  ASSERT_TRUE(x.ok()) << x.error().message;
  std::memset(p.value()->at(x.value()), 0x5a, 40ull << 20);
  p.value()->persist(p.value()->at(x.value()), 40ull << 20);
  EXPECT_GE(allocated_bytes(path), 40ull << 20);
  EXPECT_LT(allocated_bytes(path), 128ull << 20);  // far from the pool's size
  p.value().reset();
  // Reopened: what was reserved stays; allocations past it reserve more.
  auto q = Pool::open(path);
  ASSERT_TRUE(q.ok()) << q.error().message;
  auto rb = q.value()->arena().rebuild();
  ASSERT_TRUE(rb.mark(x.value(), 40ull << 20).ok());
  rb.finish();
  EXPECT_EQ(static_cast<unsigned char>(*q.value()->at(x.value() + (40ull << 20) - 1)), 0x5au);
  auto y = q.value()->arena().alloc(100ull << 20);
  ASSERT_TRUE(y.ok()) << y.error().message;
  std::memset(q.value()->at(y.value()), 0x33, 100ull << 20);
  EXPECT_GE(allocated_bytes(path), 140ull << 20);
}

// On a device that fills up (a 24 MiB tmpfs mounted for the test; skipped
// where mounting is not allowed), a pool that reserves as used fails the
// allocation the device cannot hold with device_full, and every block handed
// out before stays writable and intact (no SIGBUS at a first touch).
TEST(Pool, ReserveAsUsedFailsTheAllocationOnAFullDevice) {
  TempDir dir;
  const std::string mnt = dir.file("small");
  std::filesystem::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=24m") != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno) << ")";
  struct Unmount {
    std::string at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{mnt};
  CreateOptions o;
  o.size = 64ull << 20;
  o.reserve_as_used = true;
  auto p = Pool::create(mnt + "/p", std::move(o));
  ASSERT_TRUE(p.ok()) << p.error().message;
  std::vector<std::uint64_t> got;
  Result<std::uint64_t> r = p.value()->arena().alloc(2ull << 20);
  for (; r.ok() && got.size() < 32; r = p.value()->arena().alloc(2ull << 20)) {
    std::memset(p.value()->at(r.value()), static_cast<int>(got.size() + 1), 2ull << 20);
    got.push_back(r.value());
  }
  ASSERT_FALSE(r.ok()) << "64 MiB of blocks on a 24 MiB device";
  EXPECT_EQ(r.error().code, Errc::device_full) << r.error().message;
  EXPECT_NE(r.error().message.find("reserving"), std::string::npos) << r.error().message;
  EXPECT_GE(got.size(), 4u);
  EXPECT_LE(got.size(), 12u);
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(static_cast<int>(*p.value()->at(got[i] + (2ull << 20) - 1)), static_cast<int>(i + 1));
  // Reserved all at once, the same pool does not even get created there.
  p.value().reset();
  std::filesystem::remove(mnt + "/p");
  CreateOptions eager;
  eager.size = 64ull << 20;
  auto e = Pool::create(mnt + "/q", std::move(eager));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, Errc::device_full) << e.error().message;
}

TEST(Pool, ArenaRebuildFromReachability) {
  TempDir dir;
  const auto path = dir.file("p");
  std::uint64_t keep = 0;
  {
    auto pool = make_pool(path);
    auto a = pool->arena().alloc(8192);
    auto b = pool->arena().alloc(8192);  // never published: must be reclaimed
    ASSERT_TRUE(a.ok() && b.ok());
    keep = a.value();
    ASSERT_TRUE(pool->publish_root(0, keep, 1).ok());
  }
  auto pool = std::move(Pool::open(path).value());
  auto early = pool->arena().alloc(64);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().code, Errc::not_ready);
  auto rb = pool->arena().rebuild();
  ASSERT_TRUE(rb.mark(pool->root(0).offset, 8192).ok());
  auto twice = rb.mark(pool->root(0).offset + 4096, 64);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().code, Errc::corrupted);
  EXPECT_FALSE(rb.mark(pool->size() + 4096, 64).ok());
  rb.finish();
  EXPECT_EQ(pool->arena().blocks_in_use(), 2u);
  auto c = pool->arena().alloc(8192);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value(), keep + 8192);  // the unpublished extent came back
}

// Rebuild marks a word of blocks at a time: extents that start and end
// inside words, span several, and overlap an earlier one by a single block
// at either end.
TEST(Pool, ArenaRebuildMarksExtentsAcrossWords) {
  TempDir dir;
  auto pool = make_pool(dir.file("w"), 16u << 20);
  const std::uint64_t bs = pool->arena().block_size(), base = pool->arena().offset();
  auto rb = pool->arena().rebuild();
  ASSERT_TRUE(rb.mark(base + 3 * bs, 200 * bs).ok());   // blocks 3..202
  EXPECT_FALSE(rb.mark(base + 202 * bs, bs).ok());      // its last block
  EXPECT_FALSE(rb.mark(base, 4 * bs).ok());             // its first block
  ASSERT_TRUE(rb.mark(base, 3 * bs).ok());              // 0..2
  ASSERT_TRUE(rb.mark(base + 203 * bs, 61 * bs).ok());  // 203..263: up to a word's end
  ASSERT_TRUE(rb.mark(base + 264 * bs, 64 * bs).ok());  // one whole word
  EXPECT_EQ(rb.marked_blocks(), 328u);
  rb.finish();
  EXPECT_EQ(pool->arena().blocks_in_use(), 328u);
  auto next = pool->arena().alloc(bs);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next.value(), base + 328 * bs);  // the first block not marked
}

TEST(Pool, PrimitivesWriteAndCount) {
  TempDir dir;
  auto pool = make_pool(dir.file("p"), 16u << 20);
  auto off = pool->arena().alloc(8u << 20);
  ASSERT_TRUE(off.ok());
  std::byte* dst = pool->at(off.value());
  std::vector<std::uint8_t> src(8u << 20);
  std::iota(src.begin(), src.end(), 0);
  pool->device().reset_stats();
  pool->memcpy_persist(dst, src.data(), 4096);
  EXPECT_EQ(std::memcmp(dst, src.data(), 4096), 0);
  auto s = pool->stats().device;
  EXPECT_EQ(s.nt_bytes, 4096u);
  EXPECT_EQ(s.drains, 1u);
  pool->memcpy_persist_mt(dst, src.data(), src.size(), 2);
  EXPECT_EQ(std::memcmp(dst, src.data(), src.size()), 0);
  pool->memset_persist(dst, 0xab, 100);
  EXPECT_EQ(static_cast<unsigned char>(dst[99]), 0xab);
  pool->device().reset_stats();
  pool->persist(dst + 10, 100);  // spans lines 0..1
  EXPECT_EQ(pool->stats().device.lines_flushed, 2u);
  pool->persist_mt(dst, 8u << 20, 2);
  EXPECT_EQ(pool->stats().device.lines_flushed, 2u + (8u << 20) / 64);
}

// The workers behind the multi-threaded primitives do not survive fork():
// a child (real-kill tests, applications that fork) must get new ones, not
// wait forever for the parent's.
TEST(Pool, MultiThreadedCopyWorksInAForkedChild) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer cannot start threads in a child forked from a multi-threaded process "
                  "(its die_after_fork); the address-sanitizer and release builds run this test";
#endif
  TempDir dir;
  auto pool = make_pool(dir.file("p"), 16u << 20);
  auto off = pool->arena().alloc(8u << 20);
  ASSERT_TRUE(off.ok());
  std::byte* dst = pool->at(off.value());
  std::vector<std::uint8_t> src(8u << 20);
  std::iota(src.begin(), src.end(), 0);
  pool->memcpy_persist_mt(dst, src.data(), src.size(), 2);  // the parent's workers exist now
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(20);  // a hang is a failure, not a stuck test
    std::fill(src.begin(), src.end(), std::uint8_t{7});
    pool->memcpy_persist_mt(dst, src.data(), src.size(), 2);
    ::_exit(std::memcmp(dst, src.data(), src.size()) == 0 ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status) << " (14: hung)";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(static_cast<unsigned>(dst[1]), 7u);  // MAP_SHARED: the child's copy reached the pool
}

TEST(Pool, MsyncModeIsSelectable) {
  TempDir dir;
  CreateOptions o;
  o.size = 2u << 20;
  o.flush_mode = devices::FlushMode::msync;
  auto pool = Pool::create(dir.file("m"), std::move(o));
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool.value()->flush_mode(), devices::FlushMode::msync);
  auto off = pool.value()->arena().alloc(64);
  pool.value()->memset_persist(pool.value()->at(off.value()), 1, 64);
  EXPECT_GE(pool.value()->stats().device.msyncs, 1u);
}

// ---- errors: each made to happen for real ----

TEST(PoolErrors, MissingFile) {
  TempDir dir;
  auto r = Pool::open(dir.file("nope"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::not_found);
  EXPECT_NE(r.error().message.find("nope"), std::string::npos);
}

TEST(PoolErrors, Directory) {
  TempDir dir;
  EXPECT_EQ(Pool::open(dir.path()).error().code, Errc::is_directory);
  EXPECT_EQ(Pool::create(dir.path()).error().code, Errc::is_directory);
}

TEST(PoolErrors, PermissionDenied) {
  if (geteuid() == 0) {
    // root bypasses file modes; drop to nobody in a child to make it real.
    TempDir dir;
    const auto path = dir.file("p");
    make_pool(path);
    ::chmod(dir.path().c_str(), 0755);  // the directory is open to all: only the file's mode denies
    ::chmod(path.c_str(), 0600);
    pid_t pid = fork();
    if (pid == 0) {
      if (setuid(65534) != 0) _exit(3);
      auto r = Pool::open(path);
      _exit(!r.ok() && r.error().code == Errc::permission_denied ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 0);
    return;
  }
  TempDir dir;
  const auto path = dir.file("p");
  make_pool(path);
  ::chmod(path.c_str(), 0400);
  EXPECT_EQ(Pool::open(path).error().code, Errc::permission_denied);
}

TEST(PoolErrors, TooSmallAndBadOptions) {
  TempDir dir;
  CreateOptions o;
  o.size = 4096;
  EXPECT_EQ(Pool::create(dir.file("s"), std::move(o)).error().code, Errc::too_small);
  CreateOptions b;
  b.block_size = 1000;
  EXPECT_EQ(Pool::create(dir.file("b"), std::move(b)).error().code, Errc::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("s")));
}

TEST(PoolErrors, RefusesToOverwrite) {
  TempDir dir;
  const auto path = dir.file("p");
  { std::ofstream(path) << "precious"; }
  EXPECT_EQ(Pool::create(path).error().code, Errc::already_exists);
  std::ifstream in(path);
  std::string s;
  in >> s;
  EXPECT_EQ(s, "precious");
}

TEST(PoolErrors, TruncatedFile) {
  TempDir dir;
  const auto path = dir.file("p");
  make_pool(path);
  ASSERT_EQ(::truncate(path.c_str(), 2u << 20), 0);
  auto r = Pool::open(path);
  EXPECT_EQ(r.error().code, Errc::truncated);
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  EXPECT_EQ(Pool::open(path).error().code, Errc::truncated);
}

TEST(PoolErrors, ForeignFile) {
  TempDir dir;
  const auto path = dir.file("f");
  {
    std::ofstream out(path, std::ios::binary);
    std::vector<char> junk(2u << 20, 'x');
    out.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  EXPECT_EQ(Pool::open(path).error().code, Errc::foreign_file);
  { std::ofstream(dir.file("empty")); }
  EXPECT_EQ(Pool::open(dir.file("empty")).error().code, Errc::foreign_file);
}

TEST(PoolErrors, WrongVersionAndCorruptHeaders) {
  TempDir dir;
  const auto path = dir.file("p");
  make_pool(path);
  PoolHeader h{};
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(&h), sizeof h);
  }
  // One damaged copy: opens, reports the problem.
  std::uint64_t junk = 1;
  write_bytes(path, kHeaderCopy0 + 40, &junk, 8);
  auto one = Pool::open(path);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one.value()->health().header0_ok);
  one.value().reset();
  // Both damaged: corrupted.
  write_bytes(path, kHeaderCopy1 + 40, &junk, 8);
  EXPECT_EQ(Pool::open(path).error().code, Errc::corrupted);
  // A valid header of another layout version.
  PoolHeader v3 = h;
  v3.layout_version = kLayoutVersion + 1;
  v3.checksum = checksum64(&v3, offsetof(PoolHeader, checksum));
  write_bytes(path, kHeaderCopy0, &v3, sizeof v3);
  write_bytes(path, kHeaderCopy1, &v3, sizeof v3);
  auto r = Pool::open(path);
  EXPECT_EQ(r.error().code, Errc::wrong_version);
  EXPECT_NE(r.error().message.find("version 3"), std::string::npos);
  // A pool of layout 1, whose headers carry the byte-wise FNV-1a checksum of
  // that layout: recognised as an older version, not as damage.
  PoolHeader v1 = h;
  v1.layout_version = 1;
  std::uint64_t fnv = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < offsetof(PoolHeader, checksum); ++i) {
    fnv ^= reinterpret_cast<const unsigned char*>(&v1)[i];
    fnv *= 0x100000001b3ULL;
  }
  fnv ^= fnv >> 33;
  fnv *= 0xff51afd7ed558ccdULL;
  fnv ^= fnv >> 33;
  v1.checksum = fnv ^ offsetof(PoolHeader, checksum);
  write_bytes(path, kHeaderCopy0, &v1, sizeof v1);
  write_bytes(path, kHeaderCopy1, &v1, sizeof v1);
  r = Pool::open(path);
  EXPECT_EQ(r.error().code, Errc::wrong_version) << r.error().message;
  EXPECT_NE(r.error().message.find("version 1"), std::string::npos) << r.error().message;
}

// A header whose block_size * block_count wraps past 2^64 (checksums valid:
// a hostile file, found by fuzz/pool_fuzz) is inconsistent geometry, not an
// arena of no blocks that the next allocation walks past.
TEST(PoolErrors, BlockCountThatWrapsTheArenaSizeIsRefused) {
  TempDir dir;
  const auto path = dir.file("p");
  make_pool(path, kMinPoolSize);
  PoolHeader h{};
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(&h), sizeof h);
  }
  for (std::uint64_t count : {~std::uint64_t{0}, (~std::uint64_t{0} / h.block_size) + 1}) {
    PoolHeader bad = h;
    bad.block_count = count;
    bad.checksum = checksum64(&bad, offsetof(PoolHeader, checksum));
    write_bytes(path, kHeaderCopy0, &bad, sizeof bad);
    write_bytes(path, kHeaderCopy1, &bad, sizeof bad);
    auto r = Pool::open(path);
    ASSERT_FALSE(r.ok()) << count;
    EXPECT_EQ(r.error().code, Errc::corrupted) << r.error().message;
  }
}

TEST(PoolErrors, FailedOpenNeverWrites) {
  TempDir dir;
  const auto path = dir.file("p");
  make_pool(path);
  ASSERT_EQ(::truncate(path.c_str(), 3u << 20), 0);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> before((std::istreambuf_iterator<char>(in)), {});
  EXPECT_FALSE(Pool::open(path).ok());
  std::ifstream again(path, std::ios::binary);
  std::vector<char> after((std::istreambuf_iterator<char>(again)), {});
  EXPECT_EQ(before, after);
}

TEST(PoolErrors, DeviceFullWhileCreating) {
  TempDir dir;
  const auto path = dir.file("big");
  pid_t pid = fork();
  if (pid == 0) {
    // A file size limit makes the reservation fail with EFBIG, as a full device would.
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{1u << 20, 1u << 20};
    setrlimit(RLIMIT_FSIZE, &lim);
    CreateOptions o;
    o.size = 8u << 20;
    auto r = Pool::create(path, std::move(o));
    _exit(!r.ok() && r.error().code == Errc::device_full ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_FALSE(std::filesystem::exists(path));
  for (auto& e : std::filesystem::directory_iterator(dir.path())) ADD_FAILURE() << "left behind: " << e.path();
}

TEST(PoolErrors, PoisonedPoolRefusesPublish) {
  TempDir dir;
  auto pool = make_pool(dir.file("p"));
  pool->poison("test");
  auto r = pool->publish_root(0, kArenaOffset, 1);
  EXPECT_EQ(r.error().code, Errc::poisoned);
}

// A failed write-back of the new root table (or of the selector) must leave
// the old roots live, in this process and for the next open; the pool is
// poisoned from then on. Before the fix the selector was stored anyway.
TEST(PoolErrors, FailedWriteBackNeverSwitchesTheRoots) {
  for (const bool selector_fails : {false, true}) {
    TempDir dir;
    const auto path = dir.file("p");
    auto injector = std::make_shared<devices::FaultInjector>();
    {
      CreateOptions o;
      o.size = 4u << 20;
      o.device = devices::make_fault_device(injector);
      auto pool = std::move(Pool::create(path, std::move(o)).value());
      ASSERT_TRUE(pool->publish_root(3, kArenaOffset, 7).ok());
      devices::FaultPlan plan;
      // publish_roots: the table goes through one copy, the selector through
      // one flush.
      (selector_fails ? plan.flush : plan.copy) = 1;
      injector->arm(plan);
      auto r = pool->publish_root(3, kArenaOffset + 4096, 8);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().code, selector_fails ? Errc::io_error : Errc::poisoned) << r.error().message;
      EXPECT_NE(r.error().message.find("reopen"), std::string::npos) << r.error().message;
      EXPECT_EQ(pool->root(3).version, 7u);
      EXPECT_TRUE(pool->poisoned());
      injector->arm(devices::FaultPlan{});
      EXPECT_EQ(pool->publish_root(3, kArenaOffset + 4096, 9).error().code, Errc::poisoned);
    }
    auto pool = Pool::open(path);
    ASSERT_TRUE(pool.ok()) << pool.error().message;
    EXPECT_EQ(pool.value()->root(3).version, 7u) << (selector_fails ? "selector" : "table") << " write-back failed";
    EXPECT_EQ(pool.value()->root(3).offset, kArenaOffset);
  }
}

// A child writes, persists and publishes, then is SIGKILLed; the parent
// reopens and finds every published version intact.
TEST(PoolCrash, SigkillAfterPublishKeepsData) {
  TempDir dir;
  const auto path = dir.file("k");
  make_pool(path).reset();
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    auto pool = std::move(Pool::open(path).value());
    pool->arena().reset_empty();
    auto off = pool->arena().alloc(1u << 16).value();
    auto* d = reinterpret_cast<std::uint64_t*>(pool->at(off));
    for (std::uint64_t v = 1;; ++v) {
      for (int i = 0; i < 8192; ++i) d[i] = v * 1000003 + static_cast<std::uint64_t>(i);
      pool->persist(d, 1u << 16);
      if (!pool->publish_root(0, off, v).ok()) _exit(2);
      if (v == 50) (void)!write(pipefd[1], "x", 1);
      // Keep writing the next version in place until killed: the root's
      // version must match the data we find, or be one behind and torn.
    }
  }
  close(pipefd[1]);
  char c;
  ASSERT_EQ(read(pipefd[0], &c, 1), 1);
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st));
  auto pool = std::move(Pool::open(path).value());
  const RootSlot r = pool->root(0);
  ASSERT_GE(r.version, 50u);
  // In-place overwrite: data may already be the next version (v+1) in part,
  // but every word is from version v or v+1, never older.
  auto* d = reinterpret_cast<std::uint64_t*>(pool->at(r.offset));
  for (int i = 0; i < 8192; ++i) {
    std::uint64_t v = (d[i] - static_cast<std::uint64_t>(i)) / 1000003;
    ASSERT_TRUE(v == r.version || v == r.version + 1) << "word " << i << " from version " << v;
  }
}

}  // namespace
}  // namespace cairn::pool

namespace cairn {
namespace {

// value() on a failed result names the failure instead of throwing
// std::bad_variant_access: what() carries the code and the message.
TEST(Result, ValueOnAnErrorThrowsTheErrorsMessage) {
  Result<int> failed = make_error(Errc::not_found, "x.pool: no such file; create it first");
  try {
    (void)failed.value();
    FAIL() << "value() of an error returned";
  } catch (const BadResultAccess& e) {
    EXPECT_EQ(e.error().code, Errc::not_found);
    EXPECT_NE(std::string(e.what()).find("x.pool: no such file; create it first"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(errc_name(Errc::not_found)), std::string::npos) << e.what();
  }
  Result<void> void_failed = make_error(Errc::poisoned, "p.pool: poisoned");
  EXPECT_THROW(void_failed.value(), BadResultAccess);
  Result<int> fine = 3;
  EXPECT_EQ(fine.value(), 3);
  Result<void> void_fine;
  EXPECT_NO_THROW(void_fine.value());
}

}  // namespace
}  // namespace cairn
