// write_faults.cpp — the shared SIGSEGV handler of write-fault page tracking.
#include "util/write_faults.hpp"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

namespace cairn::util {
namespace {

// Watched ranges, read by the handler without locks: an entry is live while
// `begin` is non-zero; `end`, `fn` and `ctx` are stored before `begin` is
// published (release) and the handler reads `begin` first (acquire).
struct Watch {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  std::atomic<WriteFaultFn> fn{nullptr};
  std::atomic<void*> ctx{nullptr};
};
constexpr int kMaxWatches = 1024;
Watch g_watch[kMaxWatches];
std::mutex g_mu;  // registration only
struct sigaction g_previous {};
bool g_installed = false;

void on_segv(int sig, siginfo_t* info, void* uctx) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  if (info->si_code == SEGV_ACCERR) {
    for (auto& w : g_watch) {
      const std::uintptr_t b = w.begin.load(std::memory_order_acquire);
      if (b == 0 || addr < b || addr >= w.end.load(std::memory_order_relaxed)) continue;
      WriteFaultFn fn = w.fn.load(std::memory_order_relaxed);
      if (fn != nullptr && fn(w.ctx.load(std::memory_order_relaxed), addr)) return;
    }
  }
  // Not ours: whatever would have happened without us.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0) {
    if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(sig, info, uctx);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  // Restore the default action; the faulting instruction runs again and the
  // process dies of it as it would have.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGSEGV, &dfl, nullptr);
}

}  // namespace

Result<int> watch_write_faults(std::uintptr_t begin, std::uintptr_t end, WriteFaultFn fn, void* ctx) {
  if (begin == 0 || end <= begin || fn == nullptr)
    return make_error(Errc::invalid_argument, "write-fault tracking: empty range or no function");
  std::lock_guard lk(g_mu);
  if (!g_installed) {
    struct sigaction sa {};
    sa.sa_sigaction = &on_segv;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    if (::sigaction(SIGSEGV, &sa, &g_previous) != 0)
      return make_error(Errc::unsupported,
                        std::string("cannot install the SIGSEGV handler for write tracking: ") + std::strerror(errno));
    g_installed = true;
  }
  for (int i = 0; i < kMaxWatches; ++i) {
    Watch& w = g_watch[i];
    if (w.begin.load(std::memory_order_relaxed) != 0) continue;
    w.end.store(end, std::memory_order_relaxed);
    w.fn.store(fn, std::memory_order_relaxed);
    w.ctx.store(ctx, std::memory_order_relaxed);
    w.begin.store(begin, std::memory_order_release);
    return i;
  }
  return make_error(Errc::unsupported,
                    "write-fault tracking: " + std::to_string(kMaxWatches) + " ranges are tracked already");
}

void unwatch_write_faults(int handle) {
  if (handle < 0 || handle >= kMaxWatches) return;
  std::lock_guard lk(g_mu);
  g_watch[handle].begin.store(0, std::memory_order_release);
}

}  // namespace cairn::util
