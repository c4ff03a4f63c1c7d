// crashsim.hpp — the crash simulator and durability harness: run a workload on
// a pool, crash it (in simulation) at every flush, drain, non-temporal copy and
// marker, and check that recovery always yields a committed version.
//
// How a test uses it (a few lines):
//
//   class MyStructure : public crashsim::Structure { ... create, recover, step ... };
//   crashsim::Workload w{.name = "mine", .make = [] { return std::make_unique<MyStructure>(); }};
//   auto report = crashsim::run(w, crashsim::Options{});
//   EXPECT_TRUE(report.passed()) << report.summary();   // prints the failing keys
//
// What happens (README.md in this folder has the long form):
//   1. setup: a fresh pool is created and Structure::create commits version 0;
//      that state is durable.
//   2. the pool is reopened over a memory image bound to the simulator device
//      (SimDevice) and Structure::step runs `steps` times. Every flush, drain,
//      non-temporal copy/fill and marker is a crash point. At each one the
//      pending words (written or flushed but not yet durable) are collected,
//      and crash images are built where each pending aligned 8-byte word holds
//      its durable value, its value when flushed, or its current value.
//   3. every crash image is checked: recovery must give exactly the last
//      committed version or the one in flight (only the latter once its commit
//      point was persisted), bit for bit; the pool's root tables and arena must
//      be sound; K further operations must still match the model; and a crash
//      during that recovery (and those operations) is explored the same way
//      (depth 2).
//   4. every crash state has a key; replay(key) rebuilds exactly that state.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/extended/pool.hpp"

namespace cairn::testing::crashsim {

// What survives a power failure.
//   adr    cache lines reach the persistence domain when flushed and then
//          fenced by the same thread; anything written may also have been
//          evicted. Each aligned 8-byte word is failure-atomic.
//   eadr   caches are persistent: a fence makes everything written before it
//          durable; between fences any subset of the written words is.
//   msync  a non-DAX file: flush (msync) makes whole 4 KiB pages durable when
//          it returns; before that any subset of dirty pages may have been
//          written back, and a page may tear at 512-byte sectors.
//   pagecache  a non-DAX file under cairn's pagecache device: flush records
//          the enclosing pages, drain (by any thread) writes every recorded
//          page back as it is then; any dirty page may also have been written
//          back earlier, torn at 512-byte sectors as under msync.
enum class Durability : std::uint8_t { adr = 0, eadr = 1, msync = 2, pagecache = 3 };
const char* durability_name(Durability d) noexcept;
Result<Durability> parse_durability(const std::string& text);
// The pool flush mode a durability model simulates.
devices::FlushMode flush_mode_for(Durability d) noexcept;

// splitmix64: small, fast and seedable from a few words; usable with <random>.
class Rng {
 public:
  using result_type = std::uint64_t;
  explicit Rng(std::uint64_t seed = 0) : s_(seed) {}
  std::uint64_t operator()() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : (*this)() % n; }
  static constexpr std::uint64_t min() { return 0; }
  static constexpr std::uint64_t max() { return ~std::uint64_t{0}; }

 private:
  std::uint64_t s_;
};

// Mixes words into one seed.
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0, std::uint64_t d = 0) noexcept;

// A version as the model knows it: recovery must reproduce `bytes` exactly.
struct Version {
  std::uint64_t number = 0;
  std::vector<std::byte> bytes;
  // memcmp: std::vector<std::byte>'s == compares byte by byte here (a sixth
  // of the in-process harness's time went to it).
  bool operator==(const Version& o) const {
    return number == o.number && bytes.size() == o.bytes.size() &&
           (bytes.empty() || std::memcmp(bytes.data(), o.bytes.data(), bytes.size()) == 0);
  }
};

class Model;

// Which versions a crash at some moment may recover to.
struct Expect {
  const Model* model = nullptr;
  std::int64_t last = -1;       // the last version whose commit returned
  std::int64_t in_flight = -1;  // the version being committed, -1 if none
  bool point_durable = false;   // its commit point was persisted: only it is acceptable
};

// The reference model: the versions the workload committed, kept in DRAM.
// A commit is bracketed by begin() and end(); the harness calls
// commit_point() when the pool reports Marker::commit_point (a structure
// whose commit point is its own word calls pool.marker(commit_point) after
// persisting it).
class Model {
 public:
  Model() = default;
  explicit Model(Version base) { versions_.push_back(std::move(base)); }

  void begin(Version v);
  void commit_point();
  void end();
  // A commit that failed before its commit point.
  void abort();

  bool empty() const { return versions_.empty(); }
  const Version& last() const { return versions_[static_cast<std::size_t>(last_)]; }
  const Version* in_flight() const { return in_flight_ ? &versions_.back() : nullptr; }
  const Version& at(std::size_t i) const { return versions_[i]; }
  std::size_t size() const { return versions_.size(); }
  Expect expect() const;

  // Real-kill mode: every change is published to *word (in shared memory) as
  // last | in_flight << 24 | point_durable << 48 (plus 1 in each index field).
  void set_mirror(volatile std::uint64_t* word);
  static Expect decode_mirror(std::uint64_t word, const Model* model);

 private:
  void publish();
  std::vector<Version> versions_;
  std::int64_t last_ = 0;
  bool in_flight_ = false, point_durable_ = false;
  volatile std::uint64_t* mirror_ = nullptr;
};

// A persistent structure under test. One instance serves one open pool.
class Structure {
 public:
  virtual ~Structure() = default;
  // On a fresh pool: build the structure and commit its first version.
  virtual Result<void> create(pool::Pool& pool, Model& model, Rng& rng) = 0;
  // On a pool opened after a crash (or cleanly): make the structure
  // consistent, rebuild the pool's arena from what the roots reach, and
  // report the content (to be compared bit for bit with the model).
  virtual Result<Version> recover(pool::Pool& pool) = 0;
  // One operation that commits one new version (model.begin ... model.end).
  virtual Result<void> step(pool::Pool& pool, Model& model, Rng& rng) = 0;
  // Arena blocks a recovered version reaches (no leak, condition 2); nullopt
  // to skip the check.
  virtual std::optional<std::uint64_t> blocks_in_use(const Version&) const { return std::nullopt; }
};

// A structure whose storage is not a cairn pool but one file that its own
// library maps and persists (libpmemobj: workloads/undo_log.cpp). The harness
// keeps its images as for a pool; the structure opens one as the file
// `<dir>/<file_name()>`, a link to the image, and the library's mappings of it
// and its persist calls (msync; libpmem's flushes and fences under adr and
// eadr) are routed to the simulator by functions interposed in the executable
// (mapped_file.hpp). The images are as large as the file create() made
// (Workload::pool_size is not used).
class FileStructure {
 public:
  virtual ~FileStructure() = default;
  virtual std::string file_name() const = 0;
  // In an empty directory: create the file, commit the first version, and
  // close it (the file is then read back as the setup image).
  virtual Result<void> create(const std::string& dir, Model& model, Rng& rng) = 0;
  // Open the file in `dir` after a crash (or cleanly), recover, and report
  // the content; the file stays open for step() until destruction.
  virtual Result<Version> recover(const std::string& dir) = 0;
  virtual Result<void> step(Model& model, Rng& rng) = 0;
};

struct Workload {
  std::string name;
  std::string description;
  std::uint64_t pool_size = 1u << 20;
  std::uint32_t block_size = pool::kDefaultBlockSize;
  unsigned steps = 24;
  // A deliberately broken variant: the harness must find a failing state.
  bool broken = false;
  std::function<std::unique_ptr<Structure>()> make;
  // Instead of `make`: a structure on a file its own library maps.
  std::function<std::unique_ptr<FileStructure>()> make_file;
};

struct Options {
  Durability durability = Durability::adr;
  std::uint64_t seed = 1;
  unsigned steps = 0;               // 0: the workload's own
  unsigned extend_ops = 2;          // K further operations after recovery (condition 3)
  unsigned random_subsets = 8;      // per crash point not enumerated exhaustively
  unsigned depth2_per_point = 2;    // depth-1 states per crash point whose recovery is crashed too; 0: off
  unsigned dedup_per_stack = 0;     // >0: explore only the first k crash points with the same call stack
  std::uint64_t target_states = 0;  // >0: tune random subsets, steps or state sampling to about this many
  double state_sample = 1.0;        // fraction of depth-1 states checked (seeded choice per state; keys unaffected)
  std::uint64_t max_states = 0;     // hard cap; 0: none
  unsigned max_failures = 1;        // stop exploring after this many failing states
  bool forked = false;              // check each depth-1 state in a forked child
  bool census = false;              // count crash points and states without checking them
  std::string only_key;             // check only the state with this key (replay)
  std::function<void(const std::string&)> log;  // progress lines, optional
};

struct Failure {
  std::string key;
  std::string reason;
};

struct Report {
  std::string workload;
  std::uint64_t crash_points = 0;       // reached while armed
  std::uint64_t points_explored = 0;    // crash points whose states were checked
  std::uint64_t points_duplicate = 0;   // skipped: same crash states as an earlier point
  std::uint64_t points_exhaustive = 0;  // enumerated completely
  std::uint64_t points_deferred = 0;    // reached inside a parallel persist (checked afterwards)
  std::uint64_t states = 0;             // depth 1 + depth 2
  std::uint64_t depth2_states = 0;
  std::uint64_t depth2_runs = 0;  // recoveries explored at depth 2
  std::uint64_t max_pending = 0;  // largest pending set (units)
  unsigned steps = 0;
  unsigned random_subsets = 0;
  double seconds = 0;
  std::vector<Failure> failures;
  bool passed() const { return failures.empty(); }
  std::string summary() const;
};

// Runs the workload through the simulator.
Report run(const Workload& workload, const Options& options = {});

// ---- keys ----
// cs1:WORKLOAD:DURABILITY:SEED:STEPS:K:POINT.SUBSET[+POINT2.SUBSET2]
struct CrashKey {
  std::string workload;
  Durability durability = Durability::adr;
  std::uint64_t seed = 1;
  unsigned steps = 0;
  unsigned extend_ops = 2;
  std::uint64_t point = 0, subset = 0;
  bool depth2 = false;
  std::uint64_t point2 = 0, subset2 = 0;
};
std::string format_key(const CrashKey& key);
Result<CrashKey> parse_key(const std::string& text);

// Re-runs the workload named in the key and checks only that state. The
// report's failures are empty if the state passes.
Result<Report> replay(const std::string& key, Options options = {});
Report replay(const Workload& workload, const CrashKey& key, Options options = {});

// ---- workloads known by name (the reference structure, its broken
// variants, the pool's own publish protocol); tests may add their own ----
std::vector<const Workload*> workloads();
const Workload* find_workload(const std::string& name);
void register_workload(Workload workload);

// ---- real-kill mode (real_kill.cpp) ----
// The workload runs in a child process on a tmpfs pool with the real device
// and is killed with SIGKILL at chosen crash points (or after a random time);
// the parent reopens the file and checks as above. Caches survive a kill, so
// this finds logic errors, not ordering errors.
struct KillOptions {
  std::uint64_t seed = 1;
  unsigned steps = 0;  // 0: the workload's own
  unsigned extend_ops = 2;
  unsigned kills = 32;          // random crash points (ignored with each_point)
  bool each_point = false;      // every unique failure point (deduplicated by call stack)
  bool random_time = false;     // kill after a random delay instead of at a crash point
  unsigned recovery_kills = 2;  // kills during the recovery of each killed state (depth 2)
  std::string dir;              // where pools go; empty: a temporary directory on tmpfs
  unsigned max_failures = 1;
  std::function<void(const std::string&)> log;
};
// kill1:WORKLOAD:SEED:STEPS:K:POINT[+POINT2]
Report run_real_kill(const Workload& workload, const KillOptions& options = {});
Result<Report> replay_real_kill(const std::string& key, KillOptions options = {});

}  // namespace cairn::testing::crashsim
