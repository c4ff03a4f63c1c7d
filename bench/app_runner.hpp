// app_runner.hpp — what the app experiments share (internal): the table of
// applications they can run, the persistence variants, one in-process run of
// an app through apps::run_simulation, and a scratch directory for its pools.
//
// Adding an application to the experiments is one entry in app_table()
// (app_runner.cpp): its name, a factory for a fresh Simulation (a Simulation
// is used for one run only), its default size and iteration count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/common/app.hpp"
#include "util/json.hpp"

namespace cairn::bench {

// The app experiments drive the proxy applications' framework throughout.
using namespace ::cairn::apps;  // NOLINT(google-build-using-namespace)

struct AppSpec {
  std::string name;                                   // "npb-cg", "jacobi", ...
  std::function<std::unique_ptr<Simulation>()> make;  // a fresh Simulation
  std::string default_size;                           // RunOptions::size
  std::optional<std::uint64_t> default_iterations;    // nullopt: the app's own default
  std::string persisted;                              // what the app persists, for the table's notes
};

// Every application the experiments know, in table order.
const std::vector<AppSpec>& app_table();
// nullptr if unknown.
const AppSpec* find_app(const std::string& name);
// "npb-cg, npb-mg, ..." for error messages.
std::string app_names();

// One way of running an app: a strategy and the in-place knobs.
struct Variant {
  std::string name;      // "native", "nt-copy", "in-place", ...
  std::string strategy;  // "" = native
  bool sync_flush = false;
  bool no_flush = false;
  std::string label;  // column heading
};

// The size (RunOptions::size) and iteration count of one app in a run.
struct AppSize {
  std::string size;
  std::optional<std::uint64_t> iterations;
};
// "npb-cg=W,jacobi=512:100" → per app; "CLASS" alone is not accepted here.
// Unknown apps and empty items are errors.
Result<std::vector<std::pair<std::string, AppSize>>> parse_app_sizes(const std::string& text);

struct RunConfig {
  const AppSpec* app = nullptr;
  AppSize size;
  Variant variant;
  std::string profile;  // device profile for the pool ("" = real device)
  unsigned threads = 1;
  std::string dir;   // storage directory (a ScratchDir)
  std::string name;  // storage name, unique per run
};

struct RunOutcome {
  bool ran = false;       // run_simulation returned a report
  std::string error;      // why not (ran == false)
  bool verified = false;  // the app's verification passed
  std::string verification;
  std::string describe;
  std::uint64_t iterations = 0, checksum = 0, state_bytes = 0, nvm_bytes = 0;
  double compute_s = 0, commit_s = 0, total_s = 0;
  double per_iteration_s = 0;  // (compute + commit) / iterations: the loop, not the setup
};

// Runs once, in-process and quiet; removes the run's storage afterwards.
RunOutcome run_once(const RunConfig& config);

// A fresh directory for one experiment's pools: <base>/cairn-bench-<tag>-XXXXXX,
// base = `dir` if given, else /dev/shm if it exists, else the default pool
// dir. Removed with everything in it on destruction.
class ScratchDir {
 public:
  static Result<std::unique_ptr<ScratchDir>> create(const std::string& dir, const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  ScratchDir() = default;
  std::string path_;
};

// Removes <dir>/<name>.* (pools, libpmemobj pools, checkpoint files).
void remove_storage(const std::string& dir, const std::string& name);

// ---------------------------------------------------------------- matrix

// Every app x variant under every profile and thread count, `repeats` times.
// The order interleaves: for each profile, thread count and app, repetition r
// runs every variant once before repetition r+1 starts, so a slow phase of a
// shared machine hits all variants of a repetition alike. The baseline
// variant ("native") is measured in the same run, next to the others, under
// every profile (it does not use the device, but it shares the moment).
struct MatrixSpec {
  std::vector<std::pair<const AppSpec*, AppSize>> apps;
  std::vector<Variant> variants;  // the first one is the baseline
  std::vector<std::string> profiles;
  std::vector<unsigned> threads;
  int repeats = 3;
  std::string dir;  // scratch base ("" = /dev/shm)
  std::string tag;  // scratch directory tag
};

struct MatrixRow {
  std::string profile, app, size, variant, label, describe;
  unsigned threads = 0;
  std::uint64_t iterations = 0, state_bytes = 0;
  std::vector<double> samples;         // seconds per iteration, one per good run
  std::vector<double> commit_samples;  // of which in begin() + commit()
  double per_iteration_s = 0;          // median of samples
  double commit_per_iteration_s = 0;   // median of commit_samples
  double nvm_bytes_per_iteration = 0;  // last good run
  double vs_baseline = 0;              // per_iteration_s / the baseline's (0: no baseline)
  double overhead_pct = 0;             // 100 * (vs_baseline - 1)
  int runs = 0, good_runs = 0;         // good: ran, verified, checksum equal to the baseline's
  std::vector<std::string> failures;   // one line per bad run
  bool is_baseline = false;
};

// Runs the matrix; progress lines go to `log` if not null. Errors: the
// scratch directory; failed runs are recorded in their rows.
Result<std::vector<MatrixRow>> run_matrix(const MatrixSpec& spec, std::ostream* log);

// The options every app experiment checks first: --repeats at least 1, and
// at least one device profile, each of which parses.
Result<void> check_repeats_and_profiles(int repeats, const std::vector<std::string>& profiles);

// Variants by name from `known` (all of them for an empty list), the
// baseline (known[0]) first even if not asked for.
Result<std::vector<Variant>> pick_variants(const std::vector<Variant>& known, const std::vector<std::string>& names);

// The rows as a JSON array, one object per row; samples_ms holds every
// verified repetition's time per iteration, in the order they ran.
util::Json matrix_rows_json(const std::vector<MatrixRow>& rows);

}  // namespace cairn::bench
