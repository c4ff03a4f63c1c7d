// stream_test.cpp — file:, mem: and pmem: streams: stdio and iostream round
// trips, views, growth, prefix mapping, commit visibility across processes,
// reader pins, killed writers and every error a user can cause.
#include "cairn/stream.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cairn/cairn.h"
#include "cairn/extended/device.hpp"
#include "cairn/extended/pool.hpp"
#include "stream/directory.hpp"
#include "stream/testing.hpp"
#include "tests/support/temp_dir.hpp"

namespace cs = cairn::stream;
using cairn::Errc;

namespace {

std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

std::unique_ptr<cs::Stream> open_ok(const std::string& uri, cs::Mode m, cs::OpenOptions o = {}) {
  auto s = cs::Stream::open(uri, m, o);
  EXPECT_TRUE(s.ok()) << uri << ": " << (s.ok() ? "" : s.error().message);
  return s.ok() ? std::move(s.value()) : nullptr;
}

void write_bytes(const std::string& uri, const std::vector<unsigned char>& bytes, cs::OpenOptions o = {}) {
  auto s = open_ok(uri, cs::Mode::write, o);
  ASSERT_TRUE(s);
  if (!bytes.empty()) {
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), s->file()), bytes.size());
  }
  auto r = s->close();
  ASSERT_TRUE(r.ok()) << r.error().message;
}

std::vector<unsigned char> read_bytes(const std::string& uri) {
  auto s = open_ok(uri, cs::Mode::read);
  if (!s) return {};
  auto v = s->view();
  return std::vector<unsigned char>(reinterpret_cast<const unsigned char*>(v.data()),
                                    reinterpret_cast<const unsigned char*>(v.data()) + v.size());
}

// A child process that opens `uri` for writing, writes `bytes` without
// committing them and stops there; returns once it has written (-1 if the
// fork failed or the child did not get that far).
pid_t fork_stalled_writer(const std::string& uri, const std::vector<unsigned char>& bytes) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    auto s = cs::Stream::open(uri, cs::Mode::write);
    if (!s.ok()) ::_exit(2);
    std::fwrite(bytes.data(), 1, bytes.size(), s.value()->file());
    std::fflush(s.value()->file());
    (void)!::write(ready[1], "x", 1);
    ::pause();  // killed here, never closed
    ::_exit(4);
  }
  ::close(ready[1]);
  char c;
  const bool wrote = child > 0 && ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  return wrote ? child : -1;
}

// A child that opens `uri` for writing (reserving `bytes`), writes `bytes`
// and holds the stream open until a byte arrives on `go` (then closes it and
// exits 0 if the commit succeeded). Returns once it has written.
pid_t fork_held_writer(const std::string& uri, const std::vector<unsigned char>& bytes, int& go) {
  int ready[2], start[2];
  if (::pipe(ready) != 0 || ::pipe(start) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(start[1]);
    cs::OpenOptions o;
    o.size_hint = bytes.size();
    auto s = cs::Stream::open(uri, cs::Mode::write, o);
    if (!s.ok()) ::_exit(2);
    std::fwrite(bytes.data(), 1, bytes.size(), s.value()->file());
    std::fflush(s.value()->file());
    (void)!::write(ready[1], "x", 1);
    char c;
    if (::read(start[0], &c, 1) != 1) ::_exit(5);
    ::_exit(s.value()->close().ok() ? 0 : 3);
  }
  ::close(ready[1]);
  ::close(start[0]);
  go = start[1];
  char c;
  const bool wrote = child > 0 && ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  return wrote ? child : -1;
}

// The directory entry of stream `name`, through a mapping of the pool of its
// own (the test's view of the shared state).
cairn::stream::detail::StreamEntry* entry_of(cairn::pool::Pool& p, const std::string& name) {
  namespace sd = cairn::stream::detail;
  auto* dir = p.at(p.root(sd::kStreamRoot).offset);
  const auto* h = reinterpret_cast<const sd::DirHeader*>(dir);
  auto* e = reinterpret_cast<sd::StreamEntry*>(dir + sizeof(sd::DirHeader));
  for (std::uint64_t i = 0; i < h->entry_count; ++i)
    if (e[i].name_check != 0 && name == e[i].name) return &e[i];
  return nullptr;
}

class Streams : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { ::setenv("CAIRN_STREAM_POOL_SIZE", "64M", 1); }
  std::string uri(const std::string& name) const {
    const std::string kind = GetParam();
    if (kind == "file") return "file:" + dir_.file(name);
    if (kind == "mem") return "mem:" + dir_.path() + "/" + name;
    return "pmem:" + dir_.file("streams.pool") + "#" + name;
  }
  cairn::testing::TempDir dir_;
};

TEST_P(Streams, StdioRoundTripWithSeekAndTell) {
  const std::string u = uri("mesh.txt");
  {
    auto w = open_ok(u, cs::Mode::write);
    ASSERT_TRUE(w);
    FILE* f = w->file();
    for (int i = 0; i < 1000; ++i) std::fprintf(f, "%d %.17g\n", i, i * 0.125);
    EXPECT_GT(std::ftell(f), 0);
    ASSERT_TRUE(w->close().ok());
  }
  auto r = open_ok(u, cs::Mode::read);
  ASSERT_TRUE(r);
  FILE* f = r->file();
  for (int i = 0; i < 1000; ++i) {
    int k = -1;
    double x = -1;
    ASSERT_EQ(std::fscanf(f, "%d %lg", &k, &x), 2);
    EXPECT_EQ(k, i);
    EXPECT_EQ(x, i * 0.125);
  }
  int more = 0;
  EXPECT_EQ(std::fscanf(f, "%d", &more), EOF);
  ASSERT_EQ(std::fseek(f, 0, SEEK_END), 0);
  const long end = std::ftell(f);
  EXPECT_EQ(static_cast<std::size_t>(end), r->view().size());
  ASSERT_EQ(std::fseek(f, 2, SEEK_SET), 0);
  char buf[4] = {};
  ASSERT_EQ(std::fread(buf, 1, 3, f), 3u);
  EXPECT_STREQ(buf, "0\n1");
  EXPECT_NE(std::fseek(f, end + 1, SEEK_SET), 0) << "a reader cannot seek past the end";
}

TEST_P(Streams, BinaryWritesGrowAndTheViewHoldsEveryByte) {
  // 5 MiB without a size hint: the buffer doubles from 64 KiB several times.
  const auto bytes = pattern(5u << 20, 7);
  write_bytes(uri("big.bin"), bytes);
  EXPECT_EQ(read_bytes(uri("big.bin")), bytes);
  cs::OpenOptions o;
  o.size_hint = bytes.size();
  write_bytes(uri("pre.bin"), bytes, o);
  EXPECT_EQ(read_bytes(uri("pre.bin")), bytes);
}

TEST_P(Streams, SeekingPastTheEndOfAWriterLeavesZeros) {
  const std::string u = uri("holes");
  auto w = open_ok(u, cs::Mode::write);
  ASSERT_TRUE(w);
  std::fputs("ab", w->file());
  ASSERT_EQ(std::fseek(w->file(), 10, SEEK_SET), 0);
  std::fputs("cd", w->file());
  ASSERT_EQ(std::fseek(w->file(), 0, SEEK_SET), 0);
  std::fputc('A', w->file());
  ASSERT_TRUE(w->close().ok());
  const auto got = read_bytes(u);
  const std::vector<unsigned char> want = {'A', 'b', 0, 0, 0, 0, 0, 0, 0, 0, 'c', 'd'};
  EXPECT_EQ(got, want);
}

TEST_P(Streams, IostreamOverTheSameStream) {
  const std::string u = uri("fields");
  {
    auto w = open_ok(u, cs::Mode::write);
    ASSERT_TRUE(w);
    w->ios() << "size_field " << 42 << ' ' << 3.5 << '\n';
    const int raw[3] = {0, 3, 13};
    w->ios().write(reinterpret_cast<const char*>(raw), sizeof raw);
    ASSERT_TRUE(w->close().ok());
  }
  auto r = open_ok(u, cs::Mode::read);
  ASSERT_TRUE(r);
  std::string word;
  int n = 0;
  double x = 0;
  r->ios() >> word >> n >> x;
  EXPECT_EQ(word, "size_field");
  EXPECT_EQ(n, 42);
  EXPECT_EQ(x, 3.5);
  r->ios().get();  // the newline
  int raw[3] = {};
  r->ios().read(reinterpret_cast<char*>(raw), sizeof raw);
  EXPECT_EQ(raw[2], 13);
  r->ios().seekg(0, std::ios::end);
  EXPECT_EQ(static_cast<std::size_t>(r->ios().tellg()), r->view().size());
}

TEST_P(Streams, ReaderOfAMissingStreamGetsNotFound) {
  auto r = cs::Stream::open(uri("absent"), cs::Mode::read);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::not_found) << r.error().message;
  EXPECT_NE(r.error().message.find("absent"), std::string::npos) << r.error().message;
}

TEST_P(Streams, ANewVersionReplacesTheOldOneOnlyAtClose) {
  const std::string u = uri("state");
  write_bytes(u, pattern(100000, 1));
  auto w = open_ok(u, cs::Mode::write);
  ASSERT_TRUE(w);
  const auto v2 = pattern(300000, 2);
  ASSERT_EQ(std::fwrite(v2.data(), 1, v2.size(), w->file()), v2.size());
  std::fflush(w->file());
  if (std::string(GetParam()) != "file") {
    EXPECT_EQ(read_bytes(u), pattern(100000, 1)) << "not committed yet";
  }
  ASSERT_TRUE(w->close().ok());
  EXPECT_EQ(read_bytes(u), v2);
}

// An exception between open and close must not publish what was written so
// far (LMDB aborts an uncommitted transaction); the stream is free again.
TEST_P(Streams, AWriterDestroyedByAnExceptionCommitsNothing) {
  const std::string u = uri("interrupted");
  write_bytes(u, pattern(50000, 1));
  try {
    auto w = open_ok(u, cs::Mode::write);
    ASSERT_TRUE(w);
    const auto half = pattern(30000, 2);
    ASSERT_EQ(std::fwrite(half.data(), 1, half.size(), w->file()), half.size());
    w->ios() << "and more, buffered";
    throw std::runtime_error("the solver diverged");
  } catch (const std::runtime_error&) {
  }
  if (std::string(GetParam()) != "file") {  // a file has no versions
    EXPECT_EQ(read_bytes(u), pattern(50000, 1)) << "a truncated version was published";
  }
  write_bytes(u, pattern(70000, 3));
  EXPECT_EQ(read_bytes(u), pattern(70000, 3));
}

// Without an exception the destructor still commits (as an ofstream's
// closes the file); abandon() is the explicit way out.
TEST_P(Streams, TheDestructorCommitsAndAbandonDoesNot) {
  const std::string u = uri("scoped");
  {
    auto w = open_ok(u, cs::Mode::write);
    ASSERT_TRUE(w);
    w->ios() << "kept";
  }
  const auto kept = read_bytes(u);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "kept");
  auto w = open_ok(u, cs::Mode::write);
  ASSERT_TRUE(w);
  w->ios() << "dropped";
  EXPECT_TRUE(w->abandon().ok());
  EXPECT_TRUE(w->close().ok()) << "closing after abandon is harmless";
  if (std::string(GetParam()) != "file") {
    const auto after = read_bytes(u);
    EXPECT_EQ(std::string(after.begin(), after.end()), "kept");
  }
  // A stream opened while an exception is already in flight (in a
  // destructor run by the unwinding) commits when it goes out of scope.
  struct WritesOnUnwind {
    std::string u;
    ~WritesOnUnwind() {
      auto s = cs::Stream::open(u, cs::Mode::write);
      if (s.ok()) s.value()->ios() << "written while unwinding";
    }
  };
  try {
    WritesOnUnwind guard{u};
    throw std::runtime_error("unwind");
  } catch (const std::runtime_error&) {
  }
  const auto unwound = read_bytes(u);
  EXPECT_EQ(std::string(unwound.begin(), unwound.end()), "written while unwinding");
}

INSTANTIATE_TEST_SUITE_P(Kinds, Streams, ::testing::Values("file", "mem", "pmem"));

class PmemStreams : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("CAIRN_STREAM_POOL_SIZE", "16M", 1); }
  std::string pool() const { return dir_.file("s.pool"); }
  std::string uri(const std::string& name) const { return "pmem:" + pool() + "#" + name; }
  cairn::testing::TempDir dir_;
};

TEST_F(PmemStreams, PrefixMapsPlainNames) {
  ::setenv("CAIRN_STREAM_PREFIX", ("pmem:" + pool() + "#").c_str(), 1);
  EXPECT_EQ(cs::resolve("solution.dat"), uri("solution.dat"));
  EXPECT_EQ(cs::resolve("mem:x"), "mem:x");
  write_bytes("solution.dat", pattern(1000, 3));
  ::unsetenv("CAIRN_STREAM_PREFIX");
  EXPECT_EQ(cs::resolve("solution.dat"), "file:solution.dat");
  EXPECT_EQ(read_bytes(uri("solution.dat")), pattern(1000, 3));
}

TEST_F(PmemStreams, TheViewPointsIntoThePoolAndStaysWhileNewerVersionsAreWritten) {
  write_bytes(uri("a"), pattern(200000, 1));
  auto r = open_ok(uri("a"), cs::Mode::read);
  ASSERT_TRUE(r);
  const auto held = r->view();
  // Every later commit would reuse the first extent without the reader's pin.
  for (unsigned v = 2; v <= 6; ++v) write_bytes(uri("a"), pattern(200000, v));
  EXPECT_EQ(0, std::memcmp(held.data(), pattern(200000, 1).data(), held.size())) << "a pinned version was reused";
  EXPECT_EQ(read_bytes(uri("a")), pattern(200000, 6));
  ASSERT_TRUE(r->close().ok());
  // Once released, the old extents are reused: the pool does not fill up.
  for (unsigned v = 7; v <= 200; ++v) write_bytes(uri("a"), pattern(200000, v));
  EXPECT_EQ(read_bytes(uri("a")), pattern(200000, 200));
}

// Fresh pool space on tmpfs is written through the file (a reserved
// extent, and one a growing writer moves to); reused space through the
// mapping. Every version reads back whole, whichever way its bytes went.
TEST_F(PmemStreams, VersionsInFreshAndReusedPoolSpaceReadBackWhole) {
  ::setenv("CAIRN_STREAM_POOL_SIZE", "64M", 1);
  for (unsigned v = 1; v <= 6; ++v) {
    const std::size_t n = (3u << 20) + v * 12345;
    cs::OpenOptions o;
    o.size_hint = v % 2 == 0 ? n : 0;  // odd versions grow from the last length
    auto w = open_ok(uri("fresh"), cs::Mode::write, o);
    ASSERT_TRUE(w);
    const auto bytes = pattern(n, v);
    for (std::size_t off = 0; off < n; off += 100000)
      ASSERT_EQ(std::fwrite(bytes.data() + off, 1, std::min<std::size_t>(100000, n - off), w->file()),
                std::min<std::size_t>(100000, n - off));
    ASSERT_TRUE(w->close().ok());
    EXPECT_EQ(read_bytes(uri("fresh")), bytes) << "version " << v;
  }
}

// A released old version's extent can be reused by another stream whose
// readers then pin the same first byte: the former owner's descriptor must
// not claim it again (found by the workflow app: "overlapping extents").
TEST_F(PmemStreams, AnExtentReusedByAnotherStreamIsNotClaimedByItsFormerOwner) {
  cs::OpenOptions big;
  big.size_hint = 300000;
  write_bytes(uri("a"), pattern(300000, 1), big);  // version 1: extent X, first after the directory
  write_bytes(uri("a"), pattern(300000, 2));       // version 2 after it; a's old descriptor names X
  cs::OpenOptions hint;
  hint.size_hint = 100000;  // one extent, first fit: X, with another capacity
  auto w = cs::Stream::open(uri("b"), cs::Mode::write, hint);
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_EQ(std::fwrite(pattern(100000, 3).data(), 1, 100000, w.value()->file()), 100000u);
  ASSERT_TRUE(w.value()->close().ok());
  auto r = open_ok(uri("b"), cs::Mode::read);  // pins b's extent
  ASSERT_TRUE(r);
  for (unsigned v = 4; v < 8; ++v) write_bytes(uri("c"), pattern(5000, v));  // each open reclaims
  EXPECT_EQ(read_bytes(uri("a")), pattern(300000, 2));
  EXPECT_EQ(0, std::memcmp(r->view().data(), pattern(100000, 3).data(), 100000));
  ASSERT_TRUE(r->close().ok());
  EXPECT_EQ(read_bytes(uri("b")), pattern(100000, 3));
}

TEST_F(PmemStreams, AMalformedPoolSizeIsAnErrorNotAnotherSize) {
  for (const char* bad : {"64X", "lots", "-5M", "0", "12MB"}) {
    ::setenv("CAIRN_STREAM_POOL_SIZE", bad, 1);
    auto w = cs::Stream::open(uri("x"), cs::Mode::write);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_EQ(w.error().code, Errc::invalid_argument) << bad;
    EXPECT_NE(w.error().message.find(bad), std::string::npos) << w.error().message;
  }
  ::setenv("CAIRN_STREAM_POOL_SIZE", "3M", 1);
  write_bytes(uri("x"), pattern(100, 1));
  EXPECT_EQ(std::filesystem::file_size(pool()), 3u << 20);
}

TEST_F(PmemStreams, NeverCommittedAndBusyAndRemoved) {
  auto w = open_ok(uri("x"), cs::Mode::write);
  ASSERT_TRUE(w);
  auto r = cs::Stream::open(uri("x"), cs::Mode::read);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::no_version) << r.error().message;
  auto w2 = cs::Stream::open(uri("x"), cs::Mode::write);
  ASSERT_FALSE(w2.ok());
  EXPECT_EQ(w2.error().code, Errc::busy);
  EXPECT_NE(w2.error().message.find(std::to_string(::getpid())), std::string::npos) << w2.error().message;
  std::fputs("hello", w->file());
  ASSERT_TRUE(w->close().ok());
  auto l = cs::list(pool());
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l.value().size(), 1u);
  EXPECT_EQ(l.value()[0].name, "x");
  EXPECT_EQ(l.value()[0].length, 5u);
  EXPECT_EQ(l.value()[0].version, 1u);
  ASSERT_TRUE(cs::remove(uri("x")).ok());
  auto gone = cs::Stream::open(uri("x"), cs::Mode::read);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, Errc::not_found);
}

TEST_F(PmemStreams, AFullPoolFailsTheWriteAndKeepsTheOldVersion) {
  write_bytes(uri("big"), pattern(1000, 9));
  auto w = open_ok(uri("big"), cs::Mode::write);
  ASSERT_TRUE(w);
  const auto huge = pattern(20u << 20, 4);  // more than the 16 MiB pool
  const std::size_t n = std::fwrite(huge.data(), 1, huge.size(), w->file());
  EXPECT_LT(n, huge.size());
  EXPECT_TRUE(std::ferror(w->file()));
  auto c = w->close();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, Errc::out_of_space) << c.error().message;
  EXPECT_NE(cs::last_error_message().find("no room"), std::string::npos) << cs::last_error_message();
  EXPECT_EQ(read_bytes(uri("big")), pattern(1000, 9));
  write_bytes(uri("big"), pattern(4u << 20, 5));  // the failed writer's space came back
  EXPECT_EQ(read_bytes(uri("big")), pattern(4u << 20, 5));
}

TEST_F(PmemStreams, BadUrisAndForeignPools) {
  // ("ftp:x" is no URI but a file name: it maps to file:ftp:x.)
  EXPECT_EQ(cs::resolve("ftp:x"), "file:ftp:x");
  for (const char* bad : {"pmem:nohash", "pmem:#name", "pmem:/x/p.pool#", "mem:", "file:"}) {
    auto s = cs::Stream::open(bad, cs::Mode::read);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.error().code, Errc::invalid_argument) << bad;
  }
  auto longname = cs::Stream::open(uri(std::string(200, 'n')), cs::Mode::write);
  ASSERT_FALSE(longname.ok());
  EXPECT_EQ(longname.error().code, Errc::invalid_argument);
  // A cairn pool made for something else, and a file that is no pool.
  {
    auto p = cairn::pool::Pool::create(dir_.file("other.pool"), {.size = 4u << 20});
    ASSERT_TRUE(p.ok());
  }
  auto other = cs::Stream::open("pmem:" + dir_.file("other.pool") + "#s", cs::Mode::write);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, Errc::foreign_file) << other.error().message;
  std::ofstream(dir_.file("text.pool")) << std::string(2 << 20, 'x');
  auto text = cs::Stream::open("pmem:" + dir_.file("text.pool") + "#s", cs::Mode::read);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().code, Errc::foreign_file) << text.error().message;
  auto missing = cs::Stream::open(uri("s"), cs::Mode::read);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::not_found) << missing.error().message;
}

TEST_F(PmemStreams, ADamagedDescriptorIsReportedNotRead) {
  write_bytes(uri("d"), pattern(5000, 1));
  {
    // Flip one bit of the committed descriptor's length, as bad media would.
    auto p = cairn::pool::Pool::open(pool());
    ASSERT_TRUE(p.ok());
    const auto root = p.value()->root(cairn::stream::detail::kStreamRoot);
    auto* e = reinterpret_cast<cairn::stream::detail::StreamEntry*>(p.value()->at(root.offset) +
                                                                    sizeof(cairn::stream::detail::DirHeader));
    e[0].desc[e[0].commit & 1].length ^= 4;
  }
  auto r = cs::Stream::open(uri("d"), cs::Mode::read);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::corrupted) << r.error().message;
}

// A damaged byte of a committed version's data: a typed error naming the
// stream and the pool, never different contents.
TEST_F(PmemStreams, ADamagedByteOfAVersionIsReportedNotRead) {
  write_bytes(uri("d"), pattern(70000, 1));
  {
    auto p = cairn::pool::Pool::open(pool());
    ASSERT_TRUE(p.ok());
    auto* e = entry_of(*p.value(), "d");
    ASSERT_NE(e, nullptr);
    const auto& desc = e->desc[e->commit & 1];
    p.value()->at(desc.offset)[12345] ^= std::byte{0x10};
  }
  cs::detail::forget_pools();
  auto r = cs::Stream::open(uri("d"), cs::Mode::read);
  ASSERT_FALSE(r.ok()) << "damaged bytes were read as the stream's contents";
  EXPECT_EQ(r.error().code, Errc::corrupted) << r.error().message;
  EXPECT_NE(r.error().message.find("'d'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(pool()), std::string::npos) << r.error().message;
  write_bytes(uri("d"), pattern(100, 2));  // written again, it reads
  EXPECT_EQ(read_bytes(uri("d")), pattern(100, 2));
}

// A root naming the directory off a block boundary, or so far out that the
// bound check wrapped (found by fuzz/stream_fuzz): a typed error, nothing read.
TEST_F(PmemStreams, ADirectoryRootOffABlockOrPastThePoolIsRefused) {
  namespace sd = cairn::stream::detail;
  write_bytes(uri("r"), pattern(100, 1));
  std::uint64_t good = 0;
  {
    auto p = cairn::pool::Pool::open(pool());
    ASSERT_TRUE(p.ok());
    good = p.value()->root(sd::kStreamRoot).offset;
  }
  for (std::uint64_t bad : {good + 2, ~std::uint64_t{0} - 7, std::uint64_t{1} << 63}) {
    {
      // Written into the live root table as damage would (publish_root
      // refuses offsets past the pool), its checksum made to match.
      auto p = cairn::pool::Pool::open(pool());
      ASSERT_TRUE(p.ok());
      std::byte* base = p.value()->base();
      const auto selector = *reinterpret_cast<const std::uint64_t*>(base + cairn::pool::kSelectorOffset);
      auto* t = reinterpret_cast<cairn::pool::RootTable*>(
          base + (selector == 0 ? cairn::pool::kRootTable0 : cairn::pool::kRootTable1));
      t->slots[sd::kStreamRoot].offset = bad;
      t->checksum = cairn::pool::checksum64(t, offsetof(cairn::pool::RootTable, checksum));
      p.value()->persist(t, sizeof *t);
    }
    cs::detail::forget_pools();
    auto r = cs::Stream::open(uri("r"), cs::Mode::read);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::corrupted) << r.error().message;
  }
}

// A pool whose directory predates the checksums is refused, saying so.
TEST_F(PmemStreams, APoolOfTheFirstStreamFormatIsRefused) {
  namespace sd = cairn::stream::detail;
  write_bytes(uri("old"), pattern(100, 1));
  {
    auto p = cairn::pool::Pool::open(pool());
    ASSERT_TRUE(p.ok());
    auto* h = reinterpret_cast<sd::DirHeader*>(p.value()->at(p.value()->root(sd::kStreamRoot).offset));
    h->version = 1;
    h->check = cairn::pool::checksum64(h, offsetof(sd::DirHeader, check));
  }
  cs::detail::forget_pools();
  auto r = cs::Stream::open(uri("old"), cs::Mode::read);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::wrong_version) << r.error().message;
  EXPECT_NE(r.error().message.find("version 1"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(pool()), std::string::npos) << r.error().message;
}

// The bit-flip sweep: single-bit flips of a small committed pool file (and a
// few truncations), each opened and read in a child: the child gets a typed
// error or the identical contents, never different contents, never a signal.
TEST_F(PmemStreams, BitFlipSweepGivesATypedErrorOrTheIdenticalContents) {
  namespace sd = cairn::stream::detail;
  ::setenv("CAIRN_STREAM_POOL_SIZE", "1M", 1);
  const std::vector<std::pair<std::string, std::vector<unsigned char>>> want = {{"a", pattern(5000, 2)},
                                                                                {"b", pattern(2000, 3)}};
  write_bytes(uri("a"), pattern(3000, 1));  // a has two versions: both descriptors in use
  for (const auto& [name, bytes] : want) write_bytes(uri(name), bytes);
  cs::detail::forget_pools();
  std::vector<char> image;
  {
    std::ifstream in(pool(), std::ios::binary);
    image.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_EQ(image.size(), 1u << 20);
  // Flips of non-zero bytes (the headers, the directory, the data), more of
  // them in stream a's directory entry (commit word, descriptors, name).
  std::vector<std::size_t> nonzero, entry_a;
  for (std::size_t i = 0; i < image.size(); ++i)
    if (image[i] != 0) nonzero.push_back(i);
  {
    auto p = cairn::pool::Pool::open(pool());
    ASSERT_TRUE(p.ok());
    const auto* e = reinterpret_cast<const std::byte*>(entry_of(*p.value(), "a"));
    ASSERT_NE(e, nullptr);
    const std::size_t at = static_cast<std::size_t>(e - p.value()->base());
    for (std::size_t i = at; i < at + sizeof(sd::StreamEntry); ++i)
      if (image[i] != 0) entry_a.push_back(i);
  }
  struct Case {
    std::size_t flip_byte = 0;
    int flip_bit = -1;  // -1: a truncation
    std::size_t truncate_to = 0;
  };
  std::vector<Case> cases;
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  for (int i = 0; i < 150; ++i) cases.push_back({nonzero[next() % nonzero.size()], static_cast<int>(next() % 8), 0});
  for (int i = 0; i < 30; ++i) cases.push_back({entry_a[next() % entry_a.size()], static_cast<int>(next() % 8), 0});
  for (std::size_t t : {std::size_t{0}, std::size_t{100}, std::size_t{4096}, std::size_t{65536}, std::size_t{300000},
                        image.size() / 2, image.size() - 4096})
    cases.push_back({0, -1, t});

  int identical = 0, typed = 0;
  for (const Case& c : cases) {
    std::vector<char> damaged = image;
    if (c.flip_bit >= 0)
      damaged[c.flip_byte] = static_cast<char>(damaged[c.flip_byte] ^ (1 << c.flip_bit));
    else
      damaged.resize(c.truncate_to);
    {
      std::ofstream out(pool(), std::ios::binary | std::ios::trunc);
      out.write(damaged.data(), static_cast<std::streamsize>(damaged.size()));
    }
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::alarm(30);  // a hang shows as a signal
      bool error = false;
      for (const auto& [name, bytes] : want) {
        auto s = cs::Stream::open(uri(name), cs::Mode::read);
        if (!s.ok()) {
          if (s.error().code == Errc::ok || s.error().message.empty()) ::_exit(13);
          error = true;
          continue;
        }
        const auto v = s.value()->view();
        if (v.size() != bytes.size() || std::memcmp(v.data(), bytes.data(), v.size()) != 0) ::_exit(11);
      }
      ::_exit(error ? 12 : 10);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    const std::string what = c.flip_bit >= 0
                                 ? "bit " + std::to_string(c.flip_bit) + " of byte " + std::to_string(c.flip_byte)
                                 : "truncation to " + std::to_string(c.truncate_to) + " bytes";
    ASSERT_FALSE(WIFSIGNALED(status)) << what << ": signal " << WTERMSIG(status);
    ASSERT_TRUE(WIFEXITED(status)) << what;
    EXPECT_NE(WEXITSTATUS(status), 11) << what << ": silently different contents";
    EXPECT_TRUE(WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 12 || WEXITSTATUS(status) == 11)
        << what << ": exit " << WEXITSTATUS(status);
    identical += WEXITSTATUS(status) == 10;
    typed += WEXITSTATUS(status) == 12;
  }
  std::cout << "bit-flip sweep: " << cases.size() << " cases, " << identical << " identical, " << typed
            << " typed errors\n";
}

// Another process commits; this one reads, waits, and survives its death.
TEST_F(PmemStreams, AStreamCommittedByAnotherProcessIsReadHere) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto s = cs::Stream::open(uri("from-child"), cs::Mode::write);
    if (!s.ok()) ::_exit(2);
    const auto b = pattern(3u << 20, 11);
    std::fwrite(b.data(), 1, b.size(), s.value()->file());
    ::_exit(s.value()->close().ok() ? 0 : 3);
  }
  ASSERT_TRUE(cs::wait(uri("from-child"), 30).ok());
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(read_bytes(uri("from-child")), pattern(3u << 20, 11));
}

TEST_F(PmemStreams, AWriterKilledMidStreamLeavesTheLastCommittedVersion) {
  write_bytes(uri("sol"), pattern(1u << 20, 1));
  const pid_t child = fork_stalled_writer(uri("sol"), pattern(6u << 20, 12));  // grows the pending extent twice
  ASSERT_GT(child, 0);
  // The live writer holds the stream.
  auto busy = cs::Stream::open(uri("sol"), cs::Mode::write);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code, Errc::busy);
  EXPECT_NE(busy.error().message.find(std::to_string(child)), std::string::npos) << busy.error().message;
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(read_bytes(uri("sol")), pattern(1u << 20, 1));
  // The dead writer's extent is reclaimed: a 12 MiB stream fits in the 16 MiB
  // pool only if its 8 MiB pending extent was freed.
  write_bytes(uri("sol"), pattern(12u << 20, 13));
  EXPECT_EQ(read_bytes(uri("sol")), pattern(12u << 20, 13));
}

// A writer that died but was never reaped (a zombie: its parent does not wait
// for it, as an init that reaps nothing leaves orphans) holds nothing.
TEST_F(PmemStreams, AZombieWriterHoldsNoLock) {
  const pid_t child = fork_stalled_writer(uri("z"), pattern(1u << 16, 14));
  ASSERT_GT(child, 0);
  ::kill(child, SIGKILL);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // dead, not reaped
  auto s = cs::Stream::open(uri("z"), cs::Mode::write);
  ASSERT_TRUE(s.ok()) << s.error().message;
  std::fputs("mine", s.value()->file());
  ASSERT_TRUE(s.value()->close().ok());
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const auto b = read_bytes(uri("z"));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data()), b.size()), "mine");
}

// Whether a writer is alive is not read from /proc: a writer in another pid
// namespace sharing the pool, or hidden by hidepid=2, shows a pid that means
// nothing here or names another process. Its extent must not be reclaimed.
TEST_F(PmemStreams, ALiveWriterWhosePidMeansNothingHereKeepsItsExtent) {
  write_bytes(uri("w"), pattern(1u << 20, 1));
  const auto mine = pattern(4u << 20, 2);
  int go = -1;
  const pid_t child = fork_held_writer(uri("w"), mine, go);  // its extent: the first hole of 4 MiB
  ASSERT_GT(child, 0);
  {
    auto p = cairn::pool::Pool::open(pool());
    ASSERT_TRUE(p.ok()) << p.error().message;
    auto* e = entry_of(*p.value(), "w");
    ASSERT_NE(e, nullptr);
    ASSERT_EQ(e->owner.pid, static_cast<std::uint64_t>(child));
    e->owner.pid = 1;  // what the writer's own pid namespace calls it: here, another process
  }
  auto busy = cs::Stream::open(uri("w"), cs::Mode::write);
  EXPECT_FALSE(busy.ok()) << "a live writer's stream was taken over";
  if (!busy.ok()) {
    EXPECT_EQ(busy.error().code, Errc::busy) << busy.error().message;
  }
  busy = cairn::Error{};  // (closes a writer that should not exist)
  // First fit: this stream would take the writer's extent, had it been reclaimed.
  cs::OpenOptions hint;
  hint.size_hint = 4u << 20;
  write_bytes(uri("x"), pattern(4u << 20, 3), hint);
  ASSERT_EQ(::write(go, "x", 1), 1);
  ::close(go);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(read_bytes(uri("w")), mine);
  EXPECT_EQ(read_bytes(uri("x")), pattern(4u << 20, 3));
}

// A child forked by a writer's process inherits the writer's file
// descriptors, but not its liveness: when the writer's process dies, the
// stream is free although the child lives on.
TEST_F(PmemStreams, AChildForkedByAWriterDoesNotKeepItAlive) {
  write_bytes(uri("f"), pattern(1000, 1));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    ::close(ready[0]);
    auto s = cs::Stream::open(uri("f"), cs::Mode::write);
    if (!s.ok()) ::_exit(2);
    std::fputs("never committed", s.value()->file());
    std::fflush(s.value()->file());
    // The heir says it is ready itself: by then fork has returned in it, so
    // its fork handlers have run (a writer reporting its heir's pid could be
    // killed before the heir first ran, while the heir still held the
    // writer's lock through the descriptors fork copied).
    if (::fork() == 0) {
      const pid_t me = ::getpid();
      (void)!::write(ready[1], &me, sizeof me);
      ::pause();
      ::_exit(0);
    }
    ::pause();  // killed here
    ::_exit(4);
  }
  ::close(ready[1]);
  pid_t heir = -1;
  ASSERT_EQ(::read(ready[0], &heir, sizeof heir), static_cast<ssize_t>(sizeof heir));
  ::close(ready[0]);
  ::kill(writer, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, 0), writer);
  auto w = cs::Stream::open(uri("f"), cs::Mode::write);
  ::kill(heir, SIGKILL);  // reparented to init (or a subreaper), which reaps it
  ASSERT_TRUE(w.ok()) << w.error().message;
  std::fputs("mine", w.value()->file());
  ASSERT_TRUE(w.value()->close().ok());
  const auto b = read_bytes(uri("f"));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data()), b.size()), "mine");
}

// The pool lock's fcntl can fail (no OFD locks on that file system, no lock
// records left): a typed error naming the pool and what to do, nothing done.
TEST_F(PmemStreams, APoolLockThatCannotBeTakenIsATypedError) {
  write_bytes(uri("l"), pattern(100, 1));
  cs::detail::fail_next_pool_lock(ENOLCK);
  auto w = cs::Stream::open(uri("l"), cs::Mode::write);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, Errc::io_error) << w.error().message;
  EXPECT_NE(w.error().message.find(pool()), std::string::npos) << w.error().message;
  EXPECT_NE(w.error().message.find("lock"), std::string::npos) << w.error().message;
  cs::detail::fail_next_pool_lock(EINVAL);
  auto r = cs::Stream::open(uri("l"), cs::Mode::read);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unsupported) << r.error().message;
  EXPECT_NE(r.error().message.find("/dev/shm"), std::string::npos) << r.error().message;
  // A writer whose commit cannot take the lock commits nothing.
  auto w2 = open_ok(uri("l"), cs::Mode::write);
  ASSERT_TRUE(w2);
  std::fputs("new", w2->file());
  std::fflush(w2->file());
  cs::detail::fail_next_pool_lock(ENOLCK);
  EXPECT_FALSE(w2->close().ok());
  EXPECT_EQ(read_bytes(uri("l")), pattern(100, 1));
  write_bytes(uri("l"), pattern(200, 2));  // the failed writer is gone
  EXPECT_EQ(read_bytes(uri("l")), pattern(200, 2));
}

// The process keeps a few pools mapped; a writer whose pool was dropped from
// that cache and mapped again is still alive to the new mapping's reclaim.
TEST_F(PmemStreams, AWriterSurvivesItsPoolBeingMappedAgain) {
  auto w = open_ok(uri("first"), cs::Mode::write);
  ASSERT_TRUE(w);
  const auto a = pattern(1u << 20, 21);
  ASSERT_EQ(std::fwrite(a.data(), 1, a.size(), w->file()), a.size());
  std::fflush(w->file());
  for (int i = 0; i < 10; ++i)
    write_bytes("pmem:" + dir_.file("other-" + std::to_string(i) + ".pool") + "#x", pattern(10, 1));
  // Written through a new mapping of the same pool: must not take the extent
  // the first writer is still filling.
  write_bytes(uri("second"), pattern(2u << 20, 22));
  ASSERT_TRUE(w->close().ok());
  EXPECT_EQ(read_bytes(uri("first")), a);
  EXPECT_EQ(read_bytes(uri("second")), pattern(2u << 20, 22));
}

TEST_F(PmemStreams, StageOutAndBackInKeepsEveryByte) {
  ::setenv("CAIRN_STREAM_POOL_SIZE", "128M", 1);
  const std::vector<std::pair<std::string, std::vector<unsigned char>>> streams = {
      {"mesh/part-0", pattern(40u << 20, 1)},  // several 16 MiB chunks over 2 threads
      {"mesh/part-1", pattern(3000, 2)},
      {"fields.txt", pattern(0, 3)}};
  for (const auto& [name, bytes] : streams) write_bytes(uri(name), bytes);
  std::vector<std::uint64_t> seen;
  cs::StageOptions o;
  o.threads = 2;
  o.progress = [&](std::uint64_t done, std::uint64_t) { seen.push_back(done); };
  auto out = cs::stage_out("pmem:" + pool(), dir_.file("pfs"), o);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out.value().items, 3u);
  EXPECT_EQ(out.value().bytes, (40u << 20) + 3000u);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), out.value().bytes);
  for (const auto& [name, bytes] : streams) EXPECT_EQ(read_bytes("file:" + dir_.file("pfs/" + name)), bytes) << name;
  // Back into another pool, each file a committed stream named by its path.
  const std::string other = dir_.file("other.pool");
  auto in = cs::stage_in(dir_.file("pfs"), "pmem:" + other, o);
  ASSERT_TRUE(in.ok()) << in.error().message;
  EXPECT_EQ(in.value().items, 3u);
  for (const auto& [name, bytes] : streams) EXPECT_EQ(read_bytes("pmem:" + other + "#" + name), bytes) << name;
  // A whole pool file, as it is.
  auto whole = cs::stage_out(other, dir_.file("copy"), o);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  for (const auto& [name, bytes] : streams)
    EXPECT_EQ(read_bytes("pmem:" + dir_.file("copy/other.pool") + "#" + name), bytes) << name;
  // A name that would leave the directory is refused.
  write_bytes(uri("../escape"), pattern(10, 4));
  auto bad = cs::stage_out(uri("../escape"), dir_.file("pfs2"), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::invalid_argument);
}

// ---- failed write-backs (issue 41): the fault device under the stream pool

// The issue's reproduction: a writer whose every flush, drain and copy fails
// (CAIRN_DEVICE, in a child that maps the pool afresh) must not commit.
TEST_F(PmemStreams, AWriterOnAFailingDeviceDoesNotCommit) {
  write_bytes(uri("v"), pattern(70000, 1));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setenv("CAIRN_DEVICE", "fault:flush=1,drain=1,copy=1", 1);
    auto s = cs::Stream::open(uri("v"), cs::Mode::write);
    if (!s.ok()) ::_exit(2);
    const auto b = pattern(90000, 2);
    std::fwrite(b.data(), 1, b.size(), s.value()->file());
    auto r = s.value()->close();
    ::_exit(r.ok() ? 0 : r.error().code == Errc::poisoned || r.error().code == Errc::io_error ? 3 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "0: the failing writer's close() reported success";
  cs::detail::forget_pools();
  EXPECT_EQ(read_bytes(uri("v")), pattern(70000, 1));
}

// Every pool the streams map here goes through a fault device the test arms
// mid-run; the parameter says which kind of call fails from then on.
class PmemStreamFaults : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ::setenv("CAIRN_STREAM_POOL_SIZE", "16M", 1);
    cs::detail::set_device_factory([inj = injector_] { return cairn::devices::make_fault_device(inj); });
    cs::detail::forget_pools();
  }
  void TearDown() override {
    cs::detail::set_device_factory({});
    cs::detail::forget_pools();
  }
  std::string uri(const std::string& name) const { return "pmem:" + dir_.file("f.pool") + "#" + name; }
  // The next call of the parameter's kind fails, and every later one.
  void arm() {
    cairn::devices::FaultPlan plan;
    const std::string kind = GetParam();
    (kind == "flush" ? plan.flush : kind == "drain" ? plan.drain : plan.copy) = 1;
    injector_->arm(plan);
  }
  // What a process that maps the pool afresh (with a sound device) reads.
  std::vector<unsigned char> fresh_read(const std::string& name) {
    cs::detail::set_device_factory({});
    cs::detail::forget_pools();
    return read_bytes(uri(name));
  }
  std::shared_ptr<cairn::devices::FaultInjector> injector_ = std::make_shared<cairn::devices::FaultInjector>();
  cairn::testing::TempDir dir_;
};

TEST_P(PmemStreamFaults, CloseReportsAFailedWriteBackAndThePreviousVersionStays) {
  const auto v1 = pattern(100000, 1);
  write_bytes(uri("s"), v1);
  auto w = open_ok(uri("s"), cs::Mode::write);
  ASSERT_TRUE(w);
  const auto v2 = pattern(300000, 2);
  ASSERT_EQ(std::fwrite(v2.data(), 1, v2.size() / 2, w->file()), v2.size() / 2);
  std::fflush(w->file());
  arm();  // the second half's copies, the drains before the commit word, or its flush
  ASSERT_EQ(std::fwrite(v2.data() + v2.size() / 2, 1, v2.size() - v2.size() / 2, w->file()), v2.size() - v2.size() / 2);
  auto r = w->close();
  ASSERT_FALSE(r.ok()) << GetParam() << ": close() reported success after a failed write-back";
  EXPECT_TRUE(r.error().code == Errc::poisoned || r.error().code == Errc::io_error) << r.error().message;
  EXPECT_NE(r.error().message.find("'s'"), std::string::npos) << "names the stream: " << r.error().message;
  EXPECT_EQ(fresh_read("s"), v1) << "a fresh open must read the previous version bit for bit";
}

TEST_P(PmemStreamFaults, FcloseOfTheCApiReportsAFailedWriteBack) {
  const auto v1 = pattern(5000, 3);
  write_bytes(uri("c"), v1);
  FILE* f = cairn_stream_open(uri("c").c_str(), "w", 0);
  ASSERT_NE(f, nullptr) << cairn_stream_errormsg();
  const auto v2 = pattern(200000, 4);
  ASSERT_EQ(std::fwrite(v2.data(), 1, 1000, f), 1000u);
  std::fflush(f);
  arm();
  ASSERT_EQ(std::fwrite(v2.data() + 1000, 1, v2.size() - 1000, f), v2.size() - 1000);
  errno = 0;
  EXPECT_EQ(std::fclose(f), EOF) << GetParam() << ": fclose reported success after a failed write-back";
  EXPECT_EQ(errno, EIO);
  EXPECT_NE(std::string(cairn_stream_errormsg()).find("'c'"), std::string::npos) << cairn_stream_errormsg();
  EXPECT_EQ(fresh_read("c"), v1);
}

// A stream's first version: the failed commit leaves nothing to read.
TEST_P(PmemStreamFaults, AFailedFirstCommitLeavesNoVersion) {
  write_bytes(uri("other"), pattern(10, 5));  // the pool exists, cleanly
  auto w = open_ok(uri("first"), cs::Mode::write);
  ASSERT_TRUE(w);
  arm();
  const auto b = pattern(50000, 6);
  ASSERT_EQ(std::fwrite(b.data(), 1, b.size(), w->file()), b.size());
  ASSERT_FALSE(w->close().ok());
  cs::detail::set_device_factory({});
  cs::detail::forget_pools();
  auto r = cs::Stream::open(uri("first"), cs::Mode::read);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::no_version) << r.error().message;
  EXPECT_EQ(read_bytes(uri("other")), pattern(10, 5));
}

// After a failed write-back the process's mapping of the pool refuses every
// commit; the next stream opened maps the pool again (a sound device now).
TEST_P(PmemStreamFaults, TheNextOpenMapsAPoisonedPoolAgain) {
  write_bytes(uri("p"), pattern(1000, 1));
  auto w = open_ok(uri("p"), cs::Mode::write);
  ASSERT_TRUE(w);
  arm();
  std::fputs("lost", w->file());
  ASSERT_FALSE(w->close().ok());
  cs::detail::set_device_factory({});  // the device was fixed; no forget_pools()
  write_bytes(uri("p"), pattern(2000, 2));
  EXPECT_EQ(read_bytes(uri("p")), pattern(2000, 2));
}

INSTANTIATE_TEST_SUITE_P(Kinds, PmemStreamFaults, ::testing::Values("flush", "drain", "copy"));

// A reader that waits in vain is told which stream it waited for and what its
// writer has not done yet: created it, or committed (closed) it.
TEST(MemStreams, WaitNamesTheStreamAndWhatItsWriterHasNotDone) {
  const auto missing = cs::wait("mem:not-yet", 0.01);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::not_found);
  EXPECT_NE(missing.error().message.find("stream 'mem:not-yet' does not exist"), std::string::npos)
      << missing.error().message;
  EXPECT_NE(missing.error().message.find("its writer has not created it yet"), std::string::npos)
      << missing.error().message;
  auto w = open_ok("mem:open-writer", cs::Mode::write);
  ASSERT_TRUE(w);
  const auto open = cs::wait("mem:open-writer", 0.01);
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.error().code, Errc::no_version);
  EXPECT_NE(open.error().message.find("its writer has not closed it yet"), std::string::npos) << open.error().message;
  ASSERT_TRUE(w->close().ok());
  EXPECT_TRUE(cs::wait("mem:open-writer", 0.01).ok());
  ASSERT_TRUE(cs::remove("mem:open-writer").ok());
}

TEST(MemStreams, ReadersKeepTheVersionTheyOpened) {
  write_bytes("mem:shared", pattern(1000, 1));
  auto r = open_ok("mem:shared", cs::Mode::read);
  ASSERT_TRUE(r);
  write_bytes("mem:shared", pattern(1000, 2));
  const auto v = r->view();
  EXPECT_EQ(0, std::memcmp(v.data(), pattern(1000, 1).data(), v.size()));
  EXPECT_EQ(read_bytes("mem:shared"), pattern(1000, 2));
  auto l = cs::list("mem:");
  ASSERT_TRUE(l.ok());
  ASSERT_FALSE(l.value().empty());
  EXPECT_EQ(l.value()[0].version, 2u);
  ASSERT_TRUE(cs::remove("mem:shared").ok());
}

TEST(FileStreams, SyncAndErrors) {
  cairn::testing::TempDir dir;
  cs::OpenOptions o;
  o.sync = true;
  write_bytes("file:" + dir.file("a.dat"), pattern(10000, 1), o);
  EXPECT_EQ(read_bytes("file:" + dir.file("a.dat")), pattern(10000, 1));
  auto d = cs::Stream::open("file:" + dir.path(), cs::Mode::read);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, Errc::is_directory);
  auto nodir = cs::Stream::open("file:" + dir.file("no/such/dir"), cs::Mode::write);
  ASSERT_FALSE(nodir.ok());
  EXPECT_EQ(nodir.error().code, Errc::not_found);
}

}  // namespace
