// real_kill.cpp — real-kill mode: the workload runs in a child process on a
// pool file on tmpfs with the real device and is killed with SIGKILL at a
// chosen crash point (the child stops itself there with SIGSTOP and the parent
// kills it) or after a random delay; the parent reopens the file and checks
// conditions 1-3. Depth 2 kills the recovery of each killed state the same
// way. The page cache survives a kill, so every store made before the kill is
// in the file: this mode finds logic errors (what recovery does with a state
// the program really produced), not ordering errors — the simulator does that.
#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "tests/crashsim/checker.hpp"
#include "tests/crashsim/crashsim.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::testing::crashsim {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kNever = ~std::uint64_t{0};

// What a child shares with its parent.
struct Shared {
  volatile std::uint64_t mirror;        // Model::set_mirror
  std::atomic<std::uint64_t> progress;  // crash points passed
};

// A device that delegates to another and counts crash points like the
// simulator (every flush, drain, copy, fill and marker); at point `target` it
// stops the process (SIGSTOP) for the parent to kill. Optionally records a
// call-stack hash per point (unique failure points).
class KillDevice final : public devices::Device {
 public:
  KillDevice(std::unique_ptr<devices::Device> inner, std::uint64_t target, std::atomic<std::uint64_t>* progress)
      : inner_(std::move(inner)), target_(target), progress_(progress) {}
  std::string name() const override { return "kill(" + inner_->name() + ")"; }
  Result<devices::Ops> bind(const devices::Mapping& m) override {
    auto ops = inner_->bind(m);
    if (!ops.ok()) return ops;
    in_ = ops.value();
    ictx_ = inner_->context();
    devices::Ops o;
    o.flush = [](void* c, const void* a, std::size_t n) {
      auto& d = *static_cast<KillDevice*>(c);
      d.point();
      d.in_.flush(d.ictx_, a, n);
    };
    o.drain = [](void* c) {
      auto& d = *static_cast<KillDevice*>(c);
      d.point();
      d.in_.drain(d.ictx_);
    };
    o.copy_nodrain = [](void* c, void* dst, const void* src, std::size_t n) {
      auto& d = *static_cast<KillDevice*>(c);
      d.point();
      d.in_.copy_nodrain(d.ictx_, dst, src, n);
    };
    o.fill_nodrain = [](void* c, void* dst, int v, std::size_t n) {
      auto& d = *static_cast<KillDevice*>(c);
      d.point();
      d.in_.fill_nodrain(d.ictx_, dst, v, n);
    };
    return o;
  }
  void* context() override { return this; }
  void unbind() override { inner_->unbind(); }
  void marker(devices::Marker m, const char* label) override {
    point();
    inner_->marker(m, label);
  }
  void hash_stacks(std::vector<std::uint64_t>* out) { stacks_ = out; }
  std::uint64_t points() const { return count_.load(); }

 private:
  void point() {
    const std::uint64_t n = count_.fetch_add(1);
    if (progress_ != nullptr) progress_->store(n + 1);
    if (stacks_ != nullptr) {
      void* frames[32];
      const int k = backtrace(frames, 32);
      std::uint64_t h = 0x51ed270b27c2f3a5ULL;
      for (int i = 2; i < k; ++i) h = mix_seed(h, reinterpret_cast<std::uintptr_t>(frames[i]));
      std::lock_guard lk(mu_);
      stacks_->push_back(h);
    }
    if (n == target_) ::kill(::getpid(), SIGSTOP);
  }

  std::unique_ptr<devices::Device> inner_;
  devices::Ops in_{};
  void* ictx_ = nullptr;
  std::uint64_t target_;
  std::atomic<std::uint64_t>* progress_;
  std::atomic<std::uint64_t> count_{0};
  std::vector<std::uint64_t>* stacks_ = nullptr;
  std::mutex mu_;
};

std::string kill_key(const std::string& w, std::uint64_t seed, unsigned steps, unsigned k, std::uint64_t point,
                     std::int64_t point2) {
  std::ostringstream o;
  o << "kill1:" << w << ':' << seed << ':' << steps << ':' << k << ':' << point;
  if (point2 >= 0) o << '+' << point2;
  return o.str();
}

Result<std::unique_ptr<pool::Pool>> open_file(const std::string& path, std::uint64_t target,
                                              std::atomic<std::uint64_t>* progress) {
  pool::OpenOptions oo;
  oo.device = std::make_unique<KillDevice>(devices::make_real_device(), target, progress);
  return pool::Pool::open(path, std::move(oo));
}

// Waits for a child that either stops itself (then kills it) or exits.
// Returns how it ended: "killed", "exited" or a description of a crash.
std::string reap(pid_t pid, bool kill_now) {
  int status = 0;
  if (kill_now) ::kill(pid, SIGKILL);
  for (;;) {
    if (waitpid(pid, &status, WUNTRACED) < 0) {
      if (errno == EINTR) continue;
      return std::string("waitpid: ") + std::strerror(errno);
    }
    if (WIFSTOPPED(status)) {
      ::kill(pid, SIGKILL);
      continue;
    }
    if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGKILL ? "killed" : strsignal(WTERMSIG(status));
    if (WIFEXITED(status))
      return WEXITSTATUS(status) == 0 ? "exited" : "exit status " + std::to_string(WEXITSTATUS(status));
  }
}

class Killer {
 public:
  Killer(const Workload& w, const KillOptions& o, Report& rep) : w_(w), o_(o), rep_(rep) {
    steps_ = o.steps != 0 ? o.steps : w.steps;
  }

  void run(const std::vector<std::uint64_t>* only_points, std::int64_t only_point2) {
    std::unique_ptr<TempDir> tmp;
    if (o_.dir.empty()) tmp = std::make_unique<TempDir>();
    dir_ = o_.dir.empty() ? tmp->path() : o_.dir;
    if (!setup()) return;
    void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail("(setup)", "cannot map shared memory");
    shared_ = static_cast<Shared*>(p);

    std::vector<std::uint64_t> targets;
    std::vector<std::uint64_t> delays_ns;
    if (only_points != nullptr) {
      targets = *only_points;
    } else if (o_.random_time) {
      const std::uint64_t full = time_full_run();
      Rng rng(mix_seed(o_.seed, 0x7173));
      for (unsigned i = 0; i < o_.kills; ++i) delays_ns.push_back(rng.below(full + 1));
    } else if (o_.each_point) {
      std::set<std::uint64_t> seen;
      for (std::uint64_t i = 0; i < stacks_.size(); ++i)
        if (seen.insert(stacks_[i]).second) targets.push_back(i);
    } else {
      Rng rng(mix_seed(o_.seed, 0x4b11));
      for (unsigned i = 0; i < o_.kills; ++i) targets.push_back(rng.below(total_points_ + 1));
    }
    const std::size_t n = delays_ns.empty() ? targets.size() : delays_ns.size();
    for (std::size_t i = 0; i < n && !stop_; ++i) {
      if (delays_ns.empty())
        kill_at(targets[i], only_point2);
      else
        kill_after(delays_ns[i]);
    }
    munmap(shared_, sizeof(Shared));
  }

 private:
  void fail(const std::string& key, const std::string& why) {
    rep_.failures.push_back(Failure{key, why});
    if (o_.log) o_.log("FAIL " + key + "  " + why);
    if (rep_.failures.size() >= std::max(1u, o_.max_failures)) stop_ = true;
  }

  std::string setup_path() const { return dir_ + "/setup.pool"; }
  std::string run_path() const { return dir_ + "/run.pool"; }
  std::string rec_path() const { return dir_ + "/recovery.pool"; }
  std::string crashed_path() const { return dir_ + "/crashed.pool"; }

  // The setup pool file and, in process, the model and the crash points of a
  // full run (the census).
  bool setup() {
    {
      pool::CreateOptions co;
      co.size = w_.pool_size;
      co.block_size = w_.block_size;
      co.device = devices::make_real_device();
      auto pool = pool::Pool::create(setup_path(), std::move(co));
      if (!pool.ok()) return fail("(setup)", pool.error().message), false;
      Model m;
      Rng rng(mix_seed(o_.seed, 0x5e7u));
      auto st = w_.make();
      if (auto r = st->create(*pool.value(), m, rng); !r.ok()) return fail("(setup)", r.error().message), false;
    }
    std::filesystem::copy_file(setup_path(), run_path(), std::filesystem::copy_options::overwrite_existing);
    auto pool = open_file(run_path(), kNever, nullptr);
    if (!pool.ok()) return fail("(setup)", pool.error().message), false;
    auto* dev = static_cast<KillDevice*>(&pool.value()->device());
    auto st = w_.make();
    auto v = st->recover(*pool.value());
    if (!v.ok()) return fail("(setup)", "clean recovery after setup failed: " + v.error().message), false;
    model_ = Model(v.value());
    const std::uint64_t before = dev->points();
    base_points_ = before;
    dev->hash_stacks(&stacks_);
    Rng rng(mix_seed(o_.seed, 0x57e95u));
    for (unsigned i = 0; i < steps_; ++i)
      if (auto r = st->step(*pool.value(), model_, rng); !r.ok())
        return fail("(setup)", "workload step failed: " + r.error().message), false;
    total_points_ = dev->points() - before;
    dev->hash_stacks(nullptr);
    return true;
  }

  // Runs the workload in a child; crash point `target` of the steps stops it
  // (kNever: runs to the end). Points are numbered from the first step, as in
  // the census: the clean recovery before it passes base_points_ of them.
  pid_t spawn_workload(std::uint64_t target) {
    std::filesystem::copy_file(setup_path(), run_path(), std::filesystem::copy_options::overwrite_existing);
    shared_->mirror = 0;
    shared_->progress.store(0);
    const pid_t pid = fork();
    if (pid != 0) return pid;
    auto pool = open_file(run_path(), target == kNever ? kNever : target + base_points_, &shared_->progress);
    if (!pool.ok()) _exit(3);
    auto st = w_.make();
    auto v = st->recover(*pool.value());
    if (!v.ok()) _exit(4);
    Model m(v.value());
    m.set_mirror(&shared_->mirror);
    Rng rng(mix_seed(o_.seed, 0x57e95u));
    for (unsigned i = 0; i < steps_; ++i)
      if (!st->step(*pool.value(), m, rng).ok()) _exit(5);
    _exit(0);
  }

  // The crash point the child had passed last, numbered as in the census.
  std::uint64_t reached() const {
    const std::uint64_t p = shared_->progress.load();
    return p > base_points_ ? p - base_points_ - 1 : 0;
  }

  std::uint64_t time_full_run() {
    const auto t0 = Clock::now();
    const pid_t pid = spawn_workload(kNever);
    reap(pid, false);
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  }

  CheckOutcome check_file(const std::string& path, const Expect& e, std::uint64_t seed) {
    CheckConfig cfg;
    cfg.workload = &w_;
    cfg.extend_ops = o_.extend_ops;
    Opener open = [path]() {
      pool::OpenOptions oo;
      oo.device = devices::make_real_device();
      return pool::Pool::open(path, std::move(oo));
    };
    return check_state(open, cfg, e, seed);
  }

  void kill_at(std::uint64_t target, std::int64_t only_point2) {
    const std::string how = reap(spawn_workload(target), false);
    ++rep_.crash_points;
    after_kill(reached(), how, only_point2);
  }

  void kill_after(std::uint64_t delay_ns) {
    const pid_t pid = spawn_workload(kNever);
    std::this_thread::sleep_for(std::chrono::nanoseconds(delay_ns));
    const std::string how = reap(pid, true);
    ++rep_.crash_points;
    after_kill(reached(), how, -1);
  }

  void after_kill(std::uint64_t point, const std::string& how, std::int64_t only_point2) {
    const std::string key = kill_key(w_.name, o_.seed, steps_, o_.extend_ops, point, -1);
    if (how != "killed" && how != "exited") return fail(key, "the workload process died: " + how);
    // A child killed before its model published anything (still opening or
    // recovering the setup pool) must leave the setup version.
    const Expect e =
        shared_->mirror == 0 ? Expect{&model_, 0, -1, false} : Model::decode_mirror(shared_->mirror, &model_);
    if (e.last < 0 || static_cast<std::size_t>(std::max(e.last, e.in_flight)) >= model_.size())
      return fail(key, "the child's model does not match the census (is the workload deterministic?)");
    // Keep the crashed file for depth 2: the check below writes to it.
    std::filesystem::copy_file(run_path(), crashed_path(), std::filesystem::copy_options::overwrite_existing);
    const CheckOutcome out = check_file(run_path(), e, mix_seed(o_.seed, point, 0xc4ec));
    ++rep_.states;
    ++rep_.points_explored;
    if (!out.ok) return fail(key, out.reason);
    if (o_.recovery_kills > 0 || only_point2 >= 0) kill_recovery(point, e, only_point2);
  }

  // Counts the recovery's crash points, then kills it at some of them.
  void kill_recovery(std::uint64_t point, const Expect& e, std::int64_t only_point2) {
    const std::string crashed = crashed_path();
    auto spawn = [&](std::uint64_t target) {
      std::filesystem::copy_file(crashed, rec_path(), std::filesystem::copy_options::overwrite_existing);
      shared_->progress.store(0);
      const pid_t pid = fork();
      if (pid != 0) return pid;
      auto pool = open_file(rec_path(), target, &shared_->progress);
      if (!pool.ok()) _exit(3);
      pool.value()->marker(devices::Marker::recovery_begin, "recovery begins");
      auto st = w_.make();
      if (!st->recover(*pool.value()).ok()) _exit(4);
      pool.value()->marker(devices::Marker::recovery_end, "recovery ended");
      _exit(0);
    };
    std::vector<std::uint64_t> picks;
    if (only_point2 >= 0) {
      picks.push_back(static_cast<std::uint64_t>(only_point2));
    } else {
      reap(spawn(kNever), false);
      const std::uint64_t total = shared_->progress.load();
      if (total <= 2) return;  // only the two markers: recovery had nothing to do
      Rng rng(mix_seed(o_.seed, point, 0x2ec));
      for (unsigned i = 0; i < o_.recovery_kills; ++i) picks.push_back(1 + rng.below(total - 1));
    }
    for (std::uint64_t j : picks) {
      if (stop_) return;
      const std::string how = reap(spawn(j), false);
      const std::string key = kill_key(w_.name, o_.seed, steps_, o_.extend_ops, point, static_cast<std::int64_t>(j));
      if (how != "killed" && how != "exited") return fail(key, "the recovery process died: " + how);
      const CheckOutcome out = check_file(rec_path(), e, mix_seed(o_.seed, point, j, 0xc4ec));
      ++rep_.states;
      ++rep_.depth2_states;
      ++rep_.depth2_runs;
      if (!out.ok) return fail(key, "after a kill during recovery: " + out.reason);
    }
  }

  const Workload& w_;
  const KillOptions& o_;
  Report& rep_;
  unsigned steps_ = 0;
  std::string dir_;
  Shared* shared_ = nullptr;
  Model model_;
  std::vector<std::uint64_t> stacks_;
  std::uint64_t total_points_ = 0, base_points_ = 0;
  bool stop_ = false;
};

}  // namespace

Report run_real_kill(const Workload& w, const KillOptions& o) {
  Report rep;
  rep.workload = w.name + " (real kill)";
  if (!w.make) {
    // A file workload (Workload::make_file): the persist conformance suite
    // kills the undo-log strategy for real.
    rep.failures.push_back(Failure{"kill1:" + w.name, "real-kill mode runs pool workloads only, not file workloads"});
    return rep;
  }
  const auto t0 = Clock::now();
  Killer k(w, o, rep);
  k.run(nullptr, -1);
  rep.steps = o.steps != 0 ? o.steps : w.steps;
  rep.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return rep;
}

Result<Report> replay_real_kill(const std::string& key, KillOptions o) {
  // kill1:WORKLOAD:SEED:STEPS:K:POINT[+POINT2]
  std::vector<std::string> f;
  std::stringstream ss(key);
  std::string part;
  while (std::getline(ss, part, ':')) f.push_back(part);
  auto bad = [&] {
    return make_error(Errc::invalid_argument,
                      "bad real-kill key '" + key + "' (expected kill1:WORKLOAD:SEED:STEPS:K:POINT[+POINT2])");
  };
  if (f.size() != 6 || f[0] != "kill1") return bad();
  const Workload* w = find_workload(f[1]);
  if (w == nullptr) return make_error(Errc::not_found, "no workload named '" + f[1] + "' is registered");
  try {
    o.seed = std::stoull(f[2]);
    o.steps = static_cast<unsigned>(std::stoul(f[3]));
    o.extend_ops = static_cast<unsigned>(std::stoul(f[4]));
    const auto plus = f[5].find('+');
    const std::vector<std::uint64_t> points{std::stoull(f[5].substr(0, plus))};
    const std::int64_t point2 = plus == std::string::npos ? -1 : std::stoll(f[5].substr(plus + 1));
    o.recovery_kills = 0;
    Report rep;
    rep.workload = w->name + " (real kill replay)";
    Killer k(*w, o, rep);
    k.run(&points, point2);
    return rep;
  } catch (const std::exception&) {
    return bad();
  }
}

}  // namespace cairn::testing::crashsim
