// syscall_faults.cpp — the interposed calls behind syscall_faults.hpp. Each
// forwards to the next definition of its name (dlsym RTLD_NEXT) unless the
// armed fault is due.
#undef _FORTIFY_SOURCE
#include "tests/support/syscall_faults.hpp"

#include <dlfcn.h>
#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>

namespace cairn::testing {
namespace {

std::atomic<int> armed_call{-1};  // a Syscall, or -1
std::atomic<int> countdown{0};
std::atomic<int> armed_errno{0};
std::atomic<bool> delivered{false};

// Whether this call of `call` is the one to fail (then errno is set).
bool due(Syscall call) {
  if (armed_call.load(std::memory_order_acquire) != static_cast<int>(call)) return false;
  if (countdown.fetch_sub(1) != 1) return false;
  armed_call.store(-1);
  delivered.store(true);
  errno = armed_errno.load();
  return true;
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

mode_t mode_arg(int flags, va_list ap) {
  return ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}

}  // namespace

void fail_syscall(Syscall call, int nth, int err) {
  delivered.store(false);
  armed_errno.store(err);
  countdown.store(nth);
  armed_call.store(static_cast<int>(call), std::memory_order_release);
}

bool clear_syscall_fault() {
  armed_call.store(-1);
  return delivered.exchange(false);
}

}  // namespace cairn::testing

namespace sf = cairn::testing;

extern "C" {

#define SF_REAL(name, type) static const auto real = sf::next<type>(#name)

int fsync(int fd) {
  SF_REAL(fsync, int (*)(int));
  return sf::due(sf::Syscall::fsync) ? -1 : real(fd);
}

int rename(const char* from, const char* to) noexcept {
  SF_REAL(rename, int (*)(const char*, const char*));
  return sf::due(sf::Syscall::rename) ? -1 : real(from, to);
}

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = sf::mode_arg(flags, ap);
  va_end(ap);
  SF_REAL(open, int (*)(const char*, int, ...));
  return (flags & O_DIRECTORY) != 0 && sf::due(sf::Syscall::open_dir) ? -1 : real(path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = sf::mode_arg(flags, ap);
  va_end(ap);
  SF_REAL(open64, int (*)(const char*, int, ...));
  return (flags & O_DIRECTORY) != 0 && sf::due(sf::Syscall::open_dir) ? -1 : real(path, flags, mode);
}

}  // extern "C"
