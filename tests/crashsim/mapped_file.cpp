// mapped_file.cpp — file workloads under the simulator: the interposed
// mapping and persistence calls, the watches they report to, and the check of
// one crash image (see mapped_file.hpp).
#include "tests/crashsim/mapped_file.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "tests/crashsim/sim_device.hpp"

// Defined by interpose.cpp, in the executables that link it.
extern "C" __attribute__((weak)) int cairn_crashsim_interposer_present();

namespace cairn::testing::crashsim {
namespace {

constexpr int kSlots = 16;
std::atomic<FileWatch*> g_watches[kSlots];
std::atomic<int> g_live{0};
std::atomic<std::uint64_t> g_seq{0};
std::mutex g_register;

std::mutex g_drop_mu;
std::vector<std::pair<const std::byte*, std::size_t>> g_drop;
std::atomic<bool> g_dropping{false};

bool dropped(const void* addr, std::size_t len) {
  if (!g_dropping.load(std::memory_order_acquire)) return false;
  const auto* a = static_cast<const std::byte*>(addr);
  std::lock_guard lk(g_drop_mu);
  for (const auto& [b, n] : g_drop)
    if (a < b + n && b < a + len) return true;
  return false;
}

}  // namespace

void drop_persists_add(const void* base, std::size_t len) {
  std::lock_guard lk(g_drop_mu);
  g_drop.emplace_back(static_cast<const std::byte*>(base), len);
  g_dropping.store(true, std::memory_order_release);
}

void drop_persists_remove(const void* base) {
  std::lock_guard lk(g_drop_mu);
  std::erase_if(g_drop, [&](const auto& r) { return r.first == base; });
  g_dropping.store(!g_drop.empty(), std::memory_order_release);
}

namespace interpose {

std::atomic<std::uint64_t> msyncs{0}, flushes{0}, drains{0}, maps{0};

bool any_watch() { return g_live.load(std::memory_order_acquire) > 0; }

FileWatch* watch_at(const void* addr) {
  for (auto& slot : g_watches) {
    FileWatch* w = slot.load(std::memory_order_acquire);
    if (w != nullptr && w->contains(addr)) return w;
  }
  return nullptr;
}

// The most recent watch whose file is mapped: the library instance that is
// running (watches nest: a check runs inside an armed run's crash point).
FileWatch* innermost() {
  FileWatch* best = nullptr;
  for (auto& slot : g_watches) {
    FileWatch* w = slot.load(std::memory_order_acquire);
    if (w != nullptr && w->mapped() && (best == nullptr || w->seq() > best->seq())) best = w;
  }
  return best;
}

void on_mapped(void* base, size_t len, int fd, off_t offset) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return;
  for (auto& slot : g_watches) {
    FileWatch* w = slot.load(std::memory_order_acquire);
    if (w != nullptr && w->matches(st.st_dev, st.st_ino)) {
      maps.fetch_add(1, std::memory_order_relaxed);
      w->on_map(static_cast<std::byte*>(base), len, offset);
      return;
    }
  }
}

void on_unmapped(void* base, size_t len) {
  for (auto& slot : g_watches) {
    FileWatch* w = slot.load(std::memory_order_acquire);
    if (w != nullptr) w->on_unmap(static_cast<std::byte*>(base), len);
  }
}

}  // namespace interpose

bool interposer_linked() { return cairn_crashsim_interposer_present != nullptr; }

// ---- FileWatch ----

FileWatch::FileWatch(int fd, std::size_t size, Durability durability, SimDevice* device)
    : size_(size), durability_(durability), device_(device) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  written_bits_.assign((size_ / kPage + 64) / 64, 0);
  seq_ = g_seq.fetch_add(1, std::memory_order_relaxed) + 1;
  std::lock_guard lk(g_register);
  for (int i = 0; i < kSlots; ++i) {
    FileWatch* expected = nullptr;
    if (g_watches[i].compare_exchange_strong(expected, this, std::memory_order_acq_rel)) {
      slot_ = i;
      break;
    }
  }
  if (slot_ < 0) return;
  g_live.fetch_add(1, std::memory_order_acq_rel);
  ok_ = true;
  if (!interposer_linked())
    problem_ =
        "this executable does not interpose mmap, msync and libpmem's persist calls, so the library's persistence "
        "would bypass the simulator: link tests/crashsim/interpose.cpp into it";
}

FileWatch::~FileWatch() {
  if (slot_ < 0) return;
  if (primary_ != nullptr) on_unmap(primary_, primary_len_);  // the library did not close: stop tracking anyway
  std::lock_guard lk(g_register);
  g_watches[slot_].store(nullptr, std::memory_order_release);
  g_live.fetch_sub(1, std::memory_order_acq_rel);
}

bool FileWatch::matches(dev_t dev, ino_t ino) const { return ok_ && dev == dev_ && ino == ino_; }

const FileWatch::Map* FileWatch::find(const void* addr) const {
  const auto* a = static_cast<const std::byte*>(addr);
  for (const Map& m : maps_)
    if (a >= m.base && a < m.base + m.len) return &m;
  return nullptr;
}

bool FileWatch::contains(const void* addr) const { return find(addr) != nullptr; }

WriteTracker* FileWatch::tracker() const { return device_ != nullptr ? device_->tracker() : tracker_.get(); }

void FileWatch::learn_secondaries() {
  WriteTracker* t = tracker();
  if (t == nullptr) return;
  for (std::uint32_t p : secondary_pages_) t->learn(p);
}

void FileWatch::on_map(std::byte* base, std::size_t len, off_t offset) {
  const auto off = static_cast<std::uint64_t>(offset);
  maps_.push_back(Map{base, len, off});
  // The whole file: libpmemobj maps its size rounded down to a page.
  if (off == 0 && len >= size_ / kPage * kPage && primary_ == nullptr) {
    primary_ = base;
    primary_len_ = std::min(len, size_);
    if (device_ != nullptr) {
      devices::Mapping m;
      m.base = base;
      m.size = primary_len_;
      m.is_pmem = cpu_model();
      m.mode = cpu_model() ? devices::FlushMode::cpu : devices::FlushMode::msync;
      auto ops = device_->bind(m);
      if (!ops.ok()) {
        problem_ = "cannot bind the simulator device to the library's mapping: " + ops.error().message;
        return;
      }
      ctx_ = device_->context();
      flush_ = ops.value().flush;
      drain_ = ops.value().drain;
    } else {
      tracker_ = std::make_unique<WriteTracker>(base, primary_len_);
      if (auto r = tracker_->start(); !r.ok()) problem_ = r.error().message;
    }
    learn_secondaries();
    return;
  }
  // A partial mapping (the pool header): its pages are candidates for good.
  const std::uint64_t first = off / kPage;
  const std::uint64_t end = std::min<std::uint64_t>((off + len + kPage - 1) / kPage, (size_ + kPage - 1) / kPage);
  for (std::uint64_t p = first; p < end; ++p) {
    if (std::find(secondary_pages_.begin(), secondary_pages_.end(), p) == secondary_pages_.end())
      secondary_pages_.push_back(static_cast<std::uint32_t>(p));
  }
  learn_secondaries();
}

void FileWatch::harvest() {
  if (tracker_ == nullptr) return;
  const std::size_t n = tracker_->learned_count();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t p = tracker_->learned(i);
    const std::uint64_t bit = std::uint64_t{1} << (p % 64);
    if ((written_bits_[p / 64] & bit) != 0) continue;
    written_bits_[p / 64] |= bit;
    written_.push_back(p);
  }
}

void FileWatch::on_unmap(const std::byte* base, std::size_t len) {
  for (std::size_t i = 0; i < maps_.size();) {
    const Map& m = maps_[i];
    if (m.base + m.len <= base || m.base >= base + len) {
      ++i;
      continue;
    }
    if (m.base == primary_) {
      harvest();
      if (device_ != nullptr)
        device_->unbind();
      else
        tracker_.reset();
      primary_ = nullptr;
      flush_ = nullptr;
      drain_ = nullptr;
    }
    maps_.erase(maps_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void FileWatch::written_pages(std::vector<std::uint32_t>& out) {
  harvest();
  out.insert(out.end(), written_.begin(), written_.end());
  out.insert(out.end(), secondary_pages_.begin(), secondary_pages_.end());
}

bool FileWatch::flush(const void* addr, std::size_t len) {
  const Map* m = find(addr);
  if (m == nullptr) return false;
  if (device_ == nullptr) return true;  // a check: the image is memory
  if (flush_ == nullptr) {
    problem_ = "a persist call on the file before the library mapped it whole";
    return true;
  }
  // Writes through a partial mapping do not fault on the tracked one: its
  // pages are learned again before each crash point (a clean page forgotten
  // there has nothing pending).
  if (dropped(addr, len)) return true;  // a broken variant (drop_persists_add)
  if (m->base != primary_) learn_secondaries();
  const auto off = m->offset + static_cast<std::uint64_t>(static_cast<const std::byte*>(addr) - m->base);
  const std::size_t n =
      static_cast<std::size_t>(std::min<std::uint64_t>(len, primary_len_ - std::min<std::uint64_t>(off, primary_len_)));
  if (n == 0) return true;
  flush_(ctx_, primary_ + off, n);
  return true;
}

void FileWatch::drain() {
  if (drain_ != nullptr) drain_(ctx_);
}

InterposeCalls interpose_calls() {
  InterposeCalls c;
  c.msyncs = interpose::msyncs.load(std::memory_order_relaxed);
  c.flushes = interpose::flushes.load(std::memory_order_relaxed);
  c.drains = interpose::drains.load(std::memory_order_relaxed);
  c.maps = interpose::maps.load(std::memory_order_relaxed);
  return c;
}

// ---- ImageLinks ----

ImageLinks::ImageLinks() {
  const char* env = std::getenv("CAIRN_TEST_DIR");
  std::string root = env != nullptr ? env : (std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp");
  std::string tmpl = root + "/cairn-crashsim-links-XXXXXX";
  if (mkdtemp(tmpl.data()) != nullptr) root_ = tmpl;
}

ImageLinks::~ImageLinks() {
  if (root_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

Result<std::string> ImageLinks::dir_for(const Image& image, const std::string& name) {
  if (root_.empty()) return make_error(Errc::io_error, "crashsim: cannot create a directory for image links");
  const std::string dir = root_ + "/" + std::to_string(image.fd());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string link = dir + "/" + name;
  const std::string target = "/proc/self/fd/" + std::to_string(image.fd());
  // Made again each time: a number of a closed image may name another.
  ::unlink(link.c_str());
  if (::symlink(target.c_str(), link.c_str()) != 0)
    return make_error(Errc::io_error, "crashsim: symlink " + link + " -> " + target + ": " + std::strerror(errno));
  return dir;
}

// ---- the check of one crash image ----

CheckOutcome check_file_state(int image_fd, std::size_t size, const std::string& dir, Durability durability,
                              const CheckConfig& config, const Expect& expect, std::uint64_t rng_seed,
                              std::vector<std::uint32_t>& written) {
  FileWatch watch(image_fd, size, durability, nullptr);
  auto run = [&]() -> CheckOutcome {
    CheckOutcome out;
    auto fail = [&](std::string why) {
      out.ok = false;
      out.reason = std::move(why);
      return out;
    };
    if (!watch.ok()) return fail("crashsim: cannot watch the crash image's file");
    const Workload& w = *config.workload;
    Model after;
    {
      auto st = w.make_file();
      auto rec = st->recover(dir);
      if (!rec.ok()) return fail("recovery failed: " + rec.error().message);
      out.recovered = rec.value().number;
      // Condition 1.
      if (auto why = match_version(rec.value(), expect); !why.empty()) return fail(why);
      // Condition 3: K further operations, then a clean reopen.
      if (config.extend_ops == 0) return out;
      after = Model(std::move(rec.value()));
      Rng rng(rng_seed);
      for (unsigned i = 0; i < config.extend_ops; ++i) {
        auto r = st->step(after, rng);
        if (!r.ok())
          return fail("further operation " + std::to_string(i + 1) + " after recovery failed: " + r.error().message);
        if (after.in_flight() != nullptr)
          return fail("further operation " + std::to_string(i + 1) + " did not finish its commit (model.end)");
      }
    }
    auto st = w.make_file();
    auto rec = st->recover(dir);
    if (!rec.ok())
      return fail("after " + std::to_string(config.extend_ops) +
                  " further operations a clean reopen failed: " + rec.error().message);
    if (!(rec.value() == after.last()))
      return fail("after " + std::to_string(config.extend_ops) +
                  " further operations a clean reopen recovered version " + std::to_string(rec.value().number) +
                  ", not the model's last version " + std::to_string(after.last().number) +
                  (rec.value().number == after.last().number ? " (bytes differ)" : ""));
    return out;
  };
  CheckOutcome out = watch.problem().empty() ? run() : CheckOutcome{false, "crashsim: " + watch.problem(), 0};
  if (out.ok && !watch.problem().empty()) out = CheckOutcome{false, "crashsim: " + watch.problem(), out.recovered};
  watch.written_pages(written);
  return out;
}

// ---- the check server ----

namespace {

constexpr std::size_t kShared = 4u << 20;

// A little writer and reader over the shared region.
struct Cursor {
  std::byte* p;
  std::byte* end;
  bool ok = true;
  void put(const void* v, std::size_t n) {
    if (!ok || static_cast<std::size_t>(end - p) < n) {
      ok = false;
      return;
    }
    std::memcpy(p, v, n);
    p += n;
  }
  void get(void* v, std::size_t n) {
    if (!ok || static_cast<std::size_t>(end - p) < n) {
      ok = false;
      return;
    }
    std::memcpy(v, p, n);
    p += n;
  }
  template <class T>
  void put(const T& v) {
    put(&v, sizeof v);
  }
  template <class T>
  T get() {
    T v{};
    get(&v, sizeof v);
    return v;
  }
  void put_bytes(const std::string& str) {
    put<std::uint64_t>(str.size());
    put(str.data(), str.size());
  }
  std::string get_string() {
    const auto n = get<std::uint64_t>();
    if (!ok || static_cast<std::size_t>(end - p) < n) {
      ok = false;
      return {};
    }
    std::string str(reinterpret_cast<const char*>(p), n);
    p += n;
    return str;
  }
  void put_version(const Version& v) {
    put(v.number);
    put<std::uint64_t>(v.bytes.size());
    put(v.bytes.data(), v.bytes.size());
  }
  Version get_version() {
    Version v;
    v.number = get<std::uint64_t>();
    v.bytes.resize(get<std::uint64_t>());
    get(v.bytes.data(), v.bytes.size());
    return v;
  }
};

bool write_byte(int fd, char c) {
  for (;;) {
    const ssize_t n = ::write(fd, &c, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

bool read_byte(int fd, char& c) {
  for (;;) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

}  // namespace

Result<std::unique_ptr<CheckServer>> CheckServer::start(const Workload& workload) {
  std::unique_ptr<CheckServer> s(new CheckServer());
  s->workload_ = &workload;
  void* p = mmap(nullptr, kShared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return make_error(Errc::io_error, "crashsim: cannot map the check server's region");
  s->shared_ = static_cast<std::byte*>(p);
  if (pipe(s->req_) != 0 || pipe(s->resp_) != 0)
    return make_error(Errc::io_error, std::string("crashsim: pipe: ") + std::strerror(errno));
  s->pid_ = fork();
  if (s->pid_ < 0) return make_error(Errc::io_error, std::string("crashsim: fork: ") + std::strerror(errno));
  if (s->pid_ == 0) {
    ::close(s->req_[1]);
    ::close(s->resp_[0]);
    s->serve();
    _exit(0);
  }
  ::close(s->req_[0]);
  ::close(s->resp_[1]);
  s->req_[0] = s->resp_[1] = -1;
  return s;
}

CheckServer::~CheckServer() {
  if (req_[1] >= 0) ::close(req_[1]);  // EOF: the server exits
  if (pid_ > 0) {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (resp_[0] >= 0) ::close(resp_[0]);
  if (shared_ != nullptr) munmap(shared_, kShared);
}

void CheckServer::serve() {
  char c = 0;
  while (read_byte(req_[0], c)) {
    Cursor in{shared_, shared_ + kShared};
    const int fd = in.get<int>();
    const auto size = in.get<std::uint64_t>();
    const std::string dir = in.get_string();
    const auto durability = in.get<Durability>();
    const auto extend_ops = in.get<unsigned>();
    const auto seed = in.get<std::uint64_t>();
    const auto has_last = in.get<bool>();
    const auto has_fly = in.get<bool>();
    const auto point_durable = in.get<bool>();
    Model model;
    if (has_last) model = Model(in.get_version());
    if (has_fly) {
      model.begin(in.get_version());
      if (point_durable) model.commit_point();
    }
    CheckOutcome out{false, "crashsim: the check request did not fit the shared region", 0};
    std::vector<std::uint32_t> written;
    if (in.ok) {
      CheckConfig cfg;
      cfg.workload = workload_;
      cfg.extend_ops = extend_ops;
      out = check_file_state(fd, size, dir, durability, cfg, model.expect(), seed, written);
    }
    Cursor o{shared_, shared_ + kShared};
    o.put(out.ok);
    o.put(out.recovered);
    o.put_bytes(out.reason);
    o.put<std::uint64_t>(written.size());
    o.put(written.data(), written.size() * sizeof(std::uint32_t));
    if (!write_byte(resp_[1], 'r')) return;
  }
}

CheckOutcome CheckServer::check(int image_fd, std::size_t size, const std::string& dir, Durability durability,
                                unsigned extend_ops, const Expect& e, std::uint64_t rng_seed,
                                std::vector<std::uint32_t>& written) {
  if (dead_) return CheckOutcome{false, "crashsim: the check server is gone (an earlier recovery crashed it)", 0};
  Cursor in{shared_, shared_ + kShared};
  in.put(image_fd);
  in.put<std::uint64_t>(size);
  in.put_bytes(dir);
  in.put(durability);
  in.put(extend_ops);
  in.put(rng_seed);
  in.put<bool>(e.last >= 0);
  in.put<bool>(e.in_flight >= 0);
  in.put<bool>(e.point_durable);
  if (e.last >= 0) in.put_version(e.model->at(static_cast<std::size_t>(e.last)));
  if (e.in_flight >= 0) in.put_version(e.model->at(static_cast<std::size_t>(e.in_flight)));
  if (!in.ok) return CheckOutcome{false, "crashsim: the versions do not fit the check server's region", 0};
  char c = 0;
  if (!write_byte(req_[1], 'q') || !read_byte(resp_[0], c)) {
    dead_ = true;
    int status = 0;
    std::string why = "recovery crashed the checking process";
    if (waitpid(pid_, &status, 0) == pid_ && WIFSIGNALED(status))
      why += std::string(": ") + strsignal(WTERMSIG(status));
    pid_ = -1;
    // What it wrote is unknown: the caller restores every page.
    const std::size_t pages = (size + kPage - 1) / kPage;
    for (std::size_t p = 0; p < pages; ++p) written.push_back(static_cast<std::uint32_t>(p));
    return CheckOutcome{false, why, 0};
  }
  Cursor o{shared_, shared_ + kShared};
  CheckOutcome out;
  out.ok = o.get<bool>();
  out.recovered = o.get<std::uint64_t>();
  out.reason = o.get_string();
  const auto n = o.get<std::uint64_t>();
  const std::size_t at = written.size();
  written.resize(at + n);
  o.get(written.data() + at, n * sizeof(std::uint32_t));
  return out;
}

}  // namespace cairn::testing::crashsim

// ---- the interposed functions (global, C linkage: they replace libc's and
// libpmem's for every library of the executable) ----

using cairn::testing::crashsim::FileWatch;
namespace cs = cairn::testing::crashsim;
