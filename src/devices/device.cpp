// device.cpp — device factory, flush-mode names and counter snapshots.
#include "cairn/extended/device.hpp"

#include <cstdlib>

namespace cairn::devices {

const char* flush_mode_name(FlushMode mode) noexcept {
  switch (mode) {
    case FlushMode::automatic: return "auto";
    case FlushMode::cpu: return "cpu";
    case FlushMode::msync: return "msync";
  }
  return "?";
}

Result<FlushMode> parse_flush_mode(const std::string& text) {
  if (text.empty() || text == "auto") return FlushMode::automatic;
  if (text == "cpu") return FlushMode::cpu;
  if (text == "msync") return FlushMode::msync;
  return make_error(Errc::invalid_argument,
                    "unknown flush mode '" + text + "': use auto, cpu (cache-line flush + fence) or msync");
}

Stats Counters::snapshot() const {
  Stats s;
  auto ld = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.flush_calls = ld(flush_calls);
  s.lines_flushed = ld(lines_flushed);
  s.bytes_flushed = s.lines_flushed * 64;
  s.nt_bytes = ld(nt_bytes);
  s.copied_bytes = ld(copied_bytes);
  s.drains = ld(drains);
  s.msyncs = ld(msyncs);
  s.injected_delay_ns = ld(injected_delay_ns);
  return s;
}

void Counters::reset() {
  for (auto* a : {&flush_calls, &lines_flushed, &nt_bytes, &copied_bytes, &drains, &msyncs, &injected_delay_ns})
    a->store(0, std::memory_order_relaxed);
}

Result<std::unique_ptr<Device>> make_device(const std::string& spec_in) {
  std::string spec = spec_in;
  if (spec.empty()) {
    const char* env = std::getenv("CAIRN_DEVICE");
    spec = env ? env : "";
    // A profile alone ($CAIRN_DEVICE_PROFILE) selects the emulated device.
    const char* profile = std::getenv("CAIRN_DEVICE_PROFILE");
    if (spec.empty() && profile != nullptr && *profile != '\0') spec = "emulated";
  }
  if (spec.empty() || spec == "real") return make_real_device();
  if (spec == "fault" || spec.rfind("fault:", 0) == 0) return make_fault_device(spec);
  const std::string prefix = "emulated:";
  if (spec.rfind(prefix, 0) == 0) spec = spec.substr(prefix.size());
  return make_emulated_device(spec);
}

}  // namespace cairn::devices
