// stream.cpp — file:, mem: and pmem: streams behind one FILE* (fopencookie)
// and one std::iostream; the pmem: pool lock, reader pins and writer
// liveness (the directory's hooks). Model and guarantees: cairn/stream.hpp.
#include "cairn/stream.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <istream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <streambuf>
#include <thread>

#include "cairn/extended/pool.hpp"
#include "stream/directory.hpp"
#include "stream/testing.hpp"
#include "stream/uri.hpp"
#include "util/crc32c.hpp"
#include "util/io.hpp"

namespace cairn::stream {

namespace {

thread_local std::string g_last_error;

constexpr std::uint64_t kInitialCapacity = 64 * 1024;
constexpr std::uint32_t kDirectoryEntries = 1024;
constexpr std::size_t kStoresKept = 8;

struct Uri {
  enum class Kind { file, mem, pmem } kind;
  std::string path;  // file: the file; pmem: the pool file
  std::string name;  // mem:, pmem: the stream name
};

Result<Uri> parse(const std::string& uri) {
  auto bad = [&](const std::string& why) {
    return make_error(Errc::invalid_argument,
                      "stream URI '" + uri + "': " + why + " (expected file:PATH, mem:NAME or pmem:POOL#NAME)");
  };
  if (uri.rfind("file:", 0) == 0) {
    if (uri.size() == 5) return bad("no path");
    return Uri{Uri::Kind::file, uri.substr(5), {}};
  }
  if (uri.rfind("mem:", 0) == 0) {
    if (uri.size() == 4) return bad("no name");
    return Uri{Uri::Kind::mem, {}, uri.substr(4)};
  }
  if (uri.rfind("pmem:", 0) == 0) {
    const auto hash = uri.rfind('#');
    if (hash == std::string::npos || hash < 5) return bad("no '#NAME' after the pool file");
    if (hash == 5) return bad("no pool file before '#'");
    if (hash + 1 == uri.size()) return bad("no stream name after '#'");
    if (uri.size() - hash - 1 > detail::kNameMax)
      return bad("the stream name is longer than " + std::to_string(detail::kNameMax) + " bytes");
    return Uri{Uri::Kind::pmem, uri.substr(5, hash - 5), uri.substr(hash + 1)};
  }
  return bad("unknown scheme");
}

// Records e as this thread's last stream error and returns it.
Error fail(Error e) {
  g_last_error = errc_name(e.code) + std::string(": ") + e.message;
  return e;
}

// $CAIRN_STREAM_POOL_SIZE: bytes with an optional K, M or G suffix; unset
// or empty gives the fallback, anything else unreadable is an error (a typo
// must not silently make a pool of another size).
Result<std::uint64_t> parse_size(const char* text, std::uint64_t fallback) {
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  double mult = 1;
  switch (end != text ? *end : '?') {
    case 'k':
    case 'K': mult = 1024.0, ++end; break;
    case 'm':
    case 'M': mult = 1024.0 * 1024, ++end; break;
    case 'g':
    case 'G': mult = 1024.0 * 1024 * 1024, ++end; break;
    default: break;
  }
  if (end == text || *end != '\0' || !(v > 0) || v * mult > 1e18)
    return make_error(Errc::invalid_argument, std::string("CAIRN_STREAM_POOL_SIZE='") + text +
                                                  "' is not a size (bytes, or a number with K, M or G)");
  return static_cast<std::uint64_t>(v * mult);
}

// ---------------------------------------------------------------- pmem store

// errno the next blocking lock (the pool lock) fails with; 0: none. Set by
// detail::fail_next_pool_lock, for the tests of that error.
std::atomic<int> g_pool_lock_fault{0};

int ofd_lock(int fd, short type, std::uint64_t at, bool wait) {
  if (wait && type != F_UNLCK)
    if (const int err = g_pool_lock_fault.exchange(0); err != 0) {
      errno = err;
      return -1;
    }
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(at);
  fl.l_len = 1;
  int r;
  do r = ::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
  while (r != 0 && errno == EINTR);
  return r;
}

// Is byte `at` locked through another open file description than fd's (any
// process, this one included)? True when the kernel cannot say: a writer is
// never taken for dead on a guess.
bool ofd_locked_elsewhere(int fd, std::uint64_t at) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(at);
  fl.l_len = 1;
  if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) return true;
  return fl.l_type != F_UNLCK;
}

// The file descriptors through which this process's writers hold their
// liveness locks. A child forked while a writer is open shares the writer's
// open file description, and with it the lock: the child would keep a dead
// writer alive. So in the child each one is made to point at /dev/null (the
// number stays valid for the copy of the writer that will close it; the
// child's reference to the lock goes).
class LivenessFds {
 public:
  static LivenessFds& get() {
    static auto* l = [] {
      auto* made = new LivenessFds;  // never destroyed: writers may outlive statics at exit
      ::pthread_atfork([] { get().mu_.lock(); }, [] { get().mu_.unlock(); }, [] { get().in_child(); });
      return made;
    }();
    return *l;
  }
  // Opens a file description with `open` and takes the write lock on `byte`
  // through it; the fd, or -1 with errno set. Under the mutex, so that no
  // fork sees the lock held through an fd it does not know.
  int take(const std::function<int()>& open, std::uint64_t byte) {
    std::lock_guard<std::mutex> g(mu_);
    const int fd = open();
    if (fd < 0) return -1;
    if (ofd_lock(fd, F_WRLCK, byte, false) != 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      return -1;
    }
    fds_.insert(fd);
    return fd;
  }
  // Closes it: the lock goes with this process's last reference.
  void drop(int fd) {
    std::lock_guard<std::mutex> g(mu_);
    fds_.erase(fd);
    ::close(fd);
  }

 private:
  void in_child() {
    // Only async-signal-safe calls here.
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    for (const int fd : fds_)
      if (null >= 0) ::dup3(null, fd, O_CLOEXEC);
    if (null >= 0) ::close(null);
    fds_.clear();
    mu_.unlock();
  }
  std::mutex mu_;
  std::set<int> fds_;
};

// One per pool file per process: the mapping, the directory, the lock.
class Store {
 public:
  static Result<std::shared_ptr<Store>> get(const std::string& path, bool create, std::uint64_t pool_size);
  ~Store() {
    if (fd_ >= 0) ::close(fd_);
  }

  // The pool lock: this process's threads (mutex) and other processes (an
  // OFD write lock on byte 0 of the pool file: the header, never an extent).
  // Taking it can fail (a file system without OFD locks, no lock records
  // left): check ok() before touching the directory.
  class Lock {
   public:
    explicit Lock(Store& s) : s_(s), taken_(s_.acquire()), held_(taken_.ok()) {}
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    ~Lock() { unlock(); }
    bool ok() const { return taken_.ok(); }
    const Error& error() const { return taken_.error(); }
    void unlock() {
      if (held_) s_.release();
      held_ = false;
    }

   private:
    Store& s_;
    Result<void> taken_;
    bool held_;
  };

  detail::Directory& dir() { return *dir_; }
  pool::Pool& pool() { return *pool_; }
  // A failed write-back poisoned the mapping (commits happen under mu_).
  bool poisoned() {
    std::lock_guard<std::mutex> g(mu_);
    return pool_->poisoned();
  }
  const detail::Owner& me() const { return me_; }
  // A new open file description of the pool file (a reader's pin, a writer's
  // liveness lock): the same file even if its path was renamed since.
  int reopen(int flags) const {
    const int fd = ::open(("/proc/self/fd/" + std::to_string(fd_)).c_str(), flags | O_CLOEXEC);
    return fd >= 0 ? fd : ::open(pool_->path().c_str(), flags | O_CLOEXEC);
  }

 private:
  Store() = default;
  Result<void> acquire() {
    mu_.lock();
    if (ofd_lock(fd_, F_WRLCK, 0, true) == 0) return {};
    const int err = errno;
    mu_.unlock();
    const bool no_ofd = err == EINVAL || err == ENOSYS || err == EOPNOTSUPP;
    Error e = util::errno_error(pool_->path(), "take the stream pool's lock (fcntl F_OFD_SETLKW on byte 0)", err,
                                no_ofd ? "this file system or kernel has no open file description locks (Linux 3.15 "
                                         "or later, a local file system or tmpfs): put the pool on /dev/shm or a "
                                         "local file system"
                                       : "the kernel refused a record lock on the pool file (ENOLCK: its lock table "
                                         "is full, or a network file system without a lock service); put the pool "
                                         "on /dev/shm or a local file system, or free locks");
    if (no_ofd) e.code = Errc::unsupported;
    return e;
  }
  void release() {
    ofd_lock(fd_, F_UNLCK, 0, false);
    mu_.unlock();
  }
  static Result<void> create_pool(const std::string& path, std::uint64_t size);
  detail::Hooks hooks() {
    detail::Hooks h = detail::ofd_hooks(fd_);
    h.lock = [this] { return acquire(); };
    h.unlock = [this] { release(); };
    return h;
  }

  pid_t pid_ = 0;           // the process that opened it
  std::uint64_t used_ = 0;  // for the registry's eviction
  int fd_ = -1;
  std::mutex mu_;
  std::unique_ptr<pool::Pool> pool_;
  std::optional<detail::Directory> dir_;
  detail::Owner me_{};
};

Result<void> Store::create_pool(const std::string& path, std::uint64_t size) {
  // Built under a private name and linked into place with its directory
  // already published: a process never sees a stream pool without one.
  const std::string tmp = path + ".creating-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  pool::CreateOptions co;
  co.size = size;
  co.reserve_as_used = true;
  auto p = pool::Pool::create(tmp, std::move(co));
  if (!p.ok()) return p.error();
  auto d = detail::Directory::format(*p.value(), kDirectoryEntries);
  if (!d.ok()) {
    ::unlink(tmp.c_str());
    return d.error();
  }
  p.value().reset();
  if (::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return util::errno_error(path, "create the stream pool", err);
  }
  ::unlink(tmp.c_str());  // EEXIST: another process created it first; use theirs
  return {};
}

// This process's Stores, by file; the device factory of the tests.
struct Registry {
  std::mutex mu;
  std::map<std::pair<dev_t, ino_t>, std::shared_ptr<Store>> stores;
  std::uint64_t uses = 0;
  std::function<std::unique_ptr<devices::Device>()> make_device;
};
Registry& store_registry() {
  static auto* r = new Registry;  // never destroyed: Stores may outlive statics at exit
  return *r;
}

Result<std::shared_ptr<Store>> Store::get(const std::string& path, bool create, std::uint64_t pool_size) {
  Registry& reg = store_registry();
  auto& registry = reg.stores;
  auto& uses = reg.uses;
  std::lock_guard<std::mutex> g(reg.mu);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT || !create)
      return util::errno_error(path, "open the stream pool", errno,
                               errno == ENOENT ? "nothing was written to a pmem: stream of this pool yet" : "");
    if (auto r = create_pool(path, pool_size); !r.ok()) return r.error();
    if (::stat(path.c_str(), &st) != 0) return util::errno_error(path, "open the stream pool", errno);
  }
  const auto key = std::make_pair(st.st_dev, st.st_ino);
  if (auto it = registry.find(key); it != registry.end()) {
    // A forked child must not use its parent's Store: the same open file
    // description would share the parent's locks, and the owner is the parent.
    // Nor may a Store of a file since deleted (tmpfs reuses inode numbers).
    struct stat mine {};
    const bool same_file = ::fstat(it->second->fd_, &mine) == 0 && mine.st_nlink > 0 && mine.st_ino == st.st_ino;
    // Nor a poisoned one: a write-back to it failed, and the pool refuses
    // further commits until it is mapped again (writers still open keep the
    // old Store, and fail).
    if (it->second->pid_ == ::getpid() && same_file && !it->second->poisoned()) {
      it->second->used_ = ++uses;
      return it->second;
    }
    registry.erase(it);
  }
  std::shared_ptr<Store> s(new Store());
  s->pid_ = ::getpid();
  s->used_ = ++uses;
  pool::OpenOptions po;
  if (reg.make_device) po.device = reg.make_device();
  auto p = pool::Pool::open(path, std::move(po));
  if (!p.ok()) return p.error();
  s->pool_ = std::move(p.value());
  s->fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (s->fd_ < 0) return util::errno_error(path, "open the stream pool", errno);
  std::random_device rd;
  s->me_ = detail::Owner{static_cast<std::uint64_t>(::getpid()),
                         (std::uint64_t{rd()} << 32) ^ rd() ^ reinterpret_cast<std::uintptr_t>(s.get())};
  {
    Lock lock(*s);
    if (!lock.ok()) return lock.error();
    auto d = detail::Directory::attach(*s->pool_, s->hooks());
    if (!d.ok()) return d.error();
    s->dir_.emplace(std::move(d.value()));
  }
  // The most recent pools stay mapped between streams (opening one maps and
  // validates the file and rebuilds its arena); older ones are released.
  if (registry.size() >= kStoresKept) {
    auto oldest = std::min_element(registry.begin(), registry.end(),
                                   [](const auto& a, const auto& b) { return a.second->used_ < b.second->used_; });
    registry.erase(oldest);
  }
  registry[key] = s;
  return s;
}

}  // namespace

// ------------------------------------------------------------------ handles

class Handle {
 public:
  virtual ~Handle() = default;
  virtual ssize_t read(char*, std::size_t) { return fail_io(EBADF, "stream is open for writing"); }
  virtual ssize_t write(const char*, std::size_t) { return fail_io(EBADF, "stream is open for reading"); }
  virtual int seek(off64_t* pos, int whence) = 0;
  // Writers commit (unless an error was seen), readers release.
  virtual Result<void> finish() = 0;
  // Writers drop what they wrote, committing nothing; readers release.
  virtual Result<void> drop() { return finish(); }
  virtual std::span<const std::byte> view() { return {}; }

  Result<void> close() {
    if (closed_) return result_;
    closed_ = true;
    result_ = dropping_ ? drop() : finish();
    if (!result_.ok()) fail(result_.error());
    return result_;
  }
  bool closed() const { return closed_; }
  // close() will drop instead of commit; writes from now on (the FILE*'s
  // buffer, flushed as it closes) are discarded.
  void drop_at_close() { dropping_ = true; }
  bool dropping() const { return dropping_; }

 protected:
  // A failed read or write: the first error is kept (close reports it).
  ssize_t fail_io(int err, const std::string& what) {
    return fail_with(make_error(util::errc_from_errno(err), what), err);
  }
  ssize_t fail_with(const Error& e, int err) {
    if (error_.code == Errc::ok) error_ = e;
    fail(e);
    errno = err;
    return -1;
  }
  // Seeking within [0, limit] for readers, anywhere >= 0 for writers.
  static int seek_in(std::uint64_t& pos, std::uint64_t end, off64_t* to, int whence, std::uint64_t limit) {
    off64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? static_cast<off64_t>(pos) : static_cast<off64_t>(end);
    const off64_t target = base + *to;
    if (target < 0 || static_cast<std::uint64_t>(target) > limit) {
      errno = EINVAL;
      return -1;
    }
    pos = static_cast<std::uint64_t>(target);
    *to = target;
    return 0;
  }
  Error error_;

 private:
  bool closed_ = false;
  bool dropping_ = false;
  Result<void> result_;
};

namespace {

// Readers of committed bytes that stay put while the handle is open.
class MemoryReader : public Handle {
 public:
  ssize_t read(char* buf, std::size_t n) override {
    const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, len_ - std::min(pos_, len_)));
    if (k > 0) std::memcpy(buf, data_ + pos_, k);
    pos_ += k;
    return static_cast<ssize_t>(k);
  }
  int seek(off64_t* to, int whence) override { return seek_in(pos_, len_, to, whence, len_); }
  std::span<const std::byte> view() override { return {data_, static_cast<std::size_t>(len_)}; }

 protected:
  const std::byte* data_ = nullptr;
  std::uint64_t len_ = 0, pos_ = 0;
};

// ------------------------------------------------------------------- file:

class FileWriter : public Handle {
 public:
  static Result<std::shared_ptr<Handle>> open(const std::string& path, bool sync) {
    auto h = std::make_shared<FileWriter>();
    h->path_ = path;
    h->sync_ = sync;
    h->fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (h->fd_ < 0) return util::errno_error(path, "open for writing", errno);
    return std::shared_ptr<Handle>(h);
  }
  ~FileWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }
  ssize_t write(const char* buf, std::size_t n) override {
    if (int err = util::pwrite_full(fd_, buf, n, pos_); err != 0)
      return fail_with(util::errno_error(path_, "write", err), err);
    pos_ += n;
    end_ = std::max(end_, pos_);
    return static_cast<ssize_t>(n);
  }
  int seek(off64_t* to, int whence) override { return seek_in(pos_, end_, to, whence, UINT64_MAX / 2); }
  // A file has no versions: what was written stays, unsynced.
  Result<void> drop() override {
    ::close(fd_);
    fd_ = -1;
    return {};
  }
  Result<void> finish() override {
    if (sync_ && error_.code == Errc::ok && ::fsync(fd_) != 0) error_ = util::errno_error(path_, "fsync", errno);
    if (::close(fd_) != 0 && error_.code == Errc::ok) error_ = util::errno_error(path_, "close", errno);
    fd_ = -1;
    if (error_.code != Errc::ok) return error_;
    return {};
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool sync_ = false;
  std::uint64_t pos_ = 0, end_ = 0;
};

class FileReader : public MemoryReader {
 public:
  static Result<std::shared_ptr<Handle>> open(const std::string& path) {
    auto h = std::make_shared<FileReader>();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return util::errno_error(path, "open for reading", errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      const int err = S_ISDIR(st.st_mode) ? EISDIR : errno ? errno : EINVAL;
      ::close(fd);
      return util::errno_error(path, "open for reading", err);
    }
    h->len_ = static_cast<std::uint64_t>(st.st_size);
    if (h->len_ > 0) {
      // Populated in one call (as a pmem: reader's version is): a view's
      // user would otherwise take its page faults while it computes.
      void* p = ::mmap(nullptr, h->len_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        return util::errno_error(path, "map for reading", err);
      }
      h->data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);
    return std::shared_ptr<Handle>(h);
  }
  ~FileReader() override {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), len_);
  }
  Result<void> finish() override { return {}; }
};

// -------------------------------------------------------------------- mem:

// Buffers of released mem: versions, kept for the next writers: a fresh
// buffer costs a page fault or a populated page per 4 KiB, which is most of a
// large transfer's time, and a component writes the same sizes every cycle.
class BufferCache {
 public:
  static BufferCache& get() {
    static auto* c = new BufferCache;  // never destroyed: versions may outlive statics at exit
    return *c;
  }
  // The smallest cached buffer of at least `cap` bytes, or {nullptr, 0}.
  std::pair<void*, std::uint64_t> take(std::uint64_t cap) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = free_.lower_bound(cap);
    if (it == free_.end()) return {nullptr, 0};
    auto out = std::make_pair(it->second, it->first);
    bytes_ -= it->first;
    free_.erase(it);
    return out;
  }
  void give(void* p, std::uint64_t cap) {
    if (p == nullptr) return;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (cap >= kMin && free_.size() < kMaxBuffers && bytes_ + cap <= kMaxBytes) {
        free_.emplace(cap, p);
        bytes_ += cap;
        return;
      }
    }
    std::free(p);
  }

 private:
  static constexpr std::uint64_t kMin = 1u << 20, kMaxBytes = 2ull << 30;
  static constexpr std::size_t kMaxBuffers = 16;
  std::mutex mu_;
  std::multimap<std::uint64_t, void*> free_;
  std::uint64_t bytes_ = 0;
};

struct MemVersion {
  std::byte* data = nullptr;
  std::uint64_t length = 0, capacity = 0, version = 0;
  ~MemVersion() { BufferCache::get().give(data, capacity); }
};

struct MemRegistry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const MemVersion>> committed;
  std::set<std::string> writing;  // names with an open writer
};
MemRegistry& mem_registry() {
  static auto* r = new MemRegistry;  // never destroyed (see BufferCache)
  return *r;
}

class MemWriter : public Handle {
 public:
  static Result<std::shared_ptr<Handle>> open(const std::string& name, std::uint64_t hint) {
    auto& reg = mem_registry();
    {
      std::lock_guard<std::mutex> g(reg.mu);
      if (!reg.writing.insert(name).second)
        return make_error(Errc::busy, "stream 'mem:" + name + "' is being written by another thread of this process");
      // As for pmem:, no hint means "as large as the last version".
      if (auto it = reg.committed.find(name); hint == 0 && it != reg.committed.end()) hint = it->second->length;
    }
    auto h = std::make_shared<MemWriter>();
    h->name_ = name;
    h->v_ = std::make_shared<MemVersion>();
    if (auto r = h->reserve(hint > 0 ? hint : kInitialCapacity); !r.ok()) {
      h->release();
      return r.error();
    }
    return std::shared_ptr<Handle>(h);
  }
  ~MemWriter() override { release(); }
  ssize_t write(const char* buf, std::size_t n) override {
    if (pos_ + n > v_->capacity)
      if (auto r = reserve(std::max(v_->capacity * 2, pos_ + n)); !r.ok()) return fail_with(r.error(), ENOMEM);
    if (pos_ > v_->length) std::memset(v_->data + v_->length, 0, pos_ - v_->length);
    std::memcpy(v_->data + pos_, buf, n);
    pos_ += n;
    v_->length = std::max(v_->length, pos_);
    return static_cast<ssize_t>(n);
  }
  int seek(off64_t* to, int whence) override { return seek_in(pos_, v_->length, to, whence, UINT64_MAX / 2); }
  Result<void> drop() override {
    release();
    return {};
  }
  Result<void> finish() override {
    auto& reg = mem_registry();
    std::lock_guard<std::mutex> g(reg.mu);
    reg.writing.erase(name_);
    released_ = true;
    if (error_.code != Errc::ok) return error_;
    auto& slot = reg.committed[name_];
    v_->version = slot ? slot->version + 1 : 1;
    slot = std::move(v_);
    return {};
  }

 private:
  Result<void> reserve(std::uint64_t cap) {
    // realloc as open_memstream grows: glibc moves large blocks with mremap.
    if (v_->data == nullptr) {
      auto [cached, cached_cap] = BufferCache::get().take(cap);
      if (cached != nullptr) {
        v_->data = static_cast<std::byte*>(cached);
        v_->capacity = cached_cap;
        return {};
      }
    }
    void* p = std::realloc(v_->data, cap);
    if (p == nullptr)
      return make_error(Errc::out_of_space,
                        "stream 'mem:" + name_ + "': no memory for " + std::to_string(cap) + " bytes");
    // The new pages in one batch (MADV_POPULATE_WRITE) rather than one fault
    // per 4 KiB page as they are written; a hint: failure leaves the faults.
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto b = (reinterpret_cast<std::uintptr_t>(p) + v_->capacity + page - 1) / page * page;
    const auto e = (reinterpret_cast<std::uintptr_t>(p) + cap) / page * page;
    if (e > b) (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_WRITE);
    v_->data = static_cast<std::byte*>(p);
    v_->capacity = cap;
    return {};
  }
  void release() {
    if (released_) return;
    released_ = true;
    auto& reg = mem_registry();
    std::lock_guard<std::mutex> g(reg.mu);
    reg.writing.erase(name_);
  }
  std::string name_;
  std::shared_ptr<MemVersion> v_;
  std::uint64_t pos_ = 0;
  bool released_ = false;
};

class MemReader : public MemoryReader {
 public:
  static Result<std::shared_ptr<Handle>> open(const std::string& name) {
    auto& reg = mem_registry();
    std::lock_guard<std::mutex> g(reg.mu);
    auto it = reg.committed.find(name);
    if (it == reg.committed.end()) {
      const bool writing = reg.writing.count(name) != 0;
      return make_error(writing ? Errc::no_version : Errc::not_found,
                        "stream 'mem:" + name + "' " +
                            (writing ? "was never committed: its writer has not closed it yet"
                                     : "does not exist in this process (mem: streams live in the memory of the "
                                       "process that wrote them)"));
    }
    auto h = std::make_shared<MemReader>();
    h->v_ = it->second;
    h->data_ = h->v_->data;
    h->len_ = h->v_->length;
    return std::shared_ptr<Handle>(h);
  }
  Result<void> finish() override {
    v_.reset();
    return {};
  }

 private:
  std::shared_ptr<const MemVersion> v_;
};

// ------------------------------------------------------------------- pmem:

class PmemWriter : public Handle {
 public:
  static Result<std::shared_ptr<Handle>> open(const Uri& u, const OpenOptions& o) {
    std::uint64_t hint = o.size_hint > 0 ? o.size_hint : kInitialCapacity;
    auto env_size = parse_size(std::getenv("CAIRN_STREAM_POOL_SIZE"), 256ull << 20);
    if (o.pool_size == 0 && !env_size.ok()) return env_size.error();
    const std::uint64_t pool_size = o.pool_size > 0 ? o.pool_size : env_size.value();
    auto s = Store::get(u.path, true, std::max<std::uint64_t>(pool_size, pool::kMinPoolSize));
    if (!s.ok()) return s.error();
    auto h = std::make_shared<PmemWriter>();
    h->store_ = s.value();
    h->name_ = u.name;
    Store::Lock lock(*h->store_);
    if (!lock.ok()) return lock.error();
    auto& dir = h->store_->dir();
    // Without a hint, a stream written every cycle reserves what its last
    // version took: growth by doubling is paid once, not every cycle.
    if (o.size_hint == 0)
      if (auto c = dir.committed(u.name); c.ok()) hint = std::max(hint, c.value().desc.length);
    auto e = dir.begin_write(u.name, hint, h->store_->me());
    if (!e.ok()) return e.error();
    // Alive from here until closed: the lock on the entry's liveness byte,
    // through a file description of this writer's own (see Store::hooks).
    h->live_fd_ = detail::hold_liveness([&] { return h->store_->reopen(O_RDWR); }, dir.liveness_byte(e.value()));
    if (h->live_fd_ < 0) {
      const int err = errno;
      dir.abandon(e.value());
      if (err == EAGAIN || err == EACCES)
        return make_error(Errc::busy, "stream '" + u.name + "' in pool " + u.path +
                                          ": its entry is locked by another process that is not its writer (a "
                                          "child forked by a writer and still running?); try again when it ends");
      return util::errno_error(u.path, "lock the entry of stream '" + u.name + "' for its writer", err);
    }
    h->entry_ = e.value();
    h->thread_ = std::this_thread::get_id();
    lock.unlock();
    // The extent's pages in one batch (MADV_POPULATE_WRITE) instead of one
    // fault per 4 KiB page (several microseconds each in a VM), outside the
    // pool lock: the extent is this writer's alone. Only pages written
    // before: the rest (fresh pool space on tmpfs) the writes put through
    // the file, which fills them without clearing them first.
    h->fresh_from_ = h->store_->dir().unwritten_from(h->entry_);
    h->store_->pool().prefault(h->store_->dir().pending_data(h->entry_), h->fresh_from_);
    return std::shared_ptr<Handle>(h);
  }
  ssize_t write(const char* buf, std::size_t n) override {
    if (error_.code != Errc::ok) return fail_with(error_, EIO);
    if (std::this_thread::get_id() != thread_) many_threads_ = true;
    auto r = store_->dir().write(entry_, pos_, buf, n, len_, &fresh_from_);
    if (!r.ok()) return fail_with(r.error(), util::errno_from_errc(r.error().code));
    // The version's CRC from the caller's bytes (in cache) while the writes
    // append; a seek back or past the end leaves it to the commit.
    if (crc_len_ == pos_ && crc_len_ != kNoCrc) {
      crc_ = util::crc32c(crc_, buf, n);
      crc_len_ += n;
    } else {
      crc_len_ = kNoCrc;
    }
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  int seek(off64_t* to, int whence) override { return seek_in(pos_, len_, to, whence, UINT64_MAX / 2); }
  ~PmemWriter() override { drop_liveness(); }
  Result<void> finish() override {
    // The write-back before the pool lock; under it only the commit.
    if (error_.code == Errc::ok && many_threads_) store_->pool().persist(store_->dir().pending_data(entry_), len_);
    Store::Lock lock(*store_);
    if (!lock.ok()) {
      // Nothing committed; once the liveness lock is gone the next process
      // to change the directory reclaims the extent.
      drop_liveness();
      return lock.error();
    }
    Result<void> out;
    if (error_.code != Errc::ok) {
      store_->dir().abandon(entry_);
      out = error_;
    } else if (auto v = store_->dir().finish(entry_, len_, crc_len_ == len_ ? std::optional(crc_) : std::nullopt);
               !v.ok()) {
      out = v.error();
    }
    drop_liveness();  // after the directory says nobody writes it
    return out;
  }
  Result<void> drop() override {
    Store::Lock lock(*store_);
    if (lock.ok()) store_->dir().abandon(entry_);
    drop_liveness();  // without the lock: the next reclaim frees the extent
    if (!lock.ok()) return lock.error();
    return {};
  }

 private:
  void drop_liveness() {
    if (live_fd_ >= 0) detail::release_liveness(live_fd_);
    live_fd_ = -1;
  }
  std::shared_ptr<Store> store_;
  std::string name_;
  static constexpr std::uint64_t kNoCrc = UINT64_MAX;
  int live_fd_ = -1;  // holds the lock on the entry's liveness byte
  long entry_ = -1;
  std::uint32_t crc_ = 0;      // CRC-32C of the first crc_len_ bytes
  std::uint64_t crc_len_ = 0;  // kNoCrc: the writes did not only append
  std::uint64_t pos_ = 0, len_ = 0;
  std::uint64_t fresh_from_ = UINT64_MAX;  // Directory::unwritten_from
  std::thread::id thread_;
  bool many_threads_ = false;
};

class PmemReader : public MemoryReader {
 public:
  static Result<std::shared_ptr<Handle>> open(const Uri& u) {
    auto s = Store::get(u.path, false, 0);
    if (!s.ok()) {
      Error e = s.error();
      if (e.code == Errc::not_found) e.message = "stream '" + u.name + "' does not exist: " + e.message;
      return e;
    }
    auto h = std::make_shared<PmemReader>();
    h->store_ = s.value();
    detail::Committed committed;
    {
      Store::Lock lock(*h->store_);
      if (!lock.ok()) return lock.error();
      auto c = h->store_->dir().committed(u.name);
      if (!c.ok()) return c.error();
      committed = c.value();
      h->data_ = c.value().data;
      h->len_ = c.value().desc.length;
      if (c.value().desc.offset != 0) {
        // The pin: an OFD read lock on the extent's first byte, which writers
        // test before reusing it; the kernel drops it if this process dies.
        h->pin_fd_ = h->store_->reopen(O_RDONLY);
        if (h->pin_fd_ < 0 || detail::pin_extent(h->pin_fd_, c.value().desc.offset) != 0)
          return util::errno_error(u.path, "pin the stream's version", errno);
      }
    }
    // The pinned version's pages mapped in one batch (a reader in a fresh
    // process would otherwise take one fault per page), outside the lock.
    // Read-only population: nothing is dirtied for a later msync.
    if (h->len_ > 0) {
      const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
      const auto b = reinterpret_cast<std::uintptr_t>(h->data_) & ~(page - 1);
      const auto e = reinterpret_cast<std::uintptr_t>(h->data_) + h->len_;
      (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_READ);
    }
    // Damaged bytes are an error, never different contents (the pin keeps
    // the version from changing while it is checked, outside the lock).
    if (auto v = h->store_->dir().verify(u.name, committed); !v.ok()) return v.error();
    return std::shared_ptr<Handle>(h);
  }
  ~PmemReader() override {
    if (pin_fd_ >= 0) ::close(pin_fd_);
  }
  Result<void> finish() override {
    if (pin_fd_ >= 0) ::close(pin_fd_);
    pin_fd_ = -1;
    data_ = nullptr;
    len_ = 0;
    return {};
  }

 private:
  std::shared_ptr<Store> store_;
  int pin_fd_ = -1;
};

// --------------------------------------------------------------- adapters

// fopencookie's callbacks. The cookie owns a reference to the handle and
// knows its FILE* so that cairn_stream_view can find the handle of a FILE*.
struct Cookie {
  std::shared_ptr<Handle> handle;
  std::FILE* file = nullptr;
};

struct FileRegistry {
  std::mutex mu;
  std::map<std::FILE*, std::weak_ptr<Handle>> handles;
};
FileRegistry& file_registry() {
  static FileRegistry r;
  return r;
}

cookie_io_functions_t cookie_functions() {
  cookie_io_functions_t f{};
  f.read = [](void* c, char* buf, size_t n) -> ssize_t { return static_cast<Cookie*>(c)->handle->read(buf, n); };
  f.write = [](void* c, const char* buf, size_t n) -> ssize_t {
    Handle& h = *static_cast<Cookie*>(c)->handle;
    return h.dropping() ? static_cast<ssize_t>(n) : h.write(buf, n);
  };
  f.seek = [](void* c, off64_t* pos, int whence) { return static_cast<Cookie*>(c)->handle->seek(pos, whence); };
  f.close = [](void* c) {
    auto* cookie = static_cast<Cookie*>(c);
    {
      auto& reg = file_registry();
      std::lock_guard<std::mutex> g(reg.mu);
      reg.handles.erase(cookie->file);
    }
    auto r = cookie->handle->close();
    delete cookie;
    if (r.ok()) return 0;
    errno = util::errno_from_errc(r.error().code);
    return -1;
  };
  return f;
}

// A std::streambuf over a FILE*, unbuffered: the FILE* buffers.
class FileBuf : public std::streambuf {
 public:
  explicit FileBuf(std::FILE* f) : f_(f) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return std::fflush(f_) == 0 ? traits_type::not_eof(c) : c;
    return std::fputc(c, f_) == EOF ? traits_type::eof() : c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    return static_cast<std::streamsize>(std::fwrite(s, 1, static_cast<std::size_t>(n), f_));
  }
  int_type underflow() override {
    const int c = std::getc(f_);
    if (c == EOF) return traits_type::eof();
    std::ungetc(c, f_);
    return c;
  }
  int_type uflow() override {
    const int c = std::getc(f_);
    return c == EOF ? traits_type::eof() : c;
  }
  std::streamsize xsgetn(char* s, std::streamsize n) override {
    return static_cast<std::streamsize>(std::fread(s, 1, static_cast<std::size_t>(n), f_));
  }
  int_type pbackfail(int_type c) override {
    return traits_type::eq_int_type(c, traits_type::eof()) ? c : std::ungetc(c, f_) == EOF ? traits_type::eof() : c;
  }
  pos_type seekoff(off_type off, std::ios_base::seekdir dir, std::ios_base::openmode) override {
    const int whence = dir == std::ios_base::beg ? SEEK_SET : dir == std::ios_base::cur ? SEEK_CUR : SEEK_END;
    if (::fseeko(f_, off, whence) != 0) return pos_type(off_type(-1));
    return pos_type(::ftello(f_));
  }
  pos_type seekpos(pos_type pos, std::ios_base::openmode m) override {
    return seekoff(off_type(pos), std::ios_base::beg, m);
  }
  int sync() override { return std::fflush(f_) == 0 ? 0 : -1; }

 private:
  std::FILE* f_;
};

Result<std::shared_ptr<Handle>> open_handle(const Uri& u, Mode mode, const OpenOptions& o) {
  switch (u.kind) {
    case Uri::Kind::file: {
      // $CAIRN_STREAM_SYNC=1: the coupling asks every file: writer to fsync.
      const char* env_sync = std::getenv("CAIRN_STREAM_SYNC");
      const bool sync = o.sync || (env_sync != nullptr && std::string_view(env_sync) == "1");
      return mode == Mode::write ? FileWriter::open(u.path, sync) : FileReader::open(u.path);
    }
    case Uri::Kind::mem: return mode == Mode::write ? MemWriter::open(u.name, o.size_hint) : MemReader::open(u.name);
    case Uri::Kind::pmem: return mode == Mode::write ? PmemWriter::open(u, o) : PmemReader::open(u);
  }
  return make_error(Errc::invalid_argument, "unknown stream kind");
}

}  // namespace

// ------------------------------------------------------------------ public

void detail::set_device_factory(std::function<std::unique_ptr<devices::Device>()> make) {
  Registry& reg = store_registry();
  std::lock_guard<std::mutex> g(reg.mu);
  reg.make_device = std::move(make);
}

void detail::fail_next_pool_lock(int err) { g_pool_lock_fault.store(err); }

detail::Hooks detail::ofd_hooks(int fd) {
  detail::Hooks h;
  // A writer holds an OFD write lock on its entry's liveness byte through
  // a file description of its own for as long as it is open; the kernel
  // drops it when the writer's process exits or dies, whatever pid
  // namespace it lives in and whether or not /proc shows it. A lock held
  // through another description than fd's (another Store of this process
  // included) is a live writer.
  h.alive = [fd](std::uint64_t byte, const detail::Owner&) { return ofd_locked_elsewhere(fd, byte); };
  // A reader pins an extent with an OFD read lock on its first byte; if our
  // write lock on it succeeds nobody does (and nobody can start to: new
  // readers take their pin under the pool lock, which the caller holds).
  h.unpinned = [fd](std::uint64_t off) {
    if (ofd_lock(fd, F_WRLCK, off, false) != 0) return false;
    ofd_lock(fd, F_UNLCK, off, false);
    return true;
  };
  return h;
}

int detail::hold_liveness(const std::function<int()>& open, std::uint64_t byte) {
  return LivenessFds::get().take(open, byte);
}

void detail::release_liveness(int fd) { LivenessFds::get().drop(fd); }

int detail::pin_extent(int fd, std::uint64_t offset) { return ofd_lock(fd, F_RDLCK, offset, false); }

void detail::forget_pools() {
  Registry& reg = store_registry();
  std::lock_guard<std::mutex> g(reg.mu);
  reg.stores.clear();
}

std::string resolve(std::string_view name) {
  const std::string n(name);
  if (detail::has_scheme(n)) return n;
  const char* prefix = std::getenv("CAIRN_STREAM_PREFIX");
  if (prefix != nullptr && *prefix != '\0') return std::string(prefix) + n;
  return "file:" + n;
}

Result<std::unique_ptr<Stream>> Stream::open(std::string_view uri_in, Mode mode, const OpenOptions& o) {
  const std::string uri = resolve(uri_in);
  auto u = parse(uri);
  if (!u.ok()) return fail(u.error());
  if (mode == Mode::read && o.wait_seconds > 0)
    if (auto w = wait(uri, o.wait_seconds); !w.ok()) return fail(w.error());
  auto h = open_handle(u.value(), mode, o);
  if (!h.ok()) return fail(h.error());
  auto* cookie = new Cookie{h.value(), nullptr};
  std::FILE* f = ::fopencookie(cookie, mode == Mode::write ? "w" : "r", cookie_functions());
  if (f == nullptr) {
    delete cookie;
    (void)h.value()->close();
    return fail(make_error(Errc::out_of_space, "fopencookie failed for " + uri));
  }
  cookie->file = f;
  {
    auto& reg = file_registry();
    std::lock_guard<std::mutex> g(reg.mu);
    reg.handles[f] = h.value();
  }
  std::unique_ptr<Stream> s(new Stream());
  s->file_ = f;
  s->handle_ = h.value();
  s->uri_ = uri;
  s->mode_ = mode;
  s->uncaught_at_open_ = std::uncaught_exceptions();
  return s;
}

Stream::~Stream() {
  // A writer destroyed by an exception's unwinding was interrupted: what it
  // wrote is not a version (as LMDB aborts an uncommitted transaction).
  if (mode_ == Mode::write && std::uncaught_exceptions() > uncaught_at_open_)
    (void)abandon();
  else
    (void)close();
}

Result<void> Stream::abandon() {
  if (handle_ && !handle_->closed()) handle_->drop_at_close();
  return close();
}

std::iostream& Stream::ios() {
  if (!ios_) {
    buf_ = std::make_unique<FileBuf>(file_);
    ios_ = std::make_unique<std::iostream>(buf_.get());
  }
  return *ios_;
}

std::span<const std::byte> Stream::view() const {
  return handle_ && !handle_->closed() ? handle_->view() : std::span<const std::byte>{};
}

Result<void> Stream::close() {
  if (file_ == nullptr) return handle_ ? handle_->close() : Result<void>{};
  if (ios_) ios_->flush();
  std::FILE* f = file_;
  file_ = nullptr;
  std::fclose(f);  // runs the handle's close (the commit); its result is kept there
  return handle_->close();
}

std::FILE* Stream::release() {
  std::FILE* f = file_;
  file_ = nullptr;
  handle_.reset();
  return f;
}

Result<std::span<const std::byte>> view(std::FILE* f) {
  std::shared_ptr<Handle> h;
  {
    auto& reg = file_registry();
    std::lock_guard<std::mutex> g(reg.mu);
    if (auto it = reg.handles.find(f); it != reg.handles.end()) h = it->second.lock();
  }
  if (!h) return make_error(Errc::invalid_argument, "this FILE* was not opened by cairn_stream_open (or is closed)");
  return h->view();
}

Result<void> wait(std::string_view uri_in, double timeout_seconds) {
  const std::string uri = resolve(uri_in);
  auto u = parse(uri);
  if (!u.ok()) return u.error();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    Error last;
    if (u.value().kind == Uri::Kind::file) {
      struct stat st {};
      if (::stat(u.value().path.c_str(), &st) == 0) return {};
      last = util::errno_error(u.value().path, "wait for the file", errno);
    } else {
      auto h = open_handle(u.value(), Mode::read, {});
      if (h.ok()) {
        (void)h.value()->close();
        return {};
      }
      last = h.error();
      if (last.code != Errc::not_found && last.code != Errc::no_version) return last;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      // A stream named, and why it is missing: a reader waits for a writer.
      const std::string seconds = std::to_string(timeout_seconds) + " s";
      if (u.value().kind == Uri::Kind::file)
        last.message += " (waited " + seconds + ")";
      else if (last.code == Errc::not_found)
        last.message = "stream '" + uri + "' does not exist after waiting " + seconds +
                       ": its writer has not created it yet (start the writer, or wait longer); " + last.message;
      else
        last.message = "stream '" + uri + "' has no committed version after waiting " + seconds +
                       ": its writer has not closed it yet; " + last.message;
      return last;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

Result<void> remove(std::string_view uri_in) {
  const std::string uri = resolve(uri_in);
  auto u = parse(uri);
  if (!u.ok()) return u.error();
  switch (u.value().kind) {
    case Uri::Kind::file:
      if (::unlink(u.value().path.c_str()) != 0) return util::errno_error(u.value().path, "remove", errno);
      return {};
    case Uri::Kind::mem: {
      auto& reg = mem_registry();
      std::lock_guard<std::mutex> g(reg.mu);
      if (reg.committed.erase(u.value().name) == 0)
        return make_error(Errc::not_found, "stream '" + uri + "' does not exist in this process");
      return {};
    }
    case Uri::Kind::pmem: {
      auto s = Store::get(u.value().path, false, 0);
      if (!s.ok()) return s.error();
      Store::Lock lock(*s.value());
      if (!lock.ok()) return lock.error();
      return s.value()->dir().remove(u.value().name);
    }
  }
  return {};
}

Result<std::vector<Info>> list(std::string_view where_in) {
  std::string where(where_in);
  std::vector<Info> out;
  if (where == "mem:") {
    auto& reg = mem_registry();
    std::lock_guard<std::mutex> g(reg.mu);
    for (const auto& [name, v] : reg.committed) out.push_back(Info{name, v->length, v->version, v->capacity, 0});
    return out;
  }
  if (where.rfind("pmem:", 0) == 0) where = where.substr(5);
  if (const auto hash = where.rfind('#'); hash != std::string::npos) where = where.substr(0, hash);
  auto s = Store::get(where, false, 0);
  if (!s.ok()) return s.error();
  Store::Lock lock(*s.value());
  if (!lock.ok()) return lock.error();
  return s.value()->dir().list();
}

const std::string& last_error_message() { return g_last_error; }

}  // namespace cairn::stream
