// pool_fuzz.cpp — libFuzzer target: a pool file (header copies, root
// selector, root tables, high-water mark, arena) built from a sparse image,
// opened by Pool::open and Pool::open_image, checked by Pool::inspect, its
// arena rebuilt from the roots and a root published. Any typed error is fine.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "cairn/extended/pool.hpp"
#include "fuzz_support.hpp"

namespace {

using cairn::pool::Pool;

// What an owner of the roots does after open: mark each root's extent (one
// block; the owner knows the real length), then allocate and publish.
void exercise(Pool& pool) {
  (void)pool.health();
  (void)pool.root_generation();
  auto rebuild = pool.arena().rebuild();
  for (unsigned s = 0; s < cairn::pool::kRootSlots; ++s) {
    const auto root = pool.root(s);
    if (root.offset != 0) (void)rebuild.mark(root.offset, pool.arena().block_size());
  }
  rebuild.finish();
  auto off = pool.arena().alloc(100);
  if (!off.ok()) return;
  std::byte* p = pool.at(off.value());
  pool.memset_persist(p, 0x5A, 100);
  (void)pool.publish_root(cairn::pool::kRootSlots - 1, off.value(), 7);
  pool.arena().free(off.value(), 100);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = cairn::fuzz::scratch_dir() + "/input.pool";
  cairn::fuzz::write_sparse_image(path, {data, size});

  (void)Pool::inspect(path);

  // open_image over a private copy-on-write mapping of the file: the same
  // validation as open(), without the file's locking and reservation.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const off_t file_size = fd >= 0 ? ::lseek(fd, 0, SEEK_END) : 0;
  void* m = file_size > 0
                ? ::mmap(nullptr, static_cast<std::size_t>(file_size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0)
                : MAP_FAILED;
  if (m != MAP_FAILED) {
    {
      auto image = Pool::open_image(static_cast<std::byte*>(m), static_cast<std::size_t>(file_size));
      if (image.ok()) exercise(*image.value());
    }  // the Pool goes before its memory does
    ::munmap(m, static_cast<std::size_t>(file_size));
  }
  if (fd >= 0) ::close(fd);

  {
    auto opened = Pool::open(path);
    if (opened.ok()) exercise(*opened.value());
  }
  (void)Pool::inspect(path);  // after the publish, if it happened
  cairn::fuzz::clear_scratch();
  return 0;
}
