// streams_bench.cpp — `cairn bench streams`: transfer time and bandwidth of
// file:, mem: and pmem: streams at several sizes and process counts, and the
// preallocation curve (seed 002, Figs. 3-5). Method: streams_bench.hpp.
#include "bench/streams_bench.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "bench/bench_util.hpp"
#include "cairn/stream.hpp"

namespace cairn::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string uri_for(const std::string& mode, const std::string& scratch_disk, const std::string& scratch_tmpfs,
                    unsigned rank) {
  const std::string name = "rank-" + std::to_string(rank) + ".dat";
  if (mode == "file-disk-fsync" || mode == "file-disk") return "file:" + scratch_disk + "/" + name;
  if (mode == "file-tmpfs") return "file:" + scratch_tmpfs + "/" + name;
  if (mode == "mem") return "mem:" + name;
  return "pmem:" + scratch_tmpfs + "/streams.pool#" + name;
}

// One process's timed phases: memcpy, write, read. Returns the three times
// or an error message.
// Transfers per process: the first (cold) and kRounds - 1 in steady state
// (a pmem: writer alternates between two extents, a mem: writer gets the
// buffer of the version before last back: both need two rounds to warm up).
constexpr int kRounds = 4;

struct Times {
  double memcpy_s = 0, cold_write_s = 0, cold_read_s = 0, write_s[kRounds - 1] = {}, read_s[kRounds - 1] = {};
  char error[200] = {};
};

// Phases are separated by a barrier: the process reports "done" on done_fd
// and waits for the parent's next "go" on go_fd.
Times transfer(const std::string& mode, const std::string& uri, std::uint64_t size, std::vector<char>& src,
               std::vector<char>& dst, int go_fd, int done_fd) {
  Times t;
  char go;
  bool first = true;
  auto wait_go = [&] {
    if (!first) (void)!::write(done_fd, "d", 1);
    first = false;
    return ::read(go_fd, &go, 1) == 1;
  };
  auto fail = [&](const std::string& what) {
    std::snprintf(t.error, sizeof t.error, "%s", what.c_str());
    return t;
  };
  if (!wait_go()) return fail("no start signal");
  auto t0 = Clock::now();
  std::memcpy(dst.data(), src.data(), size);
  t.memcpy_s = seconds_since(t0);
  stream::OpenOptions o;
  o.sync = mode == "file-disk-fsync";
  // A cold transfer (the first of this process: fresh buffers, an unmapped
  // pool), then the steady state a component sees every cycle.
  for (int round = 0; round < kRounds; ++round) {
    if (!wait_go()) return fail("no start signal");
    t0 = Clock::now();
    {
      auto s = stream::Stream::open(uri, stream::Mode::write, o);
      if (!s.ok()) return fail(s.error().message);
      for (std::uint64_t off = 0; off < size; off += 1u << 20) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(1u << 20, size - off));
        if (std::fwrite(src.data() + off, 1, n, s.value()->file()) != n) return fail("fwrite failed");
      }
      if (auto r = s.value()->close(); !r.ok()) return fail(r.error().message);
    }
    (round == 0 ? t.cold_write_s : t.write_s[round - 1]) = seconds_since(t0);
    if (!wait_go()) return fail("no start signal");
    std::memset(dst.data(), 0, size);
    t0 = Clock::now();
    {
      auto s = stream::Stream::open(uri, stream::Mode::read);
      if (!s.ok()) return fail(s.error().message);
      if (std::fread(dst.data(), 1, size, s.value()->file()) != size) return fail("short read");
      if (auto r = s.value()->close(); !r.ok()) return fail(r.error().message);
    }
    (round == 0 ? t.cold_read_s : t.read_s[round - 1]) = seconds_since(t0);
  }
  if (std::memcmp(dst.data(), src.data(), size) != 0) return fail("the bytes read differ from the bytes written");
  return t;
}

// Runs P forked processes through the three phases, started together.
Result<std::vector<Times>> run_processes(const std::string& mode, std::uint64_t size, unsigned procs,
                                         const std::string& disk, const std::string& tmpfs) {
  std::vector<pid_t> pids;
  std::vector<int> go(procs), res(procs);
  for (unsigned p = 0; p < procs; ++p) {
    int g[2], r[2];
    if (::pipe(g) != 0 || ::pipe(r) != 0) return make_error(Errc::io_error, "pipe failed");
    const pid_t pid = ::fork();
    if (pid < 0) return make_error(Errc::io_error, "fork failed");
    if (pid == 0) {
      ::close(g[1]);
      ::close(r[0]);
      std::vector<char> src(size), dst(size);
      for (std::uint64_t i = 0; i < size; ++i) src[i] = static_cast<char>((i * 131 + p) & 0xff);
      std::memset(dst.data(), 1, size);
      const Times t = transfer(mode, uri_for(mode, disk, tmpfs, p), size, src, dst, g[0], r[1]);
      (void)!::write(r[1], t.error[0] != '\0' ? "f" : "d", 1);
      (void)!::write(r[1], &t, sizeof t);
      ::_exit(0);
    }
    ::close(g[0]);
    ::close(r[1]);
    pids.push_back(pid);
    go[p] = g[1];
    res[p] = r[0];
  }
  // 1 + 2 kRounds phases (memcpy, then a write and a read per round), each started in every process at
  // once after every process finished the previous one. A process that
  // failed skips to the end and reports "done" for every phase at once.
  std::vector<bool> ended(procs, false);
  for (int phase = 0; phase < 1 + 2 * kRounds; ++phase) {
    for (unsigned p = 0; p < procs; ++p)
      if (!ended[p]) (void)!::write(go[p], "g", 1);
    for (unsigned p = 0; p < procs; ++p) {
      char d;
      if (!ended[p] && (::read(res[p], &d, 1) != 1 || d == 'f')) ended[p] = true;
    }
  }
  std::vector<Times> out(procs);
  Error err;
  for (unsigned p = 0; p < procs; ++p) {
    if (::read(res[p], &out[p], sizeof(Times)) != static_cast<ssize_t>(sizeof(Times)))
      std::snprintf(out[p].error, sizeof out[p].error, "process %u died", p);
    ::close(go[p]);
    ::close(res[p]);
    int status = 0;
    ::waitpid(pids[p], &status, 0);
    if (out[p].error[0] != '\0' && err.code == Errc::ok) err = make_error(Errc::io_error, out[p].error);
  }
  if (err.code != Errc::ok) return err;
  return out;
}

double prealloc_once(const std::string& mode, std::uint64_t size, const std::vector<char>& src,
                     const std::string& pool) {
  const bool pre = mode.find("prealloc") != std::string::npos || mode == "fmemopen";
  constexpr std::size_t kChunk = 64 << 10;
  auto t0 = Clock::now();
  if (mode == "open_memstream" || mode == "fmemopen") {
    char* buf = nullptr;
    std::size_t len = 0;
    FILE* f = nullptr;
    if (mode == "open_memstream") {
      f = ::open_memstream(&buf, &len);
    } else {
      buf = static_cast<char*>(std::malloc(size));
      f = buf != nullptr ? ::fmemopen(buf, size, "w") : nullptr;
    }
    if (f == nullptr) {
      std::free(buf);
      return -1;
    }
    for (std::uint64_t off = 0; off < size; off += kChunk)
      std::fwrite(src.data() + off, 1, static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, size - off)), f);
    std::fclose(f);
    const double s = seconds_since(t0);
    std::free(buf);
    return s;
  }
  stream::OpenOptions o;
  if (pre) o.size_hint = size;
  const std::string uri = mode.rfind("pmem", 0) == 0 ? "pmem:" + pool + "#curve" : "mem:curve";
  // A new stream each time: an existing one would reserve its last length.
  (void)stream::remove(uri);
  t0 = Clock::now();
  auto s = stream::Stream::open(uri, stream::Mode::write, o);
  if (!s.ok()) return -1;
  for (std::uint64_t off = 0; off < size; off += kChunk)
    std::fwrite(src.data() + off, 1, static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, size - off)),
                s.value()->file());
  if (!s.value()->close().ok()) return -1;
  return seconds_since(t0);
}

std::string human(std::uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + " GiB";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= 1024) return fmt("%.0f KiB", static_cast<double>(b) / 1024);
  return std::to_string(b) + " B";
}

}  // namespace

Result<StreamsReport> run_streams_bench(const StreamsBenchOptions& o, std::ostream* progress) {
  StreamsReport rep;
  rep.repeats = o.repeats;
  rep.machine = cpu_model() + ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads; " +
                utc_now() + "; load " + fmt("%.2f", load_average());
  const std::string tag = "cairn-bench-streams-" + std::to_string(::getpid());
  const std::string disk = o.disk_dir + "/" + tag, tmpfs = o.tmpfs_dir + "/" + tag;
  for (const auto& d : {disk, tmpfs})
    if (auto r = create_bench_dir(d); !r.ok()) return r.error();
  for (const auto size : o.sizes)
    for (const auto procs : o.processes)
      for (const auto& mode : o.modes) {
        if (mode == "pmem") {
          // A fresh pool sized for every process's two versions, created
          // before the clock starts (creating allocates its space).
          fs::remove(tmpfs + "/streams.pool");
          stream::OpenOptions po;
          po.pool_size = std::max<std::uint64_t>(64ull << 20, 3 * size * procs + (64ull << 20));
          auto s = stream::Stream::open("pmem:" + tmpfs + "/streams.pool#init", stream::Mode::write, po);
          if (!s.ok()) return s.error();
          if (auto c = s.value()->close(); !c.ok()) return c.error();
        }
        TransferRow row{mode, size, procs};
        std::vector<double> w, r, m, cw, cr;
        for (int k = 0; k < o.repeats && row.ok; ++k) {
          auto t = run_processes(mode, size, procs, disk, tmpfs);
          if (!t.ok()) {
            row.ok = false;
            row.error = t.error().message;
            rep.failed = true;
            break;
          }
          for (const auto& x : t.value()) {
            w.insert(w.end(), x.write_s, x.write_s + kRounds - 1);
            r.insert(r.end(), x.read_s, x.read_s + kRounds - 1);
            m.push_back(x.memcpy_s);
            cw.push_back(x.cold_write_s);
            cr.push_back(x.cold_read_s);
          }
        }
        row.write_s = median(w);
        row.read_s = median(r);
        row.write_samples_s = w;
        row.read_samples_s = r;
        row.cold_write_s = median(cw);
        row.cold_read_s = median(cr);
        const double mc = median(m);
        row.write_gbps = row.write_s > 0 ? static_cast<double>(size) / row.write_s / 1e9 : 0;
        row.read_gbps = row.read_s > 0 ? static_cast<double>(size) / row.read_s / 1e9 : 0;
        row.memcpy_gbps = mc > 0 ? static_cast<double>(size) / mc / 1e9 : 0;
        if (progress)
          *progress << "[streams] " << mode << " " << human(size) << " x" << procs << ": write "
                    << fmt("%.3f", row.write_s * 1e3) << " ms, read " << fmt("%.3f", row.read_s * 1e3) << " ms"
                    << (row.ok ? "" : " FAILED: " + row.error) << std::endl;
        rep.transfers.push_back(row);
      }
  // Fig. 5: preallocation, one process.
  std::vector<std::uint64_t> psizes = o.prealloc_sizes;
  if (psizes.empty())
    for (double b = 64 * 1024; b <= 16.0 * 1024 * 1024 + 1; b *= std::pow(2.0, 0.25))
      psizes.push_back(static_cast<std::uint64_t>(b) / 4096 * 4096);
  const std::string pool = tmpfs + "/curve.pool";
  {
    stream::OpenOptions po;
    po.pool_size = 256ull << 20;
    auto s = stream::Stream::open("pmem:" + pool + "#init", stream::Mode::write, po);
    if (!s.ok()) return s.error();
    if (auto c = s.value()->close(); !c.ok()) return c.error();
  }
  std::vector<char> src(psizes.empty() ? 0 : psizes.back(), 7);
  for (const char* mode : {"open_memstream", "fmemopen", "mem", "mem-prealloc", "pmem", "pmem-prealloc"})
    for (const auto size : psizes) {
      std::vector<double> t;
      for (int k = 0; k < std::max(o.repeats, 5); ++k) t.push_back(prealloc_once(mode, size, src, pool));
      // A failed write (-1) fails the report instead of entering a median.
      const bool ok = std::none_of(t.begin(), t.end(), [](double x) { return x < 0; });
      rep.failed = rep.failed || !ok;
      const double med = ok ? median(t) : 0;
      rep.prealloc.push_back(PreallocRow{mode, size, med > 0 ? static_cast<double>(size) / med / 1e9 : 0});
    }
  std::error_code ec;
  fs::remove_all(disk, ec);
  fs::remove_all(tmpfs, ec);
  return rep;
}

void print_streams_report(const StreamsReport& rep, std::ostream& out) {
  out << "Machine: " << rep.machine << "\n";
  out << "Medians over " << rep.repeats
      << " repetitions of the per-process times; every process writes then reads its own stream (open + fwrite "
         "in 1 MiB calls + close; open + fread + close), started together, twice: the first transfer of a "
         "process (fresh buffers, pool not yet mapped) and then the steady state of a component that transfers "
         "every cycle (write, read and the ratios); memcpy: the same bytes between two DRAM buffers already "
         "touched, in the same processes.\n\n";
  std::map<std::pair<std::uint64_t, unsigned>, std::map<std::string, const TransferRow*>> by;
  for (const auto& r : rep.transfers) by[{r.size, r.processes}][r.mode] = &r;
  out << "| size | procs | mode | first write ms | first read ms | write ms | read ms | write GB/s | read GB/s | "
         "transfer vs file-disk-fsync | vs file-tmpfs | write+read vs memcpy |\n"
         "|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const auto& [key, modes] : by)
    for (const auto& [mode, r] : modes) {
      const auto ratio = [&](const char* base) -> std::string {
        auto it = modes.find(base);
        if (it == modes.end() || !r->ok || r->write_s + r->read_s <= 0) return "-";
        return fmt("%.1fx", (it->second->write_s + it->second->read_s) / (r->write_s + r->read_s));
      };
      const double bw =
          r->write_s + r->read_s > 0 ? 2.0 * static_cast<double>(r->size) / (r->write_s + r->read_s) / 1e9 : 0;
      out << "| " << human(key.first) << " | " << key.second << " | " << mode << " | "
          << fmt("%.3f", r->cold_write_s * 1e3) << " | " << fmt("%.3f", r->cold_read_s * 1e3) << " | "
          << (r->ok ? fmt("%.3f", r->write_s * 1e3) : "FAILED") << " | " << fmt("%.3f", r->read_s * 1e3) << " | "
          << fmt("%.2f", r->write_gbps) << " | " << fmt("%.2f", r->read_gbps) << " | " << ratio("file-disk-fsync")
          << " | " << ratio("file-tmpfs") << " | "
          << (r->memcpy_gbps > 0 ? fmt("%.0f %%", 100.0 * bw / r->memcpy_gbps) : "-") << " |\n";
    }
  // Goals (issue 14), at the largest size measured with one process.
  std::uint64_t big = 0;
  for (const auto& r : rep.transfers) big = std::max(big, r.size);
  out << "\nGoals at " << human(big) << ", 1 process (transfer = write + read):\n";
  const auto& modes = by[{big, 1}];
  for (const char* m : {"mem", "pmem"}) {
    auto it = modes.find(m);
    if (it == modes.end()) continue;
    const auto* r = it->second;
    const double t = r->write_s + r->read_s;
    auto cmp = [&](const char* base, double goal) {
      auto b = modes.find(base);
      if (b == modes.end() || t <= 0) return;
      const double x = (b->second->write_s + b->second->read_s) / t;
      out << "- " << m << " vs " << base << ": " << fmt("%.1fx", x) << " faster (goal >= " << fmt("%.0fx", goal)
          << "): " << (x >= goal ? "met" : "NOT met") << "\n";
    };
    cmp("file-disk-fsync", 10);
    cmp("file-tmpfs", 2);
    const double bw = 2.0 * static_cast<double>(r->size) / t / 1e9;
    if (r->memcpy_gbps > 0)
      out << "- " << m << " write+read bandwidth " << fmt("%.2f", bw)
          << " GB/s = " << fmt("%.0f %%", 100 * bw / r->memcpy_gbps) << " of memcpy's " << fmt("%.2f", r->memcpy_gbps)
          << " GB/s (goal >= 50 %): " << (bw >= 0.5 * r->memcpy_gbps ? "met" : "NOT met") << "\n";
  }
  out << "\nPreallocation (seed 002 Fig. 5): effective write bandwidth, GB/s = bytes / time(open + write in 64 KiB "
         "calls + close), one process\n\n| size |";
  std::vector<std::string> pmodes;
  std::map<std::uint64_t, std::map<std::string, double>> curve;
  for (const auto& p : rep.prealloc) {
    if (std::find(pmodes.begin(), pmodes.end(), p.mode) == pmodes.end()) pmodes.push_back(p.mode);
    curve[p.size][p.mode] = p.gbps;
  }
  for (const auto& m : pmodes) out << " " << m << " |";
  out << "\n|--:|";
  for (std::size_t i = 0; i < pmodes.size(); ++i) out << "--:|";
  out << "\n";
  for (const auto& [size, row] : curve) {
    out << "| " << human(size) << " |";
    for (const auto& m : pmodes) out << " " << fmt("%.2f", row.count(m) ? row.at(m) : 0.0) << " |";
    out << "\n";
  }
}

Result<void> write_streams_json(const StreamsReport& rep, const std::string& path) {
  Json transfers = Json::array();
  for (const auto& r : rep.transfers)
    transfers.push_back({{"mode", r.mode},
                         {"size", r.size},
                         {"processes", r.processes},
                         {"write_s", r.write_s},
                         {"read_s", r.read_s},
                         {"first_write_s", r.cold_write_s},
                         {"first_read_s", r.cold_read_s},
                         {"write_gbps", r.write_gbps},
                         {"read_gbps", r.read_gbps},
                         {"memcpy_gbps", r.memcpy_gbps},
                         {"ok", r.ok},
                         {"write_samples_s", r.write_samples_s},
                         {"read_samples_s", r.read_samples_s}});
  Json prealloc = Json::array();
  for (const auto& p : rep.prealloc) prealloc.push_back({{"mode", p.mode}, {"size", p.size}, {"gbps", p.gbps}});
  const Json doc = {
      {"machine", rep.machine}, {"repeats", rep.repeats}, {"transfers", transfers}, {"prealloc", prealloc}};
  return write_json_file(doc, path);
}

}  // namespace cairn::bench
