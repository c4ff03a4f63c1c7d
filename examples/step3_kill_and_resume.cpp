// step3_kill_and_resume.cpp — tutorial step 3 (C++): kill the loop with SIGKILL, resume, get the same answer.
//
// A child process runs step 2's loop and is killed (SIGKILL, no chance to
// clean up) in the middle of iteration 137, after it has written half of the
// new version. The parent then does what a restarted job does: opens the same
// state, restores the last committed version (iteration 136, bit for bit:
// the half-written iteration is simply not there), finishes the loop and
// compares the result with an uninterrupted run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "cairn/persist.hpp"

constexpr std::size_t kN = 1 << 16;
constexpr long kSteps = 300, kKillAt = 137;

void sweep(const double* in, double* out, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i)
    out[i] = (i == 0 || i + 1 == kN) ? in[i] : in[i] + 0.25 * (in[i - 1] - 2 * in[i] + in[i + 1]);
}

// Runs the loop on the stored state (killing itself in iteration kill_at if
// it is not 0); returns the first iteration it ran.
long run(std::vector<double>* result, long kill_at) {
  auto ctx = cairn::persist::Context::create({.name = "step3"}).value();
  auto* u = ctx->dual_region("u", kN * sizeof(double)).value();
  auto* done = ctx->region("steps_done", sizeof(long)).value();
  ctx->open().value();
  if (ctx->committed_version()) {
    ctx->restore().value();
  } else {
    for (std::size_t i = 0; i < kN; ++i) u->read<double>()[i] = static_cast<double>(i % 97);
    *done->as<long>() = 0;
  }
  const long start = *done->as<long>();
  for (long s = start; s < kSteps; ++s) {
    sweep(u->read<double>(), u->write<double>(), 0, kN / 2);
    if (s + 1 == kill_at) ::raise(SIGKILL);  // half of the new version written
    sweep(u->read<double>(), u->write<double>(), kN / 2, kN);
    *done->as<long>() = s + 1;
    ctx->commit().value();
  }
  if (result) result->assign(u->read<double>(), u->read<double>() + kN);
  return start;
}

int main() {
  const pid_t child = ::fork();
  if (child == 0) {
    run(nullptr, kKillAt);
    _exit(0);  // not reached
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    std::fprintf(stderr, "step3: the child was not killed (status %d)\n", status);
    return 1;
  }
  std::vector<double> resumed;
  const long from = run(&resumed, 0);

  std::vector<double> a(kN), b(kN);
  for (std::size_t i = 0; i < kN; ++i) a[i] = static_cast<double>(i % 97);
  for (long s = 0; s < kSteps; ++s) {
    sweep(a.data(), b.data(), 0, kN);
    a.swap(b);
  }
  const bool same = std::memcmp(a.data(), resumed.data(), kN * sizeof(double)) == 0;
  std::printf("step3: child killed in iteration %ld; resumed after iteration %ld; result %s the uninterrupted run's\n",
              kKillAt, from, same ? "equals" : "DIFFERS FROM");
  return same && from == kKillAt - 1 ? 0 : 1;
}
