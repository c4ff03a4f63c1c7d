// pool_demo.cpp — what `make demo` runs: a 1D heat equation whose state lives in a pool, committed every iteration,
// killed and recovered bit for bit.
//
// The state is two arrays in one arena extent. Iteration v+1 reads the array
// holding version v (the one root slot 0 names) and writes the other one, so
// the committed version is never overwritten before the next is committed:
//
//   1. compute u(v+1) into the inactive array           (ordinary stores)
//   2. persist that array                               (flush + fence)
//   3. publish root 0 = {that array, version v+1}       (one 8-byte commit)
//
// A crash anywhere leaves root 0 naming a complete array of the version it
// says. The demo shows this for real: a child process runs the same loop and
// is SIGKILLed mid-run; the parent reopens the pool and checks that the
// recovered array equals, bit for bit, what an uninterrupted run computes for
// the recovered version number.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cairn/extended/pool.hpp"

namespace {

using cairn::pool::Pool;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kCells = 1u << 16;  // 512 KiB per array
constexpr std::uint64_t kArrayBytes = kCells * sizeof(double);
constexpr std::uint64_t kMetaBytes = 4096;  // one block before the arrays
constexpr std::uint64_t kExtentBytes = kMetaBytes + 2 * kArrayBytes;
constexpr std::uint64_t kPoolSize = 4u << 20;
constexpr std::uint64_t kIterations = 300;                   // the uninterrupted run
constexpr std::uint64_t kKillAfter = 40;                     // the child reports this version, then is killed
constexpr std::uint64_t kChildLimit = 1000000;               // a bound in case nobody kills the child
constexpr double kDiffusion = 0.25;                          // r = alpha dt / dx^2, stable for r <= 0.5
constexpr std::uint64_t kDemoMagic = 0x314F4D4544544145ULL;  // "EATDEMO1"
constexpr unsigned kStateSlot = 0;                           // root: the array holding the committed version
constexpr unsigned kExtentSlot = 1;                          // root: the whole extent (for the arena rebuild)

// Written once when the extent is set up; identifies the layout on reopen.
struct DemoMeta {
  std::uint64_t magic;
  std::uint64_t cells;
  std::uint64_t array_offset[2];
};

// One explicit step function used for both the pool run and the reference, so
// that both execute the same instructions (bit-for-bit comparison).
[[gnu::noinline]] void heat_step(const double* in, double* out, std::uint64_t n) {
  out[0] = 0.0;
  out[n - 1] = 0.0;
  for (std::uint64_t i = 1; i + 1 < n; ++i) out[i] = in[i] + kDiffusion * (in[i - 1] - 2.0 * in[i] + in[i + 1]);
}

// A hot plateau plus a ripple, so that neighbouring versions differ everywhere.
[[gnu::noinline]] void initial_state(double* u, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i) / static_cast<double>(n - 1);
    u[i] = (x > 0.4 && x < 0.6 ? 100.0 : 0.0) + 5.0 * std::sin(40.0 * x);
  }
  u[0] = 0.0;
  u[n - 1] = 0.0;
}

// What an uninterrupted run holds at `version`, computed in DRAM.
std::vector<double> reference(std::uint64_t version) {
  std::vector<double> a(kCells), b(kCells);
  initial_state(a.data(), kCells);
  for (std::uint64_t v = 0; v < version; ++v) {
    heat_step(a.data(), b.data(), kCells);
    a.swap(b);
  }
  return a;
}

struct Timing {
  double compute_s = 0, commit_s = 0;
};

// The simulation bound to its extent in a pool.
class HeatState {
 public:
  HeatState(Pool& pool, std::uint64_t extent) : pool_(pool), extent_(extent) {}

  DemoMeta* meta() const { return reinterpret_cast<DemoMeta*>(pool_.at(extent_)); }
  double* array(int which) const { return reinterpret_cast<double*>(pool_.at(meta()->array_offset[which])); }
  int array_of(std::uint64_t offset) const { return offset == meta()->array_offset[0] ? 0 : 1; }

  // Lays out the extent and commits version 0 (meta, initial array and both
  // roots durable before the one commit point).
  cairn::Result<void> start() {
    DemoMeta m{kDemoMagic, kCells, {extent_ + kMetaBytes, extent_ + kMetaBytes + kArrayBytes}};
    pool_.memcpy_persist(meta(), &m, sizeof m);
    initial_state(array(0), kCells);
    pool_.persist(array(0), kArrayBytes);
    return pool_.publish_roots({{kExtentSlot, {extent_, 0}}, {kStateSlot, {m.array_offset[0], 0}}});
  }

  // One iteration: compute into the inactive array, persist it, commit.
  cairn::Result<void> step(Timing* t) {
    const cairn::pool::RootSlot root = pool_.root(kStateSlot);
    const int cur = array_of(root.offset);
    const auto t0 = Clock::now();
    heat_step(array(cur), array(1 - cur), kCells);
    const auto t1 = Clock::now();
    pool_.persist(array(1 - cur), kArrayBytes);
    auto r = pool_.publish_root(kStateSlot, meta()->array_offset[1 - cur], root.version + 1);
    const auto t2 = Clock::now();
    if (t != nullptr) {
      t->compute_s += std::chrono::duration<double>(t1 - t0).count();
      t->commit_s += std::chrono::duration<double>(t2 - t1).count();
    }
    return r;
  }

  std::uint64_t version() const { return pool_.root(kStateSlot).version; }
  const double* committed() const { return array(array_of(pool_.root(kStateSlot).offset)); }

 private:
  Pool& pool_;
  std::uint64_t extent_;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "pool_demo: %s\n", what.c_str());
  return 1;
}

// Binds to a pool that has the demo's layout: rebuilds the arena from the
// extent root, or starts the arena empty and allocates a fresh extent.
cairn::Result<std::uint64_t> bind_extent(Pool& pool, bool* had_state) {
  *had_state = false;
  const cairn::pool::RootSlot ext = pool.root(kExtentSlot);
  if (ext.offset != 0) {
    auto rb = pool.arena().rebuild();
    if (rb.mark(ext.offset, kExtentBytes).ok()) {
      const auto* m = reinterpret_cast<const DemoMeta*>(pool.at(ext.offset));
      if (m->magic == kDemoMagic && m->cells == kCells) {
        rb.finish();
        *had_state = true;
        return ext.offset;
      }
    }
  }
  pool.arena().reset_empty();
  return pool.arena().alloc(kExtentBytes);
}

bool same_bits(const double* a, const double* b) { return std::memcmp(a, b, kArrayBytes) == 0; }

// The child: reopen, start from version 0, iterate until killed. Reports
// version kKillAfter through the pipe.
[[noreturn]] void child_run(const std::string& path, int report_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  auto opened = Pool::open(path);
  if (!opened.ok()) _exit(10);
  Pool& pool = *opened.value();
  bool had = false;
  auto extent = bind_extent(pool, &had);
  if (!extent.ok()) _exit(11);
  HeatState s(pool, extent.value());
  if (!s.start().ok()) _exit(12);
  for (std::uint64_t v = 0; v < kChildLimit; ++v) {
    if (!s.step(nullptr).ok()) _exit(13);
    if (s.version() == kKillAfter && write(report_fd, "k", 1) != 1) _exit(14);
  }
  _exit(0);
}

const char* durability_note(const Pool& pool) {
  if (pool.is_pmem()) return "real persistent memory (DAX): persisted data survives power loss";
  if (pool.flush_mode() == cairn::devices::FlushMode::cpu)
    return "not pmem: cache-line flushes on a tmpfs/DRAM mapping survive a process crash, not a power loss";
  return "not pmem: msync to the file system, durable against power loss, in 4 KiB pages";
}

}  // namespace

int main() {
  const std::string dir = cairn::pool::default_pool_dir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail("cannot create the pool directory " + dir + ": " + ec.message() + " (set CAIRN_POOL_DIR)");
  const std::string path = dir + "/pool_demo.pool";

  std::printf("cairn pool demo: 1D heat equation, %llu cells, state kept in a persistent pool\n\n",
              static_cast<unsigned long long>(kCells));

  // ---- 1. create or reopen ----
  std::unique_ptr<Pool> pool;
  bool reopened = false;
  if (std::filesystem::exists(path)) {
    auto opened = Pool::open(path);
    if (!opened.ok())
      return fail(opened.error().message + "\n(the demo never overwrites a file: remove " + path + " to start over)");
    pool = std::move(opened.value());
    reopened = true;
  } else {
    cairn::pool::CreateOptions o;
    o.size = kPoolSize;
    auto created = Pool::create(path, std::move(o));
    if (!created.ok()) return fail(created.error().message);
    pool = std::move(created.value());
  }
  bool had_state = false;
  auto extent = bind_extent(*pool, &had_state);
  if (!extent.ok()) return fail(extent.error().message);
  HeatState state(*pool, extent.value());

  std::printf("pool            %s (%s, %llu MiB)\n", path.c_str(), reopened ? "reopened" : "created",
              static_cast<unsigned long long>(pool->size() >> 20));
  std::printf("is_pmem         %s\n", pool->is_pmem() ? "yes" : "no");
  std::printf("flush mode      %s: %s\n", cairn::devices::flush_mode_name(pool->flush_mode()), durability_note(*pool));
  if (had_state) {
    const std::uint64_t v = state.version();
    const bool ok = same_bits(state.committed(), reference(v).data());
    std::printf("previous run    left version %llu, %s an uninterrupted run at that version\n",
                static_cast<unsigned long long>(v), ok ? "equal to" : "DIFFERENT FROM");
    if (!ok) return fail("the state a previous run left does not match its version");
  }

  // ---- 2. an uninterrupted run, committed every iteration ----
  if (auto r = state.start(); !r.ok()) return fail(r.error().message);
  pool->device().reset_stats();
  const auto published_before = pool->stats().roots_published;
  Timing t;
  for (std::uint64_t i = 0; i < kIterations; ++i)
    if (auto r = state.step(&t); !r.ok()) return fail(r.error().message);
  const cairn::pool::PoolStats st = pool->stats();
  if (state.version() != kIterations) return fail("the run ended at the wrong version");
  if (!same_bits(state.committed(), reference(kIterations).data()))
    return fail("the pool's state differs from the DRAM reference after the run");

  const double per_compute_us = 1e6 * t.compute_s / kIterations;
  const double per_commit_us = 1e6 * t.commit_s / kIterations;
  std::printf("iterations      %llu, each: compute -> persist %llu KiB -> publish root 0 (one 8-byte commit)\n",
              static_cast<unsigned long long>(kIterations), static_cast<unsigned long long>(kArrayBytes >> 10));
  std::printf("bytes flushed   %llu (%llu cache lines, %llu non-temporal bytes, %llu drains, %llu msyncs)\n",
              static_cast<unsigned long long>(st.device.bytes_flushed),
              static_cast<unsigned long long>(st.device.lines_flushed),
              static_cast<unsigned long long>(st.device.nt_bytes), static_cast<unsigned long long>(st.device.drains),
              static_cast<unsigned long long>(st.device.msyncs));
  std::printf("roots published %llu\n", static_cast<unsigned long long>(st.roots_published - published_before));
  std::printf("per iteration   compute %.1f us, persist + publish %.1f us (%.0f%% of compute)\n", per_compute_us,
              per_commit_us, per_compute_us > 0 ? 100.0 * per_commit_us / per_compute_us : 0.0);
  std::printf("final state     equals the DRAM reference at version %llu, bit for bit\n\n",
              static_cast<unsigned long long>(kIterations));
  pool.reset();  // unmapped: the child maps the file itself

  // ---- 3. kill a run mid-way and recover ----
  int fds[2];
  if (pipe(fds) != 0) return fail("pipe failed");
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return fail("fork failed");
  if (pid == 0) {
    close(fds[0]);
    child_run(path, fds[1]);
  }
  close(fds[1]);
  char c = 0;
  const bool reported = read(fds[0], &c, 1) == 1;
  close(fds[0]);
  kill(pid, SIGKILL);  // wherever the child is: computing, persisting or publishing
  int status = 0;
  waitpid(pid, &status, 0);
  if (!reported) return fail("the child failed before reaching version " + std::to_string(kKillAfter));
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
    return fail("the child was not killed by SIGKILL (it finished or failed first)");

  const auto r0 = Clock::now();
  auto opened = Pool::open(path);
  if (!opened.ok()) return fail("reopening after the kill: " + opened.error().message);
  pool = std::move(opened.value());
  auto ext = bind_extent(*pool, &had_state);
  const auto r1 = Clock::now();
  if (!ext.ok() || !had_state) return fail("the recovered pool lost the demo's extent");
  HeatState recovered(*pool, ext.value());
  const std::uint64_t v = recovered.version();
  const std::vector<double> expect = reference(v);
  const bool equal = same_bits(recovered.committed(), expect.data());
  // The other array is where the child was writing version v+1 when it died.
  std::vector<double> next(kCells);
  heat_step(expect.data(), next.data(), kCells);
  const double* in_flight = recovered.array(1 - recovered.array_of(pool->root(kStateSlot).offset));
  std::uint64_t done = 0;
  for (std::uint64_t i = 0; i < kCells; ++i) done += std::memcmp(&in_flight[i], &next[i], sizeof(double)) == 0;
  std::printf("crash test      child SIGKILLed after it committed version %llu\n",
              static_cast<unsigned long long>(kKillAfter));
  std::printf("recovered       version %llu (reopen + arena rebuild %.2f ms)\n", static_cast<unsigned long long>(v),
              1e3 * std::chrono::duration<double>(r1 - r0).count());
  std::printf(
      "in flight       version %llu: %llu of %llu cells already held their new values when the child died; "
      "never published, so ignored\n",
      static_cast<unsigned long long>(v + 1), static_cast<unsigned long long>(done),
      static_cast<unsigned long long>(kCells));
  std::printf("verification    recovered data %s an uninterrupted run at version %llu, bit for bit\n",
              equal ? "EQUALS" : "DIFFERS FROM", static_cast<unsigned long long>(v));
  if (v < kKillAfter) return fail("recovered an older version than the child had committed");
  if (!equal) return fail("recovered data does not match its version");
  std::printf("\nok (the pool stays at %s; run again to reopen it)\n", path.c_str());
  return 0;
}
