// fs_explore.cpp — workload, checker, explorer, keys and replay of the
// file-system crash explorer (see fs_explore.hpp).
#include "tests/crashsim/fs_explore.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "cairn/persist.hpp"
#include "cairn/stream.hpp"
#include "dist/files.hpp"
#include "tests/crashsim/fs_record.hpp"
#include "tests/crashsim/workloads/context_state.hpp"
#include "tests/support/temp_dir.hpp"
#include "util/io.hpp"

namespace cairn::testing::crashsim::fs {
namespace {

// The state of workloads/context_state.hpp: a dual region, a plain region (not
// a page multiple) and two registered pointers into it. The file is six 4 KiB
// blocks: metadata, 2 + 2 blocks of region data, the pointers.
using builtin::ContextState;
constexpr std::size_t kDualBytes = ContextState::kDualBytes, kPlainBytes = ContextState::kPlainBytes;
constexpr const char* kName = "state";
// Measured: about this many checked states per recorded commit (depth 1 and
// 2), per target (file strategy, dist flush, stage out) and model (posix,
// ordered).
constexpr double kStatesPerStep[3][2] = {{500, 120}, {110, 75}, {50, 40}};

std::string ckpt_name(std::uint64_t v) { return std::string(kName) + "." + std::to_string(v) + ".ckpt"; }

// What the explorer runs on a directory: a structure whose commits are file
// operations. open() may create the directory; recover() is what a restart
// sees (nothing committed: nullopt); prepare() changes the state and returns
// the version a commit of it makes; commit_name(v) is the file whose name in
// a crash state is v's commit point (the rename).
class Session {
 public:
  virtual ~Session() = default;
  virtual Result<void> open(const std::string& dir) = 0;
  virtual Result<std::optional<Version>> recover() = 0;
  virtual Result<Version> prepare(Rng& rng, bool all) = 0;
  virtual Result<void> commit() = 0;
  virtual std::string commit_name(const Version& v) const = 0;
};

// A persist::Context of strategy `file` on a directory, with the state and
// DRAM mirror of the other strategy workloads (workloads/context_state.hpp).
class FileSession final : public Session {
 public:
  Result<void> open(const std::string& dir) override {
    persist::Options o;
    o.strategy = "file";
    o.name = kName;
    o.dir = dir;
    o.threads = 1;
    if (auto r = state_.create_context(o); !r.ok()) return r;
    if (auto r = state_.context().open(); !r.ok()) return r;
    return state_.register_pointers();
  }
  Result<std::optional<Version>> recover() override {
    if (!state_.context().committed_version()) return std::optional<Version>{};
    auto got = state_.restore();
    if (!got.ok()) return std::move(got).error();
    return std::optional<Version>(std::move(got.value()));
  }
  // Starts an iteration and changes a few words (or everything), pointers too.
  Result<Version> prepare(Rng& rng, bool all) override {
    if (auto r = state_.change(rng, [all] { return all; }); !r.ok()) return r.error();
    return state_.version(state_.context().version() + 1);
  }
  Result<void> commit() override {
    auto c = state_.context().commit();
    if (!c.ok()) return std::move(c).error();
    return {};
  }
  std::string commit_name(const Version& v) const override { return ckpt_name(v.number); }

 private:
  ContextState state_;
};

// dist's flush of a rank's versions to the shared directory (PfsFlusher,
// src/dist/files.cpp, MPI-free): each commit writes version V of a payload
// through util::write_file_atomically (temporary, fsync, rename, directory
// fsync) on the flusher's thread, then removes all but the two newest. What a
// restart sees: every version the directory lists, each read back and
// verified as restore reads it; the state is the two newest (restore takes
// the newest every rank holds, falling back to the one before when it is
// damaged or another rank lacks it), so both must be there and whole.
class FlushSession final : public Session {
 public:
  Result<void> open(const std::string& dir) override {
    // The flush directory as dist::Context::place makes it.
    if (auto r = util::create_directories_durably(dir, "the flush directory"); !r.ok()) return r;
    flusher_.emplace(dir, kName, 0, 1);
    return {};
  }
  Result<std::optional<Version>> recover() override {
    kept_.clear();
    for (const std::uint64_t v : flusher_->versions()) {
      std::vector<std::byte> payload;  // empty: any length, as amr-mpi reads it
      if (auto r = flusher_->read(v, payload); !r.ok()) return r.error();
      kept_.emplace_back(v, std::move(payload));
    }
    if (kept_.empty()) return std::optional<Version>{};
    return std::optional<Version>(state(kept_));
  }
  // The next version: a few bytes changed, or a new payload of another length.
  Result<Version> prepare(Rng& rng, bool all) override {
    std::vector<std::byte> p = kept_.empty() ? std::vector<std::byte>{} : kept_.front().second;
    if (all || p.empty()) {
      p.resize(static_cast<std::size_t>(1000 + rng.below(9000)));
      for (auto& b : p) b = static_cast<std::byte>(rng());
    } else {
      for (std::uint64_t n = 1 + rng.below(8); n > 0; --n) p[rng.below(p.size())] = static_cast<std::byte>(rng());
    }
    next_ = {kept_.empty() ? 1 : kept_.front().first + 1, std::move(p)};
    auto after = kept_;
    after.insert(after.begin(), next_);
    return state(after);
  }
  Result<void> commit() override {
    auto buffer = next_.second;
    if (auto r = flusher_->start(next_.first, std::move(buffer)); !r.ok()) return r;
    if (auto r = flusher_->wait(); !r.ok()) return r;
    kept_.insert(kept_.begin(), next_);
    if (kept_.size() > 2) kept_.resize(2);
    return {};
  }
  std::string commit_name(const Version& v) const override {
    return std::filesystem::path(flusher_->file(v.number)).filename().string();
  }

 private:
  using Flushed = std::pair<std::uint64_t, std::vector<std::byte>>;  // version, payload
  // The two newest: their numbers, lengths and payloads; numbered by the newest.
  static Version state(const std::vector<Flushed>& newest_first) {
    Version v;
    v.number = newest_first.front().first;
    for (std::size_t i = 0; i < std::min<std::size_t>(2, newest_first.size()); ++i) {
      const std::uint64_t head[2] = {newest_first[i].first, newest_first[i].second.size()};
      const auto* h = reinterpret_cast<const std::byte*>(head);
      v.bytes.insert(v.bytes.end(), h, h + sizeof head);
      v.bytes.insert(v.bytes.end(), newest_first[i].second.begin(), newest_first[i].second.end());
    }
    return v;
  }
  std::optional<dist::detail::PfsFlusher> flusher_;
  std::vector<Flushed> kept_;  // newest first
  Flushed next_;
};

// `cairn stage out` (stream::stage_out, src/stream/stage.cpp) of this
// process's mem: streams, one stream "field", into the directory: each
// commit writes a new version of the stream, then stages it out (temporary,
// fsync, rename, directory fsync; the directory created by the first). What
// a restart sees: the staged file, whose first 8 bytes number its version.
// One stream only: a stage of several files renames them one by one, so a
// crash may leave some new and some old, and the explorer's model is one
// version at a time. The file keeps its name, so no name in a crash state
// marks the commit point (commit_name is empty).
class StageSession final : public Session {
 public:
  Result<void> open(const std::string& dir) override {
    dir_ = dir;
    return {};
  }
  Result<std::optional<Version>> recover() override {
    const std::string path = dir_ + "/" + kStream;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::optional<Version>{};
      return util::errno_error(path, "open the staged file", errno);
    }
    struct stat st {};
    std::vector<std::byte> bytes;
    long long got = -1;
    if (::fstat(fd, &st) == 0) {
      bytes.resize(static_cast<std::size_t>(st.st_size));
      got = util::pread_full(fd, bytes.data(), bytes.size(), 0);
    }
    ::close(fd);
    if (got != static_cast<long long>(bytes.size()) || bytes.size() < 8)
      return make_error(Errc::truncated, path + ": a staged file of " + std::to_string(bytes.size()) + " bytes");
    Version v;
    std::memcpy(&v.number, bytes.data(), 8);
    v.bytes = std::move(bytes);
    last_ = v;
    return std::optional<Version>(std::move(v));
  }
  // The stream's next version: a few bytes changed, or new bytes of another
  // length; written into the mem: stream now, staged by commit().
  Result<Version> prepare(Rng& rng, bool all) override {
    Version v = last_;
    if (all || v.bytes.size() < 9) {
      v.bytes.resize(static_cast<std::size_t>(9 + rng.below(9000)));
      for (auto& b : v.bytes) b = static_cast<std::byte>(rng());
    } else {
      for (std::uint64_t n = 1 + rng.below(8); n > 0; --n)
        v.bytes[8 + rng.below(v.bytes.size() - 8)] = static_cast<std::byte>(rng());
    }
    v.number = last_.number + 1;
    std::memcpy(v.bytes.data(), &v.number, 8);
    auto w = stream::Stream::open(std::string("mem:") + kStream, stream::Mode::write);
    if (!w.ok()) return std::move(w).error();
    if (std::fwrite(v.bytes.data(), 1, v.bytes.size(), w.value()->file()) != v.bytes.size())
      return make_error(Errc::io_error, "writing the mem: stream");
    if (auto r = w.value()->close(); !r.ok()) return r.error();
    next_ = v;
    return v;
  }
  Result<void> commit() override {
    stream::StageOptions o;
    o.threads = 1;
    auto r = stream::stage_out("mem:", dir_, o);
    if (!r.ok()) return std::move(r).error();
    last_ = next_;
    return {};
  }
  std::string commit_name(const Version&) const override { return {}; }

 private:
  static constexpr const char* kStream = "field";
  std::string dir_;
  Version last_, next_;
};

std::unique_ptr<Session> make_session(Target t) {
  if (t == Target::pfs_flush) return std::make_unique<FlushSession>();
  if (t == Target::stage_out) return std::make_unique<StageSession>();
  return std::make_unique<FileSession>();
}

// ---- broken variants ----

void transform(Variant v, std::vector<Op>& log) {
  switch (v) {
    case Variant::no_tmp_fsync: std::erase_if(log, [](const Op& op) { return op.kind == OpKind::fsync; }); break;
    case Variant::no_dir_fsync: std::erase_if(log, [](const Op& op) { return op.kind == OpKind::fsync_dir; }); break;
    case Variant::fsync_after_rename:
      for (std::size_t i = 0; i < log.size(); ++i) {
        if (log[i].kind != OpKind::fsync) continue;
        std::size_t j = i + 1;
        while (j < log.size() && !(log[j].kind == OpKind::rename && log[j].ino == log[i].ino)) ++j;
        if (j == log.size()) continue;
        Op f = std::move(log[i]);
        log.erase(log.begin() + static_cast<std::ptrdiff_t>(i));
        log.insert(log.begin() + static_cast<std::ptrdiff_t>(j), std::move(f));  // after the rename (now at j - 1)
        i = j;
      }
      break;
    default: break;
  }
}

std::uint64_t load64(const std::vector<std::byte>& f, std::size_t off) {
  std::uint64_t w = 0;
  if (off + 8 <= f.size()) std::memcpy(&w, f.data() + off, 8);
  return w;
}

// A recovery that trusts what it reads: the newest checkpoint file whose
// magic is right and which is long enough, with no checksum (header or body)
// verified. Regions are read from where the writer places them. Compared on
// the region data only (dual + plain).
std::optional<Version> naive_recover(const std::string& dir, bool include_tmp) {
  struct Cand {
    std::uint64_t v;
    bool tmp;
    std::string path;
  };
  std::vector<Cand> cands;
  std::error_code ec;
  const std::string prefix = std::string(kName) + ".";
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string f = it->path().filename().string();
    if (f.rfind(prefix, 0) != 0) continue;
    f = f.substr(prefix.size());
    bool tmp = false;
    if (f.size() > 9 && f.ends_with(".ckpt.tmp")) {
      tmp = true;
      f.resize(f.size() - 9);
    } else if (f.size() > 5 && f.ends_with(".ckpt")) {
      f.resize(f.size() - 5);
    } else {
      continue;
    }
    if (f.empty() || f.size() > 19 || !std::all_of(f.begin(), f.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (tmp && !include_tmp) continue;
    cands.push_back({std::stoull(f), tmp, it->path().string()});
  }
  std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.v != b.v ? a.v > b.v : !a.tmp; });
  for (const auto& c : cands) {
    std::vector<std::byte> f;
    const int fd = ::open(c.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0) {
      f.resize(static_cast<std::size_t>(st.st_size));
      if (::pread(fd, f.data(), f.size(), 0) != static_cast<ssize_t>(f.size())) f.clear();
    }
    ::close(fd);
    if (load64(f, 0) != 0x54504b434e524941ULL) continue;  // "AIRNCKPT"
    const std::uint64_t data = load64(f, 48);
    const std::uint64_t a = (data + kDualBytes + 4095) / 4096 * 4096;
    if (data > f.size() || a + kPlainBytes > f.size()) continue;
    Version v;
    v.number = load64(f, 16);
    v.bytes.assign(f.begin() + static_cast<std::ptrdiff_t>(data),
                   f.begin() + static_cast<std::ptrdiff_t>(data + kDualBytes));
    v.bytes.insert(v.bytes.end(), f.begin() + static_cast<std::ptrdiff_t>(a),
                   f.begin() + static_cast<std::ptrdiff_t>(a + kPlainBytes));
    return v;
  }
  return std::nullopt;
}

// ---- materialising and checking a state ----

void materialise(const std::string& dir, const Image& img) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!img.dir_exists) return;
  ::mkdir(dir.c_str(), 0755);
  for (const auto& [name, data] : img.files) {
    const int fd = ::open((dir + "/" + name).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) continue;
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t w = ::write(fd, data.data() + done, data.size() - done);
      if (w <= 0) break;
      done += static_cast<std::size_t>(w);
    }
    ::close(fd);
  }
}

struct Expect {
  std::int64_t last = -1, in_flight = -1;  // indices into the versions
};

struct CheckOut {
  std::optional<Version> recovered;
  Version extended;
  bool recorded = false;
  std::vector<Op> log;
};

std::string describe(const Version& got, const std::vector<Version>& versions) {
  for (const auto& v : versions)
    if (v.bytes == got.bytes)
      return "version " + std::to_string(got.number) + " (the model's version " + std::to_string(v.number) + ")";
  return "version " + std::to_string(got.number) + " with bytes of no committed version (a mix or damage)";
}

// Checks one crash state; returns "" or why it fails. With `record`, the
// recovery and the extra commit are recorded into out.log for depth 2.
std::string check(const FsWorkload& w, const std::string& dir, const Image& img, const std::vector<Version>& versions,
                  Expect e, Rng ext, bool record, CheckOut& out) {
  const Variant variant = w.variant;
  materialise(dir, img);
  const Version* last = e.last >= 0 ? &versions[static_cast<std::size_t>(e.last)] : nullptr;
  const Version* fly = e.in_flight >= 0 ? &versions[static_cast<std::size_t>(e.in_flight)] : nullptr;
  // The commit point: the in-flight version's final name is in this state.
  const std::string point_name = fly != nullptr ? make_session(w.target)->commit_name(*fly) : std::string();
  const bool point = !point_name.empty() && img.files.count(point_name) != 0;
  std::string want = point  ? "only the in-flight version " + std::to_string(fly->number) + " (its rename is on disk)"
                     : last ? "version " + std::to_string(last->number) + " (last returned)" +
                                  (fly ? " or in-flight " + std::to_string(fly->number) : "")
                     : fly ? "nothing or the in-flight version " + std::to_string(fly->number)
                           : "nothing";
  auto accept = [&](const Version& got, std::size_t prefix) {
    auto same = [&](const Version* v) {
      return v != nullptr && v->number == got.number &&
             std::equal(got.bytes.begin(), got.bytes.begin() + static_cast<std::ptrdiff_t>(prefix), v->bytes.begin());
    };
    return same(fly) || (!point && same(last));
  };

  if (variant == Variant::trust_header || variant == Variant::trust_tmp) {
    auto got = naive_recover(dir, variant == Variant::trust_tmp);
    if (!got) return last || point ? "recovered nothing; wanted " + want : "";
    if (!accept(*got, kDualBytes + kPlainBytes)) return "recovered " + describe(*got, versions) + "; wanted " + want;
    return "";
  }

  if (record) record_start(dir, img);
  struct StopRecording {
    bool on;
    ~StopRecording() {
      if (on) (void)record_stop();
    }
  } guard{record};
  auto s = make_session(w.target);
  if (auto r = s->open(dir); !r.ok()) return "open failed: " + r.error().message + "; wanted " + want;
  auto got = s->recover();
  if (!got.ok()) return "restore failed: " + got.error().message + "; wanted " + want;
  if (!got.value()) {
    if (last || point) return "nothing recovered; wanted " + want;
  } else {
    if (!accept(*got.value(), got.value()->bytes.size()))
      return "recovered " + describe(*got.value(), versions) + "; wanted " + want;
    out.recovered = *got.value();
  }
  // Condition 3: one more commit, then a clean reopen recovers it.
  auto next = s->prepare(ext, ext.below(4) == 0);
  if (!next.ok()) return "begin after recovery failed: " + next.error().message;
  out.extended = std::move(next.value());
  if (record) record_marker(OpKind::begin, out.recovered ? 1 : 0);
  auto c = s->commit();
  if (!c.ok()) return "commit after recovery failed: " + c.error().message;
  if (record) {
    record_marker(OpKind::end, 0);
    out.log = record_stop();
    out.recorded = true;
    guard.on = false;
  }
  auto again = make_session(w.target);
  if (auto r = again->open(dir); !r.ok()) return "clean reopen failed: " + r.error().message;
  auto reread = again->recover();
  if (!reread.ok()) return "restore after clean reopen failed: " + reread.error().message;
  if (!reread.value() || reread.value()->number != out.extended.number)
    return "clean reopen does not see the commit made after recovery";
  if (!(*reread.value() == out.extended)) return "clean reopen recovered " + describe(*reread.value(), {out.extended});
  return "";
}

// ---- keys ----

struct Key {
  std::string workload;
  FsModel model = FsModel::posix;
  std::uint64_t seed = 1;
  unsigned steps = 0;
  std::uint64_t point = 0, state = 0;
  bool depth2 = false;
  std::uint64_t point2 = 0, state2 = 0;
};

std::string format_key(const Key& k) {
  std::string s = "fs1:" + k.workload + ":" + model_name(k.model) + ":" + std::to_string(k.seed) + ":" +
                  std::to_string(k.steps) + ":" + std::to_string(k.point) + "." + std::to_string(k.state);
  if (k.depth2) s += "+" + std::to_string(k.point2) + "." + std::to_string(k.state2);
  return s;
}

Result<Key> parse_key(const std::string& text) {
  auto bad = [&] {
    return make_error(Errc::invalid_argument,
                      "bad key '" + text + "' (fs1:WORKLOAD:MODEL:SEED:STEPS:POINT.STATE[+POINT2.STATE2])");
  };
  std::vector<std::string> f;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ':');) f.push_back(part);
  if (f.size() != 6 || f[0] != "fs1") return bad();
  Key k;
  k.workload = f[1];
  auto m = parse_model(f[2]);
  if (!m.ok()) return std::move(m).error();
  k.model = m.value();
  auto num = [](const std::string& s, std::uint64_t& out) {
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
    out = std::stoull(s);
    return true;
  };
  auto pair = [&](const std::string& s, std::uint64_t& a, std::uint64_t& b) {
    const auto dot = s.find('.');
    return dot != std::string::npos && num(s.substr(0, dot), a) && num(s.substr(dot + 1), b);
  };
  std::uint64_t steps = 0;
  if (!num(f[3], k.seed) || !num(f[4], steps)) return bad();
  k.steps = static_cast<unsigned>(steps);
  const auto plus = f[5].find('+');
  if (!pair(f[5].substr(0, plus), k.point, k.state)) return bad();
  if (plus != std::string::npos) {
    k.depth2 = true;
    if (!pair(f[5].substr(plus + 1), k.point2, k.state2)) return bad();
  }
  return k;
}

// ---- the explorer ----

struct Explorer {
  const FsWorkload& w;
  const FsOptions& o;
  FsReport& r;
  Key key;                  // workload, model, seed, steps; point/state filled per state
  std::optional<Key> only;  // replay
  std::string dir[2];       // where depth 1 and depth 2 states are materialised
  bool stop = false;

  GenOptions gen(std::uint64_t point, unsigned depth) const {
    GenOptions g;
    g.model = o.model;
    g.seed = o.seed;
    g.point = point;
    g.depth = depth;
    g.random_subsets = depth == 1 ? o.random_subsets : std::max(1u, o.random_subsets / 4);
    g.exhaustive_limit = depth == 1 ? 1 << 10 : 1 << 6;
    g.torn_per_block = depth == 1 ? 2 : 1;
    return g;
  }

  void fail(const Key& k, const std::string& reason) {
    r.failures.push_back({format_key(k), reason});
    if (o.log) o.log("FAIL " + format_key(k) + ": " + reason);
    if (r.failures.size() >= o.max_failures) stop = true;
  }

  void explore(const Image& initial, const std::vector<Op>& log, const std::vector<Version>& versions,
               std::int64_t initial_last, unsigned depth, Key k) {
    Tracker t(initial);
    Expect e{initial_last, -1};
    std::uint64_t prev = 0;
    bool have_prev = false;
    for (std::size_t p = 0; p <= log.size() && !stop; ++p) {
      if (p > 0) {
        const Op& op = log[p - 1];
        if (op.kind == OpKind::unsupported) {
          (depth == 1 ? k.point : k.point2) = p;
          fail(k, "an operation the file-system model does not know: " + op.name);
          return;
        }
        if (op.kind == OpKind::begin) e.in_flight = static_cast<std::int64_t>(op.off);
        if (op.kind == OpKind::end) {
          e.last = e.in_flight;
          e.in_flight = -1;
        }
        t.apply(op, p - 1);
      }
      if (depth == 1) ++r.crash_points;
      const std::uint64_t sig =
          fs_mix(t.signature(), static_cast<std::uint64_t>(e.last + 1), static_cast<std::uint64_t>(e.in_flight + 1));
      if (have_prev && sig == prev) {
        ++r.points_duplicate;
        continue;
      }
      prev = sig;
      have_prev = true;
      if (only && (depth == 1 ? only->point : only->point2) != p) continue;
      const GenOptions g = gen(p, depth);
      // The state whose recovery is recorded and crashed again (depth 2).
      std::uint64_t pick = std::numeric_limits<std::uint64_t>::max();
      if (only) {
        if (depth == 1 && only->depth2) pick = only->state;
      } else if (depth == 1 && o.depth2_every > 0 && fs_mix(o.seed, p, 0xd2) % o.depth2_every == 0) {
        const std::uint64_t n = t.for_each_state(g, [](std::uint64_t, const Image&) { return true; });
        if (n > 0) pick = fs_mix(o.seed, p, 0xd3) % n;
      }
      bool exhaustive = false;
      t.for_each_state(
          g,
          [&](std::uint64_t s, const Image& img) {
            if (only && (depth == 1 ? only->state : only->state2) != s) return true;
            Key here = k;
            (depth == 1 ? here.point : here.point2) = p;
            (depth == 1 ? here.state : here.state2) = s;
            here.depth2 = depth == 2;
            CheckOut out;
            const bool rec = depth == 1 && s == pick;
            std::string why = check(w, dir[depth - 1], img, versions, e, Rng(fs_mix(o.seed, p, s, depth)), rec, out);
            // Messages name the (random) scratch directory: not part of a replayable reason.
            for (auto at = why.find(dir[depth - 1]); at != std::string::npos; at = why.find(dir[depth - 1], at))
              why.replace(at, dir[depth - 1].size(), "DIR");
            ++r.states;
            if (depth == 2) ++r.depth2_states;
            if (!why.empty()) {
              fail(here, why);
              return !stop;
            }
            if (rec && out.recorded) {
              ++r.depth2_runs;
              transform(w.variant, out.log);
              std::vector<Version> v2;
              if (out.recovered) v2.push_back(*out.recovered);
              v2.push_back(out.extended);
              explore(img, out.log, v2, out.recovered ? 0 : -1, 2, here);
            }
            return !stop;
          },
          &exhaustive);
      ++r.points_explored;
      if (exhaustive) ++r.points_exhaustive;
    }
  }
};

FsReport run_impl(const FsWorkload& w, FsOptions o, std::optional<Key> only) {
  const auto t0 = std::chrono::steady_clock::now();
  // Every check opens two Contexts, each verifying a checkpoint through a
  // 1 MiB bounce buffer: keep such blocks in the heap instead of mapping,
  // zero-faulting and unmapping them each time (a test-speed setting only).
  static const bool heap_tuned = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    return true;
  }();
  (void)heap_tuned;
  FsReport r;
  r.workload = w.name;
  r.model = o.model;
  unsigned steps = o.steps;
  if (steps == 0)
    steps = o.target_states > 0
                ? std::max(3u, static_cast<unsigned>(
                                   std::ceil(static_cast<double>(o.target_states) /
                                             kStatesPerStep[static_cast<int>(w.target)][static_cast<int>(o.model)])))
                : 6;
  r.steps = steps;
  TempDir root;
  const std::string rec_dir = root.file("rec");
  Explorer x{w, o, r, Key{w.name, o.model, o.seed, steps}, only, {root.file("chk1"), root.file("chk2")}};

  // Record: the real strategy commits `steps` versions into a directory it creates.
  std::vector<Version> versions;
  std::vector<Op> log;
  {
    const Image initial{false, {}};
    record_start(rec_dir, initial);
    auto s = make_session(w.target);
    auto opened = s->open(rec_dir);
    Rng rng(fs_mix(o.seed, 0xf11e));
    for (unsigned i = 0; opened.ok() && i < steps; ++i) {
      auto next = s->prepare(rng, i == 0 || rng.below(8) == 0);
      if (!next.ok()) {
        opened = std::move(next).error();
        break;
      }
      versions.push_back(std::move(next.value()));
      record_marker(OpKind::begin, i);
      if (auto c = s->commit(); !c.ok()) {
        opened = std::move(c).error();
        break;
      }
      record_marker(OpKind::end, i);
    }
    log = record_stop();
    if (!opened.ok()) {
      r.failures.push_back({format_key(x.key), "the recorded workload failed: " + opened.error().message});
      return r;
    }
  }
  for (const auto& op : log)
    if (op.kind != OpKind::begin && op.kind != OpKind::end) ++r.ops;
  transform(w.variant, log);
  x.explore(Image{false, {}}, log, versions, -1, 1, x.key);
  if (only && r.failures.empty() && r.states < (only->depth2 ? 2u : 1u))
    r.failures.push_back({format_key(*only), "the key names no crash state of this run"});
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

const std::vector<FsWorkload>& fs_workloads() {
  static const std::vector<FsWorkload> all = {
      {"file", "the file strategy as shipped", Variant::none, false},
      {"file.no_tmp_fsync", "commit without the fsync of the .tmp before the rename", Variant::no_tmp_fsync, true},
      {"file.no_dir_fsync", "commit without the directory fsync after the rename", Variant::no_dir_fsync, true},
      {"file.fsync_after_rename", "the .tmp's fsync after the rename (data may follow the name)",
       Variant::fsync_after_rename, true},
      {"file.trust_header", "recovery trusts the newest checkpoint's header, verifies no checksum",
       Variant::trust_header, false},
      {"file.trust_tmp", "as trust_header, counting .ckpt.tmp files as checkpoints", Variant::trust_tmp, true},
      {"dist_flush", "dist's flush of a rank's versions to the shared directory, the two newest kept", Variant::none,
       false, Target::pfs_flush},
      {"dist_flush.no_tmp_fsync", "the flush renames its temporary without fsyncing it", Variant::no_tmp_fsync, true,
       Target::pfs_flush},
      {"stage_out", "cairn stage out of a mem: stream into a directory it creates", Variant::none, false,
       Target::stage_out},
      {"stage_out.no_tmp_fsync", "stage out renames its temporary without fsyncing it", Variant::no_tmp_fsync, true,
       Target::stage_out},
  };
  return all;
}

const FsWorkload* find_fs_workload(const std::string& name) {
  for (const auto& w : fs_workloads())
    if (w.name == name) return &w;
  return nullptr;
}

std::string FsReport::summary() const {
  std::ostringstream s;
  s << workload << "/" << model_name(model) << ": " << (passed() ? "PASS" : "FAIL") << ", " << states << " states ("
    << depth2_states << " at depth 2, " << depth2_runs << " recoveries crashed), " << steps << " commits, " << ops
    << " fs operations, " << crash_points << " crash points (" << points_explored << " explored, " << points_duplicate
    << " duplicate, " << points_exhaustive << " exhaustive), " << seconds << " s";
  if (seconds > 0) s << " (" << static_cast<std::uint64_t>(static_cast<double>(states) / seconds) << " states/s)";
  for (const auto& f : failures) s << "\n  " << f.key << ": " << f.reason;
  return s.str();
}

FsReport run_fs(const FsWorkload& workload, const FsOptions& options) {
  if (!options.only_key.empty()) {
    auto r = replay_fs(options.only_key, options);
    if (r.ok()) return std::move(r.value());
    FsReport bad;
    bad.workload = workload.name;
    bad.failures.push_back({options.only_key, r.error().message});
    return bad;
  }
  return run_impl(workload, options, std::nullopt);
}

Result<FsReport> replay_fs(const std::string& key, FsOptions options) {
  auto k = parse_key(key);
  if (!k.ok()) return std::move(k).error();
  const FsWorkload* w = find_fs_workload(k.value().workload);
  if (w == nullptr) return make_error(Errc::invalid_argument, "no file-system workload '" + k.value().workload + "'");
  options.model = k.value().model;
  options.seed = k.value().seed;
  options.steps = k.value().steps;
  return run_impl(*w, options, k.value());
}

}  // namespace cairn::testing::crashsim::fs
