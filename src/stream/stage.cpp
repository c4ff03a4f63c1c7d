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
#include <mutex>

#include "cairn/stream.hpp"
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

struct OutItem {
  std::unique_ptr<Stream> source;  // a reader: its view is the bytes
  std::string path;
  int fd = -1;
};

// Copies each source's view into its file, 16 MiB chunks over all threads.
Result<StageReport> copy_out(std::vector<OutItem>& items, const StageOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t total = 0;
  std::vector<std::pair<std::size_t, std::uint64_t>> chunks;  // item, offset
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& it = items[i];
    std::error_code ec;
    fs::create_directories(fs::path(it.path).parent_path(), ec);
    it.fd = ::open(it.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (it.fd < 0) {
      const Error e = util::errno_error(it.path, "create", errno);
      for (std::size_t k = 0; k < i; ++k) ::close(items[k].fd);
      return e;
    }
    const std::uint64_t n = it.source->view().size();
    total += n;
    for (std::uint64_t off = 0; off < n; off += kChunk) chunks.emplace_back(i, off);
  }
  std::atomic<std::uint64_t> done{0};
  auto copied = run_jobs(chunks.size(), o, done, total, [&](std::size_t c) -> Result<void> {
    auto& it = items[chunks[c].first];
    const auto v = it.source->view();
    const std::uint64_t off = chunks[c].second;
    const std::uint64_t n = std::min<std::uint64_t>(kChunk, v.size() - off);
    if (int err = util::pwrite_full(it.fd, v.data() + off, n, off); err != 0)
      return util::errno_error(it.path, "write", err);
    done.fetch_add(n);
    return {};
  });
  Error first = copied.ok() ? Error{} : copied.error();
  for (auto& it : items) {
    if (first.code == Errc::ok && ::fsync(it.fd) != 0) first = util::errno_error(it.path, "fsync", errno);
    ::close(it.fd);
    it.fd = -1;
  }
  if (first.code != Errc::ok) return first;
  return report(items.size(), total, t0);
}

}  // namespace

Result<StageReport> stage_out(std::string_view from_in, const std::string& dir, const StageOptions& o) {
  const std::string from(from_in);
  std::vector<OutItem> items;
  auto add = [&](const std::string& uri, const std::string& name) -> Result<void> {
    if (auto r = check_relative(name); !r.ok()) return r;
    auto s = Stream::open(uri, Mode::read);
    if (!s.ok()) return s.error();
    items.push_back(OutItem{std::move(s.value()), (fs::path(dir) / name).string(), -1});
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
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return util::errno_error(dir, "create the directory", ec.value());
  return copy_out(items, o);
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
      auto s = Stream::open("file:" + path, Mode::read);
      if (!s.ok()) return s.error();
      items.push_back(OutItem{std::move(s.value()), (fs::path(to) / name).string(), -1});
    }
    return copy_out(items, o);
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
    auto src = Stream::open("file:" + files[i].first, Mode::read);
    if (!src.ok()) return src.error();
    const auto v = src.value()->view();
    OpenOptions wo;
    wo.size_hint = std::max<std::uint64_t>(v.size(), 1);
    auto dst = Stream::open(single ? to : to + "#" + files[i].second, Mode::write, wo);
    if (!dst.ok()) return dst.error();
    for (std::uint64_t off = 0; off < v.size(); off += kChunk) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, v.size() - off));
      if (std::fwrite(v.data() + off, 1, n, dst.value()->file()) != n) break;  // close() reports why
      done.fetch_add(n);
    }
    return dst.value()->close();
  });
  if (!copied.ok()) return copied.error();
  return report(files.size(), total, t0);
}
}  // namespace cairn::stream
