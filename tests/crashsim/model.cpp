// model.cpp — the reference model, crash keys, durability names and reports.
#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "tests/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim {

const char* durability_name(Durability d) noexcept {
  switch (d) {
    case Durability::adr: return "adr";
    case Durability::eadr: return "eadr";
    case Durability::msync: return "msync";
    case Durability::pagecache: return "pagecache";
  }
  return "?";
}

devices::FlushMode flush_mode_for(Durability d) noexcept {
  if (d == Durability::msync) return devices::FlushMode::msync;
  if (d == Durability::pagecache) return devices::FlushMode::pagecache;
  return devices::FlushMode::cpu;
}

Result<Durability> parse_durability(const std::string& text) {
  if (text == "adr") return Durability::adr;
  if (text == "eadr") return Durability::eadr;
  if (text == "msync") return Durability::msync;
  if (text == "pagecache") return Durability::pagecache;
  return make_error(Errc::invalid_argument,
                    "unknown durability model '" + text +
                        "': use adr (flush + fence per thread), eadr (persistent "
                        "caches, fences order), msync (non-DAX pages, one msync per flush) or pagecache "
                        "(non-DAX pages written back at each drain)");
}

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) noexcept {
  Rng r(a ^ 0x2545f4914f6cdd1dULL);
  std::uint64_t h = r();
  for (std::uint64_t w : {b, c, d}) {
    Rng q(h ^ w);
    h = q() ^ (w * 0x9e3779b97f4a7c15ULL);
  }
  return h;
}

// ---- Model ----

void Model::begin(Version v) {
  if (in_flight_) versions_.pop_back();  // a commit that never ended
  versions_.push_back(std::move(v));
  in_flight_ = true;
  point_durable_ = false;
  publish();
}

void Model::commit_point() {
  if (!in_flight_) return;
  point_durable_ = true;
  publish();
}

void Model::end() {
  if (!in_flight_) return;
  last_ = static_cast<std::int64_t>(versions_.size()) - 1;
  in_flight_ = false;
  point_durable_ = false;
  publish();
}

void Model::abort() {
  if (!in_flight_) return;
  versions_.pop_back();
  in_flight_ = false;
  point_durable_ = false;
  publish();
}

Expect Model::expect() const {
  Expect e;
  e.model = this;
  e.last = versions_.empty() ? -1 : last_;
  e.in_flight = in_flight_ ? static_cast<std::int64_t>(versions_.size()) - 1 : -1;
  e.point_durable = in_flight_ && point_durable_;
  return e;
}

void Model::set_mirror(volatile std::uint64_t* word) {
  mirror_ = word;
  publish();
}

void Model::publish() {
  if (mirror_ == nullptr) return;
  const Expect e = expect();
  *mirror_ = static_cast<std::uint64_t>(e.last + 1) | (static_cast<std::uint64_t>(e.in_flight + 1) << 24) |
             (std::uint64_t{e.point_durable} << 48);
}

Expect Model::decode_mirror(std::uint64_t word, const Model* model) {
  Expect e;
  e.model = model;
  e.last = static_cast<std::int64_t>(word & 0xffffff) - 1;
  e.in_flight = static_cast<std::int64_t>((word >> 24) & 0xffffff) - 1;
  e.point_durable = ((word >> 48) & 1) != 0;
  return e;
}

// ---- keys ----

std::string format_key(const CrashKey& k) {
  std::ostringstream o;
  o << "cs1:" << k.workload << ':' << durability_name(k.durability) << ':' << k.seed << ':' << k.steps << ':'
    << k.extend_ops << ':' << k.point << '.' << k.subset;
  if (k.depth2) o << '+' << k.point2 << '.' << k.subset2;
  return o.str();
}

Result<CrashKey> parse_key(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return make_error(Errc::invalid_argument, "bad crash key '" + text + "': " + why +
                                                  " (expected cs1:WORKLOAD:DURABILITY:SEED:STEPS:K:POINT.SUBSET"
                                                  "[+POINT.SUBSET])");
  };
  std::vector<std::string> f;
  std::string cur;
  for (char c : text) {
    if (c == ':') {
      f.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  f.push_back(cur);
  if (f.size() != 7 || f[0] != "cs1") return bad("wrong number of fields or version");
  CrashKey k;
  k.workload = f[1];
  if (k.workload.empty()) return bad("no workload");
  auto d = parse_durability(f[2]);
  if (!d.ok()) return bad(d.error().message);
  k.durability = d.value();
  auto num = [](const std::string& s, std::uint64_t& out) {
    if (s.empty() || s.size() > 20) return false;
    std::uint64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    out = v;
    return true;
  };
  std::uint64_t steps = 0, extend = 0;
  if (!num(f[3], k.seed) || !num(f[4], steps) || !num(f[5], extend)) return bad("seed, steps and K are numbers");
  k.steps = static_cast<unsigned>(steps);
  k.extend_ops = static_cast<unsigned>(extend);
  auto pair = [&](const std::string& s, std::uint64_t& a, std::uint64_t& b) {
    const auto dot = s.find('.');
    return dot != std::string::npos && num(s.substr(0, dot), a) && num(s.substr(dot + 1), b);
  };
  const std::string& st = f[6];
  const auto plus = st.find('+');
  if (!pair(st.substr(0, plus), k.point, k.subset)) return bad("POINT.SUBSET are numbers");
  if (plus != std::string::npos) {
    k.depth2 = true;
    if (!pair(st.substr(plus + 1), k.point2, k.subset2)) return bad("the depth-2 POINT.SUBSET are numbers");
  }
  return k;
}

// ---- reports ----

std::string Report::summary() const {
  std::ostringstream o;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f", seconds);
  o << workload << ": " << states << " crash states (" << depth2_states << " at depth 2 in " << depth2_runs
    << " recoveries) at " << points_explored << " of " << crash_points << " crash points (" << points_exhaustive
    << " exhaustive, " << points_duplicate << " duplicates skipped, " << points_deferred
    << " deferred), largest pending set " << max_pending << ", " << steps << " steps, " << secs << " s";
  if (failures.empty()) {
    o << ": all pass";
  } else {
    o << ": " << failures.size() << " failing";
    for (const auto& f : failures) o << "\n  " << f.key << "  " << f.reason;
  }
  return o.str();
}

}  // namespace cairn::testing::crashsim
