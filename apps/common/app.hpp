// app.hpp — the proxy-application framework: one set of command-line options,
// one driver, and the Simulation interface every app (jacobi, npb-cg, npb-mg,
// ...) implements. An app is a Simulation plus a three-line main():
//
//   int main(int argc, char** argv) {
//     return cairn::apps::run_main(argc, argv, std::make_unique<MyApp>());
//   }
//
// What the driver does (run_simulation):
//   1. sim.configure(options)          the app reads --size etc.
//   2. sim.declare(fields)             the app names its state arrays
//   3. with --strategy: a persist::Context registers them (dual fields as
//      DualRegion, plain fields as Region, scratch fields stay in DRAM) plus
//      the driver's own plain region holding the iteration counter; without:
//      everything is plain DRAM ("native", the baseline).
//   4. fresh run: old storage of this name is removed, sim.initialize();
//      --resume: restore() brings back the last committed version, including
//      the counter, then sim.after_restore(), and the loop continues at the
//      iteration after it.
//   5. loop: sim.step(i) for i = start .. iterations-1, with begin() before
//      the first step of a period and commit() after every --persist-every
//      K steps (and after the last one), sim.before_commit() right before
//      each commit. --crash-at N SIGKILLs the process at the start of
//      iteration N, after the commits of the earlier ones.
//   6. (native runs: sim.before_commit() once, so the fields hold the final
//      state) sim.verify(); the report prints the outcome, the verified quantity and
//      a 64-bit checksum of every persisted field (runs compare bit for bit).
//      Exit code: 0 verified, 1 verification failed, 2 bad options or error.
//
// Fields (how a step sees its state):
//   dual     two versions. A step reads in<T>() and writes out<T>() — every
//            element of out (copy what it does not change: there is no
//            carry-over). The driver swaps them after each step. With a
//            strategy they are a DualRegion, so in-place versioning (seed 004
//            §4) persists the written version without a copy. When K > 1 the
//            steps inside a period write through a DRAM scratch buffer so the
//            committed version is never written before the next commit.
//            Initial values go into initial<T>() (the version step 0 reads).
//   plain    one buffer, updated in place by the steps (non-uniform updates,
//            small scalars such as CG's zeta) or written once in initialize()
//            and only read afterwards (inputs). Persisted as a Region.
//   scratch  DRAM the app needs during a step but never persists (work
//            vectors recomputed every iteration). Its contents at the start of
//            a step are undefined after a restart: do not carry values in it.
// State outside the fields (seed 001's linked lists of particles): an app
// may keep part of its state in its own DRAM structures and mirror it in
// plain fields. before_commit() copies it into them (timed as commit time;
// also called once at the end of a native run, so the checksum covers the
// final state); after_restore() rebuilds the structures from the restored
// fields (timed as restore time; initialize() is not called on --resume).
// Both default to doing nothing. Steps must then depend only on the fields
// and those structures, never on values a restart would lose.
// Buffer addresses may change between steps (swaps, restore): fetch them from
// the Field inside step(), do not cache them across steps.
//
// Determinism (restart correctness is checked bit for bit): a step must be a
// pure function of the persisted fields and the iteration number. Use the
// Team below: parallel_for splits statically, parallel_reduce / parallel_sum
// cut the range into chunks that depend only on its length (not on the thread
// count) and combine the partial results in chunk order, so results are the
// same for any --threads value, any strategy, and with or without a restart.
// Never accumulate with atomics or in thread-completion order.
#pragma once

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::persist {
class Context;
}  // namespace cairn::persist

namespace cairn::apps {

// ---------------------------------------------------------------- options

// The options every app takes (see add_common_options for the flags).
struct RunOptions {
  std::string strategy;                     // --strategy; "" = native (no persistence)
  std::uint64_t persist_every = 1;          // --persist-every K: commit every K iterations
  unsigned threads = 0;                     // --threads; 0 = hardware threads
  std::string device;                       // --device-profile, passed as persist::Options::device
  bool sync_flush = false;                  // --sync-flush: in-place flushes at commit, no helper thread
  bool no_flush = false;                    // --no-flush: in-place skips write-back (measurement only)
  bool no_checksums = false;                // --no-checksums: no payload checksums (measurement only)
  std::string size;                         // --size: app-specific ("1024", or an NPB class "S", "W", "A", "B")
  std::optional<std::uint64_t> iterations;  // --iterations: override the app's default
  std::optional<std::uint64_t> crash_at;    // --crash-at N: SIGKILL at the start of iteration N
  bool resume = false;                      // --resume: continue from the last committed version
  std::string dir;                          // --dir; "" = the default pool dir
  std::string name;                         // --name; "" = the simulation's name()
  bool quiet = false;                       // --quiet: no progress, one-line summary
  std::string json;                         // --json FILE: write the report as JSON
};

// Adds the common flags to `cli`, bound to `options`.
void add_common_options(CLI::App& cli, RunOptions& options);

// Checks what CLI11 cannot (known strategy, K >= 1, ...) and fills defaults
// (threads); the message says what is wrong and what to do.
Result<void> validate(RunOptions& options);

// ---------------------------------------------------------------- threads

// A fixed team of threads (the caller is thread 0). run(fn) calls
// fn(thread, threads) on every member and returns when all are done.
class Team {
 public:
  explicit Team(unsigned threads);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  unsigned size() const { return threads_; }
  void run(const std::function<void(unsigned thread, unsigned threads)>& fn);

  // [begin, end) split into size() contiguous parts; fn(lo, hi) on each.
  template <class F>
  void parallel_for(std::size_t begin, std::size_t end, F&& fn) {
    if (end <= begin) return;
    run([&](unsigned t, unsigned nt) {
      const std::size_t n = end - begin;
      const std::size_t lo = begin + n * t / nt, hi = begin + n * (t + 1) / nt;
      if (lo < hi) fn(lo, hi);
    });
  }

  // Deterministic reduction: [begin, end) is cut into reduction_chunks(n)
  // chunks whose bounds depend only on n; fn(lo, hi) -> T gives each chunk's
  // value, and the chunk values are combined left to right starting at init.
  template <class T, class F, class Combine>
  T parallel_reduce(std::size_t begin, std::size_t end, T init, F&& fn, Combine&& combine) {
    if (end <= begin) return init;
    const std::size_t n = end - begin, chunks = reduction_chunks(n);
    std::vector<T> part(chunks, init);
    run([&](unsigned t, unsigned nt) {
      for (std::size_t c = chunks * t / nt; c < chunks * (t + 1) / nt; ++c)
        part[c] = fn(begin + n * c / chunks, begin + n * (c + 1) / chunks);
    });
    T acc = init;
    for (const T& p : part) acc = combine(acc, p);
    return acc;
  }
  template <class F>
  double parallel_sum(std::size_t begin, std::size_t end, F&& fn) {
    return parallel_reduce(begin, end, 0.0, fn, [](double a, double b) { return a + b; });
  }
  static std::size_t reduction_chunks(std::size_t n) { return n < 64 ? n : 64; }

 private:
  void worker(unsigned index);
  unsigned threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(unsigned, unsigned)>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stop_ = false;
};

// ---------------------------------------------------------------- state

enum class FieldKind { dual, plain, scratch };

// One state array of a simulation; buffers are set by the driver.
class Field {
 public:
  const std::string& name() const { return name_; }
  FieldKind kind() const { return kind_; }
  std::size_t bytes() const { return bytes_; }
  template <class T>
  std::size_t count() const {
    return bytes_ / sizeof(T);
  }

  // dual: the version this iteration reads, and the one it writes.
  template <class T>
  const T* in() const {
    return static_cast<const T*>(in_);
  }
  template <class T>
  T* out() const {
    return static_cast<T*>(out_);
  }
  // dual, in initialize(): the version the first step reads.
  template <class T>
  T* initial() const {
    return static_cast<T*>(in_);
  }
  // plain and scratch: the one buffer.
  template <class T>
  T* data() const {
    return static_cast<T*>(in_);
  }

  // Optional, inside step(): this step will not write this field again. With
  // in-place persistence its flush starts now on the helper thread while the
  // step computes the rest (seed 004 §4.2's proactive flush_async); a step
  // that splits its state into several fields (row blocks) overlaps most of
  // the flushing with computation. No effect for other strategies.
  void done_writing() const;

  // dual, inside step(), for kernels that stream their output: copies n bytes
  // from src to dst (inside out()) with non-temporal stores and no fence
  // (persist::Context::stream; native runs use the same copy into DRAM, so
  // both run the same kernel). Every thread that streamed calls
  // stream_fence() after its last stream() of the step; once all of out() is
  // written that way, done_streaming() replaces done_writing() and in-place
  // has nothing left to write back for this field.
  void stream(void* dst, const void* src, std::size_t n) const;
  void stream_fence() const;
  void done_streaming() const;

 private:
  friend class Driver;
  friend class FieldSet;
  std::string name_;
  FieldKind kind_ = FieldKind::plain;
  std::size_t bytes_ = 0;
  void* in_ = nullptr;
  void* out_ = nullptr;
  // Set by the driver: where done_writing() hands the field over.
  persist::Context* ctx_ = nullptr;
  const void* region_ = nullptr;  // persist::DualRegion or persist::Region
  bool last_step_ = false;        // the step before a commit
};

// Handed to Simulation::declare(). Names: 1..31 characters, unique; "app."
// is reserved for the driver. Sizes are in bytes and must be > 0.
class FieldSet {
 public:
  Field* dual(const std::string& name, std::size_t bytes) { return add(name, bytes, FieldKind::dual); }
  Field* plain(const std::string& name, std::size_t bytes) { return add(name, bytes, FieldKind::plain); }
  Field* scratch(const std::string& name, std::size_t bytes) { return add(name, bytes, FieldKind::scratch); }
  const std::vector<std::unique_ptr<Field>>& all() const { return fields_; }

 private:
  Field* add(const std::string& name, std::size_t bytes, FieldKind kind);
  std::vector<std::unique_ptr<Field>> fields_;
};

// ---------------------------------------------------------------- simulation

struct Verification {
  bool passed = false;
  std::string quantity;  // what was measured, e.g. "max |psi - predicted|"
  double value = 0;      // its value
  double tolerance = 0;  // passed means value <= tolerance (or as the app explains in detail)
  std::string detail;    // one line for humans, may be empty
};

class Simulation {
 public:
  virtual ~Simulation() = default;
  // Default pool name and report label ("jacobi", "npb-cg"); may depend on
  // configure() (e.g. "jacobi-sharpen").
  virtual std::string name() const = 0;
  // App-specific flags (optional), added next to the common ones.
  virtual void add_options(CLI::App& /*cli*/) {}
  // Reads options.size ("" = the app's default) and its own flags; the error
  // says which sizes are valid. Called once, before everything else.
  virtual Result<void> configure(const RunOptions& options) = 0;
  // One line describing the problem ("256x256 grid, stream function ...").
  virtual std::string describe() const = 0;
  virtual std::uint64_t default_iterations() const = 0;
  // Declare every state array; keep the returned Field pointers.
  virtual void declare(FieldSet& fields) = 0;
  // Fresh runs only: fill the initial state (dual: initial<T>(), plain: data<T>()).
  virtual void initialize(Team& team) = 0;
  // Iteration `iteration` (0-based). See the header comment for the rules.
  virtual void step(std::uint64_t iteration, Team& team) = 0;
  // Optional, for state kept outside the fields (see the header comment):
  // mirror it into the plain fields before a commit, rebuild it after a restore.
  virtual void before_commit(Team& /*team*/) {}
  virtual void after_restore(Team& /*team*/) {}
  // Optional text appended to progress lines (e.g. a residual). Must not
  // change any field.
  virtual std::string progress_note(Team& /*team*/) { return {}; }
  // After `iterations` iterations in total: check the state (dual fields: in()).
  virtual Verification verify(std::uint64_t iterations, Team& team) = 0;
};

// ---------------------------------------------------------------- driver

struct Report {
  std::string app, strategy;  // strategy "native" without persistence
  std::string describe;
  unsigned threads = 0;
  std::uint64_t iterations = 0;       // total, including those before a restart
  std::uint64_t start_iteration = 0;  // first iteration this run computed
  std::uint64_t persist_every = 0;
  Verification verification;
  std::uint64_t checksum = 0;  // over every dual and plain field
  double compute_seconds = 0;  // in step()
  double commit_seconds = 0;   // in begin() + commit()
  double open_seconds = 0;     // creating/attaching storage
  double restore_seconds = 0;  // restore() on --resume
  double total_seconds = 0;    // the whole run_simulation()
  std::uint64_t commits = 0;
  std::uint64_t state_bytes = 0;  // bytes of persisted fields
  std::uint64_t nvm_bytes_written = 0;
};

// Runs the simulation as described at the top. Errors (bad storage, nothing
// to resume, ...) are returned; a failed verification is a Report with
// verification.passed == false.
Result<Report> run_simulation(Simulation& sim, const RunOptions& options);

// Prints the report (human-readable; one line with --quiet).
void print_report(const Report& report, bool quiet);
// Writes the report as a flat JSON object, one key per line.
Result<void> write_json(const Report& report, const std::string& path);

// A 64-bit hash of bytes (stable across runs and machines of the same
// endianness); chain calls by passing the previous value as seed.
std::uint64_t checksum(const void* data, std::size_t bytes, std::uint64_t seed = 0);

// Parses the command line (common options + sim.add_options), runs, prints,
// and returns the exit code: 0 verified, 1 verification failed, 2 bad
// options or an error (message on stderr).
int run_main(int argc, char** argv, std::unique_ptr<Simulation> sim, const std::string& description = {});

}  // namespace cairn::apps
