// fault_device.cpp — the `fault` device: the real device with chosen calls failing like a failed msync.
//
// The device owns a real device and calls its Ops for every call that is not
// made to fail, so counters and durability are the real device's (it shares
// the real device's counters and I/O error, like the emulated device). A call
// made to fail records EIO through record_io_error() and skips the write-back:
// a flush or drain does nothing, a copy or fill stores its bytes with plain
// stores and writes nothing back. Which calls fail is a FaultPlan (device.hpp)
// from the spec, or set later with arm_fault() on a device registered by name.
//
// The plan is kept as absolute call numbers (0: never) in atomics: the hot
// path does one fetch_add and one load per call, from any thread (persist_mt
// workers flush concurrently).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "cairn/extended/device.hpp"

namespace cairn::devices {
namespace {

struct FaultState {
  std::atomic<std::uint64_t> flush{0}, drain{0}, copy{0}, failed{0};
  // Absolute call numbers from which (or, once, at which) calls fail; 0: never.
  std::atomic<std::uint64_t> flush_at{0}, drain_at{0}, copy_at{0};
  std::atomic<bool> once{false};

  // Counts a call of one kind; true if it must fail.
  bool next(std::atomic<std::uint64_t>& count, const std::atomic<std::uint64_t>& at) {
    const std::uint64_t n = count.fetch_add(1, std::memory_order_relaxed) + 1;
    const std::uint64_t a = at.load(std::memory_order_acquire);
    const bool fail = a != 0 && (once.load(std::memory_order_relaxed) ? n == a : n >= a);
    if (fail) failed.fetch_add(1, std::memory_order_relaxed);
    return fail;
  }
  // Arms `plan` relative to the calls made so far.
  void arm(const FaultPlan& plan) {
    once.store(plan.once, std::memory_order_relaxed);
    auto set = [](std::atomic<std::uint64_t>& at, const std::atomic<std::uint64_t>& count, std::uint64_t n) {
      at.store(n == 0 ? 0 : count.load(std::memory_order_relaxed) + n, std::memory_order_release);
    };
    set(flush_at, flush, plan.flush);
    set(drain_at, drain, plan.drain);
    set(copy_at, copy, plan.copy);
  }
};

// Live named devices; the newest registration of a name wins.
std::mutex g_registry_mu;
std::map<std::string, std::weak_ptr<FaultState>>& registry() {
  static auto* r = new std::map<std::string, std::weak_ptr<FaultState>>();  // never destroyed: used at exit
  return *r;
}

class FaultDevice final : public Device {
 public:
  FaultDevice(const FaultPlan& plan, std::string name)
      : inner_(make_real_device()), plan_(std::make_shared<FaultState>()), name_(std::move(name)) {
    share_state_with(*inner_);
    plan_->arm(plan);
    if (!name_.empty()) {
      std::lock_guard lk(g_registry_mu);
      registry()[name_] = plan_;
    }
  }
  ~FaultDevice() override {
    if (name_.empty()) return;
    std::lock_guard lk(g_registry_mu);
    auto it = registry().find(name_);
    if (it != registry().end() && it->second.lock() == plan_) registry().erase(it);
  }

  std::string name() const override { return name_.empty() ? "fault" : "fault:name=" + name_; }

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
  void fail(std::atomic<std::uint64_t>& counter, std::uint64_t amount) {
    record_io_error(EIO);
    counters().add(counter, amount);
  }

  static void flush_impl(void* ctx, const void* addr, std::size_t len) {
    auto& d = self(ctx);
    if (d.plan_->next(d.plan_->flush, d.plan_->flush_at)) return d.fail(d.counters().flush_calls, 1);
    d.inner_ops_.flush(d.inner_ctx_, addr, len);
  }
  static void drain_impl(void* ctx) {
    auto& d = self(ctx);
    if (d.plan_->next(d.plan_->drain, d.plan_->drain_at)) return d.fail(d.counters().drains, 1);
    d.inner_ops_.drain(d.inner_ctx_);
  }
  static void copy_impl(void* ctx, void* dst, const void* src, std::size_t len) {
    auto& d = self(ctx);
    if (d.plan_->next(d.plan_->copy, d.plan_->copy_at)) {
      std::memcpy(dst, src, len);  // the stores happen; their write-back does not
      return d.fail(d.counters().copied_bytes, len);
    }
    d.inner_ops_.copy_nodrain(d.inner_ctx_, dst, src, len);
  }
  static void fill_impl(void* ctx, void* dst, int c, std::size_t len) {
    auto& d = self(ctx);
    if (d.plan_->next(d.plan_->copy, d.plan_->copy_at)) {
      std::memset(dst, c, len);
      return d.fail(d.counters().copied_bytes, len);
    }
    d.inner_ops_.fill_nodrain(d.inner_ctx_, dst, c, len);
  }

  std::unique_ptr<Device> inner_;
  Ops inner_ops_{};
  void* inner_ctx_ = nullptr;
  std::shared_ptr<FaultState> plan_;  // shared with the registry
  std::string name_;
};

std::shared_ptr<FaultState> find(const std::string& name) {
  std::lock_guard lk(g_registry_mu);
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second.lock();
}

Error no_such_device(const std::string& name) {
  return make_error(Errc::not_found, "no live fault device is named '" + name +
                                         "': create it with the device spec \"fault:name=" + name +
                                         "\" and keep its pool open");
}

}  // namespace

Result<std::unique_ptr<Device>> make_fault_device(const std::string& spec_in) {
  std::string spec = spec_in;
  const std::string prefix = "fault";
  if (spec.rfind(prefix, 0) == 0) spec = spec.substr(prefix.size());
  if (!spec.empty() && spec[0] == ':') spec = spec.substr(1);
  FaultPlan plan;
  std::string name;
  auto bad = [&](const std::string& what) {
    return make_error(Errc::invalid_argument, "fault device spec '" + spec_in + "': " + what +
                                                  "; use fault:flush=N,drain=N,copy=N,once,name=ID (N counts "
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
    if (key == "name") {
      if (value.empty()) return bad("name= needs a value");
      name = value;
      continue;
    }
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
  return std::unique_ptr<Device>(std::make_unique<FaultDevice>(plan, name));
}

Result<void> arm_fault(const std::string& name, const FaultPlan& plan) {
  auto s = find(name);
  if (!s) return no_such_device(name);
  s->arm(plan);
  return {};
}

Result<FaultCounts> fault_counts(const std::string& name) {
  auto s = find(name);
  if (!s) return no_such_device(name);
  FaultCounts c;
  c.flush = s->flush.load(std::memory_order_relaxed);
  c.drain = s->drain.load(std::memory_order_relaxed);
  c.copy = s->copy.load(std::memory_order_relaxed);
  c.failed = s->failed.load(std::memory_order_relaxed);
  return c;
}

}  // namespace cairn::devices
