// harness.cpp — runs a workload through the simulator: setup, the armed run,
// the crash states of every crash point, their checks (in-process or in a
// forked child), depth 2 (crashing the recovery), keys and replay.
//
// Memory: each level of exploration has three images of the pool's size
// (image.hpp): W, the working mapping the workload's pool runs on; D, the
// durable image the SimDevice maintains; S, scratch where crash images are
// built. S equals D between states: a state patches the chosen candidate
// values into S, the checker opens a pool over S and recovers, and S is
// restored from D on the pages the patch touched plus the pages the checker
// wrote (learned by S's write tracker). A crash point therefore costs time in
// proportion to what was written, not to the pool size.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "tests/crashsim/checker.hpp"
#include "tests/crashsim/enumerate.hpp"
#include "tests/crashsim/image.hpp"
#include "tests/crashsim/mapped_file.hpp"
#include "tests/crashsim/sim_device.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::testing::crashsim {
namespace {

// The shared page forked checks report through.
constexpr std::size_t kResultBytes = 64 * 1024;

using Clock = std::chrono::steady_clock;

struct Level {
  std::unique_ptr<Image> work, durable, scratch;
};

Result<Level> make_level(std::size_t size) {
  Level lv;
  for (auto* img : {&lv.work, &lv.durable, &lv.scratch}) {
    auto made = Image::create(size);
    if (!made.ok()) return std::move(made).error();
    *img = std::move(made.value());
  }
  auto started = lv.scratch->tracker().start();
  if (!started.ok()) return std::move(started).error();
  return lv;
}

// Creates a pool (or the file structure's file) with the workload's first
// version and returns its bytes.
Result<std::vector<std::byte>> build_setup(const Workload& w, const Options& o, Model& model) {
  TempDir dir;
  std::string path = dir.file("setup.pool");
  std::uint64_t size = w.pool_size;
  if (w.make_file) {
    auto st = w.make_file();
    path = dir.file(st->file_name());
    Rng rng(mix_seed(o.seed, 0x5e7u));
    auto made = st->create(dir.path(), model, rng);
    if (!made.ok())
      return make_error(made.error().code, "setup: FileStructure::create failed: " + made.error().message);
    if (model.empty() || model.in_flight() != nullptr)
      return make_error(Errc::invalid_argument,
                        "setup: FileStructure::create must commit one version (model.begin/end)");
    // The images are as large as the file the structure made.
    std::error_code ec;
    size = std::filesystem::file_size(path, ec);
    if (ec || size == 0) return make_error(Errc::io_error, "setup: " + path + ": " + (ec ? ec.message() : "empty"));
  } else {
    pool::CreateOptions co;
    co.size = w.pool_size;
    co.block_size = w.block_size;
    co.device = devices::make_real_device();
    auto pool = pool::Pool::create(path, std::move(co));
    if (!pool.ok()) return make_error(pool.error().code, "setup: " + pool.error().message);
    auto st = w.make();
    Rng rng(mix_seed(o.seed, 0x5e7u));
    auto made = st->create(*pool.value(), model, rng);
    if (!made.ok()) return make_error(made.error().code, "setup: Structure::create failed: " + made.error().message);
    if (model.empty() || model.in_flight() != nullptr)
      return make_error(Errc::invalid_argument, "setup: Structure::create must commit one version (model.begin/end)");
  }
  std::vector<std::byte> bytes(size);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) return make_error(Errc::io_error, "setup: cannot read back " + path);
  return bytes;
}

// What a run works on: a pool over the working image with its Structure, or
// a file structure whose own library maps the working image (as a file).
class Session {
 public:
  virtual ~Session() = default;
  virtual Result<Version> recover() = 0;
  virtual Result<void> step(Model& model, Rng& rng) = 0;
  virtual void marker(devices::Marker m, const char* label) = 0;
};

class PoolSession final : public Session {
 public:
  PoolSession(std::unique_ptr<pool::Pool> pool, std::unique_ptr<Structure> st)
      : pool_(std::move(pool)), st_(std::move(st)) {}
  Result<Version> recover() override { return st_->recover(*pool_); }
  Result<void> step(Model& model, Rng& rng) override { return st_->step(*pool_, model, rng); }
  void marker(devices::Marker m, const char* label) override { pool_->marker(m, label); }

 private:
  std::unique_ptr<pool::Pool> pool_;
  std::unique_ptr<Structure> st_;
};

// The device is bound when the library maps the file (FileWatch); the
// structure is destroyed first, so the library closes while it is watched.
class FileSession final : public Session {
 public:
  FileSession(std::unique_ptr<SimDevice> dev, std::unique_ptr<FileWatch> watch, std::unique_ptr<FileStructure> st,
              std::string dir)
      : dev_(std::move(dev)), watch_(std::move(watch)), st_(std::move(st)), dir_(std::move(dir)) {}
  Result<Version> recover() override { return checked(st_->recover(dir_)); }
  Result<void> step(Model& model, Rng& rng) override { return checked(st_->step(model, rng)); }
  void marker(devices::Marker m, const char* label) override {
    if (watch_->mapped()) dev_->marker(m, label);
  }

 private:
  template <class T>
  Result<T> checked(Result<T> r) {
    if (r.ok() && !watch_->problem().empty()) return make_error(Errc::io_error, "crashsim: " + watch_->problem());
    return r;
  }
  std::unique_ptr<SimDevice> dev_;
  std::unique_ptr<FileWatch> watch_;
  std::unique_ptr<FileStructure> st_;
  std::string dir_;
};

struct Deferred {
  std::uint64_t id = 0;
  UnitSet units;
  std::vector<std::byte> durable;
  Expect expect;
};

// Shared by the levels of one run.
struct RunState {
  const Workload* workload = nullptr;
  Options options;
  Report* report = nullptr;
  CrashKey key;  // workload, durability, seed, steps, K
  std::optional<CrashKey> only;
  bool stop = false;
  std::size_t size = 0;
  std::unique_ptr<Level> nested;      // images of depth 2, reused
  void* result_page = nullptr;        // forked checks write their outcome here
  std::unique_ptr<ImageLinks> links;  // file workloads: the images as files
  // File workloads: a process with no pool open checks the crash images
  // (libpmemobj opens a pool, by its UUID, once per process).
  std::unique_ptr<CheckServer> server;
};

class Explorer {
 public:
  Explorer(RunState& rs, Level& lv, unsigned depth) : rs_(rs), lv_(lv), depth_(depth) {}

  // Depth 1: the workload's steps on a pool whose image is `setup`.
  void run_workload(Model& model) {
    model_ = &model;
    auto session = open_tracked();
    if (!session) return;
    auto v = session->recover();
    if (!v.ok()) return harness_failure("clean recovery right after setup failed: " + v.error().message);
    if (auto why = match_version(v.value(), model.expect()); !why.empty())
      return harness_failure("clean recovery right after setup: " + why);
    arm();
    Rng rng(mix_seed(rs_.options.seed, 0x57e95u));
    for (unsigned i = 0; i < rs_.key.steps && !rs_.stop; ++i) {
      auto r = session->step(model, rng);
      if (!r.ok()) {
        harness_failure("workload step " + std::to_string(i + 1) + " failed: " + r.error().message);
        break;
      }
    }
    finish();
  }

  // Depth 2: recovery of a crash image already in lv_ (all three images),
  // then K further operations, all under the simulator.
  void run_recovery(const Expect& expect, std::uint64_t seed) {
    fixed_expect_ = expect;
    in_recovery_ = true;
    auto session = open_tracked();
    if (!session) return;
    arm();
    session->marker(devices::Marker::recovery_begin, "recovery begins");
    auto v = session->recover();
    if (!v.ok()) {
      finish();
      return;  // the depth-1 check of this image reports recovery failures
    }
    session->marker(devices::Marker::recovery_end, "recovery ended");
    in_recovery_ = false;
    extend_model_ = Model(v.value());
    model_ = &extend_model_;
    Rng rng(seed);
    for (unsigned i = 0; i < rs_.key.extend_ops && !rs_.stop; ++i) {
      auto r = session->step(extend_model_, rng);
      if (!r.ok()) break;  // reported by the depth-1 check's condition 3
    }
    finish();
  }

 private:
  std::unique_ptr<Session> open_tracked() {
    if (rs_.workload->make_file) return open_file();
    SimDevice::Config c;
    c.durability = rs_.options.durability;
    c.durable = lv_.durable->alias();
    c.tracker = &lv_.work->tracker();
    auto dev = std::make_unique<SimDevice>(c);
    dev_ = dev.get();
    pool::OpenOptions oo;
    oo.flush_mode = flush_mode_for(rs_.options.durability);
    oo.device = std::move(dev);
    auto pool = pool::Pool::open_image(lv_.work->view(), rs_.size, std::move(oo), "workload pool");
    if (!pool.ok()) {
      harness_failure("the pool image does not open: " + pool.error().message);
      dev_ = nullptr;
      return nullptr;
    }
    return std::make_unique<PoolSession>(std::move(pool.value()), rs_.workload->make());
  }

  // A file workload: the structure opens the working image as a file; the
  // device tracks the library's own mapping (it is bound when that is made).
  std::unique_ptr<Session> open_file() {
    auto st = rs_.workload->make_file();
    auto dir = rs_.links->dir_for(*lv_.work, st->file_name());
    if (!dir.ok()) {
      harness_failure(dir.error().message);
      return nullptr;
    }
    SimDevice::Config c;
    c.durability = rs_.options.durability;
    c.durable = lv_.durable->alias();
    c.track_writes = true;
    auto dev = std::make_unique<SimDevice>(c);
    dev_ = dev.get();
    auto watch = std::make_unique<FileWatch>(lv_.work->fd(), rs_.size, rs_.options.durability, dev.get());
    if (!watch->ok()) {
      harness_failure("cannot watch the working image's file (too many watches?)");
      dev_ = nullptr;
      return nullptr;
    }
    return std::make_unique<FileSession>(std::move(dev), std::move(watch), std::move(st), dir.value());
  }

  void arm() {
    dev_->set_hook([this](const SimDevice::Point& p) { on_point(p); });
    dev_->set_stack_hashing(rs_.options.dedup_per_stack > 0 && depth_ == 1);
    dev_->arm(true);
  }

  void finish() {
    dev_->end_point();
    dev_->arm(false);
    process_deferred();
  }

  void harness_failure(const std::string& why) {
    rs_.report->failures.push_back(Failure{format_key(rs_.key) + "(setup)", why});
    rs_.stop = true;
  }

  bool want_point(const SimDevice::Point& p) {
    if (rs_.only) return p.id == (depth_ == 1 ? rs_.only->point : rs_.only->point2);
    if (depth_ == 1 && rs_.options.dedup_per_stack > 0 && ++stack_seen_[p.stack] > rs_.options.dedup_per_stack)
      return false;
    return true;
  }

  Expect current_expect() const { return in_recovery_ ? fixed_expect_ : model_->expect(); }

  void on_point(const SimDevice::Point& p) {
    if (depth_ == 1) ++rs_.report->crash_points;
    if (p.kind == SimDevice::PointKind::marker && p.marker == devices::Marker::commit_point && !in_recovery_)
      model_->commit_point();
    if (rs_.stop || !want_point(p)) return;
    dev_->pending(units_);
    const Expect e = current_expect();
    if (!rs_.only) {
      const std::uint64_t sig = mix_seed(
          units_.signature(), dev_->durable_generation(),
          static_cast<std::uint64_t>(e.last) ^ (static_cast<std::uint64_t>(e.in_flight) << 32), e.point_durable);
      if (!seen_.insert(sig).second) {
        if (depth_ == 1) ++rs_.report->points_duplicate;
        return;
      }
    }
    if (p.deferred && !rs_.options.census) {
      // Inside a parallel persist: keep a copy of what the state needs and
      // check it once the parallel operation is over.
      if (depth_ == 1) ++rs_.report->points_deferred;
      Deferred d;
      d.id = p.id;
      d.units = units_;
      d.durable.assign(dev_->durable(), dev_->durable() + rs_.size);
      d.expect = e;
      deferred_.push_back(std::move(d));
      return;
    }
    process_deferred();
    explore(p.id, units_, dev_->durable(), true, e);
  }

  void process_deferred() {
    for (auto& d : deferred_) explore(d.id, d.units, d.durable.data(), false, d.expect);
    deferred_.clear();
  }

  CrashKey key_for(std::uint64_t id, std::uint64_t s) const {
    CrashKey k = rs_.key;
    if (depth_ == 1) {
      k.point = id;
      k.subset = s;
    } else {
      k.depth2 = true;
      k.point2 = id;
      k.subset2 = s;
    }
    return k;
  }

  void explore(std::uint64_t id, const UnitSet& units, const std::byte* base, bool live, const Expect& e) {
    Report& rep = *rs_.report;
    const Options& o = rs_.options;
    Enumerator en(units, o.seed, depth_ == 1 ? id : mix_seed(rs_.key.point, rs_.key.subset, id), depth_);
    if (depth_ == 1) {
      ++rep.points_explored;
      if (en.exhaustive()) ++rep.points_exhaustive;
      rep.max_pending = std::max<std::uint64_t>(rep.max_pending, units.units.size());
    }
    const unsigned random = depth_ == 1 ? o.random_subsets : std::min(o.random_subsets, 4u);
    const std::uint64_t count = en.count(random);
    if (o.census) {
      for (std::uint64_t s = 0; s < count; ++s) rep.states += sampled_out(id, s) ? 0 : 1;
      return;
    }
    sync_scratch(base, live);
    std::vector<std::uint64_t> picks;
    // Not for file workloads: the depth-2 run would open a second copy of the
    // pool in this process, which libpmemobj refuses (one pool per UUID).
    if (depth_ == 1 && o.depth2_per_point > 0 && !rs_.only && !rs_.workload->make_file)
      picks = en.depth2_picks(o.depth2_per_point);
    std::uint64_t lo = 0, hi = count;
    if (rs_.only) {
      lo = depth_ == 1 ? rs_.only->subset : rs_.only->subset2;
      hi = lo < count ? lo + 1 : lo;
    }
    if (o.forked && depth_ == 1 && !rs_.only && !rs_.workload->make_file)
      return explore_forked(id, units, base, e, en, lo, hi, picks);
    for (std::uint64_t s = lo; s < hi && !rs_.stop; ++s) {
      if (o.max_states != 0 && rep.states >= o.max_states) {
        rs_.stop = true;
        break;
      }
      if (sampled_out(id, s)) continue;
      en.choices(s, choices_);
      patch(units, base);
      const CheckOutcome out = check(id, s, e);
      ++rep.states;
      if (depth_ == 2) ++rep.depth2_states;
      restore(base);
      if (!out.ok) {
        record_failure(en, id, s, out.reason);
        continue;
      }
      const bool deepen_this =
          depth_ == 1 && (rs_.only ? rs_.only->depth2 : std::find(picks.begin(), picks.end(), s) != picks.end());
      if (deepen_this && !rs_.workload->make_file) deepen(id, s, units, base, e);
    }
  }

  void record_failure(const Enumerator& en, std::uint64_t id, std::uint64_t s, const std::string& why) {
    Report& rep = *rs_.report;
    const CrashKey k = key_for(id, s);
    // Appended piecewise: GCC 12's -Wrestrict misfires on "[" + a + "] " + b at -O3.
    std::string reason = "[";
    reason += en.family(s);
    reason += "] ";
    reason += why;
    rep.failures.push_back(Failure{format_key(k), std::move(reason)});
    if (rs_.options.log) rs_.options.log("FAIL " + format_key(k) + "  " + rep.failures.back().reason);
    if (rep.failures.size() >= std::max(1u, rs_.options.max_failures)) rs_.stop = true;
  }

  // Forked checks of one crash point's states: a child checks them one after
  // another, each on a fresh private (copy-on-write) view of the scratch
  // image, so that no state sees another's writes and the parent's bytes
  // stay untouched, as with one child per state, without a fork and an exit
  // per state. The child builds each crash image in the shared scratch
  // itself (the parent waits) and takes it out again before the next. A
  // state whose recovery kills the child is reported as such; the next child
  // goes on after it.
  struct ForkedResult {
    std::atomic<std::uint64_t> done;  // states of this child's batch that passed
    std::atomic<int> failed;          // the state after them failed (reason follows)
    char reason[4096];
  };
  static_assert(sizeof(ForkedResult) <= kResultBytes);
  void explore_forked(std::uint64_t id, const UnitSet& units, const std::byte* base, const Expect& e,
                      const Enumerator& en, std::uint64_t lo, std::uint64_t hi,
                      const std::vector<std::uint64_t>& picks) {
    Report& rep = *rs_.report;
    const Options& o = rs_.options;
    std::vector<std::uint64_t> todo;  // at most as many as the cap leaves
    for (std::uint64_t s = lo; s < hi && (o.max_states == 0 || rep.states + todo.size() < o.max_states); ++s)
      if (!sampled_out(id, s)) todo.push_back(s);
    if (rs_.result_page == nullptr) {
      void* p = mmap(nullptr, kResultBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return harness_failure("forked check: cannot map the result page");
      rs_.result_page = p;
    }
    auto* res = new (rs_.result_page) ForkedResult;
    CheckConfig cfg;
    cfg.workload = rs_.workload;
    cfg.extend_ops = rs_.key.extend_ops;
    const Opener open = image_opener(lv_.scratch->view(), rs_.size, o.durability);
    std::byte* shared = lv_.scratch->alias();
    // States are counted as in-process runs count them: none after a stop
    // (too many failures, also at depth 2), and the cap counts depth-2 states
    // too; what a child checked past that is not counted.
    auto capped = [&] {
      if (rs_.stop) return true;
      if (o.max_states == 0 || rep.states < o.max_states) return false;
      rs_.stop = true;
      return true;
    };
    for (std::size_t next = 0; next < todo.size() && !capped();) {
      res->done.store(0);
      res->failed.store(0);
      res->reason[0] = '\0';
      const pid_t pid = fork();
      if (pid < 0) return harness_failure(std::string("forked check: fork failed: ") + std::strerror(errno));
      if (pid == 0) {
        for (std::size_t k = next; k < todo.size(); ++k) {
          alarm(120);
          en.choices(todo[k], choices_);
          patch(units, base);
          CheckOutcome out;
          if (auto r = lv_.scratch->privatize_view(); !r.ok())
            out = CheckOutcome{false, r.error().message, 0};
          else
            out = check_state(open, cfg, e, check_seed(id, todo[k]));
          for (std::uint32_t pg : patched_) copy_page(shared, base, pg);
          if (!out.ok) {
            std::snprintf(res->reason, sizeof res->reason, "%s", out.reason.c_str());
            res->failed.store(1);
            _exit(0);
          }
          res->done.fetch_add(1);
        }
        _exit(0);
      }
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      // A child that died may have left its crash image in the shared scratch.
      if (WIFSIGNALED(status))
        for (const Unit& u : units.units) copy_page(shared, base, static_cast<std::uint32_t>(u.offset / kPage));
      const std::size_t passed = res->done.load();
      for (std::size_t k = next; k < next + passed; ++k) {
        if (capped()) return;
        ++rep.states;
        if (std::find(picks.begin(), picks.end(), todo[k]) != picks.end()) {
          en.choices(todo[k], choices_);
          deepen(id, todo[k], units, base, e);
        }
      }
      next += passed;
      if (next == todo.size() && !WIFSIGNALED(status)) break;
      if (next == todo.size()) {
        harness_failure("a forked checking process died after its last state");
        break;
      }
      // todo[next] failed or killed its process.
      if (capped()) return;
      ++rep.states;
      if (WIFSIGNALED(status)) {
        record_failure(en, id, todo[next],
                       std::string("recovery crashed the checking process: ") + strsignal(WTERMSIG(status)) +
                           (WTERMSIG(status) == SIGALRM ? " (timed out)" : ""));
      } else if (res->failed.load() == 1) {
        record_failure(en, id, todo[next], res->reason);
      } else {
        record_failure(en, id, todo[next], "the checking process exited without a result");
      }
      ++next;
    }
    capped();  // a run at its cap stops here, as an in-process one does at its next state
  }

  // Options::state_sample: a seeded choice per depth-1 state, so that a
  // sampled run spreads over all crash points (sampling whole points would
  // make the count depend on which large points happen to be drawn).
  bool sampled_out(std::uint64_t id, std::uint64_t s) const {
    if (depth_ != 1 || rs_.only || rs_.options.state_sample >= 1.0) return false;
    const double u = static_cast<double>(mix_seed(rs_.options.seed, id, s, 0x5a3) >> 11) * (1.0 / 9007199254740992.0);
    return u >= rs_.options.state_sample;
  }

  // S := base on the pages that may differ.
  void sync_scratch(const std::byte* base, bool live) {
    std::byte* s = lv_.scratch->alias();
    pages_.clear();
    if (live) dev_->take_durable_changes(pages_);
    if (!live || resync_all_) {
      std::memcpy(s, base, rs_.size);
      resync_all_ = !live;
      return;
    }
    for (std::uint32_t p : pages_) copy_page(s, base, p);
  }

  void copy_page(std::byte* dst, const std::byte* src, std::uint32_t page) const {
    const std::size_t off = std::size_t{page} * kPage;
    if (off >= rs_.size) return;
    std::memcpy(dst + off, src + off, std::min(kPage, rs_.size - off));
  }

  void patch(const UnitSet& units, const std::byte* /*base*/) {
    std::byte* s = lv_.scratch->alias();
    patched_.clear();
    for (std::size_t i = 0; i < units.units.size(); ++i) {
      if (choices_[i] == 0) continue;
      const Unit& u = units.units[i];
      std::memcpy(s + u.offset, units.candidate(u, choices_[i]), u.len);
      patched_.push_back(static_cast<std::uint32_t>(u.offset / kPage));
    }
  }

  void restore(const std::byte* base) {
    std::byte* s = lv_.scratch->alias();
    for (std::uint32_t p : patched_) copy_page(s, base, p);
    for (std::uint32_t p : file_written_) copy_page(s, base, p);
    file_written_.clear();
    WriteTracker& t = lv_.scratch->tracker();
    const std::size_t n = t.learned_count();
    for (std::size_t i = 0; i < n; ++i) copy_page(s, base, t.learned(i));
  }

  // The seed of a state's further operations.
  std::uint64_t check_seed(std::uint64_t id, std::uint64_t s) const {
    return depth_ == 1 ? mix_seed(rs_.key.seed, id, s, 0xc4ec)
                       : mix_seed(rs_.key.seed, mix_seed(rs_.key.point, rs_.key.subset), id, s);
  }

  CheckOutcome check(std::uint64_t id, std::uint64_t s, const Expect& e) {
    CheckConfig cfg;
    cfg.workload = rs_.workload;
    cfg.extend_ops = rs_.key.extend_ops;
    const std::uint64_t seed = check_seed(id, s);
    if (rs_.workload->make_file) {
      // Always in-process: the library maps the image shared, so a forked
      // child's writes would reach it anyway.
      auto dir = rs_.links->dir_for(*lv_.scratch, rs_.workload->make_file()->file_name());
      if (!dir.ok()) return CheckOutcome{false, dir.error().message, 0};
      return rs_.server->check(lv_.scratch->fd(), rs_.size, dir.value(), rs_.options.durability, cfg.extend_ops, e,
                               seed, file_written_);
    }
    // (Forked runs check their depth-1 states in explore_forked.)
    return check_state(image_opener(lv_.scratch->view(), rs_.size, rs_.options.durability), cfg, e, seed);
  }

  void deepen(std::uint64_t id, std::uint64_t s, const UnitSet& units, const std::byte* base, const Expect& e) {
    if (!rs_.nested) {
      auto lv = make_level(rs_.size);
      if (!lv.ok()) {
        rs_.report->failures.push_back(Failure{format_key(key_for(id, s)), "depth 2: " + lv.error().message});
        rs_.stop = true;
        return;
      }
      rs_.nested = std::make_unique<Level>(std::move(lv.value()));
    }
    ++rs_.report->depth2_runs;
    Level& n = *rs_.nested;
    for (Image* img : {n.work.get(), n.durable.get(), n.scratch.get()}) {
      std::byte* a = img->alias();
      std::memcpy(a, base, rs_.size);
      for (std::size_t i = 0; i < units.units.size(); ++i)
        if (choices_[i] != 0)
          std::memcpy(a + units.units[i].offset, units.candidate(units.units[i], choices_[i]), units.units[i].len);
    }
    RunState& rs = rs_;
    const CrashKey saved = rs.key;
    rs.key.point = id;
    rs.key.subset = s;
    Explorer inner(rs, n, 2);
    inner.run_recovery(e, mix_seed(rs.key.seed, id, s, 0xe7));
    rs.key = saved;
  }

  RunState& rs_;
  Level& lv_;
  unsigned depth_;
  SimDevice* dev_ = nullptr;
  Model* model_ = nullptr;
  Model extend_model_;
  Expect fixed_expect_;
  bool in_recovery_ = false;
  bool resync_all_ = false;
  UnitSet units_;
  std::vector<std::uint8_t> choices_;
  std::vector<std::uint32_t> patched_, pages_, file_written_;
  std::vector<Deferred> deferred_;
  std::unordered_set<std::uint64_t> seen_;
  std::unordered_map<std::uint64_t, unsigned> stack_seen_;
};

Report run_once(const Workload& w, const Options& o) {
  Report rep;
  rep.workload = w.name;
  const auto t0 = Clock::now();
  RunState rs;
  rs.workload = &w;
  rs.options = o;
  rs.report = &rep;
  rs.size = w.pool_size;
  rs.key.workload = w.name;
  rs.key.durability = o.durability;
  rs.key.seed = o.seed;
  rs.key.steps = o.steps != 0 ? o.steps : w.steps;
  rs.key.extend_ops = o.extend_ops;
  if (w.make_file) rs.links = std::make_unique<ImageLinks>();
  rep.steps = rs.key.steps;
  rep.random_subsets = o.random_subsets;
  if (!o.only_key.empty()) {
    auto k = parse_key(o.only_key);
    if (!k.ok()) {
      rep.failures.push_back(Failure{o.only_key, k.error().message});
      return rep;
    }
    rs.only = k.value();
  }
  Model model;
  auto setup = build_setup(w, o, model);
  if (!setup.ok()) {
    rep.failures.push_back(Failure{format_key(rs.key) + "(setup)", setup.error().message});
    return rep;
  }
  rs.size = setup.value().size();
  auto lv = make_level(rs.size);
  if (!lv.ok()) {
    rep.failures.push_back(Failure{format_key(rs.key) + "(setup)", lv.error().message});
    return rep;
  }
  for (Image* img : {lv.value().work.get(), lv.value().durable.get(), lv.value().scratch.get()})
    std::memcpy(img->alias(), setup.value().data(), rs.size);
  if (w.make_file) {
    // Before the run opens the working image: the server must not have it open.
    auto server = CheckServer::start(w);
    if (!server.ok()) {
      rep.failures.push_back(Failure{format_key(rs.key) + "(setup)", server.error().message});
      return rep;
    }
    rs.server = std::move(server.value());
  }
  {
    Explorer top(rs, lv.value(), 1);
    top.run_workload(model);
  }
  if (rs.result_page != nullptr) munmap(rs.result_page, kResultBytes);
  rep.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return rep;
}

}  // namespace

Report run(const Workload& w, const Options& options) {
  Options o = options;
  if (o.target_states > 0 && o.only_key.empty() && !o.census) {
    // Census runs (no checks) to choose random subsets, steps or sampling
    // so that the depth-1 states come to about target_states.
    unsigned steps = o.steps != 0 ? o.steps : w.steps;
    for (int attempt = 0; attempt < 10; ++attempt) {
      Options c = o;
      c.census = true;
      c.random_subsets = 0;
      c.steps = steps;
      c.max_states = 0;
      c.depth2_per_point = 0;
      const Report r = run_once(w, c);
      const std::uint64_t fixed = r.states, open = r.points_explored - r.points_exhaustive;
      if (!r.failures.empty()) break;
      if (fixed >= o.target_states) {
        o.state_sample = static_cast<double>(o.target_states) / static_cast<double>(fixed);
        o.random_subsets = 0;
        break;
      }
      if (open > 0 && fixed + open * 64 >= o.target_states) {
        o.random_subsets = static_cast<unsigned>((o.target_states - fixed + open - 1) / open);
        break;
      }
      steps *= 2;
    }
    o.steps = steps;
  }
  return run_once(w, o);
}

Report replay(const Workload& w, const CrashKey& key, Options o) {
  o.durability = key.durability;
  o.seed = key.seed;
  o.steps = key.steps;
  o.extend_ops = key.extend_ops;
  o.only_key = format_key(key);
  o.max_failures = 1;
  o.target_states = 0;
  o.census = false;
  return run_once(w, o);
}

Result<Report> replay(const std::string& text, Options o) {
  auto key = parse_key(text);
  if (!key.ok()) return std::move(key).error();
  const Workload* w = find_workload(key.value().workload);
  if (w == nullptr)
    return make_error(Errc::not_found, "no workload named '" + key.value().workload +
                                           "' is registered; `cairn crashsim list` shows the known ones");
  Report r = replay(*w, key.value(), std::move(o));
  if (r.states == 0 && r.failures.empty())
    return make_error(Errc::not_found,
                      "the key's crash state was not reached (the point or subset number is past "
                      "the end of the run): " +
                          text);
  return r;
}

}  // namespace cairn::testing::crashsim
