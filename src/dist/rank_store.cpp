// rank_store.cpp — one rank's two lanes (persist::Contexts): version V is
// committed into lane V % 2 with a header naming V, so the rank always holds
// the version before its newest as well (include/cairn/dist.hpp explains why).
#include <cstring>
#include <filesystem>

#include "cairn/dist.hpp"

namespace cairn::dist {
namespace {

// The "cairn.dist" region of each lane, written inside every lane commit.
struct Header {
  std::uint64_t magic;
  std::uint32_t format;
  std::uint32_t lane;
  std::uint32_t rank;
  std::uint32_t nranks;
  std::uint64_t version;  // the global version number this lane commit holds
  std::uint64_t reserved[4];
};
static_assert(sizeof(Header) == 64);
static_assert(offsetof(Header, version) == 24);
constexpr std::uint64_t kMagic = 0x3176747369646e63ULL;  // "cndistv1"
constexpr std::uint32_t kFormat = 1;
constexpr const char* kHeaderRegion = "cairn.dist";

std::string lane_name(const std::string& base, int rank, int nranks, int lane) {
  return base + ".n" + std::to_string(nranks) + ".r" + std::to_string(rank) + (lane == 0 ? ".a" : ".b");
}

// The files of both lanes of rank `rank` in its directory.
std::vector<std::filesystem::path> lane_files(const persist::Options& base, int rank, int nranks) {
  namespace fs = std::filesystem;
  const fs::path dir = base.dir.empty() ? fs::path(".") : fs::path(base.dir);
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    for (int i = 0; i < 2; ++i)
      if (e.path().filename().string().rfind(lane_name(base.name, rank, nranks, i), 0) == 0) out.push_back(e.path());
  return out;
}

}  // namespace

void* DualRegion::read() const { return lane_[owner_->version_ % 2]->read(); }
void* DualRegion::write() const { return lane_[(owner_->version_ + 1) % 2]->write(); }
void* Region::data() const { return lane_[(owner_->version_ + (owner_->in_iteration_ ? 1 : 0)) % 2]->data(); }

RankStore::~RankStore() = default;

Result<std::unique_ptr<RankStore>> RankStore::create(const persist::Options& base, int rank, int nranks) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return make_error(Errc::invalid_argument, "rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  std::unique_ptr<RankStore> s(new RankStore());
  s->base_ = base;
  s->rank_ = rank;
  s->nranks_ = nranks;
  s->found_storage_ = !lane_files(base, rank, nranks).empty();
  if (auto r = s->create_lanes(); !r.ok()) return std::move(r).error();
  return s;
}

Result<void> RankStore::create_lanes() {
  for (int i = 0; i < 2; ++i) {
    persist::Options o = base_;
    o.name = lane_name(base_.name, rank_, nranks_, i);
    auto c = persist::Context::create(o);
    if (!c.ok()) return std::move(c).error();
    lane_[i] = std::move(c.value());
    if (lane_[i]->strategy() == "undo-log")
      return make_error(Errc::unsupported,
                        "dist runs two Contexts (lanes) per rank on the application's thread, and undo-log keeps a "
                        "libpmemobj transaction open per thread from one commit to the next: choose in-place, "
                        "shadow, dram-cache, nt-copy or file");
    auto h = lane_[i]->region(kHeaderRegion, sizeof(Header));
    if (!h.ok()) return std::move(h).error();
    header_[i] = h.value();
  }
  return {};
}

Result<void> RankStore::register_in_lanes(std::size_t index) {
  const Registration& g = registrations_[index];
  for (int i = 0; i < 2; ++i) {
    if (g.dual) {
      auto r = lane_[i]->dual_region(g.name, g.bytes);
      if (!r.ok()) return std::move(r).error();
      duals_[g.object]->lane_[i] = r.value();
    } else {
      auto r = lane_[i]->region(g.name, g.bytes);
      if (!r.ok()) return std::move(r).error();
      plains_[g.object]->lane_[i] = r.value();
    }
  }
  return {};
}

Result<DualRegion*> RankStore::dual_region(const std::string& name, std::size_t bytes) {
  auto d = std::make_unique<DualRegion>();
  d->name_ = name;
  d->bytes_ = bytes;
  d->owner_ = this;
  duals_.push_back(std::move(d));
  registrations_.push_back({name, bytes, true, duals_.size() - 1});
  if (auto r = register_in_lanes(registrations_.size() - 1); !r.ok()) {
    registrations_.pop_back();
    duals_.pop_back();
    return std::move(r).error();
  }
  return duals_.back().get();
}

Result<Region*> RankStore::region(const std::string& name, std::size_t bytes) {
  auto p = std::make_unique<Region>();
  p->name_ = name;
  p->bytes_ = bytes;
  p->owner_ = this;
  plains_.push_back(std::move(p));
  registrations_.push_back({name, bytes, false, plains_.size() - 1});
  if (auto r = register_in_lanes(registrations_.size() - 1); !r.ok()) {
    registrations_.pop_back();
    plains_.pop_back();
    return std::move(r).error();
  }
  return plains_.back().get();
}

Result<void> RankStore::open() {
  for (auto& l : lane_)
    if (auto r = l->open(); !r.ok()) return r;
  return {};
}

Result<std::array<std::uint64_t, 2>> RankStore::scan() {
  std::array<std::uint64_t, 2> held{0, 0};
  for (int i = 0; i < 2; ++i) {
    if (!lane_[i]->committed_version()) continue;
    if (auto r = lane_[i]->restore(); !r.ok()) return std::move(r).error();
    Header h;
    std::memcpy(&h, header_[i]->data(), sizeof h);
    const std::string where = "rank " + std::to_string(rank_) + " lane " + (i == 0 ? "a" : "b");
    if (h.magic != kMagic || h.format != kFormat)
      return make_error(Errc::corrupted, where + ": the cairn.dist header of its committed version is not valid");
    if (h.rank != static_cast<std::uint32_t>(rank_) || h.nranks != static_cast<std::uint32_t>(nranks_) ||
        h.lane != static_cast<std::uint32_t>(i) || (h.version != 0 && h.version % 2 != static_cast<std::uint64_t>(i)))
      return make_error(Errc::corrupted, where + " holds version " + std::to_string(h.version) + " of rank " +
                                             std::to_string(h.rank) + " of " + std::to_string(h.nranks) + " in lane " +
                                             std::to_string(h.lane) +
                                             ": storage of another rank or job was put in its place");
    if (h.version == 0 && h.rank == static_cast<std::uint32_t>(rank_) && h.lane == static_cast<std::uint32_t>(i))
      continue;  // voided by rewrite()
    held[i] = h.version;
  }
  held_ = held;
  return held;
}

Result<void> RankStore::select(std::uint64_t version) {
  if (version == 0 || held_[version % 2] != version)
    return make_error(Errc::no_version, "rank " + std::to_string(rank_) + " does not hold version " +
                                            std::to_string(version) + " (its lanes hold " + std::to_string(held_[0]) +
                                            " and " + std::to_string(held_[1]) + ")");
  version_ = version;
  in_iteration_ = false;
  return {};
}

void RankStore::adopt(std::uint64_t version) {
  version_ = version;
  in_iteration_ = false;
}

Result<void> RankStore::begin() {
  if (in_iteration_) return {};
  const std::size_t w = (version_ + 1) % 2;
  if (auto r = lane_[w]->begin(); !r.ok()) return r;
  // After begin: undo-log snapshots the lane's regions here, so the carried
  // bytes are part of its transaction.
  for (const auto& p : plains_) std::memcpy(p->lane_[w]->data(), p->lane_[1 - w]->data(), p->bytes_);
  in_iteration_ = true;
  return {};
}

void RankStore::write_header(std::size_t lane, std::uint64_t version) {
  Header h{};
  h.magic = kMagic;
  h.format = kFormat;
  h.lane = static_cast<std::uint32_t>(lane);
  h.rank = static_cast<std::uint32_t>(rank_);
  h.nranks = static_cast<std::uint32_t>(nranks_);
  h.version = version;
  std::memcpy(header_[lane]->data(), &h, sizeof h);
}

Result<std::uint64_t> RankStore::commit_local() {
  if (auto r = begin(); !r.ok()) return std::move(r).error();
  const std::uint64_t v = version_ + 1;
  const std::size_t w = v % 2;
  write_header(w, v);
  in_iteration_ = false;
  auto c = lane_[w]->commit();
  if (!c.ok()) return std::move(c).error();
  held_[w] = v;
  return v;
}

std::size_t RankStore::payload_bytes() const {
  std::size_t n = 0;
  for (const auto& g : registrations_) n += (g.bytes + kBlock - 1) / kBlock * kBlock;
  return n;
}

void RankStore::for_each_region(std::uint64_t version,
                                const std::function<void(std::size_t, const std::byte*, std::size_t)>& fn) const {
  const std::size_t l = version % 2;
  std::size_t at = 0;
  for (const auto& g : registrations_) {
    // A lane's committed version: a dual region's read() once that lane has
    // committed, a plain region's data().
    const void* p = g.dual ? duals_[g.object]->lane_[l]->read() : plains_[g.object]->lane_[l]->data();
    fn(at, static_cast<const std::byte*>(p), g.bytes);
    at += (g.bytes + kBlock - 1) / kBlock * kBlock;
  }
}

Result<void> RankStore::rewrite(std::uint64_t version, const std::byte* payload) {
  if (version == 0) return make_error(Errc::invalid_argument, "rewrite of version 0");
  // 1. Void the other lane (it may hold a version of an abandoned timeline
  //    that would otherwise outrank `version` at the next restore).
  version_ = version;
  in_iteration_ = false;
  const std::size_t other = (version + 1) % 2;
  if (auto r = lane_[other]->begin(); !r.ok()) return r;
  write_header(other, 0);
  if (auto c = lane_[other]->commit(); !c.ok()) return std::move(c).error();
  held_[other] = 0;
  // 2. The payload into lane version % 2, committed as `version`.
  version_ = version - 1;
  const std::size_t w = version % 2;
  if (auto r = lane_[w]->begin(); !r.ok()) return r;
  in_iteration_ = true;
  std::size_t at = 0;
  for (const auto& g : registrations_) {
    void* p = g.dual ? duals_[g.object]->lane_[w]->write() : plains_[g.object]->lane_[w]->data();
    std::memcpy(p, payload + at, g.bytes);
    at += (g.bytes + kBlock - 1) / kBlock * kBlock;
  }
  if (auto c = commit_local(); !c.ok()) return std::move(c).error();
  return select(version);
}

Result<void> RankStore::set_aside(const std::string& why) {
  namespace fs = std::filesystem;
  for (auto& l : lane_) l.reset();
  const fs::path dir = base_.dir.empty() ? fs::path(".") : fs::path(base_.dir);
  const fs::path aside = dir / "damaged";
  std::error_code ec;
  fs::create_directories(aside, ec);
  for (const fs::path& f : lane_files(base_, rank_, nranks_)) {
    fs::rename(f, aside / f.filename(), ec);
    if (ec)
      return make_error(Errc::io_error, "rank " + std::to_string(rank_) + ": cannot move " + f.string() + " aside (" +
                                            ec.message() + ") after: " + why);
  }
  held_ = {0, 0};
  version_ = 0;
  in_iteration_ = false;
  found_storage_ = false;
  if (auto r = create_lanes(); !r.ok()) return r;
  for (std::size_t i = 0; i < registrations_.size(); ++i)
    if (auto r = register_in_lanes(i); !r.ok()) return r;
  return open();
}

void RankStore::advance() { ++version_; }

void RankStore::retry() {}

Result<std::vector<std::string>> RankStore::remove_storage(const persist::Options& base, int rank, int nranks) {
  std::vector<std::string> out;
  for (int i = 0; i < 2; ++i) {
    persist::Options o = base;
    o.name = lane_name(base.name, rank, nranks, i);
    auto r = persist::remove_storage(o);
    if (!r.ok()) return std::move(r).error();
    out.insert(out.end(), r.value().begin(), r.value().end());
  }
  return out;
}

}  // namespace cairn::dist
