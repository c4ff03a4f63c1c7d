// interpose.cpp — the mapping and persistence calls of a library that maps a
// watched file itself, routed to the crash simulator (mapped_file.hpp). This
// replaces libc's mmap, munmap and msync and libpmem's persist calls for the
// whole process, so it belongs to the executables that run file workloads
// (the undo-log crash test, `cairn-crashsim`), never to a library:
// CMakeLists.txt adds it to each. Without a watch every call goes straight to
// the real function.
//
// Under ThreadSanitizer: the sanitizer's runtime calls mmap by its libc name
// while it initialises (its symboliser's allocator), and an executable's own
// definition of mmap wins over libc's and the runtime's interceptor. An
// instrumented mmap then records a function entry into a thread trace that
// does not exist yet and dies (SEGV at 0x600000000008, the trace region).
// So mmap, munmap and msync carry no ThreadSanitizer instrumentation, and
// until the constructor below has run (the runtime is up by then) they are
// the bare system calls and touch nothing else.
#include <dlfcn.h>
#include <libpmem.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "tests/crashsim/mapped_file.hpp"

#if defined(__SANITIZE_THREAD__)
#define CAIRN_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define CAIRN_NO_TSAN
#endif

namespace {

namespace ip = cairn::testing::crashsim::interpose;
using cairn::testing::crashsim::FileWatch;

using MmapFn = void* (*)(void*, size_t, int, int, int, off_t);
using MunmapFn = int (*)(void*, size_t);
using MsyncFn = int (*)(void*, size_t, int);
MmapFn g_real_mmap = nullptr;
MunmapFn g_real_munmap = nullptr;
MsyncFn g_real_msync = nullptr;

// Resolved once at load: dlsym may allocate, and an allocation may mmap, so
// the interposers never call it; before this runs they use the system calls.
__attribute__((constructor)) void resolve_real() {
  g_real_mmap = reinterpret_cast<MmapFn>(dlsym(RTLD_NEXT, "mmap"));
  g_real_munmap = reinterpret_cast<MunmapFn>(dlsym(RTLD_NEXT, "munmap"));
  g_real_msync = reinterpret_cast<MsyncFn>(dlsym(RTLD_NEXT, "msync"));
}

template <class Fn>
Fn real_pmem(const char* name) {
  static_assert(sizeof(Fn) == sizeof(void*));
  void* p = dlsym(RTLD_NEXT, name);
  Fn fn;
  std::memcpy(&fn, &p, sizeof fn);
  return fn;
}

// libpmem's copies: write, then (unless NOFLUSH) flush, then (unless NODRAIN
// or NOFLUSH) drain. Whether the stores were non-temporal does not matter to
// the model: either way the lines are pending until flushed and fenced.
void* pmem_write_done(FileWatch* w, void* dest, size_t len, unsigned flags) {
  if ((flags & PMEM_F_MEM_NOFLUSH) == 0) {
    ip::flushes.fetch_add(1, std::memory_order_relaxed);
    w->flush(dest, len);
    if ((flags & PMEM_F_MEM_NODRAIN) == 0) {
      ip::drains.fetch_add(1, std::memory_order_relaxed);
      w->drain();
    }
  }
  return dest;
}

}  // namespace

extern "C" {

int cairn_crashsim_interposer_present() { return 1; }

CAIRN_NO_TSAN void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) noexcept {
  if (g_real_mmap == nullptr) return reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, offset));
  void* r = g_real_mmap(addr, len, prot, flags, fd, offset);
  if (r != MAP_FAILED && fd >= 0 && ip::any_watch()) ip::on_mapped(r, len, fd, offset);
  return r;
}

CAIRN_NO_TSAN int munmap(void* addr, size_t len) noexcept {
  if (g_real_munmap == nullptr) return static_cast<int>(syscall(SYS_munmap, addr, len));
  if (ip::any_watch()) ip::on_unmapped(addr, len);
  return g_real_munmap(addr, len);
}

CAIRN_NO_TSAN int msync(void* addr, size_t len, int flags) noexcept {
  if (g_real_msync == nullptr) return static_cast<int>(syscall(SYS_msync, addr, len, flags));
  if (ip::any_watch()) {
    if (FileWatch* w = ip::watch_at(addr); w != nullptr) {
      ip::msyncs.fetch_add(1, std::memory_order_relaxed);
      w->flush(addr, len);
      if (w->cpu_model()) w->drain();  // msync of a DAX mapping: flush and fence
      if (!w->has_device()) return 0;  // a check: the image is memory
    }
  }
  return g_real_msync(addr, len, flags);
}

int pmem_is_pmem(const void* addr, size_t len) {
  if (ip::any_watch())
    if (FileWatch* w = ip::watch_at(addr); w != nullptr) return w->cpu_model() ? 1 : 0;
  static const auto real = real_pmem<int (*)(const void*, size_t)>("pmem_is_pmem");
  return real(addr, len);
}

void pmem_flush(const void* addr, size_t len) {
  if (ip::any_watch())
    if (FileWatch* w = ip::watch_at(addr); w != nullptr) {
      ip::flushes.fetch_add(1, std::memory_order_relaxed);
      w->flush(addr, len);
      return;
    }
  static const auto real = real_pmem<void (*)(const void*, size_t)>("pmem_flush");
  real(addr, len);
}

void pmem_deep_flush(const void* addr, size_t len) {
  if (ip::any_watch())
    if (FileWatch* w = ip::watch_at(addr); w != nullptr) {
      ip::flushes.fetch_add(1, std::memory_order_relaxed);
      w->flush(addr, len);
      return;
    }
  static const auto real = real_pmem<void (*)(const void*, size_t)>("pmem_deep_flush");
  real(addr, len);
}

void pmem_drain(void) {
  if (ip::any_watch())
    if (FileWatch* w = ip::innermost(); w != nullptr) {
      ip::drains.fetch_add(1, std::memory_order_relaxed);
      w->drain();
      return;
    }
  static const auto real = real_pmem<void (*)()>("pmem_drain");
  real();
}

void pmem_persist(const void* addr, size_t len) {
  if (ip::any_watch())
    if (FileWatch* w = ip::watch_at(addr); w != nullptr) {
      ip::flushes.fetch_add(1, std::memory_order_relaxed);
      ip::drains.fetch_add(1, std::memory_order_relaxed);
      w->flush(addr, len);
      w->drain();
      return;
    }
  static const auto real = real_pmem<void (*)(const void*, size_t)>("pmem_persist");
  real(addr, len);
}

void* pmem_memmove(void* dest, const void* src, size_t len, unsigned flags) {
  if (ip::any_watch())
    if (FileWatch* w = ip::watch_at(dest); w != nullptr) {
      std::memmove(dest, src, len);
      return pmem_write_done(w, dest, len, flags);
    }
  static const auto real = real_pmem<void* (*)(void*, const void*, size_t, unsigned)>("pmem_memmove");
  return real(dest, src, len, flags);
}

void* pmem_memcpy(void* dest, const void* src, size_t len, unsigned flags) {
  if (ip::any_watch())
    if (FileWatch* w = ip::watch_at(dest); w != nullptr) {
      std::memmove(dest, src, len);
      return pmem_write_done(w, dest, len, flags);
    }
  static const auto real = real_pmem<void* (*)(void*, const void*, size_t, unsigned)>("pmem_memcpy");
  return real(dest, src, len, flags);
}

void* pmem_memset(void* dest, int c, size_t len, unsigned flags) {
  if (ip::any_watch())
    if (FileWatch* w = ip::watch_at(dest); w != nullptr) {
      std::memset(dest, c, len);
      return pmem_write_done(w, dest, len, flags);
    }
  static const auto real = real_pmem<void* (*)(void*, int, size_t, unsigned)>("pmem_memset");
  return real(dest, c, len, flags);
}

}  // extern "C"
