// dram_buffer.hpp — page-aligned, zeroed DRAM that frees itself (internal):
// the working copies of the DRAM strategies, the in-place strategy's plain
// regions, bounce buffers, the apps' native arrays.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "cairn/error.hpp"

namespace cairn::util {

class DramBuffer {
 public:
  // `bytes` rounded up to whole pages, zeroed (an anonymous mapping).
  // populate: fault every page in now, so that first-touch page faults do
  // not land in the loop that uses the memory; otherwise the pages are only
  // reserved as they are touched. Errc::out_of_space, naming `what`, if the
  // size exceeds physical memory or the mapping fails.
  static Result<DramBuffer> allocate(std::size_t bytes, const std::string& what, bool populate = true);

  DramBuffer() = default;
  ~DramBuffer();
  DramBuffer(DramBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DramBuffer& operator=(DramBuffer&& o) noexcept;
  DramBuffer(const DramBuffer&) = delete;
  DramBuffer& operator=(const DramBuffer&) = delete;

  std::byte* data() const { return p_; }
  std::size_t size() const { return n_; }  // whole pages
  explicit operator bool() const { return p_ != nullptr; }

 private:
  std::byte* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace cairn::util
