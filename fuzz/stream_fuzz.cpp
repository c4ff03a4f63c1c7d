// stream_fuzz.cpp — libFuzzer target: a pmem: stream pool (pool header and
// roots, the stream directory, descriptors, extents) built from a sparse
// image, read through cairn::stream: every listed stream opened for reading,
// viewed and read through its FILE*, then a new stream written and
// committed (flags bit 1: one listed stream removed first). Any typed error
// is fine.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "cairn/stream.hpp"
#include "fuzz_support.hpp"

namespace {

namespace stream = cairn::stream;

volatile std::uint64_t g_sink;  // keeps the reads of the bytes

void read_one(const std::string& uri) {
  auto s = stream::Stream::open(uri, stream::Mode::read);
  if (!s.ok()) return;
  const auto bytes = s.value()->view();
  std::uint64_t sum = 0;
  for (std::byte b : bytes) sum += static_cast<std::uint8_t>(b);
  char buf[512];
  while (std::fread(buf, 1, sizeof buf, s.value()->file()) == sizeof buf) sum += static_cast<unsigned char>(buf[0]);
  std::fseek(s.value()->file(), 0, SEEK_SET);
  (void)std::fread(buf, 1, 16, s.value()->file());
  (void)s.value()->close();
  g_sink = sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = cairn::fuzz::scratch_dir() + "/streams.pool";
  const std::uint8_t flags = cairn::fuzz::write_sparse_image(path, {data, size});
  const std::string pool_uri = "pmem:" + path;

  if (auto names = stream::list(pool_uri); names.ok()) {
    for (const auto& info : names.value()) read_one(pool_uri + "#" + info.name);
    if ((flags & 2) && !names.value().empty()) (void)stream::remove(pool_uri + "#" + names.value().front().name);
  }
  read_one(pool_uri + "#a");  // a name the seeds use, whether or not the directory lists it
  if (auto w = stream::Stream::open(pool_uri + "#fuzz-written", stream::Mode::write); w.ok()) {
    std::fputs("written after the damaged pool was opened\n", w.value()->file());
    (void)w.value()->close();
    read_one(pool_uri + "#fuzz-written");
  }
  (void)stream::list(pool_uri);
  cairn::fuzz::clear_scratch();
  return 0;
}
