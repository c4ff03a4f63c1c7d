// io.cpp — errno mapping, EINTR-safe positional I/O and /proc/meminfo (see io.hpp).
#include "util/io.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace cairn::util {

Errc errc_from_errno(int err) noexcept {
  switch (err) {
    case ENOENT:
    case ENOTDIR: return Errc::not_found;
    case EACCES:
    case EPERM:
    case EROFS: return Errc::permission_denied;
    case EISDIR: return Errc::is_directory;
    case ENOSPC:
    case EFBIG:
    case EDQUOT: return Errc::device_full;
    case EEXIST: return Errc::already_exists;
    case ENOMEM: return Errc::out_of_space;
    default: return Errc::io_error;
  }
}

int errno_from_errc(Errc code) noexcept {
  switch (code) {
    case Errc::not_found: return ENOENT;
    case Errc::permission_denied: return EACCES;
    case Errc::is_directory: return EISDIR;
    case Errc::invalid_argument: return EINVAL;
    case Errc::out_of_space:
    case Errc::device_full: return ENOSPC;
    case Errc::busy: return EBUSY;
    case Errc::no_version: return ENODATA;
    default: return EIO;
  }
}

Error errno_error(const std::string& path, const std::string& what, int err, const std::string& advice) {
  std::string text = std::strerror(err);
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z') text[0] = static_cast<char>(text[0] - 'A' + 'a');
  std::string m = path + ": " + text + " (" + what + ")";
  if (!advice.empty()) m += "; " + advice;
  return make_error(errc_from_errno(err), std::move(m));
}

long long pread_full(int fd, void* buf, std::size_t n, std::uint64_t off) {
  auto* b = static_cast<char*>(buf);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, b + got, n - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -static_cast<long long>(errno);
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return static_cast<long long>(got);
}

int pwrite_full(int fd, const void* buf, std::size_t n, std::uint64_t off, std::size_t chunk, std::uint64_t* calls) {
  auto* b = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, b, std::min(n, chunk), static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    if (calls != nullptr) ++*calls;
    b += w;
    n -= static_cast<std::size_t>(w);
    off += static_cast<std::uint64_t>(w);
  }
  return 0;
}

std::uint64_t memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

}  // namespace cairn::util
