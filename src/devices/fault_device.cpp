// fault_device.cpp — the `fault` device: the real device with chosen calls failing like a failed msync.
//
// The device owns a real device and calls its Ops for every call that is not
// made to fail, so counters and durability are the real device's (it shares
// the real device's counters and I/O error, like the emulated device). A call
// made to fail records EIO through record_io_error() and skips the write-back:
// a flush or drain does nothing, a copy or fill stores its bytes with plain
// stores and writes nothing back. Which calls fail is a FaultPlan (device.hpp)
// from the spec, or a FaultInjector the test holds and re-arms (device.hpp).
//
// The plan is kept as absolute call numbers (0: never) in atomics: the hot
// path does one fetch_add and one load per call, from any thread (persist_mt
// workers flush concurrently).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cairn/extended/device.hpp"

namespace cairn::devices {
namespace {

class FaultDevice final : public Device {
 public:
  explicit FaultDevice(std::shared_ptr<FaultInjector> plan) : inner_(make_real_device()), plan_(std::move(plan)) {
    share_state_with(*inner_);
  }

  std::string name() const override { return "fault"; }

  Result<Ops> bind(const Mapping& mapping) override {
    auto ops = inner_->bind(mapping);
    if (!ops.ok()) return ops;
    inner_ops_ = ops.value();
    inner_ctx_ = inner_->context();
    Ops o;
    o.flush = &flush_impl;
    o.drain = &drain_impl;
    o.copy_nodrain = &copy_impl;
    o.fill_nodrain = &fill_impl;
    return o;
  }
  void* context() override { return this; }
  void unbind() override { inner_->unbind(); }
  void marker(Marker m, const char* label) override { inner_->marker(m, label); }
  void read_charge(std::size_t bytes, bool sequential) override { inner_->read_charge(bytes, sequential); }

 private:
  static FaultDevice& self(void* ctx) { return *static_cast<FaultDevice*>(ctx); }

  // A failed call: the error a failed msync leaves, and the call counted.
  void fail(Counters::Field counter, std::uint64_t amount) {
    record_io_error(EIO);
    counters().add(counter, amount);
  }

  static void flush_impl(void* ctx, const void* addr, std::size_t len) {
    auto& d = self(ctx);
    if (d.plan_->next_flush()) return d.fail(d.counters().flush_calls, 1);
    d.inner_ops_.flush(d.inner_ctx_, addr, len);
  }
  static void drain_impl(void* ctx) {
    auto& d = self(ctx);
    if (d.plan_->next_drain()) return d.fail(d.counters().drains, 1);
    d.inner_ops_.drain(d.inner_ctx_);
  }
  static void copy_impl(void* ctx, void* dst, const void* src, std::size_t len) {
    auto& d = self(ctx);
    if (d.plan_->next_copy()) {
      std::memcpy(dst, src, len);  // the stores happen; their write-back does not
      return d.fail(d.counters().copied_bytes, len);
    }
    d.inner_ops_.copy_nodrain(d.inner_ctx_, dst, src, len);
  }
  static void fill_impl(void* ctx, void* dst, int c, std::size_t len) {
    auto& d = self(ctx);
    if (d.plan_->next_copy()) {
      std::memset(dst, c, len);
      return d.fail(d.counters().copied_bytes, len);
    }
    d.inner_ops_.fill_nodrain(d.inner_ctx_, dst, c, len);
  }

  std::unique_ptr<Device> inner_;
  Ops inner_ops_{};
  void* inner_ctx_ = nullptr;
  std::shared_ptr<FaultInjector> plan_;  // shared with whoever made the device
};

}  // namespace

Result<std::unique_ptr<Device>> make_fault_device(const std::string& spec_in) {
  std::string spec = spec_in;
  const std::string prefix = "fault";
  if (spec.rfind(prefix, 0) == 0) spec = spec.substr(prefix.size());
  if (!spec.empty() && spec[0] == ':') spec = spec.substr(1);
  FaultPlan plan;
  auto bad = [&](const std::string& what) {
    return make_error(Errc::invalid_argument, "fault device spec '" + spec_in + "': " + what +
                                                  "; use fault:flush=N,drain=N,copy=N,once (N counts "
                                                  "calls from 1; any key may be left out)");
  };
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) {
      if (comma == spec.size()) break;
      continue;
    }
    if (item == "once") {
      plan.once = true;
      continue;
    }
    const auto eq = item.find('=');
    if (eq == std::string::npos) return bad("'" + item + "' is not KEY=N");
    auto trim = [](std::string t) {
      t.erase(0, t.find_first_not_of(" \t"));
      t.erase(t.find_last_not_of(" \t") + 1);
      return t;
    };
    const std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || value[0] == '-')
      return bad("'" + value + "' is not a call number (a whole number, 0 for never)");
    if (key == "flush")
      plan.flush = n;
    else if (key == "drain")
      plan.drain = n;
    else if (key == "copy")
      plan.copy = n;
    else
      return bad("unknown key '" + key + "'");
  }
  return make_fault_device(std::make_shared<FaultInjector>(plan));
}

std::unique_ptr<Device> make_fault_device(std::shared_ptr<FaultInjector> injector) {
  return std::make_unique<FaultDevice>(std::move(injector));
}

bool FaultInjector::next(std::atomic<std::uint64_t>& count, const std::atomic<std::uint64_t>& at) {
  const std::uint64_t n = count.fetch_add(1, std::memory_order_relaxed) + 1;
  const std::uint64_t a = at.load(std::memory_order_acquire);
  const bool fail = a != 0 && (once_.load(std::memory_order_relaxed) ? n == a : n >= a);
  if (fail) failed_.fetch_add(1, std::memory_order_relaxed);
  return fail;
}

void FaultInjector::arm(const FaultPlan& plan) {
  once_.store(plan.once, std::memory_order_relaxed);
  auto set = [](std::atomic<std::uint64_t>& at, const std::atomic<std::uint64_t>& count, std::uint64_t n) {
    at.store(n == 0 ? 0 : count.load(std::memory_order_relaxed) + n, std::memory_order_release);
  };
  set(flush_at_, flush_, plan.flush);
  set(drain_at_, drain_, plan.drain);
  set(copy_at_, copy_, plan.copy);
}

FaultCounts FaultInjector::counts() const {
  FaultCounts c;
  c.flush = flush_.load(std::memory_order_relaxed);
  c.drain = drain_.load(std::memory_order_relaxed);
  c.copy = copy_.load(std::memory_order_relaxed);
  c.failed = failed_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace cairn::devices
