// stage.cpp — staging streams and pools between node-local persistent memory
// and a file system directory (seed 003), multi-threaded, with progress.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "cairn/stream.hpp"
#include "stream/testing.hpp"
#include "stream/uri.hpp"
#include "util/io.hpp"
#include "util/thread_pool.hpp"

namespace cairn::stream {

namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kChunk = 16ull << 20;

// A stream name or relative path that stays inside the directory.
Result<void> check_relative(const std::string& name) {
  const fs::path p(name);
  if (p.is_absolute()) return make_error(Errc::invalid_argument, "'" + name + "' is an absolute path");
  for (const auto& part : p)
    if (part == "..") return make_error(Errc::invalid_argument, "'" + name + "' leaves the directory ('..')");
  return {};
}

// Runs job(0) ... job(n - 1) over o.threads threads (util::parallel_for),
// skipping the rest after the first error, and reports `done` of `total`
// bytes about every 0.2 s from whichever thread finishes a job, then once at
// the end.
Result<void> run_jobs(std::size_t n, const StageOptions& o, const std::atomic<std::uint64_t>& done, std::uint64_t total,
                      const std::function<Result<void>(std::size_t)>& job) {
  std::mutex mu;
  Error first;
  std::atomic<bool> failed{false};
  auto reported = std::chrono::steady_clock::now();
  util::parallel_for(n, o.threads, [&](std::size_t i) {
    if (failed.load()) return;
    auto r = job(i);
    std::lock_guard<std::mutex> g(mu);
    if (!r.ok()) {
      if (!failed.exchange(true)) first = r.error();
    } else if (o.progress && std::chrono::steady_clock::now() - reported >= std::chrono::milliseconds(200)) {
      reported = std::chrono::steady_clock::now();
      o.progress(done.load(), total);
    }
  });
  if (o.progress) o.progress(done.load(), total);
  if (failed.load()) return first;
  return {};
}

StageReport report(std::size_t items, std::uint64_t bytes, std::chrono::steady_clock::time_point t0) {
  StageReport r;
  r.items = items;
  r.bytes = bytes;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::function<void(const std::string&, std::uint64_t)>& read_hook() {
  static std::function<void(const std::string&, std::uint64_t)> hook;
  return hook;
}

// A file staged from: read with pread (a mapping would fault with SIGBUS if
// the file shrank meanwhile), and held to the size and times it had when it
// was opened: a copy of a file that changed while it was read is refused.
struct SourceFile {
  std::string path;
  int fd = -1;
  struct stat st {};

  static Result<SourceFile> open(const std::string& path) {
    SourceFile f;
    f.path = path;
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) return util::errno_error(path, "open for staging", errno);
    if (::fstat(f.fd, &f.st) != 0 || !S_ISREG(f.st.st_mode)) {
      const int err = S_ISDIR(f.st.st_mode) ? EISDIR : errno != 0 ? errno : EINVAL;
      ::close(f.fd);
      return util::errno_error(path, "stage (not a regular file)", err);
    }
    return f;
  }
  SourceFile() = default;
  SourceFile(SourceFile&& o) noexcept : path(std::move(o.path)), fd(std::exchange(o.fd, -1)), st(o.st) {}
  SourceFile& operator=(SourceFile&&) = delete;
  ~SourceFile() {
    if (fd >= 0) ::close(fd);
  }
  std::uint64_t size() const { return static_cast<std::uint64_t>(st.st_size); }

  // n bytes at off into buf; an error if fewer are there.
  Result<void> read(std::byte* buf, std::size_t n, std::uint64_t off) const {
    if (read_hook()) read_hook()(path, off);
    const long long got = util::pread_full(fd, buf, n, off);
    if (got < 0) return util::errno_error(path, "read", static_cast<int>(-got));
    if (static_cast<std::uint64_t>(got) < n)
      return make_error(Errc::truncated, path + ": the file shrank while it was staged (" + std::to_string(size()) +
                                             " bytes when opened, " + std::to_string(off + got) +
                                             " found); nothing was staged from it: stage it again once it is "
                                             "complete");
    return {};
  }
  // After the last read: the file is as it was when opened (no bytes past
  // its size, same size and modification time).
  Result<void> unchanged() const {
    std::byte extra;
    if (read_hook()) read_hook()(path, size());
    const long long more = util::pread_full(fd, &extra, 1, size());
    struct stat now {};
    if (::fstat(fd, &now) != 0) return util::errno_error(path, "check after staging", errno);
    if (more != 0 || now.st_size != st.st_size || now.st_mtim.tv_sec != st.st_mtim.tv_sec ||
        now.st_mtim.tv_nsec != st.st_mtim.tv_nsec)
      return make_error(Errc::busy, path +
                                        ": the file changed while it was staged (another process writes it, or "
                                        "its size does not tell its contents); nothing was staged from it: stage "
                                        "it again once it is complete");
    return {};
  }
};

// One file written by a stage: bytes from a committed stream's view or from
// a source file, to `path` through the temporary `tmp`, renamed into place
// only once every file of the stage is written and fsynced.
struct OutItem {
  std::unique_ptr<Stream> stream;  // a reader: its view is the bytes; or
  std::optional<SourceFile> file;  // a file, read with pread
  std::string path, tmp;
  int fd = -1;
  bool placed = false;
  std::uint64_t size() const { return stream ? stream->view().size() : file->size(); }
};

// Removes the temporaries not renamed yet (a failed stage leaves every
// destination as it was).
void discard(std::vector<OutItem>& items) {
  for (auto& it : items) {
    if (it.fd >= 0) ::close(it.fd);
    it.fd = -1;
    if (!it.placed && !it.tmp.empty()) ::unlink(it.tmp.c_str());
  }
}

// fsyncs directory `d` (a rename or a new entry in it becomes durable).
Result<void> sync_directory(const std::string& d) {
  const std::string advice =
      "the staged files are in place, but whether their names survive a power failure is "
      "unknown: stage again";
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return util::errno_error(d, "open the directory to fsync it", errno, advice);
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return util::errno_error(d, "fsync the directory", err, advice);
  }
  ::close(fd);
  return {};
}

// Writes each item to its temporary, 16 MiB chunks over all threads; fsyncs
// every temporary, renames each into place, then fsyncs every directory that
// gained a name (up to `root`). Durability order: a file's bytes before its
// name, every name before the stage returns. A failure before the renames
// leaves every destination as it was.
Result<StageReport> copy_out(std::vector<OutItem>& items, const std::string& root, const StageOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t total = 0;
  std::vector<std::pair<std::size_t, std::uint64_t>> chunks;  // item, offset
  std::set<std::string> dirs;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& it = items[i];
    const fs::path parent = fs::path(it.path).parent_path();
    std::error_code ec;
    fs::create_directories(parent, ec);
    for (fs::path d = parent; !d.empty(); d = d.parent_path()) {
      dirs.insert(d.string());
      if (fs::equivalent(d, root, ec) || d == d.parent_path()) break;
    }
    it.tmp = it.path + ".tmp";
    it.fd = ::open(it.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (it.fd < 0) {
      const Error e = util::errno_error(it.tmp, "create the temporary for " + it.path, errno);
      it.tmp.clear();
      discard(items);
      return e;
    }
    const std::uint64_t n = it.size();
    total += n;
    for (std::uint64_t off = 0; off < n; off += kChunk) chunks.emplace_back(i, off);
  }
  std::atomic<std::uint64_t> done{0};
  auto copied = run_jobs(chunks.size(), o, done, total, [&](std::size_t c) -> Result<void> {
    auto& it = items[chunks[c].first];
    const std::uint64_t off = chunks[c].second;
    const std::uint64_t n = std::min<std::uint64_t>(kChunk, it.size() - off);
    const std::byte* bytes;
    std::unique_ptr<std::byte[]> buf;
    if (it.stream) {
      bytes = it.stream->view().data() + off;
    } else {
      buf.reset(new std::byte[n]);
      if (auto r = it.file->read(buf.get(), n, off); !r.ok()) return r;
      bytes = buf.get();
    }
    if (int err = util::pwrite_full(it.fd, bytes, n, off); err != 0) return util::errno_error(it.tmp, "write", err);
    done.fetch_add(n);
    return {};
  });
  if (!copied.ok()) {
    discard(items);
    return copied.error();
  }
  for (auto& it : items) {
    if (it.file)
      if (auto r = it.file->unchanged(); !r.ok()) {
        discard(items);
        return r.error();
      }
    const int fd = std::exchange(it.fd, -1);
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
      const Error e = util::errno_error(it.tmp, "fsync the staged copy of " + it.path, errno,
                                        "nothing was replaced; free space or fix the device and stage again");
      discard(items);
      return e;
    }
  }
  for (auto& it : items) {
    if (::rename(it.tmp.c_str(), it.path.c_str()) != 0) {
      const Error e = util::errno_error(it.path, "rename the staged copy into place", errno);
      discard(items);
      return e;
    }
    it.placed = true;
  }
  for (const auto& d : dirs)
    if (auto r = sync_directory(d); !r.ok()) return r.error();
  return report(items.size(), total, t0);
}

}  // namespace

Result<StageReport> stage_out(std::string_view from_in, const std::string& dir, const StageOptions& o) {
  const std::string from(from_in);
  std::vector<OutItem> items;
  auto add = [&](const std::string& uri, const std::string& name) -> Result<void> {
    if (auto r = check_relative(name); !r.ok()) return r;
    OutItem it;
    it.path = (fs::path(dir) / name).string();
    if (uri.starts_with("file:")) {
      auto f = SourceFile::open(uri.substr(5));
      if (!f.ok()) return f.error();
      it.file.emplace(std::move(f.value()));
    } else {
      auto s = Stream::open(uri, Mode::read);
      if (!s.ok()) return s.error();
      it.stream = std::move(s.value());
    }
    items.push_back(std::move(it));
    return {};
  };
  if (!detail::has_scheme(from)) {
    if (auto r = add("file:" + from, fs::path(from).filename().string()); !r.ok()) return r.error();
  } else if (from == "mem:") {
    auto l = list("mem:");
    if (!l.ok()) return l.error();
    for (const auto& i : l.value())
      if (auto r = add("mem:" + i.name, i.name); !r.ok()) return r.error();
  } else if (from.rfind("pmem:", 0) == 0 && from.find('#') != std::string::npos) {
    if (auto r = add(from, from.substr(from.rfind('#') + 1)); !r.ok()) return r.error();
  } else if (from.rfind("pmem:", 0) == 0) {
    auto l = list(from);
    if (!l.ok()) return l.error();
    for (const auto& i : l.value()) {
      if (i.version == 0) continue;  // never committed: nothing to stage
      if (auto r = add(from + "#" + i.name, i.name); !r.ok()) return r.error();
    }
  } else {
    return make_error(Errc::invalid_argument,
                      "stage out takes pmem:POOL, pmem:POOL#NAME, mem: or a file, not '" + from + "'");
  }
  // A directory created here is made durable before anything is staged into
  // it (an fsync of its parent): else a power failure after the stage
  // returned could take it away with every staged file (found by the crash
  // explorer, tests/crashsim: stage_out).
  if (auto r = util::create_directories_durably(dir, "the stage directory"); !r.ok()) return r.error();
  return copy_out(items, dir, o);
}

Result<StageReport> stage_in(const std::string& from, std::string_view to_in, const StageOptions& o) {
  const std::string to(to_in);
  std::error_code ec;
  std::vector<std::pair<std::string, std::string>> files;  // source path, name relative to `from`
  if (fs::is_directory(from, ec)) {
    for (auto it = fs::recursive_directory_iterator(from, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_regular_file()) files.emplace_back(it->path().string(), fs::relative(it->path(), from).string());
    if (ec) return util::errno_error(from, "list", ec.value());
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(from, ec)) {
    files.emplace_back(from, fs::path(from).filename().string());
  } else {
    return util::errno_error(from, "stage in", ENOENT, "give a directory or a file");
  }
  if (!detail::has_scheme(to)) {
    // Files to a directory: the chunked copy of stage out.
    std::vector<OutItem> items;
    for (const auto& [path, name] : files) {
      auto f = SourceFile::open(path);
      if (!f.ok()) return f.error();
      OutItem it;
      it.file.emplace(std::move(f.value()));
      it.path = (fs::path(to) / name).string();
      items.push_back(std::move(it));
    }
    if (auto r = util::create_directories_durably(to, "the stage directory"); !r.ok()) return r.error();
    return copy_out(items, to, o);
  }
  if (to.rfind("pmem:", 0) != 0)
    return make_error(Errc::invalid_argument, "stage in writes to pmem:POOL or a directory, not '" + to + "'");
  const bool single = to.find('#') != std::string::npos;
  if (single && files.size() != 1)
    return make_error(Errc::invalid_argument, "pmem:POOL#NAME takes one file; give pmem:POOL for a directory");
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t total = 0;
  for (const auto& f : files) total += fs::file_size(f.first, ec);
  std::atomic<std::uint64_t> done{0};
  auto copied = run_jobs(files.size(), o, done, total, [&](std::size_t i) -> Result<void> {
    auto src = SourceFile::open(files[i].first);
    if (!src.ok()) return src.error();
    const std::uint64_t size = src.value().size();
    OpenOptions wo;
    wo.size_hint = std::max<std::uint64_t>(size, 1);
    auto dst = Stream::open(single ? to : to + "#" + files[i].second, Mode::write, wo);
    if (!dst.ok()) return dst.error();
    // The stream commits only a whole, unchanged copy of the file.
    std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, size)));
    for (std::uint64_t off = 0; off < size; off += kChunk) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, size - off));
      if (auto r = src.value().read(buf.data(), n, off); !r.ok()) {
        (void)dst.value()->abandon();
        return r;
      }
      if (std::fwrite(buf.data(), 1, n, dst.value()->file()) != n) break;  // close() reports why
      done.fetch_add(n);
    }
    if (auto r = src.value().unchanged(); !r.ok()) {
      (void)dst.value()->abandon();
      return r;
    }
    return dst.value()->close();
  });
  if (!copied.ok()) return copied.error();
  return report(files.size(), total, t0);
}
void detail::set_stage_read_hook(std::function<void(const std::string& path, std::uint64_t offset)> hook) {
  read_hook() = std::move(hook);
}

}  // namespace cairn::stream
