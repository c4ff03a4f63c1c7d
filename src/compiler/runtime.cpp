// runtime.cpp — what a program transformed by the cairn-versioning pass calls
// (libcairn_versioned_rt): the pass's C entry points over persist::Context
// with the in-place strategy. One main loop per process.
//
// Order of a run:
//   cairn_versioned_array(p, bytes, name, line, mode)  at each allocation of
//       a marked array: recorded (mode 0 = two versions, 1 = copy)
//   cairn_auto_enter(start, bound, step)   before the loop: every recorded array becomes a
//       DualRegion (mode 0) or a Region (mode 1) of <dir>/<name>.pool plus the
//       region "auto.next" (the counter of the next iteration). Fresh run: the
//       arrays' contents are committed twice, so that BOTH versions hold them
//       durably (elements the loop never writes are then equal in both, which
//       the pass relies on); returns `start`. $CAIRN_RESUME=1: restore(), copy
//       nothing, return the saved counter.
//   cairn_auto_consistent/working/plain(p)   each iteration: the buffers
//   cairn_auto_commit(next)     end of each iteration: counter, commit (roles switch)
//   cairn_auto_exit()           after the loop: the last committed state copied
//       back into the arrays, the pool closed.
// Errors are fatal (a message naming the problem on stderr, exit code 2): the
// transformed program has no way to carry on without its persistence.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cairn/persist.hpp"

namespace {

struct Array {
  void* user = nullptr;  // the program's own buffer (its state outside the loop)
  std::size_t bytes = 0;
  std::string name;
  int line = 0;
  int mode = 0;
  cairn::persist::DualRegion* dual = nullptr;
  cairn::persist::Region* plain = nullptr;
};

struct State {
  std::vector<Array> arrays;
  std::unique_ptr<cairn::persist::Context> ctx;
  cairn::persist::Region* next = nullptr;
  bool entered = false;
};

State& state() {
  static State s;
  return s;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "cairn versioned runtime: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

template <class T>
T check(cairn::Result<T> r, const char* what) {
  if (!r.ok()) fail(std::string(what) + ": " + cairn::errc_name(r.error().code) + ": " + r.error().message);
  if constexpr (!std::is_void_v<T>) return std::move(r.value());
}

Array& find(const void* user) {
  for (Array& a : state().arrays)
    if (a.user == user) return a;
  fail("an array the program did not allocate through a marked pointer was asked for (pass and runtime disagree)");
}

std::string program_name() {
  if (const char* n = std::getenv("CAIRN_AUTO_NAME"); n && *n) return n;
  return program_invocation_short_name;  // glibc, <cerrno>
}

}  // namespace

extern "C" {

void* cairn_versioned_array(void* user, std::uint64_t bytes, const char* name, int line, int mode) {
  if (mode < 0)
    fail(std::string("marked array '") + name + "' (line " + std::to_string(line) +
         ") was not transformed: compile with cairn-cc or clang-16 -O1 (or more) -fpass-plugin=libcairn_versioning.so");
  State& s = state();
  if (s.entered) fail(std::string("marked array '") + name + "' allocated again after the main loop started");
  if (user == nullptr) return user;  // the program's own out-of-memory path
  for (Array& a : s.arrays)
    if (a.name == name) fail(std::string("marked array '") + name + "' allocated twice (one allocation per mark)");
  s.arrays.push_back(Array{user, static_cast<std::size_t>(bytes), name, line, mode});
  return user;
}

void cairn_main_loop_mark(void) {
  fail("CAIRN_MAIN_LOOP() reached at run time: the program was not compiled with the cairn-versioning pass");
}

std::int64_t cairn_auto_enter(std::int64_t start, std::int64_t bound, std::int64_t step) {
  State& s = state();
  if (s.entered) fail("the main loop was entered twice (one main loop per run)");
  s.entered = true;
  cairn::persist::Options o;
  o.strategy = "in-place";
  o.name = program_name();
  const char* resume_env = std::getenv("CAIRN_RESUME");
  const bool resume = resume_env && std::strcmp(resume_env, "1") == 0;
  if (!resume) {
    cairn::persist::Options rm = o;
    rm.strategy.clear();
    check(cairn::persist::remove_storage(rm), "removing the storage of an earlier run");
  }
  s.ctx = check(cairn::persist::Context::create(o), "creating the persistence context");
  for (Array& a : s.arrays) {
    if (a.mode == 0)
      a.dual = check(s.ctx->dual_region(a.name, a.bytes), "registering a versioned array");
    else
      a.plain = check(s.ctx->region(a.name, a.bytes), "registering an array persisted by copy");
  }
  s.next = check(s.ctx->region("auto.next", sizeof(std::int64_t)), "registering the loop counter");
  check(s.ctx->open(), "opening the pool");
  if (resume) {
    if (!s.ctx->committed_version())
      fail("CAIRN_RESUME=1 but pool '" + o.name + "' holds no committed iteration: run without it first");
    check(s.ctx->restore(), "restoring the last committed iteration");
    std::int64_t next = 0;
    std::memcpy(&next, s.next->data(), sizeof next);
    const bool inside = step > 0 ? start <= next && next <= bound : bound <= next && next <= start;
    if (!inside)
      fail("pool '" + o.name + "' holds iteration " + std::to_string(next) + ", outside this run's loop from " +
           std::to_string(start) + " to " + std::to_string(bound) +
           ": resume with the arguments of the run that wrote it, or run without CAIRN_RESUME to start afresh");
    return next;
  }
  std::memcpy(s.next->data(), &start, sizeof start);
  for (int round = 0; round < 2; ++round) {  // both versions hold the initial state, durably
    for (Array& a : s.arrays) std::memcpy(a.dual ? a.dual->write() : a.plain->data(), a.user, a.bytes);
    check(s.ctx->commit(), "committing the initial state");
  }
  return start;
}

void* cairn_auto_consistent(void* user) { return find(user).dual->read(); }
void* cairn_auto_working(void* user) { return find(user).dual->write(); }
void* cairn_auto_plain(void* user) { return find(user).plain->data(); }

// The update `memcpy(array, src, len)` of a versioned array: with len the
// whole array, a non-temporal copy into the working version, fenced and
// declared streamed (commit writes nothing back for it); otherwise memcpy.
void cairn_auto_stream_copy(void* user, void* dst, const void* src, std::uint64_t len) {
  Array& a = find(user);
  if (a.dual && dst == a.dual->write() && len == a.bytes) {
    State& s = state();
    s.ctx->stream(dst, src, len);
    s.ctx->stream_fence();
    s.ctx->streamed(*a.dual);
    return;
  }
  std::memmove(dst, src, len);
}

void cairn_auto_commit(std::int64_t next) {
  State& s = state();
  std::memcpy(s.next->data(), &next, sizeof next);
  check(s.ctx->commit(), "committing an iteration");
}

void cairn_auto_exit(void) {
  State& s = state();
  if (!s.ctx) return;  // the loop was skipped before cairn_auto_enter
  for (Array& a : s.arrays) std::memcpy(a.user, a.dual ? a.dual->read() : a.plain->data(), a.bytes);
  s.ctx.reset();
}

}  // extern "C"
