// thread_pool.cpp — persistent workers behind parallel_ranges(), and parallel_for().
#include "util/thread_pool.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace cairn::util {
namespace {

class Workers {
 public:
  static Workers& instance() {
    static Workers w;
    return w;
  }

  Workers() {
    // A forked child (the crash harness's real-kill mode, an application that
    // forks) has only the forking thread: the workers are gone, and one of
    // them may have held a lock at the fork. Start over with none.
    ::pthread_atfork(nullptr, nullptr, [] { instance().forget_after_fork(); });
  }

  // Runs jobs 1..n-1 on workers while the caller runs job 0.
  void run(unsigned n, const std::function<void(unsigned)>& job) {
    // One parallel operation on the workers at a time. A caller that finds
    // them busy (another thread's operation, or one nested in a job) runs
    // every part itself instead of waiting: waiting here, with whatever
    // locks the caller holds, could deadlock against a job that needs them
    // (the crash simulator's device lock is one such).
    std::unique_lock call(call_mu_, std::try_to_lock);
    if (!call.owns_lock()) {
      for (unsigned i = 0; i < n; ++i) job(i);
      return;
    }
    ensure(n - 1);
    {
      std::lock_guard lk(mu_);
      job_ = &job;
      next_ = 1;
      total_ = n;
      pending_ = n - 1;
      ++epoch_;
    }
    cv_.notify_all();
    job(0);
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

  ~Workers() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void forget_after_fork() {
    new (&call_mu_) std::mutex;
    new (&mu_) std::mutex;
    new (&cv_) std::condition_variable;
    new (&done_cv_) std::condition_variable;
    // Their threads do not exist here: never join or destroy the handles.
    (void)new std::vector<std::thread>(std::move(threads_));
    threads_.clear();
    job_ = nullptr;
    next_ = total_ = pending_ = 0;
  }

  void ensure(unsigned count) {
    while (threads_.size() < count) threads_.emplace_back([this] { loop(); });
  }
  void loop() {
    std::uint64_t seen = 0;
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || (epoch_ != seen && next_ < total_); });
      if (stop_) return;
      seen = epoch_;
      while (next_ < total_) {
        unsigned mine = next_++;
        const auto* job = job_;
        lk.unlock();
        (*job)(mine);
        lk.lock();
        if (--pending_ == 0) done_cv_.notify_one();
      }
    }
  }

  std::mutex call_mu_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> threads_;
  const std::function<void(unsigned)>* job_ = nullptr;
  unsigned next_ = 0, total_ = 0, pending_ = 0;
  std::uint64_t epoch_ = 0;
  bool stop_ = false;
};

}  // namespace

unsigned default_threads() {
  if (const char* env = std::getenv("CAIRN_THREADS")) {
    int v = std::atoi(env);
    if (v > 0) return static_cast<unsigned>(v);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_ranges(std::size_t len, unsigned threads, const std::function<void(std::size_t, std::size_t)>& fn) {
  constexpr std::size_t kAlign = 4096;
  if (threads == 0) threads = default_threads();
  std::size_t chunk = (len + threads - 1) / threads;
  chunk = (chunk + kAlign - 1) / kAlign * kAlign;
  const unsigned n = static_cast<unsigned>((len + chunk - 1) / chunk);
  if (n <= 1) return fn(0, len);
  Workers::instance().run(n, [&](unsigned i) {
    std::size_t off = static_cast<std::size_t>(i) * chunk;
    fn(off, std::min(chunk, len - off));
  });
}

void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
  if (threads == 0) threads = default_threads();
  const std::size_t t = std::min<std::size_t>(threads, n);
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
  };
  std::vector<std::thread> helpers;
  for (std::size_t k = 1; k < t; ++k) helpers.emplace_back(work);
  work();
  for (auto& h : helpers) h.join();
}

}  // namespace cairn::util
