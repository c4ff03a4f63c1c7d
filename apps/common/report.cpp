// report.cpp — the end-of-run report, as text and as JSON.
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "apps/common/app.hpp"
#include "util/json.hpp"

namespace cairn::apps {
namespace {

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

}  // namespace

void print_report(const Report& r, bool quiet) {
  const auto& v = r.verification;
  if (quiet) {
    std::printf("%s %s: %s  %s = %.3e (tolerance %.1e)  checksum %s  %.3f s\n", r.app.c_str(), r.strategy.c_str(),
                v.passed ? "VERIFIED" : "FAILED", v.quantity.c_str(), v.value, v.tolerance, hex(r.checksum).c_str(),
                r.total_seconds);
    return;
  }
  std::printf("%s: %llu iterations (%llu in this run), strategy %s\n", r.app.c_str(),
              static_cast<unsigned long long>(r.iterations),
              static_cast<unsigned long long>(r.iterations - r.start_iteration), r.strategy.c_str());
  std::printf("  verification   %s: %s = %.3e, tolerance %.1e\n", v.passed ? "PASSED" : "FAILED", v.quantity.c_str(),
              v.value, v.tolerance);
  if (!v.detail.empty()) std::printf("                 %s\n", v.detail.c_str());
  std::printf("  checksum       %s  (%.1f MiB of state)\n", hex(r.checksum).c_str(),
              static_cast<double>(r.state_bytes) / (1 << 20));
  std::printf("  time           %.3f s total: compute %.3f s, commit %.3f s (%llu commits)", r.total_seconds,
              r.compute_seconds, r.commit_seconds, static_cast<unsigned long long>(r.commits));
  if (r.start_iteration > 0 || r.restore_seconds > 0)
    std::printf(", restart %.3f ms (open %.3f + restore %.3f)", (r.open_seconds + r.restore_seconds) * 1e3,
                r.open_seconds * 1e3, r.restore_seconds * 1e3);
  std::printf("\n");
  std::fflush(stdout);
}

Result<void> write_json(const Report& r, const std::string& path) {
  const auto& v = r.verification;
  const util::Json doc = {{"app", r.app},
                          {"strategy", r.strategy},
                          {"describe", r.describe},
                          {"threads", r.threads},
                          {"iterations", r.iterations},
                          {"start_iteration", r.start_iteration},
                          {"persist_every", r.persist_every},
                          {"verified", v.passed},
                          {"verified_quantity", v.quantity},
                          {"verified_value", v.value},
                          {"tolerance", v.tolerance},
                          {"checksum", hex(r.checksum)},
                          {"state_bytes", r.state_bytes},
                          {"compute_seconds", r.compute_seconds},
                          {"commit_seconds", r.commit_seconds},
                          {"open_seconds", r.open_seconds},
                          {"restore_seconds", r.restore_seconds},
                          {"total_seconds", r.total_seconds},
                          {"commits", r.commits},
                          {"nvm_bytes_written", r.nvm_bytes_written}};
  if (auto w = util::write_json_file(doc, path); !w.ok())
    return make_error(Errc::io_error, "--json " + path + ": cannot write the report; check the directory exists");
  return {};
}

}  // namespace cairn::apps
