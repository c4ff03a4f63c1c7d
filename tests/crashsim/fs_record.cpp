// fs_record.cpp — libc interposition for the file-system crash explorer (see
// fs_record.hpp). Every function forwards to the next definition of its name
// (libc, or a sanitizer's interceptor); while recording, calls on the watched
// directory also append an Op to the log. The recorder keeps its own map of
// names to inode numbers, so the log says which file each operation touched.
#undef _FORTIFY_SOURCE
#include "tests/crashsim/fs_record.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <unordered_map>

namespace cairn::testing::crashsim::fs {
namespace {

struct FdInfo {
  enum Kind : std::uint8_t { dir, parent, file } kind = file;
  std::uint32_t ino = 0;
};

struct Recorder {
  std::atomic<bool> on{false};
  std::mutex mu;
  std::string dir, parent;
  std::map<std::string, std::uint32_t> names;
  std::uint32_t next_ino = 1;
  std::unordered_map<int, FdInfo> fds;
  std::vector<Op> ops;
};

Recorder& rec() {
  static Recorder* r = new Recorder;  // never destroyed: interposed calls may come late
  return *r;
}

bool recording() { return rec().on.load(std::memory_order_acquire); }

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// Saves errno across the recorder's own work.
struct KeepErrno {
  int e = errno;
  ~KeepErrno() { errno = e; }
};

enum class Where : std::uint8_t { none, dir, parent, in_dir, below };

// Where `path` (relative to dirfd) is, relative to the watched directory;
// `name` is the file name for in_dir. Called with the lock held.
Where classify(int dirfd, const char* path, std::string& name) {
  namespace fsys = std::filesystem;
  Recorder& r = rec();
  if (path == nullptr) return Where::none;
  fsys::path p(path);
  if (p.is_relative()) {
    if (dirfd == AT_FDCWD) {
      std::error_code ec;
      p = fsys::current_path(ec) / p;
    } else {
      auto it = r.fds.find(dirfd);
      if (it != r.fds.end() && it->second.kind == FdInfo::dir) {
        p = fsys::path(r.dir) / p;
      } else {
        char buf[4096];
        const std::string link = "/proc/self/fd/" + std::to_string(dirfd);
        const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
        if (n <= 0) return Where::none;
        p = fsys::path(std::string(buf, static_cast<std::size_t>(n))) / p;
      }
    }
  }
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  if (s == r.dir) return Where::dir;
  if (s == r.parent) return Where::parent;
  const std::string prefix = r.dir + "/";
  if (s.rfind(prefix, 0) != 0) return Where::none;
  name = s.substr(prefix.size());
  return name.find('/') == std::string::npos ? Where::in_dir : Where::below;
}

void unsupported(const std::string& what) {
  Op op;
  op.kind = OpKind::unsupported;
  op.name = what;
  rec().ops.push_back(std::move(op));
}

// The file behind a tracked fd, or nullptr. Called with the lock held.
const FdInfo* tracked(int fd) {
  auto it = rec().fds.find(fd);
  return it == rec().fds.end() ? nullptr : &it->second;
}

template <class Call>
int do_open(int dirfd, const char* path, int flags, Call real) {
  if (!recording()) return real();
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  std::string name;
  const Where w = classify(dirfd, path, name);
  const bool existed = w == Where::in_dir && r.names.count(name) != 0;
  const int fd = real();
  if (fd < 0) return fd;
  KeepErrno keep;
  const bool writable = (flags & O_ACCMODE) != O_RDONLY;
  switch (w) {
    case Where::none: break;
    case Where::dir: r.fds[fd] = FdInfo{FdInfo::dir, 0}; break;
    case Where::parent: r.fds[fd] = FdInfo{FdInfo::parent, 0}; break;
    case Where::below:
      if (writable || (flags & O_CREAT) != 0) unsupported(std::string("open below the directory: ") + path);
      break;
    case Where::in_dir: {
      if ((flags & O_TMPFILE) == O_TMPFILE || (writable && (flags & O_APPEND) != 0)) {
        unsupported(std::string("open with O_TMPFILE or O_APPEND: ") + path);
        break;
      }
      std::uint32_t ino;
      if (!existed) {
        if ((flags & O_CREAT) == 0) {
          if (writable) unsupported(std::string("open of a file the recorder does not know: ") + path);
          break;
        }
        ino = r.next_ino++;
        r.names[name] = ino;
        Op op;
        op.kind = OpKind::create;
        op.ino = ino;
        op.name = name;
        r.ops.push_back(std::move(op));
      } else {
        ino = r.names[name];
        if ((flags & O_TRUNC) != 0 && writable) {
          Op op;
          op.kind = OpKind::truncate;
          op.ino = ino;
          op.off = 0;
          r.ops.push_back(std::move(op));
        }
      }
      r.fds[fd] = FdInfo{FdInfo::file, ino};
      break;
    }
  }
  return fd;
}

mode_t mode_arg(int flags, va_list ap) {
  return ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}

template <class Real>
ssize_t do_write(Real real, int fd, const void* buf, std::size_t n, off_t off, bool positional) {
  if (!recording()) return real(fd, buf, n, off);
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  const FdInfo* f = tracked(fd);
  if (f == nullptr || f->kind != FdInfo::file) return real(fd, buf, n, off);
  const off_t at = positional ? off : ::lseek(fd, 0, SEEK_CUR);
  const ssize_t w = real(fd, buf, n, off);
  if (w <= 0) return w;
  KeepErrno keep;
  Op op;
  op.kind = OpKind::write;
  op.ino = f->ino;
  op.off = static_cast<std::uint64_t>(at);
  op.data.assign(static_cast<const std::byte*>(buf), static_cast<const std::byte*>(buf) + w);
  r.ops.push_back(std::move(op));
  return w;
}

int do_sync(int (*real)(int), int fd) {
  const int rc = real(fd);
  if (rc != 0 || !recording()) return rc;
  KeepErrno keep;
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  const FdInfo* f = tracked(fd);
  if (f == nullptr) return rc;
  Op op;
  op.kind = f->kind == FdInfo::file ? OpKind::fsync : f->kind == FdInfo::dir ? OpKind::fsync_dir : OpKind::fsync_parent;
  op.ino = f->ino;
  r.ops.push_back(std::move(op));
  return rc;
}

template <class Call>
int do_rename(int ofd, const char* from, int nfd, const char* to, unsigned flags, Call real) {
  if (!recording()) return real();
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  std::string a, b;
  const Where wa = classify(ofd, from, a), wb = classify(nfd, to, b);
  const int rc = real();
  if (rc != 0 || (wa == Where::none && wb == Where::none)) return rc;
  KeepErrno keep;
  if (wa != Where::in_dir || wb != Where::in_dir || flags != 0 || r.names.count(a) == 0) {
    unsupported(std::string("rename ") + from + " -> " + to);
    return rc;
  }
  Op op;
  op.kind = OpKind::rename;
  op.ino = r.names[a];
  op.name = a;
  op.to = b;
  r.names.erase(a);
  r.names[b] = op.ino;
  r.ops.push_back(std::move(op));
  return rc;
}

template <class Call>
int do_unlink(int dirfd, const char* path, bool rmdir, Call real) {
  if (!recording()) return real();
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  std::string name;
  const Where w = classify(dirfd, path, name);
  const int rc = real();
  if (rc != 0 || w == Where::none || w == Where::parent) return rc;
  KeepErrno keep;
  if (w != Where::in_dir || rmdir || r.names.count(name) == 0) {
    unsupported(std::string("unlink/rmdir ") + path);
    return rc;
  }
  Op op;
  op.kind = OpKind::unlink;
  op.ino = r.names[name];
  op.name = name;
  r.names.erase(name);
  r.ops.push_back(std::move(op));
  return rc;
}

void on_ftruncate(int rc, int fd, std::uint64_t len) {
  if (rc != 0 || !recording()) return;
  KeepErrno keep;
  std::lock_guard<std::mutex> lk(rec().mu);
  const FdInfo* f = tracked(fd);
  if (f == nullptr || f->kind != FdInfo::file) return;
  Op op;
  op.kind = OpKind::truncate;
  op.ino = f->ino;
  op.off = len;
  rec().ops.push_back(std::move(op));
}

void on_close(int fd) {
  if (!recording()) return;
  KeepErrno keep;
  std::lock_guard<std::mutex> lk(rec().mu);
  rec().fds.erase(fd);
}

void on_mkdir(int rc, int dirfd, const char* path) {
  if (rc != 0 || !recording()) return;
  KeepErrno keep;
  std::lock_guard<std::mutex> lk(rec().mu);
  std::string name;
  const Where w = classify(dirfd, path, name);
  if (w == Where::dir) {
    Op op;
    op.kind = OpKind::mkdir;
    rec().ops.push_back(std::move(op));
  } else if (w == Where::in_dir || w == Where::below) {
    unsupported(std::string("mkdir ") + path);
  }
}

// A call the model does not know, on a path in the directory.
void path_unknown(const char* what, int dirfd, const char* path) {
  if (!recording()) return;
  KeepErrno keep;
  std::lock_guard<std::mutex> lk(rec().mu);
  std::string name;
  if (classify(dirfd, path, name) != Where::none) unsupported(std::string(what) + " " + (path ? path : ""));
}

// A call the model does not know, on an fd (-1: any, e.g. sync()).
void fd_unknown(const char* what, int fd) {
  if (!recording()) return;
  KeepErrno keep;
  std::lock_guard<std::mutex> lk(rec().mu);
  if (fd < 0 || tracked(fd) != nullptr) unsupported(what);
}

}  // namespace

void record_start(const std::string& dir, const Image& initial) {
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  r.dir = std::filesystem::path(dir).lexically_normal().string();
  while (r.dir.size() > 1 && r.dir.back() == '/') r.dir.pop_back();
  r.parent = std::filesystem::path(r.dir).parent_path().string();
  r.names.clear();
  r.next_ino = 1;
  for (const auto& [name, data] : initial.files) r.names[name] = r.next_ino++;
  r.fds.clear();
  r.ops.clear();
  r.on.store(true, std::memory_order_release);
}

void record_marker(OpKind kind, std::uint64_t value) {
  Recorder& r = rec();
  std::lock_guard<std::mutex> lk(r.mu);
  Op op;
  op.kind = kind;
  op.off = value;
  r.ops.push_back(std::move(op));
}

std::vector<Op> record_stop() {
  Recorder& r = rec();
  r.on.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> lk(r.mu);
  r.fds.clear();
  return std::move(r.ops);
}

}  // namespace cairn::testing::crashsim::fs

// ---- the interposed libc functions ----
namespace csfs = cairn::testing::crashsim::fs;

extern "C" {

#define CSFS_REAL(name, type) static const auto real = csfs::next<type>(#name)

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = csfs::mode_arg(flags, ap);
  va_end(ap);
  CSFS_REAL(open, int (*)(const char*, int, ...));
  return csfs::do_open(AT_FDCWD, path, flags, [&] { return real(path, flags, mode); });
}
int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = csfs::mode_arg(flags, ap);
  va_end(ap);
  CSFS_REAL(open64, int (*)(const char*, int, ...));
  return csfs::do_open(AT_FDCWD, path, flags, [&] { return real(path, flags, mode); });
}
int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = csfs::mode_arg(flags, ap);
  va_end(ap);
  CSFS_REAL(openat, int (*)(int, const char*, int, ...));
  return csfs::do_open(dirfd, path, flags, [&] { return real(dirfd, path, flags, mode); });
}
int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = csfs::mode_arg(flags, ap);
  va_end(ap);
  CSFS_REAL(openat64, int (*)(int, const char*, int, ...));
  return csfs::do_open(dirfd, path, flags, [&] { return real(dirfd, path, flags, mode); });
}
int creat(const char* path, mode_t mode) {
  CSFS_REAL(creat, int (*)(const char*, mode_t));
  return csfs::do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, [&] { return real(path, mode); });
}
int creat64(const char* path, mode_t mode) {
  CSFS_REAL(creat64, int (*)(const char*, mode_t));
  return csfs::do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, [&] { return real(path, mode); });
}

ssize_t write(int fd, const void* buf, size_t n) {
  CSFS_REAL(write, ssize_t(*)(int, const void*, size_t));
  return csfs::do_write([](int f, const void* b, size_t c, off_t) { return real(f, b, c); }, fd, buf, n, 0, false);
}
ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  CSFS_REAL(pwrite, ssize_t(*)(int, const void*, size_t, off_t));
  return csfs::do_write(real, fd, buf, n, off, true);
}
ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  CSFS_REAL(pwrite64, ssize_t(*)(int, const void*, size_t, off64_t));
  return csfs::do_write(real, fd, buf, n, off, true);
}

int fsync(int fd) {
  CSFS_REAL(fsync, int (*)(int));
  return csfs::do_sync(real, fd);
}
int fdatasync(int fd) {
  CSFS_REAL(fdatasync, int (*)(int));
  return csfs::do_sync(real, fd);
}

int ftruncate(int fd, off_t len) noexcept {
  CSFS_REAL(ftruncate, int (*)(int, off_t));
  const int rc = real(fd, len);
  csfs::on_ftruncate(rc, fd, static_cast<std::uint64_t>(len));
  return rc;
}
int ftruncate64(int fd, off64_t len) noexcept {
  CSFS_REAL(ftruncate64, int (*)(int, off64_t));
  const int rc = real(fd, len);
  csfs::on_ftruncate(rc, fd, static_cast<std::uint64_t>(len));
  return rc;
}

int close(int fd) {
  CSFS_REAL(close, int (*)(int));
  csfs::on_close(fd);
  return real(fd);
}

int rename(const char* from, const char* to) noexcept {
  CSFS_REAL(rename, int (*)(const char*, const char*));
  return csfs::do_rename(AT_FDCWD, from, AT_FDCWD, to, 0, [&] { return real(from, to); });
}
int renameat(int ofd, const char* from, int nfd, const char* to) noexcept {
  CSFS_REAL(renameat, int (*)(int, const char*, int, const char*));
  return csfs::do_rename(ofd, from, nfd, to, 0, [&] { return real(ofd, from, nfd, to); });
}
int renameat2(int ofd, const char* from, int nfd, const char* to, unsigned flags) noexcept {
  CSFS_REAL(renameat2, int (*)(int, const char*, int, const char*, unsigned));
  return csfs::do_rename(ofd, from, nfd, to, flags, [&] { return real(ofd, from, nfd, to, flags); });
}

int unlink(const char* path) noexcept {
  CSFS_REAL(unlink, int (*)(const char*));
  return csfs::do_unlink(AT_FDCWD, path, false, [&] { return real(path); });
}
int unlinkat(int dirfd, const char* path, int flags) noexcept {
  CSFS_REAL(unlinkat, int (*)(int, const char*, int));
  return csfs::do_unlink(dirfd, path, (flags & AT_REMOVEDIR) != 0, [&] { return real(dirfd, path, flags); });
}
int remove(const char* path) noexcept {
  CSFS_REAL(remove, int (*)(const char*));
  return csfs::do_unlink(AT_FDCWD, path, false, [&] { return real(path); });
}
int rmdir(const char* path) noexcept {
  CSFS_REAL(rmdir, int (*)(const char*));
  return csfs::do_unlink(AT_FDCWD, path, true, [&] { return real(path); });
}
int mkdir(const char* path, mode_t mode) noexcept {
  CSFS_REAL(mkdir, int (*)(const char*, mode_t));
  const int rc = real(path, mode);
  csfs::on_mkdir(rc, AT_FDCWD, path);
  return rc;
}
int mkdirat(int dirfd, const char* path, mode_t mode) noexcept {
  CSFS_REAL(mkdirat, int (*)(int, const char*, mode_t));
  const int rc = real(dirfd, path, mode);
  csfs::on_mkdir(rc, dirfd, path);
  return rc;
}

// Calls the model does not know: recorded as unsupported when they touch the directory.
int truncate(const char* path, off_t len) noexcept {
  CSFS_REAL(truncate, int (*)(const char*, off_t));
  csfs::path_unknown("truncate", AT_FDCWD, path);
  return real(path, len);
}
int link(const char* from, const char* to) noexcept {
  CSFS_REAL(link, int (*)(const char*, const char*));
  csfs::path_unknown("link", AT_FDCWD, to);
  return real(from, to);
}
int linkat(int ofd, const char* from, int nfd, const char* to, int flags) noexcept {
  CSFS_REAL(linkat, int (*)(int, const char*, int, const char*, int));
  csfs::path_unknown("linkat", nfd, to);
  return real(ofd, from, nfd, to, flags);
}
int symlink(const char* from, const char* to) noexcept {
  CSFS_REAL(symlink, int (*)(const char*, const char*));
  csfs::path_unknown("symlink", AT_FDCWD, to);
  return real(from, to);
}
int fallocate(int fd, int mode, off_t off, off_t len) {
  CSFS_REAL(fallocate, int (*)(int, int, off_t, off_t));
  csfs::fd_unknown("fallocate", fd);
  return real(fd, mode, off, len);
}
int sync_file_range(int fd, off64_t off, off64_t n, unsigned flags) {
  CSFS_REAL(sync_file_range, int (*)(int, off64_t, off64_t, unsigned));
  csfs::fd_unknown("sync_file_range", fd);
  return real(fd, off, n, flags);
}
int syncfs(int fd) noexcept {
  CSFS_REAL(syncfs, int (*)(int));
  csfs::fd_unknown("syncfs", -1);
  return real(fd);
}
void sync() noexcept {
  CSFS_REAL(sync, void (*)());
  csfs::fd_unknown("sync", -1);
  real();
}
ssize_t writev(int fd, const struct iovec* iov, int n) {
  CSFS_REAL(writev, ssize_t(*)(int, const struct iovec*, int));
  csfs::fd_unknown("writev", fd);
  return real(fd, iov, n);
}
ssize_t pwritev(int fd, const struct iovec* iov, int n, off_t off) {
  CSFS_REAL(pwritev, ssize_t(*)(int, const struct iovec*, int, off_t));
  csfs::fd_unknown("pwritev", fd);
  return real(fd, iov, n, off);
}

}  // extern "C"
