// image.cpp — memfd images with two views, and page write tracking through
// write faults (see image.hpp for why).
#include "tests/crashsim/image.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "util/write_faults.hpp"

namespace cairn::testing::crashsim {

WriteTracker::WriteTracker(std::byte* base, std::size_t size)
    : base_(base),
      size_(size),
      pages_((size + kPage - 1) / kPage),
      bits_(new std::atomic<std::uint64_t>[(pages_ + 63) / 64]),
      learned_(new std::uint32_t[pages_]) {
  for (std::size_t i = 0; i < (pages_ + 63) / 64; ++i) bits_[i].store(0, std::memory_order_relaxed);
}

WriteTracker::~WriteTracker() { stop(); }

void WriteTracker::protect(std::uint32_t first, std::uint32_t count, bool writable) {
  mprotect(base_ + std::size_t{first} * kPage, std::size_t{count} * kPage,
           writable ? PROT_READ | PROT_WRITE : PROT_READ);
}

Result<void> WriteTracker::start() {
  if (started_) return {};
  const auto b = reinterpret_cast<std::uintptr_t>(base_);
  auto h = util::watch_write_faults(
      b, b + pages_ * kPage,
      [](void* ctx, std::uintptr_t addr) { return static_cast<WriteTracker*>(ctx)->on_fault(addr); }, this);
  if (!h.ok()) return make_error(h.error().code, "crash simulator: " + h.error().message);
  slot_ = h.value();
  // Protect runs of pages not learned yet.
  std::uint32_t run = 0;
  for (std::uint32_t p = 0; p <= pages_; ++p) {
    const bool learned = p < pages_ && ((bits_[p / 64].load(std::memory_order_relaxed) >> (p % 64)) & 1u) != 0;
    if (p < pages_ && !learned) {
      ++run;
      continue;
    }
    if (run > 0) protect(p - run, run, false);
    run = 0;
  }
  started_ = true;
  return {};
}

void WriteTracker::stop() {
  if (!started_) return;
  mprotect(base_, pages_ * kPage, PROT_READ | PROT_WRITE);
  util::unwatch_write_faults(slot_);
  slot_ = -1;
  started_ = false;
}

bool WriteTracker::on_fault(std::uintptr_t addr) {
  const auto b = reinterpret_cast<std::uintptr_t>(base_);
  if (addr < b || addr >= b + pages_ * kPage) return false;
  learn(static_cast<std::uint32_t>((addr - b) / kPage));
  return true;
}

void WriteTracker::learn(std::uint32_t p) {
  if (p >= pages_) return;
  const std::uint64_t bit = std::uint64_t{1} << (p % 64);
  if ((bits_[p / 64].fetch_or(bit, std::memory_order_acq_rel) & bit) == 0) {
    learned_[learned_n_.fetch_add(1, std::memory_order_acq_rel)] = p;
  }
  if (started_) protect(p, 1, true);
}

Result<std::unique_ptr<Image>> Image::create(std::size_t size, const char* name) {
  std::unique_ptr<Image> img(new Image());
  img->size_ = (size + kPage - 1) / kPage * kPage;
  img->fd_ = memfd_create(name, MFD_CLOEXEC);
  if (img->fd_ < 0) return make_error(Errc::io_error, std::string("memfd_create: ") + std::strerror(errno));
  // The file is `size` bytes (a file workload's library checks its size);
  // the mappings cover whole pages.
  if (ftruncate(img->fd_, static_cast<off_t>(size)) != 0)
    return make_error(Errc::io_error, std::string("ftruncate of a memfd: ") + std::strerror(errno));
  for (std::byte** v : {&img->view_, &img->alias_}) {
    void* p = mmap(nullptr, img->size_, PROT_READ | PROT_WRITE, MAP_SHARED, img->fd_, 0);
    if (p == MAP_FAILED) return make_error(Errc::io_error, std::string("mmap of a memfd: ") + std::strerror(errno));
    *v = static_cast<std::byte*>(p);
  }
  img->tracker_ = std::make_unique<WriteTracker>(img->view_, img->size_);
  return img;
}

Image::~Image() {
  tracker_.reset();
  if (view_ != nullptr) munmap(view_, size_);
  if (alias_ != nullptr) munmap(alias_, size_);
  if (fd_ >= 0) ::close(fd_);
}

Result<void> Image::privatize_view() {
  tracker_->stop();
  void* p = mmap(view_, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd_, 0);
  if (p == MAP_FAILED) return make_error(Errc::io_error, std::string("private remap: ") + std::strerror(errno));
  return {};
}

}  // namespace cairn::testing::crashsim
