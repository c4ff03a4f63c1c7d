// io.cpp — errno mapping, EINTR-safe positional I/O, the atomic file write
// and /proc/meminfo (see io.hpp).
#include "util/io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace cairn::util {

Errc errc_from_errno(int err) noexcept {
  switch (err) {
    case ENOENT:
    case ENOTDIR: return Errc::not_found;
    case EACCES:
    case EPERM:
    case EROFS: return Errc::permission_denied;
    case EISDIR: return Errc::is_directory;
    case ENOSPC:
    case EFBIG:
    case EDQUOT: return Errc::device_full;
    case EEXIST: return Errc::already_exists;
    case ENOMEM: return Errc::out_of_space;
    default: return Errc::io_error;
  }
}

int errno_from_errc(Errc code) noexcept {
  switch (code) {
    case Errc::not_found: return ENOENT;
    case Errc::permission_denied: return EACCES;
    case Errc::is_directory: return EISDIR;
    case Errc::invalid_argument: return EINVAL;
    case Errc::out_of_space:
    case Errc::device_full: return ENOSPC;
    case Errc::busy: return EBUSY;
    case Errc::no_version: return ENODATA;
    default: return EIO;
  }
}

Error errno_error(const std::string& path, const std::string& what, int err, const std::string& advice) {
  std::string text = std::strerror(err);
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z') text[0] = static_cast<char>(text[0] - 'A' + 'a');
  std::string m = path + ": " + text + " (" + what + ")";
  if (!advice.empty()) m += "; " + advice;
  return make_error(errc_from_errno(err), std::move(m));
}

long long pread_full(int fd, void* buf, std::size_t n, std::uint64_t off) {
  auto* b = static_cast<char*>(buf);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, b + got, n - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -static_cast<long long>(errno);
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return static_cast<long long>(got);
}

int pwrite_full(int fd, const void* buf, std::size_t n, std::uint64_t off, std::size_t chunk, std::uint64_t* calls) {
  auto* b = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, b, std::min(n, chunk), static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    if (calls != nullptr) ++*calls;
    b += w;
    n -= static_cast<std::size_t>(w);
    off += static_cast<std::uint64_t>(w);
  }
  return 0;
}

const char* write_step_name(WriteStep step) noexcept {
  switch (step) {
    case WriteStep::done: return "done";
    case WriteStep::create: return "create";
    case WriteStep::write: return "write";
    case WriteStep::fsync: return "fsync";
    case WriteStep::rename: return "rename";
    case WriteStep::open_dir: return "open_dir";
    case WriteStep::fsync_dir: return "fsync_dir";
  }
  return "?";
}

namespace {

std::string general_advice(Errc code) {
  switch (code) {
    case Errc::not_found: return "the directory must exist";
    case Errc::permission_denied: return "the process needs write access to the directory";
    case Errc::device_full: return "free space on the file system, or write elsewhere";
    default: return "check the file system and its device (the kernel log may say more)";
  }
}

// One atomic write in progress: the temporary's name and how to report a step
// that failed.
class AtomicWriter {
 public:
  AtomicWriter(const std::string& path, const AtomicFileOptions& o, WriteStep* failed_at)
      : path_(path), tmp_(path + ".tmp"), o_(o), failed_at_(failed_at) {
    if (failed_at_ != nullptr) *failed_at_ = WriteStep::done;
  }
  const std::string& tmp() const { return tmp_; }

  // Steps 1 and 2 with a descriptor: create, fill, fsync, close.
  Result<void> write_tmp(const FillFd& fill) {
    const int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, static_cast<mode_t>(o_.mode));
    if (fd < 0) return fail(WriteStep::create, tmp_, "creating " + o_.what + " under a temporary name", errno);
    int err = fill(fd);
    WriteStep step = WriteStep::write;
    if (err == 0 && ::fsync(fd) != 0) {
      err = errno;
      step = WriteStep::fsync;
    }
    if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;  // NFS reports late write errors here
    if (err != 0) return fail(step, tmp_, (step == WriteStep::fsync ? "fsync of " : "writing ") + o_.what, err);
    return {};
  }

  // Step 2 for a temporary written by name.
  Result<void> sync_tmp() {
    const int fd = ::open(tmp_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(WriteStep::fsync, tmp_, "opening " + o_.what + " for its fsync", errno);
    const int err = ::fsync(fd) != 0 ? errno : 0;
    ::close(fd);
    if (err != 0) return fail(WriteStep::fsync, tmp_, "fsync of " + o_.what, err);
    return {};
  }

  // Steps 3 and 4: the rename (the commit point) and the directory's fsync.
  Result<void> commit() {
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      return fail(WriteStep::rename, path_, "renaming " + o_.what + " into place from " + tmp_, errno);
    const std::string parent = std::filesystem::path(path_).parent_path().string();
    const std::string dir =
        parent.empty() ? std::string(".") : parent;  // (assigning "." trips GCC 12's -Wrestrict at -O3)
    int dfd = o_.dir_fd;
    if (dfd < 0) {
      dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd < 0)
        return fail(WriteStep::open_dir, dir, "opening the directory to make " + o_.what + " durable", errno);
    }
    const int err = ::fsync(dfd) != 0 ? errno : 0;
    if (dfd != o_.dir_fd) ::close(dfd);
    if (err != 0) return fail(WriteStep::fsync_dir, dir, "fsync of the directory after renaming " + o_.what, err);
    return {};
  }

  // The error of a failed step; before the rename, the temporary is removed.
  Error fail(WriteStep step, const std::string& file, const std::string& doing, int err) {
    if (failed_at_ != nullptr) *failed_at_ = step;
    const bool in_place = step == WriteStep::open_dir || step == WriteStep::fsync_dir;
    if (!in_place) ::unlink(tmp_.c_str());
    const Errc code = errc_from_errno(err);
    const std::string state =
        in_place ? "the new " + path_ + " is in place but may not survive a power failure" : path_ + " is unchanged";
    return errno_error(file, doing, err, state + "; " + (o_.advice ? o_.advice(code) : general_advice(code)));
  }

 private:
  const std::string& path_;
  std::string tmp_;
  const AtomicFileOptions& o_;
  WriteStep* failed_at_;
};

}  // namespace

Result<void> write_file_atomically(const std::string& path, const FillFd& fill, const AtomicFileOptions& o,
                                   WriteStep* failed_at) {
  AtomicWriter w(path, o, failed_at);
  if (auto r = w.write_tmp(fill); !r.ok()) return r;
  return w.commit();
}

Result<void> write_file_atomically(const std::string& path, std::span<const std::byte> data, const AtomicFileOptions& o,
                                   WriteStep* failed_at) {
  return write_file_atomically(
      path, [&](int fd) { return pwrite_full(fd, data.data(), data.size(), 0); }, o, failed_at);
}

Result<void> write_file_atomically_by_name(const std::string& path, const FillPath& fill, const AtomicFileOptions& o,
                                           WriteStep* failed_at) {
  AtomicWriter w(path, o, failed_at);
  if (auto r = fill(w.tmp()); !r.ok()) {
    if (failed_at != nullptr) *failed_at = WriteStep::write;
    ::unlink(w.tmp().c_str());
    return r;
  }
  if (auto r = w.sync_tmp(); !r.ok()) return r;
  return w.commit();
}

std::uint64_t memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

Result<void> create_directories_durably(const std::string& dir, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> created;
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  for (; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created.push_back(p);
    if (p == p.parent_path()) break;
  }
  ec.clear();
  fs::create_directories(dir, ec);
  if (ec) return errno_error(dir, "create " + what, ec.value());
  for (const auto& d : created) {
    const std::string parent = d.has_parent_path() ? d.parent_path().string() : ".";
    const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int err = fd < 0 ? errno : ::fsync(fd) != 0 ? errno : 0;
    if (fd >= 0) ::close(fd);
    if (err != 0)
      return errno_error(parent, "fsync the parent of " + what + " " + d.string(), err,
                         "whether the new directory survives a power failure is unknown");
  }
  return {};
}

}  // namespace cairn::util
