// cmd_stream.cpp — `cairn stage in|out` (staging between node-local persistent
// memory and a file system, seed 003) and `cairn stream ls|cat|rm`.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "cairn/stream.hpp"
#include "commands.hpp"

namespace cairn::tool {
namespace {

void progress_line(std::uint64_t done, std::uint64_t total) {
  std::fprintf(stderr, "\rstaged %.1f of %.1f MiB (%3.0f %%)", static_cast<double>(done) / (1 << 20),
               static_cast<double>(total) / (1 << 20),
               total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0);
  if (done >= total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

int report(const Result<stream::StageReport>& r) {
  if (!r.ok()) {
    std::cerr << "cairn stage: " << errc_name(r.error().code) << ": " << r.error().message << "\n";
    return 1;
  }
  const auto& s = r.value();
  std::printf("%llu item(s), %.1f MiB in %.3f s (%.2f GB/s)\n", static_cast<unsigned long long>(s.items),
              static_cast<double>(s.bytes) / (1 << 20), s.seconds,
              s.seconds > 0 ? static_cast<double>(s.bytes) / s.seconds / 1e9 : 0.0);
  return 0;
}

}  // namespace

void add_stream_commands(CLI::App& app) {
  auto* stage =
      app.add_subcommand("stage", "Copy streams or pools between persistent memory and a file system directory");
  stage->require_subcommand(1);
  static std::string from, to;
  static unsigned threads = 0;
  static bool quiet = false;
  auto opts = [&](CLI::App* c) {
    c->add_option("-t,--threads", threads, "Copy threads (default: every hardware thread)");
    c->add_flag("-q,--quiet", quiet, "No progress line");
  };
  auto* out = stage->add_subcommand(
      "out", "pmem:POOL (every committed stream), pmem:POOL#NAME, mem: or a file (a whole pool) -> DIR/NAME");
  out->add_option("from", from, "What to stage out")->required();
  out->add_option("dir", to, "Destination directory (created if missing)")->required();
  opts(out);
  static auto options = [] {
    stream::StageOptions o;
    o.threads = threads;
    if (!quiet) o.progress = progress_line;
    return o;
  };
  out->callback([] { exit_code() = report(stream::stage_out(from, to, options())); });
  auto* in = stage->add_subcommand(
      "in", "A directory (every file) or a file -> pmem:POOL (streams named by relative path) or a directory");
  in->add_option("from", from, "Directory or file to stage in")->required();
  in->add_option("to", to, "pmem:POOL, pmem:POOL#NAME or a directory")->required();
  opts(in);
  in->callback([] { exit_code() = report(stream::stage_in(from, to, options())); });

  auto* st = app.add_subcommand("stream", "List, print or remove the streams of a pool");
  st->require_subcommand(1);
  static std::string where;
  auto* ls = st->add_subcommand("ls", "List the streams of a pool (pmem:POOL or the pool file)");
  ls->add_option("pool", where, "The pool")->required();
  ls->callback([] {
    auto l = stream::list(where);
    if (!l.ok()) {
      std::cerr << "cairn stream ls: " << errc_name(l.error().code) << ": " << l.error().message << "\n";
      exit_code() = 1;
      return;
    }
    std::printf("%-40s %10s %14s %14s %8s\n", "name", "version", "bytes", "reserved", "writer");
    for (const auto& i : l.value())
      std::printf("%-40s %10llu %14llu %14llu %8s\n", i.name.c_str(), static_cast<unsigned long long>(i.version),
                  static_cast<unsigned long long>(i.length), static_cast<unsigned long long>(i.capacity),
                  i.writer_pid ? std::to_string(i.writer_pid).c_str() : "-");
  });
  auto* cat = st->add_subcommand("cat", "Write a stream's committed bytes to standard output");
  cat->add_option("uri", where, "pmem:POOL#NAME or file:PATH")->required();
  cat->callback([] {
    auto s = stream::Stream::open(where, stream::Mode::read);
    if (!s.ok()) {
      std::cerr << "cairn stream cat: " << errc_name(s.error().code) << ": " << s.error().message << "\n";
      exit_code() = 1;
      return;
    }
    const auto v = s.value()->view();
    if (std::fwrite(v.data(), 1, v.size(), stdout) != v.size()) exit_code() = 1;
  });
  auto* rm = st->add_subcommand("rm", "Remove a stream");
  rm->add_option("uri", where, "pmem:POOL#NAME")->required();
  rm->callback([] {
    if (auto r = stream::remove(where); !r.ok()) {
      std::cerr << "cairn stream rm: " << errc_name(r.error().code) << ": " << r.error().message << "\n";
      exit_code() = 1;
    }
  });
}

}  // namespace cairn::tool
