// app_runner.cpp — the app table, size parsing, one in-process run, scratch directories (see app_runner.hpp).
#include "bench/app_runner.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "apps/jacobi/kernels.hpp"
#include "apps/npb/apps.hpp"
#include "apps/sph/sph.hpp"
#include "bench/bench_util.hpp"
#include "cairn/extended/pool.hpp"
#include "cairn/extended/profile.hpp"

namespace cairn::bench {

const std::vector<AppSpec>& app_table() {
  // Default sizes, chosen so that `cairn bench overhead` (3 repetitions, 6
  // variants, 2 profiles) stays near 10 minutes on this 2-core machine: NPB
  // class A (verified against the official values only at the class's own
  // iteration count: CG A 375 CG iterations, ~2 s a run; MG A 4 V-cycles,
  // ~3 s), a Jacobi grid whose two versions (2 x 33.6 MB) exceed the 32 MiB
  // last-level cache, 100 iterations (~1 s of loop), and sph simsmall (35K
  // particles) for 40 frames (~4 s).
  static const std::vector<AppSpec> table = {
      {"npb-cg", make_npb_cg, "A", std::nullopt, "z, r, p dual; x plain (nt-copied by in-place); scalars dual"},
      {"npb-mg", make_npb_mg, "A", std::nullopt, "u, r dual (finest level with ghosts); scalars dual"},
      {"jacobi", [] { return jacobi::make_stream_function(jacobi::Stores::streaming); }, "2048", 100,
       "psi dual, in row blocks written by non-temporal stores (nothing to flush)"},
      {"jacobi-cached", [] { return jacobi::make_stream_function(jacobi::Stores::cached); }, "2048", 100,
       "psi dual, in row blocks stored through the cache, each flushed as soon as it is computed"},
      {"jacobi-sharpen", jacobi::make_sharpen, "2048", 32,
       "image (read-only input), filter, convolution, sharp: all plain"},
      {"sph", [] { return std::make_unique<sph::SphApp>(sph::Layout::blocked); }, "simsmall", 40,
       "particles in 2 MB dual chunks (blocked layout)"},
  };
  return table;
}

const AppSpec* find_app(const std::string& name) {
  for (const auto& a : app_table())
    if (a.name == name) return &a;
  return nullptr;
}

std::string app_names() {
  std::string s;
  for (const auto& a : app_table()) s += (s.empty() ? "" : ", ") + a.name;
  return s;
}

Result<std::vector<std::pair<std::string, AppSize>>> parse_app_sizes(const std::string& text) {
  std::vector<std::pair<std::string, AppSize>> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    const std::string app = item.substr(0, eq);
    if (eq == std::string::npos || eq + 1 == item.size() || !find_app(app))
      return make_error(Errc::invalid_argument,
                        "--size '" + item + "': write APP=SIZE or APP=SIZE:ITERATIONS, APP one of: " + app_names() +
                            " (e.g. npb-cg=W,jacobi=512:100)");
    std::string size = item.substr(eq + 1);
    AppSize s;
    if (const auto colon = size.find(':'); colon != std::string::npos) {
      const std::string its = size.substr(colon + 1);
      char* end = nullptr;
      const unsigned long long v = std::strtoull(its.c_str(), &end, 10);
      if (its.empty() || *end != '\0' || v == 0)
        return make_error(Errc::invalid_argument,
                          "--size '" + item + "': the iteration count after ':' must be a positive integer");
      s.iterations = v;
      size = size.substr(0, colon);
    }
    s.size = size;
    out.emplace_back(app, s);
  }
  return out;
}

void remove_storage(const std::string& dir, const std::string& name) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(name + ".", 0) != 0) continue;
    std::error_code rm;
    std::filesystem::remove_all(it->path(), rm);
  }
}

RunOutcome run_once(const RunConfig& c) {
  RunOutcome out;
  RunOptions o;
  o.strategy = c.variant.strategy;
  o.sync_flush = c.variant.sync_flush;
  o.no_flush = c.variant.no_flush;
  if (!o.strategy.empty()) o.device = c.profile;
  o.threads = c.threads;
  o.size = c.size.size;
  o.iterations = c.size.iterations;
  o.dir = c.dir;
  o.name = c.name;
  o.quiet = true;
  auto sim = c.app->make();
  auto report = run_simulation(*sim, o);
  remove_storage(c.dir, c.name);
  if (!report.ok()) {
    out.error = std::string(errc_name(report.error().code)) + ": " + report.error().message;
    return out;
  }
  const Report& r = report.value();
  out.ran = true;
  out.verified = r.verification.passed;
  out.verification = r.verification.detail.empty() ? r.verification.quantity : r.verification.detail;
  out.describe = r.describe;
  out.iterations = r.iterations - r.start_iteration;
  out.checksum = r.checksum;
  out.state_bytes = r.state_bytes;
  out.nvm_bytes = r.nvm_bytes_written;
  out.compute_s = r.compute_seconds;
  out.commit_s = r.commit_seconds;
  out.total_s = r.total_seconds;
  out.per_iteration_s =
      out.iterations ? (r.compute_seconds + r.commit_seconds) / static_cast<double>(out.iterations) : 0;
  return out;
}

Result<std::unique_ptr<ScratchDir>> ScratchDir::create(const std::string& dir, const std::string& tag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string base = dir;
  if (base.empty()) base = fs::is_directory("/dev/shm", ec) ? std::string("/dev/shm") : pool::default_pool_dir();
  fs::create_directories(base, ec);
  std::string templ = base + "/cairn-bench-" + tag + "-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr)
    return make_error(Errc::io_error, "cannot create a scratch directory under " + base + ": " + std::strerror(errno) +
                                          "; pass --dir with a writable tmpfs or DAX directory");
  std::unique_ptr<ScratchDir> s(new ScratchDir());
  s->path_ = templ;
  return s;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Result<void> check_repeats_and_profiles(int repeats, const std::vector<std::string>& profiles) {
  if (repeats < 1) return make_error(Errc::invalid_argument, "--repeats must be at least 1");
  if (profiles.empty()) return make_error(Errc::invalid_argument, "--profiles: give at least one device profile");
  for (const auto& p : profiles)
    if (auto parsed = devices::parse_profile(p); !parsed.ok()) return parsed.error();
  return {};
}

Result<std::vector<Variant>> pick_variants(const std::vector<Variant>& known, const std::vector<std::string>& names) {
  std::vector<Variant> out{known.front()};
  for (const auto& v : known) {
    if (&v == &known.front()) continue;
    bool wanted = names.empty();
    for (const auto& n : names) wanted = wanted || n == v.name;
    if (wanted) out.push_back(v);
  }
  for (const auto& n : names) {
    bool found = false;
    for (const auto& v : known) found = found || v.name == n;
    if (!found) {
      std::string list;
      for (const auto& v : known) list += (list.empty() ? "" : ", ") + v.name;
      return make_error(Errc::invalid_argument, "unknown variant '" + n + "'; choose from: " + list);
    }
  }
  return out;
}

Result<std::vector<MatrixRow>> run_matrix(const MatrixSpec& spec, std::ostream* log) {
  auto scratch = ScratchDir::create(spec.dir, spec.tag);
  if (!scratch.ok()) return std::move(scratch).error();
  const std::string dir = scratch.value()->path();
  std::vector<MatrixRow> rows;
  const std::size_t total =
      spec.profiles.size() * spec.threads.size() * spec.apps.size() * spec.variants.size() * spec.repeats;
  std::size_t done = 0, serial = 0;
  // The checksum every run of an app must end with: its first good baseline
  // run's (results are bit-identical across strategies and thread counts).
  std::map<std::string, std::uint64_t> reference;
  for (const auto& profile : spec.profiles)
    for (unsigned threads : spec.threads)
      for (const auto& [app, size] : spec.apps) {
        const std::size_t first = rows.size();
        for (const auto& v : spec.variants) {
          MatrixRow row;
          row.profile = profile;
          row.threads = threads;
          row.app = app->name;
          row.size = size.size;
          row.variant = v.name;
          row.label = v.label;
          row.is_baseline = &v == &spec.variants.front();
          rows.push_back(row);
        }
        for (int rep = 0; rep < spec.repeats; ++rep)
          for (std::size_t k = 0; k < spec.variants.size(); ++k) {
            MatrixRow& row = rows[first + k];
            RunConfig c;
            c.app = app;
            c.size = size;
            c.variant = spec.variants[k];
            c.profile = profile;
            c.threads = threads;
            c.dir = dir;
            c.name = "run-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
            const RunOutcome o = run_once(c);
            ++done;
            ++row.runs;
            std::string bad;
            const std::string key = app->name + "/" + size.size + "/" + std::to_string(o.iterations);
            if (!o.ran)
              bad = "error: " + o.error;
            else if (!o.verified)
              bad = "verification FAILED: " + o.verification;
            else if (auto ref = reference.find(key); ref != reference.end() && ref->second != o.checksum)
              bad = "checksum differs from the other runs of this app (verified, but not bit-identical)";
            if (o.ran) {
              row.describe = o.describe;
              row.iterations = o.iterations;
              row.state_bytes = o.state_bytes;
            }
            if (bad.empty()) {
              reference.emplace(key, o.checksum);
              ++row.good_runs;
              row.samples.push_back(o.per_iteration_s);
              row.commit_samples.push_back(o.iterations ? o.commit_s / static_cast<double>(o.iterations) : 0);
              row.nvm_bytes_per_iteration =
                  o.iterations ? static_cast<double>(o.nvm_bytes) / static_cast<double>(o.iterations) : 0;
            } else {
              row.failures.push_back("repetition " + std::to_string(rep + 1) + ": " + bad);
            }
            if (log)
              *log << "[" << done << "/" << total << "] " << profile << ", " << threads << " thread"
                   << (threads == 1 ? "" : "s") << ", " << app->name << " " << size.size << ", " << row.variant
                   << " (repetition " << rep + 1 << "/" << spec.repeats
                   << "): " << (bad.empty() ? ::cairn::bench::fmt("%.3f ms/iteration", o.per_iteration_s * 1e3) : bad)
                   << std::endl;
          }
        const MatrixRow& base = rows[first];
        for (std::size_t k = first; k < rows.size(); ++k) {
          MatrixRow& row = rows[k];
          row.per_iteration_s = ::cairn::bench::median(row.samples);
          row.commit_per_iteration_s = ::cairn::bench::median(row.commit_samples);
        }
        const double b = base.good_runs ? ::cairn::bench::median(base.samples) : 0;
        for (std::size_t k = first; k < rows.size(); ++k) {
          MatrixRow& row = rows[k];
          if (b > 0 && row.good_runs) {
            row.vs_baseline = row.per_iteration_s / b;
            row.overhead_pct = 100.0 * (row.vs_baseline - 1.0);
          }
        }
      }
  return rows;
}

util::Json matrix_rows_json(const std::vector<MatrixRow>& rows) {
  util::Json out = util::Json::array();
  for (const auto& r : rows) {
    util::Json samples_ms = util::Json::array();
    for (const double s : r.samples) samples_ms.push_back(s * 1e3);
    out.push_back({{"profile", r.profile},
                   {"threads", r.threads},
                   {"app", r.app},
                   {"size", r.size},
                   {"iterations", r.iterations},
                   {"variant", r.variant},
                   {"label", r.label},
                   {"baseline", r.is_baseline},
                   {"time_per_iteration_ms", r.per_iteration_s * 1e3},
                   {"commit_per_iteration_ms", r.commit_per_iteration_s * 1e3},
                   {"vs_baseline", r.vs_baseline},
                   {"overhead_pct", r.overhead_pct},
                   {"nvm_bytes_per_iteration", r.nvm_bytes_per_iteration},
                   {"state_bytes", r.state_bytes},
                   {"runs", r.runs},
                   {"verified_runs", r.good_runs},
                   {"samples_ms", samples_ms},
                   {"failures", r.failures},
                   {"describe", r.describe}});
  }
  return out;
}

}  // namespace cairn::bench
