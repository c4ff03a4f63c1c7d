// dram_buffer.cpp — page-aligned zeroed DRAM (see dram_buffer.hpp).
#include "util/dram_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cairn::util {

Result<DramBuffer> DramBuffer::allocate(std::size_t bytes, const std::string& what, bool populate) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::size_t ps = page > 0 ? static_cast<std::size_t>(page) : 4096;
  // A buffer larger than physical memory can never be a working set; refuse it
  // here rather than let the kernel (or a sanitizer's allocator) overcommit.
  if (pages > 0 && bytes > static_cast<std::size_t>(pages) * ps)
    return make_error(Errc::out_of_space, "cannot allocate " + std::to_string(bytes) + " bytes of DRAM for " + what +
                                              ": more than the machine's physical memory");
  DramBuffer b;
  b.n_ = (std::max<std::size_t>(bytes, 1) + ps - 1) / ps * ps;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : MAP_NORESERVE);
  void* p = ::mmap(nullptr, b.n_, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED)
    return make_error(Errc::out_of_space, "cannot map " + std::to_string(bytes) + " bytes of DRAM for " + what + ": " +
                                              std::strerror(errno));
  b.p_ = static_cast<std::byte*>(p);
  return b;
}

DramBuffer::~DramBuffer() {
  if (p_ != nullptr) ::munmap(p_, n_);
}

DramBuffer& DramBuffer::operator=(DramBuffer&& o) noexcept {
  if (this != &o) {
    if (p_ != nullptr) ::munmap(p_, n_);
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}

}  // namespace cairn::util
