// emulated_device.cpp — the `emulated` device: the real primitives plus delay spun on the time-stamp counter.
//
// The device owns a real device and calls its Ops, so the bytes moved, the
// counters and the durability behaviour are exactly the real device's; it
// only adds time afterwards:
//   flush        write_ns per flushed line, and the flushed bytes pass the
//                write token bucket;
//   copy / fill  non-temporal bytes pass the write token bucket; small copies
//                that go through the cache and are flushed are charged like a
//                flush (write_ns per line plus the bucket);
//   drain        drain_ns;
//   read_charge  read_ns per line (random) or read_seq_ns once (sequential),
//                and the read token bucket.
//
// The token bucket is one atomic "next free time" per direction, shared by all
// threads of the device: a call reserves bytes/bandwidth of device time
// starting at max(its start, next free) and spins until its reservation ends.
// A call's own real work counts toward its reservation (the reservation starts
// when the call started), so a single thread copying at DRAM speed under a
// 2.3 GB/s cap achieves 2.3 GB/s, not less; several threads share the cap.
//
// Which of these apply is decided once, in bind(): the Ops returned are
// template instances with the unused parts compiled out, and a profile that
// injects nothing on the write side gets the real device's Ops unchanged. The
// hot path never looks at the profile.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cairn/device.hpp"
#include "cairn/profile.hpp"
#include "devices/line_math.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define CAIRN_HAVE_TSC 1
#endif

namespace cairn::devices {
namespace {

// The real device sends copies of at least this many bytes through
// non-temporal stores and smaller ones through the cache plus a flush
// (real_device.cpp, kNtThreshold); the charge follows the same split.
// devices_test checks that the two agree through the line counters.
constexpr std::size_t kNtThreshold = 256;

// ---- time-stamp counter ----

inline std::uint64_t tsc_now() noexcept {
#ifdef CAIRN_HAVE_TSC
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

inline void cpu_relax() noexcept {
#ifdef CAIRN_HAVE_TSC
  _mm_pause();
#endif
}

// TSC ticks per nanosecond, calibrated once per process against
// steady_clock over ~20 ms. Assumes an invariant TSC (constant_tsc /
// nonstop_tsc, true of every x86 server of the last decade).
double ticks_per_ns() {
  static const double rate = [] {
#ifdef CAIRN_HAVE_TSC
    using clk = std::chrono::steady_clock;
    // Bracket each clock read between two TSC reads so a preemption between
    // them shows up as a wide bracket; take the midpoints.
    auto sample = [](clk::time_point& t) {
      const std::uint64_t a = tsc_now();
      t = clk::now();
      const std::uint64_t b = tsc_now();
      return a + (b - a) / 2;
    };
    clk::time_point c0, c1;
    const std::uint64_t r0 = sample(c0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::uint64_t r1 = sample(c1);
    const double ns = std::chrono::duration<double, std::nano>(c1 - c0).count();
    return ns > 0 ? static_cast<double>(r1 - r0) / ns : 1.0;
#else
    return 1.0;  // steady_clock ticks are nanoseconds on Linux
#endif
  }();
  return rate;
}

// Spins until the counter reaches `deadline`. Short waits poll the counter
// back to back (a pause instruction can cost ~40 ns on recent cores, too
// coarse for a 90 ns charge); long ones pause, and very long ones (a large
// copy under a low bandwidth cap) yield so a shared machine keeps running.
inline void spin_until(std::uint64_t deadline, std::uint64_t pause_after, std::uint64_t yield_after) noexcept {
  for (;;) {
    const std::uint64_t now = tsc_now();
    if (now >= deadline) return;
    const std::uint64_t left = deadline - now;
    if (left > yield_after)
      std::this_thread::yield();
    else if (left > pause_after)
      cpu_relax();
  }
}

// Reserves `cost` ticks of device time starting no earlier than `start`;
// returns when the reservation ends.
inline std::uint64_t reserve(std::atomic<std::uint64_t>& next_free, std::uint64_t start, std::uint64_t cost) noexcept {
  std::uint64_t cur = next_free.load(std::memory_order_relaxed);
  std::uint64_t end;
  do {
    end = std::max(cur, start) + cost;
  } while (!next_free.compare_exchange_weak(cur, end, std::memory_order_relaxed));
  return end;
}

class EmulatedDevice final : public Device {
 public:
  explicit EmulatedDevice(Profile profile) : profile_(std::move(profile)), inner_(make_real_device()) {
    share_state_with(*inner_);
    const double tpn = ticks_per_ns();
    ns_per_tick_ = 1.0 / tpn;
    write_line_ticks_ = profile_.write_ns * tpn;
    drain_ticks_ = static_cast<std::uint64_t>(profile_.drain_ns * tpn + 0.5);
    read_line_ticks_ = profile_.read_ns * tpn;
    read_seq_ticks_ = static_cast<std::uint64_t>(profile_.read_seq_ns * tpn + 0.5);
    write_byte_ticks_ = profile_.write_bw > 0 ? tpn * 1e9 / profile_.write_bw : 0;
    read_byte_ticks_ = profile_.read_bw > 0 ? tpn * 1e9 / profile_.read_bw : 0;
    pause_after_ = static_cast<std::uint64_t>(1000 * tpn);     // 1 us
    yield_after_ = static_cast<std::uint64_t>(200'000 * tpn);  // 200 us
    const bool read_lat = profile_.read_ns > 0 || profile_.read_seq_ns > 0;
    if (profile_.read_bw > 0)
      read_fn_ = read_lat ? &read_charge_impl<true, true> : &read_charge_impl<false, true>;
    else if (read_lat)
      read_fn_ = &read_charge_impl<true, false>;
    else
      read_fn_ = &read_charge_none;
  }

  std::string name() const override { return "emulated:" + profile_.name; }
  const Profile& profile() const { return profile_; }

  Result<Ops> bind(const Mapping& mapping) override {
    auto ops = inner_->bind(mapping);
    if (!ops.ok()) return ops;
    inner_ops_ = ops.value();
    inner_ctx_ = inner_->context();
    const bool lat = profile_.write_ns > 0, bw = profile_.write_bw > 0, drain = profile_.drain_ns > 0;
    passthrough_ = !lat && !bw && !drain;
    if (passthrough_) return inner_ops_;  // dram: no wrapper at all
    Ops e;
    if (lat && bw) {
      e.flush = &flush_impl<true, true>;
      e.copy_nodrain = &copy_impl<true, true>;
      e.fill_nodrain = &fill_impl<true, true>;
    } else if (lat) {
      e.flush = &flush_impl<true, false>;
      e.copy_nodrain = &copy_impl<true, false>;
      e.fill_nodrain = &fill_impl<true, false>;
    } else if (bw) {
      e.flush = &flush_impl<false, true>;
      e.copy_nodrain = &copy_impl<false, true>;
      e.fill_nodrain = &fill_impl<false, true>;
    } else {
      e.flush = &flush_impl<false, false>;
      e.copy_nodrain = &copy_impl<false, false>;
      e.fill_nodrain = &fill_impl<false, false>;
    }
    e.drain = drain ? &drain_impl<true> : &drain_impl<false>;
    return e;
  }
  void* context() override { return passthrough_ ? inner_->context() : this; }
  void unbind() override { inner_->unbind(); }
  void marker(Marker m, const char* label) override { inner_->marker(m, label); }
  void read_charge(std::size_t bytes, bool sequential) override { read_fn_(*this, bytes, sequential); }

 private:
  static EmulatedDevice& self(void* ctx) { return *static_cast<EmulatedDevice*>(ctx); }

  // Charges a write that started at t0 and whose real part has just ended:
  // `lines` cache lines of latency on this thread, and `bytes` through the
  // shared write bucket.
  template <bool kLat, bool kBw>
  void charge_write(std::uint64_t t0, std::uint64_t lines, std::uint64_t bytes) {
    const std::uint64_t now = tsc_now();
    std::uint64_t deadline = now;
    if constexpr (kLat) deadline += static_cast<std::uint64_t>(static_cast<double>(lines) * write_line_ticks_ + 0.5);
    if constexpr (kBw) {
      const auto cost = static_cast<std::uint64_t>(static_cast<double>(bytes) * write_byte_ticks_ + 0.5);
      deadline = std::max(deadline, reserve(write_next_free_, t0, cost));
    }
    wait(now, deadline);
  }

  void wait(std::uint64_t now, std::uint64_t deadline) {
    if (deadline <= now) return;
    spin_until(deadline, pause_after_, yield_after_);
    counters().add(counters().injected_delay_ns,
                   static_cast<std::uint64_t>(static_cast<double>(deadline - now) * ns_per_tick_ + 0.5));
  }

  template <bool kLat, bool kBw>
  static void flush_impl(void* ctx, const void* addr, std::size_t len) {
    auto& d = self(ctx);
    const std::uint64_t t0 = tsc_now();
    d.inner_ops_.flush(d.inner_ctx_, addr, len);
    if constexpr (kLat || kBw) {
      const std::uint64_t lines = lines_spanned(addr, len);
      d.charge_write<kLat, kBw>(t0, lines, lines * kLine);
    }
  }

  // Non-temporal stores bypass the cache and stream through the write
  // buffers, so a large copy is bandwidth bound, not charged per line; a
  // small one goes through the cache and is flushed line by line.
  template <bool kLat, bool kBw>
  void charge_copy(std::uint64_t t0, const void* dst, std::size_t len) {
    if (len >= kNtThreshold) {
      if constexpr (kBw) charge_write<false, true>(t0, 0, len);
    } else {
      const std::uint64_t lines = lines_spanned(dst, len);
      charge_write<kLat, kBw>(t0, lines, lines * kLine);
    }
  }

  template <bool kLat, bool kBw>
  static void copy_impl(void* ctx, void* dst, const void* src, std::size_t len) {
    auto& d = self(ctx);
    const std::uint64_t t0 = tsc_now();
    d.inner_ops_.copy_nodrain(d.inner_ctx_, dst, src, len);
    d.charge_copy<kLat, kBw>(t0, dst, len);
  }

  template <bool kLat, bool kBw>
  static void fill_impl(void* ctx, void* dst, int c, std::size_t len) {
    auto& d = self(ctx);
    const std::uint64_t t0 = tsc_now();
    d.inner_ops_.fill_nodrain(d.inner_ctx_, dst, c, len);
    d.charge_copy<kLat, kBw>(t0, dst, len);
  }

  template <bool kDrain>
  static void drain_impl(void* ctx) {
    auto& d = self(ctx);
    d.inner_ops_.drain(d.inner_ctx_);
    if constexpr (kDrain) {
      const std::uint64_t now = tsc_now();
      d.wait(now, now + d.drain_ticks_);
    }
  }

  template <bool kLat, bool kBw>
  static void read_charge_impl(EmulatedDevice& d, std::size_t bytes, bool sequential) {
    const std::uint64_t now = tsc_now();
    std::uint64_t deadline = now;
    if constexpr (kLat) {
      // A sequential stream pays the device latency once, then is bandwidth
      // bound; random reads pay it per line (each is a dependent miss).
      deadline += sequential ? d.read_seq_ticks_
                             : static_cast<std::uint64_t>(
                                   static_cast<double>(lines_spanned(nullptr, bytes)) * d.read_line_ticks_ + 0.5);
    }
    if constexpr (kBw) {
      const auto cost = static_cast<std::uint64_t>(static_cast<double>(bytes) * d.read_byte_ticks_ + 0.5);
      deadline = std::max(deadline, reserve(d.read_next_free_, now, cost));
    }
    d.wait(now, deadline);
  }
  static void read_charge_none(EmulatedDevice&, std::size_t, bool) {}

  Profile profile_;
  std::unique_ptr<Device> inner_;
  Ops inner_ops_{};
  void* inner_ctx_ = nullptr;
  bool passthrough_ = false;
  void (*read_fn_)(EmulatedDevice&, std::size_t, bool) = &read_charge_none;

  double ns_per_tick_ = 1;
  double write_line_ticks_ = 0, read_line_ticks_ = 0;
  double write_byte_ticks_ = 0, read_byte_ticks_ = 0;
  std::uint64_t drain_ticks_ = 0, read_seq_ticks_ = 0;
  std::uint64_t pause_after_ = 0, yield_after_ = 0;

  // The token buckets, each on its own cache line: every thread of the device
  // updates them.
  alignas(64) std::atomic<std::uint64_t> write_next_free_{0};
  alignas(64) std::atomic<std::uint64_t> read_next_free_{0};
};

}  // namespace

std::unique_ptr<Device> make_emulated_device(const Profile& profile) {
  return std::make_unique<EmulatedDevice>(profile);
}

Result<std::unique_ptr<Device>> make_emulated_device(const std::string& profile_spec) {
  std::string spec = profile_spec;
  // "emulated" or "emulated:" alone: the profile comes from the environment.
  if (spec.empty() || spec == "emulated") {
    const char* env = std::getenv("CAIRN_DEVICE_PROFILE");
    if (env == nullptr || *env == '\0') {
      std::string names;
      for (const auto& n : profile_names()) names += (names.empty() ? "" : ", ") + n;
      return make_error(Errc::invalid_argument,
                        "the emulated device needs a profile: use CAIRN_DEVICE=emulated:NAME or set "
                        "CAIRN_DEVICE_PROFILE (names: " +
                            names + ", or key=value numbers)");
    }
    spec = env;
  }
  auto profile = parse_profile(spec);
  if (!profile.ok()) return std::move(profile).error();
  return make_emulated_device(profile.value());
}

}  // namespace cairn::devices
