// report.cpp — the end-of-run report, as text and as JSON.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "apps/common/app.hpp"
#include "util/json.hpp"

namespace cairn::apps {
namespace {

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

using util::json_str;

// Reports keep 9 significant digits (times in seconds to nanoseconds).
std::string json_num(double v) { return util::json_num(v, 9); }

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
  std::ostringstream o;
  const auto& v = r.verification;
  o << "{\n"
    << "  \"app\": " << json_str(r.app) << ",\n"
    << "  \"strategy\": " << json_str(r.strategy) << ",\n"
    << "  \"describe\": " << json_str(r.describe) << ",\n"
    << "  \"threads\": " << r.threads << ",\n"
    << "  \"iterations\": " << r.iterations << ",\n"
    << "  \"start_iteration\": " << r.start_iteration << ",\n"
    << "  \"persist_every\": " << r.persist_every << ",\n"
    << "  \"verified\": " << (v.passed ? "true" : "false") << ",\n"
    << "  \"verified_quantity\": " << json_str(v.quantity) << ",\n"
    << "  \"verified_value\": " << json_num(v.value) << ",\n"
    << "  \"tolerance\": " << json_num(v.tolerance) << ",\n"
    << "  \"checksum\": \"" << hex(r.checksum) << "\",\n"
    << "  \"state_bytes\": " << r.state_bytes << ",\n"
    << "  \"compute_seconds\": " << json_num(r.compute_seconds) << ",\n"
    << "  \"commit_seconds\": " << json_num(r.commit_seconds) << ",\n"
    << "  \"open_seconds\": " << json_num(r.open_seconds) << ",\n"
    << "  \"restore_seconds\": " << json_num(r.restore_seconds) << ",\n"
    << "  \"total_seconds\": " << json_num(r.total_seconds) << ",\n"
    << "  \"commits\": " << r.commits << ",\n"
    << "  \"nvm_bytes_written\": " << r.nvm_bytes_written << "\n"
    << "}\n";
  std::ofstream f(path);
  if (!(f << o.str()) || !f.flush())
    return make_error(Errc::io_error, "--json " + path + ": cannot write the report; check the directory exists");
  return {};
}

}  // namespace cairn::apps
