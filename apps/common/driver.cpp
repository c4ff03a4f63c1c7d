// driver.cpp — run_simulation(): state registration, fresh start or restore,
// the iteration loop with periodic commits, crash injection, verification.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "apps/common/app.hpp"
#include "cairn/extended/pool.hpp"
#include "cairn/persist.hpp"
#include "util/dram_buffer.hpp"
#include "util/hash.hpp"

namespace cairn::apps {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The driver's own persisted record, region "app.meta": committed with the
// fields, so a restore brings back the iteration count that matches them.
struct Meta {
  std::uint64_t magic;
  std::uint64_t iterations_done;  // iterations whose results the fields hold
  std::uint64_t reserved[6];
};
constexpr std::uint64_t kMetaMagic = 0x315441444D505041ULL;  // "APPMDAT1"

}  // namespace

Field* FieldSet::add(const std::string& name, std::size_t bytes, FieldKind kind) {
  auto f = std::make_unique<Field>();
  f->name_ = name;
  f->bytes_ = bytes;
  f->kind_ = kind;
  fields_.push_back(std::move(f));
  return fields_.back().get();
}

void Field::done_writing() const {
  if (!ctx_ || !last_step_) return;
  if (kind_ == FieldKind::dual) {
    const auto* d = static_cast<const persist::DualRegion*>(region_);
    if (out_ == d->write()) ctx_->flush_async(*d);
  } else if (kind_ == FieldKind::plain) {
    ctx_->flush_async(*static_cast<const persist::Region*>(region_));
  }
}

void Field::stream(void* dst, const void* src, std::size_t n) const {
  if (ctx_)
    ctx_->stream(dst, src, n);
  else
    persist::stream_copy(dst, src, n);
}

void Field::stream_fence() const {
  if (ctx_)
    ctx_->stream_fence();
  else
    persist::stream_fence();
}

void Field::done_streaming() const {
  if (!ctx_ || !last_step_ || kind_ != FieldKind::dual) return;
  const auto* d = static_cast<const persist::DualRegion*>(region_);
  if (out_ == d->write()) ctx_->streamed(*d);
}

std::uint64_t checksum(const void* data, std::size_t bytes, std::uint64_t seed) {
  return util::hash_bytes(data, bytes, seed);
}

// Owns the storage of one run and binds the Fields to it.
class Driver {
 public:
  Driver(Simulation& sim, const RunOptions& options) : sim_(sim), opt_(options), team_(options.threads) {}
  Result<Report> run();

 private:
  Result<void> declare();
  Result<void> attach();
  void bind_initial();
  void run_period(std::uint64_t first, std::uint64_t end);
  void bind_latest();
  void progress(std::uint64_t done, std::uint64_t total);
  [[noreturn]] void crash(std::uint64_t iteration);

  Simulation& sim_;
  RunOptions opt_;
  Team team_;
  Report rep_;
  FieldSet fields_;
  std::unique_ptr<persist::Context> ctx_;
  persist::Region* meta_region_ = nullptr;
  Meta native_meta_{};
  Meta* meta_ = &native_meta_;
  struct State {
    Field* field;
    persist::DualRegion* dual = nullptr;
    persist::Region* plain = nullptr;
    util::DramBuffer a, b;  // DRAM: native buffers, or the scratch of a period (b)
    void* cur = nullptr;    // native dual: the newest version
  };
  std::vector<State> state_;
  Clock::time_point start_time_, last_progress_;
};

Result<void> Driver::declare() {
  sim_.declare(fields_);
  if (fields_.all().empty()) return make_error(Errc::invalid_argument, sim_.name() + ": declares no state");
  for (const auto& f : fields_.all()) {
    if (f->name().empty() || f->name().size() > 31 || f->name().rfind("app.", 0) == 0)
      return make_error(Errc::invalid_argument, sim_.name() + ": field name '" + f->name() +
                                                    "' must have 1 to 31 characters and not start with 'app.'");
    if (f->bytes() == 0)
      return make_error(Errc::invalid_argument, sim_.name() + ": field '" + f->name() + "' is empty");
    state_.push_back(State{f.get()});
  }
  return {};
}

Result<void> Driver::attach() {
  const bool persistent = !opt_.strategy.empty();
  for (auto& s : state_) {
    const auto kind = s.field->kind();
    const std::size_t bytes = s.field->bytes();
    const std::string what = "field '" + s.field->name() + "' (choose a smaller --size)";
    auto alloc = [&](util::DramBuffer& into) -> Result<void> {
      auto b = util::DramBuffer::allocate(bytes, what);
      if (!b.ok()) return std::move(b).error();
      into = std::move(b.value());
      return {};
    };
    if (kind == FieldKind::scratch || !persistent)
      if (auto r = alloc(s.a); !r.ok()) return r;
    // Native dual fields ping-pong between a and b; persisted ones use b as
    // the scratch of periods longer than one iteration.
    if (kind == FieldKind::dual && (!persistent || opt_.persist_every > 1))
      if (auto r = alloc(s.b); !r.ok()) return r;
    s.cur = s.a.data();
    if (kind != FieldKind::scratch) rep_.state_bytes += bytes;
  }
  if (!persistent) return {};

  persist::Options po;
  po.strategy = opt_.strategy;
  po.name = opt_.name;
  po.dir = opt_.dir.empty() ? pool::default_pool_dir() : opt_.dir;
  po.device = opt_.device;
  po.threads = opt_.threads;
  po.async_flush = !opt_.sync_flush;
  po.flush = !opt_.no_flush;
  po.checksums = !opt_.no_checksums;
  auto ctx = persist::Context::create(po);
  if (!ctx.ok()) return ctx.error();
  ctx_ = std::move(ctx.value());
  auto meta = ctx_->region("app.meta", sizeof(Meta));
  if (!meta.ok()) return meta.error();
  meta_region_ = *meta;
  for (auto& s : state_) {
    if (s.field->kind() == FieldKind::dual) {
      auto r = ctx_->dual_region(s.field->name(), s.field->bytes());
      if (!r.ok()) return r.error();
      s.dual = *r;
      s.field->region_ = s.dual;
    } else if (s.field->kind() == FieldKind::plain) {
      auto r = ctx_->region(s.field->name(), s.field->bytes());
      if (!r.ok()) return r.error();
      s.plain = *r;
      s.field->region_ = s.plain;
    }
    if (s.field->region_) s.field->ctx_ = ctx_.get();
  }
  if (!opt_.resume) {
    std::error_code ec;
    std::filesystem::create_directories(po.dir, ec);
    // A fresh run starts over: storage an earlier run left under this name
    // (by any strategy) would otherwise be resumed into or refuse the layout.
    persist::Options old = po;
    old.strategy.clear();
    if (auto r = persist::remove_storage(old); !r.ok()) return r.error();
  }
  auto t0 = Clock::now();
  if (auto r = ctx_->open(); !r.ok()) return r;
  rep_.open_seconds = seconds_since(t0);
  meta_ = meta_region_->as<Meta>();
  if (!opt_.resume) return {};

  if (!ctx_->committed_version())
    return make_error(Errc::no_version, "--resume: nothing has been committed under '" + po.dir + "/" + po.name +
                                            "' with strategy '" + po.strategy +
                                            "'; run without --resume to start from scratch");
  t0 = Clock::now();
  auto v = ctx_->restore();
  if (!v.ok()) return v.error();
  rep_.restore_seconds = seconds_since(t0);
  meta_ = meta_region_->as<Meta>();  // restore may move plain regions
  if (meta_->magic != kMetaMagic)
    return make_error(Errc::corrupted, "--resume: the committed state under '" + po.dir + "/" + po.name +
                                           "' was not written by a cairn app; run without --resume to start over");
  return {};
}

// Fields before the first step: dual in() is the version it reads.
void Driver::bind_initial() {
  for (auto& s : state_) {
    Field& f = *s.field;
    if (s.dual) {
      f.in_ = s.dual->read();
      f.out_ = s.dual->write();
    } else if (s.plain) {
      f.in_ = f.out_ = s.plain->data();
    } else {
      f.in_ = s.cur;
      f.out_ = s.b ? s.b.data() : s.cur;
    }
  }
}

// After a commit (or on a restore with nothing left to do): in() is the newest.
void Driver::bind_latest() {
  for (auto& s : state_) {
    Field& f = *s.field;
    if (s.dual) f.in_ = s.dual->read();
    if (s.plain) f.in_ = f.out_ = s.plain->data();
  }
}

[[noreturn]] void Driver::crash(std::uint64_t iteration) {
  std::cout << std::flush;
  std::fprintf(stderr, "%s: --crash-at %llu: SIGKILL at the start of iteration %llu\n", sim_.name().c_str(),
               static_cast<unsigned long long>(iteration), static_cast<unsigned long long>(iteration));
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
  std::abort();  // not reached
}

void Driver::progress(std::uint64_t done, std::uint64_t total) {
  if (opt_.quiet || seconds_since(last_progress_) < 2.0) return;
  last_progress_ = Clock::now();
  const double elapsed = seconds_since(start_time_);
  const std::uint64_t ran = done - rep_.start_iteration, left = total - done;
  const double eta = ran ? elapsed / static_cast<double>(ran) * static_cast<double>(left) : 0;
  std::string note = sim_.progress_note(team_);
  std::printf("  %s: iteration %llu/%llu (%3.0f%%)  %.1f s, about %.1f s left%s%s\n", rep_.app.c_str(),
              static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
              100.0 * static_cast<double>(done) / static_cast<double>(total), elapsed, eta, note.empty() ? "" : "  ",
              note.c_str());
  std::fflush(stdout);
}

// Iterations [first, end), committed together at the end.
void Driver::run_period(std::uint64_t first, std::uint64_t end) {
  const std::uint64_t m = end - first;
  if (opt_.crash_at && *opt_.crash_at == first) crash(first);
  if (ctx_) {
    auto t0 = Clock::now();
    if (auto r = ctx_->begin(); !r.ok()) {
      std::fprintf(stderr, "%s: begin() failed: %s\n", rep_.app.c_str(), r.error().message.c_str());
      std::exit(2);
    }
    rep_.commit_seconds += seconds_since(t0);
  }
  for (std::uint64_t j = 0; j < m; ++j) {
    const std::uint64_t it = first + j;
    if (opt_.crash_at && *opt_.crash_at == it) crash(it);
    for (auto& s : state_) {
      if (s.field->kind() != FieldKind::dual) continue;
      Field& f = *s.field;
      if (s.dual) {
        // Steps m-1, m-3, ... write the region's write() version, the others
        // the DRAM scratch: the last lands in write(), read() (the committed
        // version) is never written.
        if (j == 0) f.in_ = s.dual->read();
        f.out_ = (m - 1 - j) % 2 == 0 ? s.dual->write() : s.b.data();
      } else {
        f.in_ = s.cur;
        f.out_ = s.cur == s.a.data() ? s.b.data() : s.a.data();
      }
    }
    for (auto& s : state_) s.field->last_step_ = j + 1 == m;
    auto t0 = Clock::now();
    sim_.step(it, team_);
    rep_.compute_seconds += seconds_since(t0);
    for (auto& s : state_) {
      if (s.field->kind() != FieldKind::dual) continue;
      s.field->in_ = s.field->out_;  // the newest, for the next step and progress notes
      s.cur = s.field->in_;
    }
    if (j + 1 < m) progress(it + 1, *opt_.iterations);
  }
  for (auto& s : state_) s.field->last_step_ = false;
  meta_->iterations_done = end;
  if (ctx_) {
    auto t0 = Clock::now();
    sim_.before_commit(team_);  // state kept outside the fields joins them
    auto v = ctx_->commit();
    if (!v.ok()) {
      std::fprintf(stderr, "%s: commit() failed: %s: %s\n", rep_.app.c_str(), errc_name(v.error().code),
                   v.error().message.c_str());
      std::exit(2);
    }
    rep_.commit_seconds += seconds_since(t0);
    bind_latest();
  }
  progress(end, *opt_.iterations);
}

Result<Report> Driver::run() {
  const auto t_total = Clock::now();
  if (auto r = sim_.configure(opt_); !r.ok()) return r.error();
  if (opt_.name.empty()) opt_.name = sim_.name();
  if (!opt_.iterations) opt_.iterations = sim_.default_iterations();
  rep_.app = sim_.name();
  rep_.strategy = opt_.strategy.empty() ? "native" : opt_.strategy;
  rep_.describe = sim_.describe();
  rep_.threads = team_.size();
  rep_.persist_every = opt_.persist_every;
  if (auto r = declare(); !r.ok()) return r.error();
  if (auto r = attach(); !r.ok()) return r.error();
  bind_initial();
  if (opt_.resume) {
    rep_.start_iteration = meta_->iterations_done;
    const auto t0 = Clock::now();
    sim_.after_restore(team_);  // rebuilds what the app keeps outside the fields
    rep_.restore_seconds += seconds_since(t0);
  } else {
    meta_->magic = kMetaMagic;
    meta_->iterations_done = 0;
    sim_.initialize(team_);
  }
  if (!opt_.quiet) {
    std::printf("%s: %s\n  strategy %s, %u threads, %llu iterations", rep_.app.c_str(), rep_.describe.c_str(),
                rep_.strategy.c_str(), rep_.threads, static_cast<unsigned long long>(*opt_.iterations));
    if (ctx_) std::printf(", commit every %llu", static_cast<unsigned long long>(opt_.persist_every));
    if (opt_.resume)
      std::printf("\n  resumed after iteration %llu (restore %.3f ms)",
                  static_cast<unsigned long long>(rep_.start_iteration), rep_.restore_seconds * 1e3);
    std::printf("\n");
    std::fflush(stdout);
  }
  start_time_ = last_progress_ = Clock::now();
  const std::uint64_t total = *opt_.iterations, k = opt_.persist_every;
  for (std::uint64_t i = rep_.start_iteration; i < total;) {
    const std::uint64_t end = std::min(total, (i / k + 1) * k);
    run_period(i, end);
    i = end;
  }
  const std::uint64_t done = std::max(total, rep_.start_iteration);
  rep_.iterations = done;
  if (!ctx_) sim_.before_commit(team_);  // the checksum covers the final state
  rep_.verification = sim_.verify(done, team_);
  std::uint64_t h = 0;
  for (const auto& s : state_)
    if (s.field->kind() != FieldKind::scratch) h = checksum(s.field->in_, s.field->bytes(), h);
  rep_.checksum = h;
  if (ctx_) {
    rep_.commits = ctx_->stats().commits;
    rep_.nvm_bytes_written = ctx_->stats().nvm_bytes_written;
  }
  rep_.total_seconds = seconds_since(t_total);
  return rep_;
}

Result<Report> run_simulation(Simulation& sim, const RunOptions& options) {
  RunOptions o = options;
  if (auto v = validate(o); !v.ok()) return v.error();
  Driver d(sim, o);
  return d.run();
}

}  // namespace cairn::apps
