// fuzz_support.cpp — the scratch directory, sparse pool images and the
// checksum fix-up shared by the fuzz targets and the seed generator.
#include "fuzz_support.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cairn/extended/pool.hpp"

namespace cairn::fuzz {
namespace {

[[noreturn]] void harness_failure(const std::string& what) {
  std::fprintf(stderr, "cairn fuzz harness: %s: %s\n", what.c_str(), std::strerror(errno));
  std::abort();
}

std::uint64_t load_le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(std::vector<std::uint8_t>& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

void pwrite_all(int fd, const void* data, std::size_t len, std::uint64_t offset, const std::string& path) {
  auto* p = static_cast<const std::uint8_t*>(data);
  while (len > 0) {
    const ssize_t n = ::pwrite(fd, p, len, static_cast<off_t>(offset));
    if (n <= 0) harness_failure("writing " + path);
    p += n;
    len -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

// Reseals what lies within the file: the header copies and the root tables,
// each with the checksum the pool computes, so that a mutation inside them is
// read as data rather than refused at the checksum.
template <class T>
void reseal(int fd, std::uint64_t offset, std::uint64_t file_size, const std::string& path) {
  if (offset + sizeof(T) > file_size) return;
  T t{};
  if (::pread(fd, &t, sizeof t, static_cast<off_t>(offset)) != static_cast<ssize_t>(sizeof t))
    harness_failure("reading " + path);
  t.checksum = pool::checksum64(&t, offsetof(T, checksum));
  pwrite_all(fd, &t, sizeof t, offset, path);
}

}  // namespace

// libFuzzer calls this once before the first input: one thread for the
// library's parallel copies and checks, so that an input replays the same
// way (an explicit $CAIRN_THREADS wins).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::setenv("CAIRN_THREADS", "1", 0);
  (void)scratch_dir();
  return 0;
}

const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the directory runs after
  // static destructors would have.
  static const std::string* dir = [] {
    auto* d = new std::string("/dev/shm/cairn-fuzz-" + std::to_string(::getpid()));
    std::error_code ec;
    std::filesystem::remove_all(*d, ec);
    std::filesystem::create_directories(*d, ec);
    if (ec) harness_failure("creating " + *d);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
    return d;
  }();
  return *dir;
}

void clear_scratch() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(scratch_dir(), ec))
    std::filesystem::remove_all(e.path(), ec);
}

void write_file(const std::string& path, std::span<const std::uint8_t> bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) harness_failure("creating " + path);
  pwrite_all(fd, bytes.data(), bytes.size(), 0, path);
  ::close(fd);
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::vector<std::uint8_t> out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) harness_failure("opening " + path);
  std::uint8_t buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) harness_failure("reading " + path);
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

std::uint8_t write_sparse_image(const std::string& path, std::span<const std::uint8_t> input) {
  std::uint64_t size = 0;
  std::uint8_t flags = 0;
  std::size_t at = 0;
  if (input.size() >= 5) {
    size = std::min<std::uint64_t>(load_le(input.data(), 4), kMaxImageBytes);
    flags = input[4];
    at = 5;
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) harness_failure("creating " + path);
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) harness_failure("sizing " + path);
  while (at + 6 <= input.size()) {
    const std::uint64_t offset = load_le(&input[at], 4);
    std::uint64_t len = load_le(&input[at + 4], 2);
    at += 6;
    len = std::min<std::uint64_t>(len, input.size() - at);
    const std::uint64_t in_file = offset >= size ? 0 : std::min(len, size - offset);
    if (in_file > 0) pwrite_all(fd, &input[at], in_file, offset, path);
    at += len;
  }
  if (flags & kFixPoolChecksums) {
    reseal<pool::PoolHeader>(fd, pool::kHeaderCopy0, size, path);
    reseal<pool::PoolHeader>(fd, pool::kHeaderCopy1, size, path);
    reseal<pool::RootTable>(fd, pool::kRootTable0, size, path);
    reseal<pool::RootTable>(fd, pool::kRootTable1, size, path);
  }
  ::close(fd);
  return flags;
}

std::vector<std::uint8_t> encode_sparse_image(std::span<const std::uint8_t> file, std::uint8_t flags) {
  std::vector<std::uint8_t> out;
  store_le(out, std::min<std::uint64_t>(file.size(), kMaxImageBytes), 4);
  out.push_back(flags);
  // Runs of non-zero bytes; gaps of fewer than 16 zeros stay inside a run
  // (a segment costs 6 bytes of framing).
  constexpr std::size_t kGap = 16, kMaxRun = 0xFFFF;
  const std::size_t n = std::min<std::size_t>(file.size(), kMaxImageBytes);
  std::size_t i = 0;
  while (i < n) {
    if (file[i] == 0) {
      ++i;
      continue;
    }
    std::size_t end = i, zeros = 0;
    while (end < n && end - i < kMaxRun && zeros < kGap) {
      zeros = file[end] == 0 ? zeros + 1 : 0;
      ++end;
    }
    end -= zeros;  // trailing zeros stay out
    store_le(out, i, 4);
    store_le(out, end - i, 2);
    out.insert(out.end(), file.begin() + static_cast<std::ptrdiff_t>(i),
               file.begin() + static_cast<std::ptrdiff_t>(end));
    i = end;
  }
  return out;
}

persist::Options state_options(const std::string& strategy) {
  persist::Options o;
  o.strategy = strategy;
  o.name = "state";
  o.dir = scratch_dir();
  o.threads = 1;
  o.async_flush = false;
  return o;
}

octree::Options amr_options() {
  octree::Options o;
  o.dims = 3;
  o.data_size = sizeof(double);
  o.pool_size = 4ull << 20;
  o.dram_budget = ~0ull;  // in-core, as amr's baseline
  o.background_gc = false;
  return o;
}

Result<State> open_state(persist::Context& ctx) {
  auto p = ctx.region("p", kPlainBytes);
  if (!p.ok()) return std::move(p).error();
  auto u = ctx.dual_region("u", kDualBytes);
  if (!u.ok()) return std::move(u).error();
  if (auto r = ctx.open(); !r.ok()) return std::move(r).error();
  auto** from = p.value()->as<void*>();
  *from = p.value()->as<std::byte>() + kPointerTarget;
  if (auto r = ctx.register_pointer(from); !r.ok()) return std::move(r).error();
  return State{p.value(), u.value()};
}

}  // namespace cairn::fuzz
