// components.cpp — the workflow's five components and their stream format.
#include "apps/workflow/components.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numbers>

#include "apps/workflow/mesh.hpp"
#include "cairn/cairn.h"

namespace cairn::apps::workflow {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr char kMagic[] = "cairn-workflow/1";

std::string size_stream(int part) { return "size." + std::to_string(part); }

// A stream a component will write: name, header fields and records.
struct Output {
  std::string name;
  std::string kind;
  int cycle = 0;  // the cycle whose step reads it
  int part = 0;
  std::vector<Record> records;
};

// The header line, padded with spaces to a multiple of 8 bytes: the records
// after it are then 8-byte aligned wherever the stream's bytes start on such
// a boundary (a pool extent, a buffer, a mapped file), so that a reader can
// use them in place (Input).
std::string header(const Output& o, const Params& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %s cycle=%d part=%d parts=%d count=%zu", kMagic, o.kind.c_str(), o.cycle, o.part,
                p.parts, o.records.size());
  std::string h = buf;
  h.append((8 - (h.size() + 1) % 8) % 8, ' ');
  return h + "\n";
}

// Announces the kill point by creating `path`, then waits for the SIGKILL
// from outside (SIGALRM ends a wait nobody ends, after 10 minutes).
void wait_to_be_killed(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
  ::alarm(600);
  for (;;) ::pause();
}

// Writes every output; with fault injection, dies part-way (flushed first, so
// the uncommitted bytes are really in the stream's buffer or file).
Result<void> write_outputs(const std::vector<Output>& outputs, const Params& p, Times& t) {
  const auto t0 = Clock::now();
  std::uint64_t total = 0;
  for (const Output& o : outputs) total += header(o, p).size() + o.records.size() * sizeof(Record);
  const auto kill_at = p.kill_fraction < 0 ? UINT64_MAX : static_cast<std::uint64_t>(p.kill_fraction * total);
  std::uint64_t written = 0;
  for (const Output& o : outputs) {
    // was: fopen(name, "w"). The size is known before the first byte: a
    // pmem: or mem: writer reserves exactly that, never growing (each growth
    // copies what was written into a new extent; the mesh grows every cycle).
    const std::string h = header(o, p);
    std::FILE* f = cairn_stream_open(o.name.c_str(), "w", h.size() + o.records.size() * sizeof(Record));
    if (f == nullptr) return make_error(Errc::io_error, std::string("cannot write ") + cairn_errormsg());
    bool ok = std::fputs(h.c_str(), f) >= 0;
    written += h.size();
    constexpr std::size_t kChunk = 4096;
    for (std::size_t i = 0; ok && i < o.records.size(); i += kChunk) {
      const std::size_t n = std::min(kChunk, o.records.size() - i);
      ok = std::fwrite(o.records.data() + i, sizeof(Record), n, f) == n;
      written += n * sizeof(Record);
      if (written >= kill_at) {
        std::fflush(f);
        if (!p.kill_wait.empty()) wait_to_be_killed(p.kill_wait);
        std::raise(SIGKILL);
      }
    }
    if (std::fclose(f) != 0 || !ok)  // fclose commits (pmem:) or closes the file
      return make_error(Errc::io_error, "writing " + o.name + " failed, nothing committed: " + cairn_stream_errormsg());
  }
  t.bytes_out += total;
  t.write_s += since(t0);
  return {};
}

std::vector<std::uint64_t> keys_of(std::span<const Record> r) {
  std::vector<std::uint64_t> k(r.size());
  for (std::size_t i = 0; i < r.size(); ++i) k[i] = r[i].key;
  return k;
}

Result<Input> read_timed(const std::string& name, std::string_view kind, const Params& p, int part, Times& t) {
  const auto t0 = Clock::now();
  std::uint64_t bytes = 0;
  auto r = open_records(name, kind, p.cycle, part, p.parts, &bytes);
  t.read_s += since(t0);
  t.bytes_in += bytes;
  return r;
}

// ---- solve: Jacobi sweeps of -lap u = f with the ghost values fixed.
Result<Times> solve(const Params& p) {
  Times t;
  auto in = read_timed(part_stream(p.part), "part", p, p.part, t);
  if (!in.ok()) return in.error();
  const std::span<const Record> cells = in.value().records();
  const auto t0 = Clock::now();
  const LeafIndex index(keys_of(cells));
  std::size_t owned = 0;
  while (owned < cells.size() && cells[owned].aux != 0) ++owned;

  // Per owned leaf: its neighbours (index into cells, -1: boundary) and weights.
  std::vector<std::uint32_t> first(owned + 1);
  std::vector<long> nb_index;
  std::vector<double> nb_weight, rhs(owned), diag(owned);
  std::vector<Neighbour> nb;
  for (std::size_t i = 0; i < owned; ++i) {
    const Key k = unpack(cells[i].key);
    nb.clear();
    if (!index.neighbours(k, nb))
      return make_error(Errc::corrupted, part_stream(p.part) + " is not a 2:1 balanced mesh with its ghost leaves");
    first[i] = static_cast<std::uint32_t>(nb_index.size());
    double d = 0;
    for (const Neighbour& n : nb) {
      const long j = n.code == kBoundary ? -1 : index.find(n.code);
      if (n.code != kBoundary && j < 0)
        return make_error(Errc::corrupted, part_stream(p.part) + " lacks a ghost leaf its solver needs");
      nb_index.push_back(j);
      nb_weight.push_back(n.weight);
      d += n.weight;
    }
    const auto c = centre(k);
    const double h = cell_size(k.level);
    rhs[i] = source(c[0], c[1], p.cycle) * h * h;
    diag[i] = d;
  }
  first[owned] = static_cast<std::uint32_t>(nb_index.size());

  std::vector<double> u(cells.size()), next(cells.size());
  for (std::size_t i = 0; i < cells.size(); ++i) u[i] = cells[i].value;
  next = u;
  for (int s = 0; s < p.sweeps; ++s) {
    for (std::size_t i = 0; i < owned; ++i) {
      double sum = rhs[i];
      for (std::uint32_t e = first[i]; e < first[i + 1]; ++e)
        if (nb_index[e] >= 0) sum += nb_weight[e] * u[static_cast<std::size_t>(nb_index[e])];
      next[i] = sum / diag[i];
    }
    std::swap(u, next);
    std::copy(u.begin() + static_cast<long>(owned), u.end(), next.begin() + static_cast<long>(owned));
  }

  // Indicator: the largest jump of u across an edge plus the source's weight in the leaf.
  Output out{solution_stream(p.part), "solution", p.cycle, p.part, {}};
  out.records.reserve(owned);
  for (std::size_t i = 0; i < owned; ++i) {
    double jump = 0;
    for (std::uint32_t e = first[i]; e < first[i + 1]; ++e) {
      const double other = nb_index[e] >= 0 ? u[static_cast<std::size_t>(nb_index[e])] : 0.0;
      jump = std::max(jump, std::fabs(other - u[i]));
    }
    out.records.push_back({cells[i].key, u[i], jump + rhs[i]});
  }
  t.compute_s += since(t0);
  if (auto w = write_outputs({out}, p, t); !w.ok()) return w.error();
  return t;
}

// ---- sizefield: the indicator against the tolerance gives each leaf a target level.
Result<Times> sizefield(const Params& p) {
  Times t;
  auto in = read_timed(solution_stream(p.part), "solution", p, p.part, t);
  if (!in.ok()) return in.error();
  const auto t0 = Clock::now();
  Output out{size_stream(p.part), "size", p.cycle, p.part, {}};
  out.records.reserve(in.value().records().size());
  for (const Record& r : in.value().records()) {
    const int level = unpack(r.key).level;
    int target = level;
    if (r.aux > p.tol) target = level + 1;
    if (r.aux < p.tol / 4) target = level - 1;
    target = std::clamp(target, p.level_min, p.level_max);
    out.records.push_back({r.key, r.value, static_cast<double>(target)});
  }
  t.compute_s += since(t0);
  if (auto w = write_outputs({out}, p, t); !w.ok()) return w.error();
  return t;
}

// ---- adapt: every part's size field -> the new mesh.
Result<Times> adapt_component(const Params& p) {
  Times t;
  std::vector<Cell> cells;
  std::vector<int> target;
  for (int part = 0; part < p.parts; ++part) {
    auto in = read_timed(size_stream(part), "size", p, part, t);
    if (!in.ok()) return in.error();
    for (const Record& r : in.value().records()) {
      cells.push_back({r.key, r.value});
      target.push_back(static_cast<int>(r.aux));
    }
  }
  const auto t0 = Clock::now();
  const std::vector<Cell> mesh = adapt(cells, target, p.level_min, p.level_max);
  Output out{"mesh", "mesh", p.cycle + 1, 0, {}};  // the next cycle's mesh
  out.records.reserve(mesh.size());
  for (const Cell& c : mesh) out.records.push_back({c.code, c.value, 0.0});
  t.compute_s += since(t0);
  if (auto w = write_outputs({out}, p, t); !w.ok()) return w.error();
  return t;
}

// ---- rebalance: Morton ranges of equal length, one per solver process.
Result<Times> rebalance(const Params& p) {
  Times t;
  std::vector<Record> cells;
  if (p.uniform_level > 0) {
    for (const Cell& c : uniform(p.uniform_level)) cells.push_back({c.code, c.value, 0.0});
  } else {
    auto in = read_timed("mesh", "mesh", p, 0, t);
    if (!in.ok()) return in.error();
    cells.assign(in.value().records().begin(), in.value().records().end());
  }
  const auto t0 = Clock::now();
  std::vector<std::uint64_t> keys = keys_of(cells);
  if (const std::string bad = check_mesh(keys); !bad.empty())
    return make_error(Errc::corrupted, "the mesh to rebalance is invalid: " + bad);
  std::stable_sort(cells.begin(), cells.end(),
                   [](const Record& a, const Record& b) { return morton_order(a.key) < morton_order(b.key); });
  Output out{"balanced", "balanced", p.cycle, 0, std::move(cells)};
  const std::size_t n = out.records.size();
  for (std::size_t i = 0; i < n; ++i)
    out.records[i].aux = static_cast<double>(i * static_cast<std::size_t>(p.parts) / n);
  t.compute_s += since(t0);
  if (auto w = write_outputs({out}, p, t); !w.ok()) return w.error();
  return t;
}

// ---- preprocess: each part's leaves (aux 1) then its ghost leaves (aux 0).
Result<Times> preprocess(const Params& p) {
  Times t;
  auto in = read_timed("balanced", "balanced", p, 0, t);
  if (!in.ok()) return in.error();
  const std::span<const Record> cells = in.value().records();
  const auto t0 = Clock::now();
  const LeafIndex index(keys_of(cells));
  std::vector<Output> outs;
  for (int part = 0; part < p.parts; ++part) outs.push_back({part_stream(part), "part", p.cycle, part, {}});
  std::vector<std::vector<std::uint64_t>> ghosts(static_cast<std::size_t>(p.parts));
  std::vector<Neighbour> nb;
  for (const Record& r : cells) {
    const auto part = static_cast<std::size_t>(r.aux);
    if (r.aux < 0 || part >= outs.size())
      return make_error(Errc::corrupted, "balanced names part " + std::to_string(r.aux) + " of " +
                                             std::to_string(p.parts) + ": rebalance ran with other --parts");
    outs[part].records.push_back({r.key, r.value, 1.0});
    nb.clear();
    if (!index.neighbours(unpack(r.key), nb))
      return make_error(Errc::corrupted, "the balanced mesh is not 2:1 balanced");
    for (const Neighbour& n : nb) {
      if (n.code == kBoundary) continue;
      const Record& other = cells[static_cast<std::size_t>(index.find(n.code))];
      if (other.aux != r.aux) ghosts[part].push_back(n.code);
    }
  }
  for (std::size_t part = 0; part < outs.size(); ++part) {
    auto& g = ghosts[part];
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
    for (const std::uint64_t code : g)
      outs[part].records.push_back({code, cells[static_cast<std::size_t>(index.find(code))].value, 0.0});
  }
  t.compute_s += since(t0);
  if (auto w = write_outputs(outs, p, t); !w.ok()) return w.error();
  return t;
}

}  // namespace

std::string part_stream(int part) { return "part." + std::to_string(part); }
std::string solution_stream(int part) { return "solution." + std::to_string(part); }

bool is_component(std::string_view name) {
  return std::find(std::begin(kComponents), std::end(kComponents), name) != std::end(kComponents);
}

double source(double x, double y, int cycle) {
  const double angle = 2 * std::numbers::pi * cycle / 16.0;
  const double cx = 0.5 + 0.25 * std::cos(angle), cy = 0.5 + 0.25 * std::sin(angle);
  const double r2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
  return 1000.0 * std::exp(-r2 / (0.05 * 0.05));
}

Result<Input> open_records(const std::string& name, std::string_view kind, int cycle, int part, int parts,
                           std::uint64_t* bytes) {
  Input in;
  in.file_.reset(cairn_stream_open(name.c_str(), "r", 0));  // was: fopen(name, "r")
  std::FILE* f = in.file_.get();
  if (f == nullptr) {
    const int err = errno;  // set by cairn_stream_open, as fopen sets it
    return make_error(
        err == ENOENT || err == ENODATA ? Errc::not_found : Errc::io_error,
        std::string("cannot read ") + name + ": " + cairn_errormsg() + " (has the component that writes it run?)");
  }
  // The committed bytes in place, if the stream shows them.
  const void* data = nullptr;
  std::size_t length = 0;
  const bool viewed = cairn_stream_view(f, &data, &length) == 0 && data != nullptr;
  const auto* bytes_in = static_cast<const char*>(data);
  std::string line;
  if (viewed) {
    const std::size_t limit = std::min<std::size_t>(length, 255);
    const auto* nl = static_cast<const char*>(std::memchr(bytes_in, '\n', limit));
    line.assign(bytes_in, nl != nullptr ? static_cast<std::size_t>(nl - bytes_in) + 1 : limit);
  } else {
    char buf[256];
    if (std::fgets(buf, sizeof buf, f) != nullptr) line = buf;
  }
  if (line.empty()) return make_error(Errc::corrupted, name + " is empty: not a stream of the workflow");
  char magic[32] = {}, k[32] = {};
  int c = -1, pa = -1, ps = -1;
  std::size_t count = 0;
  if (std::sscanf(line.c_str(), "%31s %31s cycle=%d part=%d parts=%d count=%zu", magic, k, &c, &pa, &ps, &count) != 6 ||
      std::strcmp(magic, kMagic) != 0)
    return make_error(Errc::foreign_file,
                      name + " is not a stream of the workflow (its first line is not a " + kMagic + " header)");
  if (kind != k) return make_error(Errc::foreign_file, name + " holds " + k + " data, expected " + std::string(kind));
  if (c != cycle || pa != part || ps != parts)
    return make_error(Errc::wrong_version, name + " is from cycle " + std::to_string(c) + ", part " +
                                               std::to_string(pa) + " of " + std::to_string(ps) + "; expected cycle " +
                                               std::to_string(cycle) + ", part " + std::to_string(part) + " of " +
                                               std::to_string(parts) + ": the step that writes it has not run yet");
  const auto truncated = [&](std::size_t got, bool more) {
    return make_error(Errc::corrupted, name + " is truncated or too long: its header says " + std::to_string(count) +
                                           " records, it holds " + std::to_string(got) +
                                           (more ? " and more bytes" : ""));
  };
  const char* first = viewed ? bytes_in + line.size() : nullptr;
  if (viewed && reinterpret_cast<std::uintptr_t>(first) % alignof(Record) == 0) {
    // In place: the header's length tells where the records start.
    const std::size_t body = length - line.size();
    if (body != count * sizeof(Record)) return truncated(body / sizeof(Record), body >= count * sizeof(Record));
    in.records_ = {reinterpret_cast<const Record*>(first), count};
  } else {
    // The FILE* path (a stream without a view, or records not aligned in it).
    if (viewed && std::fseek(f, static_cast<long>(line.size()), SEEK_SET) != 0)
      return make_error(Errc::io_error, name + ": cannot seek past its header");
    in.copy_.resize(count);
    const std::size_t got = std::fread(in.copy_.data(), sizeof(Record), count, f);
    if (got != count || std::fgetc(f) != EOF) return truncated(got, got == count);
    in.records_ = in.copy_;
  }
  if (bytes != nullptr) *bytes = line.size() + count * sizeof(Record);
  return in;
}

Result<std::vector<Record>> read_records(const std::string& name, std::string_view kind, int cycle, int part, int parts,
                                         std::uint64_t* bytes) {
  auto in = open_records(name, kind, cycle, part, parts, bytes);
  if (!in.ok()) return in.error();
  const auto r = in.value().records();
  return std::vector<Record>(r.begin(), r.end());
}

Result<Times> run_component(std::string_view component, const Params& p) {
  if (p.parts < 1 || p.part < 0 || p.part >= p.parts)
    return make_error(Errc::invalid_argument, "part " + std::to_string(p.part) + " of " + std::to_string(p.parts));
  if (p.level_min < 1 || p.level_min > p.level_max || p.level_max > 14)
    return make_error(Errc::invalid_argument, "levels must satisfy 1 <= level-min <= level-max <= 14");
  if (component == "solve") return solve(p);
  if (component == "sizefield") return sizefield(p);
  if (component == "adapt") return adapt_component(p);
  if (component == "rebalance") return rebalance(p);
  if (component == "preprocess") return preprocess(p);
  return make_error(Errc::invalid_argument, "unknown component '" + std::string(component) +
                                                "' (solve, sizefield, adapt, rebalance, preprocess)");
}

}  // namespace cairn::apps::workflow
