// device.cpp — device factory, flush-mode names and counter snapshots.
#include "cairn/extended/device.hpp"

#include <cstdlib>

namespace cairn::devices {

const char* flush_mode_name(FlushMode mode) noexcept {
  switch (mode) {
    case FlushMode::automatic: return "auto";
    case FlushMode::cpu: return "cpu";
    case FlushMode::msync: return "msync";
    case FlushMode::pagecache: return "pagecache";
    case FlushMode::none: return "none";
  }
  return "?";
}

Result<FlushMode> parse_flush_mode(const std::string& text) {
  if (text.empty() || text == "auto") return FlushMode::automatic;
  if (text == "cpu") return FlushMode::cpu;
  if (text == "msync") return FlushMode::msync;
  if (text == "pagecache") return FlushMode::pagecache;
  if (text == "none") return FlushMode::none;
  return make_error(Errc::invalid_argument, "unknown flush mode '" + text +
                                                "': use auto, cpu (cache-line flush + fence), pagecache (page "
                                                "write-back batched at each drain), msync (one msync per flush) or "
                                                "none (survives a process crash only)");
}

namespace {

// The counter slot of each live thread: claimed at its first device call,
// given back when it exits (the next owner continues from the values it
// left; release and acquire order the two).
std::atomic<std::uint64_t> g_slots_taken{0};
static_assert(Counters::kSlots <= 64);

struct ThreadSlot {
  unsigned index = Counters::kSlots;  // the shared slot until one is claimed
  ThreadSlot() {
    std::uint64_t taken = g_slots_taken.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t free = ~taken & ((std::uint64_t{1} << Counters::kSlots) - 1);
      if (free == 0) return;
      const unsigned k = static_cast<unsigned>(__builtin_ctzll(free));
      if (g_slots_taken.compare_exchange_weak(taken, taken | (std::uint64_t{1} << k), std::memory_order_acquire,
                                              std::memory_order_relaxed)) {
        index = k;
        return;
      }
    }
  }
  ~ThreadSlot() {
    if (index < Counters::kSlots) g_slots_taken.fetch_and(~(std::uint64_t{1} << index), std::memory_order_release);
  }
};

unsigned this_thread_slot() {
  thread_local ThreadSlot slot;
  return slot.index;
}

}  // namespace

void Counters::add(Field f, std::uint64_t v) noexcept {
  const unsigned k = this_thread_slot();
  std::atomic<std::uint64_t>& c = slots_[k].v[f];
  if (k < kSlots)
    c.store(c.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);  // no lock: this thread's slot
  else
    c.fetch_add(v, std::memory_order_relaxed);
}

Stats Counters::snapshot() const {
  std::uint64_t sum[kFields] = {};
  for (const Slot& s : slots_)
    for (unsigned f = 0; f < kFields; ++f) sum[f] += s.v[f].load(std::memory_order_relaxed);
  Stats s;
  s.flush_calls = sum[flush_calls];
  s.lines_flushed = sum[lines_flushed];
  s.bytes_flushed = s.lines_flushed * 64;
  s.nt_bytes = sum[nt_bytes];
  s.copied_bytes = sum[copied_bytes];
  s.drains = sum[drains];
  s.msyncs = sum[msyncs];
  s.synced_bytes = sum[synced_bytes];
  s.injected_delay_ns = sum[injected_delay_ns];
  return s;
}

void Counters::reset() {
  for (Slot& s : slots_)
    for (auto& a : s.v) a.store(0, std::memory_order_relaxed);
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
