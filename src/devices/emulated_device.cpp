// emulated_device.cpp — the `emulated` device: the real primitives plus delay spun on the time-stamp counter.
//
// The device owns a real device and calls its Ops, so the bytes moved, the
// counters and the durability behaviour are exactly the real device's; it
// only adds time afterwards:
//   flush        write_ns per write_overlap flushed lines (rounded up: a
//                flush of one line pays write_ns), and the flushed bytes pass
//                the write token bucket;
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
// Two corrections keep a latency charge of N ns costing N ns:
//  - the spin's first counter read comes after an lfence, so it cannot execute
//    before the real primitive's instructions have completed. Without it the
//    out-of-order core runs the spin's counter reads in the shadow of the
//    real flush (whose counter updates are locked instructions, which wait for
//    the line's write-back) and part of the charge disappears: on a 2-core
//    EPYC VM, 90 ns charged per flushed line showed up as ~40 ns. A full
//    fence (mfence) would also wait for write-backs the real device leaves in
//    flight, and so overcharge.
//  - the machinery's own cost per charge (the fence, counter reads, leaving
//    the spin, the counter update) is measured once per process and taken off
//    each latency charge; without it a 40 ns read charge cost ~60 ns.
//
// Which of these apply is decided once, in bind(): the Ops returned are
// template instances with the unused parts compiled out, and a profile that
// injects nothing on the write side gets the real device's Ops unchanged. The
// hot path never looks at the profile.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cairn/extended/device.hpp"
#include "cairn/extended/profile.hpp"
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

// The counter once this thread's earlier instructions have completed
// (lfence waits for them and keeps later ones from starting early).
inline std::uint64_t tsc_after_prior() noexcept {
#ifdef CAIRN_HAVE_TSC
  _mm_lfence();
  return __rdtsc();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return tsc_now();
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
      std::uint64_t a = 0, b = 0;
      for (int tries = 0; tries < 1000; ++tries) {  // until a bracket shows no preemption
        a = tsc_now();
        t = clk::now();
        b = tsc_now();
        if (b - a < 20'000) break;
      }
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
// back to back (a pause instruction costs ~30 ns here, too coarse for a
// 40 ns charge); longer ones pause between polls to spare the sibling
// hyperthread. Never yields: on a busy machine a yielding thread comes back
// late, which turns a bandwidth cap into a lower one. Returns the counter
// value that ended the spin.
inline std::uint64_t spin_until(std::uint64_t deadline, std::uint64_t pause_after) noexcept {
  for (;;) {
    const std::uint64_t now = tsc_now();
    if (now >= deadline) return now;
#ifdef CAIRN_HAVE_TSC
    if (deadline - now > pause_after) _mm_pause();
#endif
  }
}

// Counts the delay (the spin plus `credit`, the part of the charge the
// machinery's own cost already paid) and spins until `deadline`. The count
// comes first: its locked add then runs inside the spin's window instead of
// after it, where it would add to every charge by an amount that varies with
// what the sibling hyperthread is doing.
//
// A spin ends at the first counter read past its deadline, up to one read
// (~12 ns in a VM) late. Every charge of the same size starts its spin in
// the same phase, so that lateness does not average out: it is a fixed error
// per latency value, different for 40 ns and 200 ns. Each thread therefore
// carries its last overrun and takes it off its next spin (error feedback);
// overruns beyond max_carry are preemptions, not phase, and are dropped.
thread_local std::uint64_t t_overrun = 0;

inline void wait_and_count(Counters& c, std::uint64_t now, std::uint64_t deadline, std::uint64_t credit,
                           std::uint64_t pause_after, double ns_per_tick) noexcept {
  const std::uint64_t spun = deadline > now ? deadline - now : 0;
  if (spun + credit)
    c.add(c.injected_delay_ns, static_cast<std::uint64_t>(static_cast<double>(spun + credit) * ns_per_tick + 0.5));
  if (spun) {
    const std::uint64_t target = deadline - std::min(t_overrun, spun);
    const std::uint64_t over = spin_until(target, pause_after) - target;
    t_overrun = over <= pause_after / 10 ? over : 0;  // max_carry: 100 ns
  }
}

std::uint64_t pause_after_ticks() { return static_cast<std::uint64_t>(1000 * ticks_per_ns()); }  // 1 us

// Ticks a latency charge costs beyond its spin, for writes (flush, copy,
// drain) and for reads; measured once per process (below the device, which
// it measures).
struct Overheads {
  std::uint64_t write = 0, read = 0;
};
const Overheads& charge_overheads();

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
  // `calibrating`: a probe charge_overheads() measures, which takes nothing
  // off its charges.
  explicit EmulatedDevice(Profile profile, bool calibrating = false)
      : profile_(std::move(profile)), inner_(make_real_device()) {
    share_state_with(*inner_);
    const double tpn = ticks_per_ns();
    ns_per_tick_ = 1.0 / tpn;
    write_line_ticks_ = profile_.write_ns * tpn;
    write_overlap_ = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(profile_.write_overlap));
    drain_ticks_ = static_cast<std::uint64_t>(profile_.drain_ns * tpn + 0.5);
    read_line_ticks_ = profile_.read_ns * tpn;
    read_seq_ticks_ = static_cast<std::uint64_t>(profile_.read_seq_ns * tpn + 0.5);
    write_byte_ticks_ = profile_.write_bw > 0 ? tpn * 1e9 / profile_.write_bw : 0;
    read_byte_ticks_ = profile_.read_bw > 0 ? tpn * 1e9 / profile_.read_bw : 0;
    pause_after_ = pause_after_ticks();
    const bool read_lat = profile_.read_ns > 0 || profile_.read_seq_ns > 0;
    if (!calibrating && (profile_.write_ns > 0 || profile_.drain_ns > 0 || read_lat)) {
      write_overhead_ = charge_overheads().write;
      read_overhead_ = charge_overheads().read;
    }
    if (profile_.read_bw > 0)
      read_fn_ = read_lat ? &read_charge_impl<true, true> : &read_charge_impl<false, true>;
    else if (read_lat)
      read_fn_ = &read_charge_impl<true, false>;
    else
      read_fn_ = &read_charge_none;
  }

  std::string name() const override { return "emulated:" + profile_.name; }

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

  std::uint64_t ticks(double per_unit, std::uint64_t units) const {
    return static_cast<std::uint64_t>(static_cast<double>(units) * per_unit + 0.5);
  }

  // Charges a write that started at t0 and whose real part has just been
  // issued: `lines` cache lines written back (write_overlap of them at a
  // time) on this thread, and `bytes` through the shared write bucket. With a
  // latency the device time starts when the real part has completed (t0 is
  // not used): the latency already comes on top of the host's time, and
  // reading the counter at entry would add its own cost to every flush.
  template <bool kLat, bool kBw>
  void charge_write(std::uint64_t t0, std::uint64_t lines, std::uint64_t bytes) {
    std::uint64_t now, lat = 0, credit = 0;
    if constexpr (kLat) {
      now = tsc_after_prior();  // the real flush first, then the extra (see top)
      lat = ticks(write_line_ticks_, (lines + write_overlap_ - 1) / write_overlap_);
      credit = std::min(lat, write_overhead_);
    } else {
      now = tsc_now();  // a bandwidth charge counts the host's time from t0
    }
    std::uint64_t deadline = now + (lat - credit);
    if constexpr (kBw)
      deadline = std::max(deadline, reserve(write_next_free_, kLat ? now : t0, ticks(write_byte_ticks_, bytes)));
    wait_and_count(counters(), now, deadline, credit, pause_after_, ns_per_tick_);
  }

  template <bool kLat, bool kBw>
  static void flush_impl(void* ctx, const void* addr, std::size_t len) {
    auto& d = self(ctx);
    const std::uint64_t t0 = kBw && !kLat ? tsc_now() : 0;
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
      const std::uint64_t now = tsc_after_prior();
      const std::uint64_t credit = std::min(d.drain_ticks_, d.write_overhead_);
      wait_and_count(d.counters(), now, now + (d.drain_ticks_ - credit), credit, d.pause_after_, d.ns_per_tick_);
    }
  }

  template <bool kLat, bool kBw>
  static void read_charge_impl(EmulatedDevice& d, std::size_t bytes, bool sequential) {
    const std::uint64_t now = tsc_after_prior();
    std::uint64_t lat = 0, credit = 0;
    if constexpr (kLat) {
      // A sequential stream pays the device latency once, then is bandwidth
      // bound; random reads pay it per line (each is a dependent miss).
      lat = sequential ? d.read_seq_ticks_ : d.ticks(d.read_line_ticks_, lines_spanned(nullptr, bytes));
      credit = std::min(lat, d.read_overhead_);
    }
    std::uint64_t deadline = now + (lat - credit);
    if constexpr (kBw)
      deadline = std::max(deadline, reserve(d.read_next_free_, now, d.ticks(d.read_byte_ticks_, bytes)));
    wait_and_count(d.counters(), now, deadline, credit, d.pause_after_, d.ns_per_tick_);
  }
  static void read_charge_none(EmulatedDevice&, std::size_t, bool) {}

  Profile profile_;
  std::unique_ptr<Device> inner_;
  Ops inner_ops_{};
  void* inner_ctx_ = nullptr;
  bool passthrough_ = false;
  void (*read_fn_)(EmulatedDevice&, std::size_t, bool) = &read_charge_none;

  double ns_per_tick_ = 1;
  double write_line_ticks_ = 0, read_line_ticks_ = 0;  // fractional: many lines per call
  std::uint64_t write_overlap_ = 1;
  double write_byte_ticks_ = 0, read_byte_ticks_ = 0;
  std::uint64_t drain_ticks_ = 0, read_seq_ticks_ = 0;
  std::uint64_t write_overhead_ = 0, read_overhead_ = 0;  // charge_overheads()
  std::uint64_t pause_after_ = 0;

  // The token buckets, each on its own cache line: every thread of the device
  // updates them.
  alignas(64) std::atomic<std::uint64_t> write_next_free_{0};
  alignas(64) std::atomic<std::uint64_t> read_next_free_{0};
};

// Measures what a charge costs beyond the latency it asks for, on this host,
// by charging 200 ns through probe devices exactly as callers do: for reads,
// read_charge() through the Device interface; for writes, one flush per
// freshly written line on a scratch buffer, through the Ops of a probe
// emulated device against the same loop through the real device's Ops (the
// difference less 200 ns is what the fence and the spin machinery add). Each
// figure is a median over trials, which a preempted trial cannot drag far
// (the best trial would catch a moment when the sibling hyperthread idles
// and underestimate the typical cost). Both capped at 100 ns in case the
// probe was disturbed throughout.
Overheads measure_overheads() {
  const double tpn = ticks_per_ns();
  constexpr double kLatNs = 200;
  constexpr int kTrials = 15;
  const double cap = 100 * tpn;
  Overheads o;
  // Warm up first: a core that has idled runs the first microseconds of a
  // burst slower, which would read as machinery cost.
  spin_until(tsc_now() + static_cast<std::uint64_t>(2e6 * tpn), ~std::uint64_t{0});

  Profile rp;
  rp.name = "calibration";
  rp.read_ns = kLatNs;
  EmulatedDevice reader(rp, true);
  Device* volatile dev = &reader;  // keep the call virtual, as at a real call site
  constexpr int kReads = 1000;
  std::vector<double> per_call;
  for (int t = 0; t < kTrials; ++t) {
    const std::uint64_t a = tsc_now();
    for (int i = 0; i < kReads; ++i) dev->read_charge(64, false);
    per_call.push_back(static_cast<double>(tsc_now() - a) / kReads - kLatNs * tpn);
  }
  std::nth_element(per_call.begin(), per_call.begin() + kTrials / 2, per_call.end());
  o.read = static_cast<std::uint64_t>(std::clamp(per_call[kTrials / 2], 0.0, cap));

  constexpr std::size_t kLines = 1024;
  std::vector<std::byte> raw((kLines + 1) * kLine);
  auto* buf = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(raw.data()) + kLine - 1) & ~(kLine - 1));
  const Mapping m{buf, kLines * kLine, false, FlushMode::cpu};  // cpu flushes: no side effect but the flush
  auto real = make_real_device();
  Profile wp;
  wp.name = "calibration";
  wp.write_ns = kLatNs;
  EmulatedDevice writer(wp, true);
  auto real_ops = real->bind(m), emu_ops = writer.bind(m);
  if (real_ops.ok() && emu_ops.ok()) {
    auto per_pass = [&](const Ops& ops, void* ctx, int pass) {
      std::memset(buf, pass, kLines * kLine);
      const std::uint64_t a = tsc_now();
      for (std::size_t i = 0; i < kLines; ++i) ops.flush(ctx, buf + i * kLine, kLine);
      const std::uint64_t b = tsc_now();
      ops.drain(ctx);
      return static_cast<double>(b - a);
    };
    std::vector<double> diffs;
    for (int t = 0; t < 2 * kTrials + 1; ++t) {
      // Alternate which goes first so neither always follows the other.
      const double r1 = t % 2 ? per_pass(real_ops.value(), real->context(), t) : 0;
      const double e = per_pass(emu_ops.value(), writer.context(), t);
      const double r = t % 2 ? r1 : per_pass(real_ops.value(), real->context(), t);
      diffs.push_back(e - r);
    }
    std::nth_element(diffs.begin(), diffs.begin() + kTrials, diffs.end());
    const double extra = diffs[kTrials] / kLines - kLatNs * tpn;
    o.write = static_cast<std::uint64_t>(std::clamp(extra, 0.0, cap));
  }
  return o;
}

const Overheads& charge_overheads() {
  static const Overheads o = measure_overheads();
  return o;
}

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
