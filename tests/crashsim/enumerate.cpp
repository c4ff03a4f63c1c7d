// enumerate.cpp — decoding crash-state numbers into per-unit choices.
#include "tests/crashsim/enumerate.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "tests/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim {
namespace {

// Items of a family of `n` candidates capped at kMaxPositions, evenly spread.
std::uint64_t capped(std::uint64_t n) { return std::min<std::uint64_t>(n, kMaxPositions); }
std::uint64_t position(std::uint64_t j, std::uint64_t n) { return j * n / capped(n); }

}  // namespace

void UnitSet::add(std::uint64_t offset, std::uint32_t len, std::uint64_t group, const std::byte* const* vals,
                  unsigned n) {
  Unit u;
  u.offset = offset;
  u.len = len;
  u.n = static_cast<std::uint8_t>(n);
  u.group = group;
  for (unsigned i = 0; i < n; ++i) {
    u.value[i] = static_cast<std::uint32_t>(bytes.size());
    bytes.insert(bytes.end(), vals[i], vals[i] + len);
  }
  units.push_back(u);
}

std::uint64_t UnitSet::signature() const {
  std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ units.size();
  for (const Unit& u : units) h = mix_seed(h, u.offset, u.n, u.len);
  const std::size_t words = bytes.size() / 8;
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, bytes.data() + i * 8, 8);
    h = (h ^ w) * 0x100000001b3ULL + (h >> 29);
  }
  return mix_seed(h, bytes.size());
}

Enumerator::Enumerator(const UnitSet& set, std::uint64_t seed, std::uint64_t point, unsigned depth)
    : set_(set), seed_(seed), point_(point), depth_(depth) {
  const std::uint64_t limit = kExhaustiveLimit[depth_ >= 2 ? 1 : 0];
  std::uint64_t product = 1;
  exhaustive_ = true;
  for (const Unit& u : set_.units) {
    product *= u.n;
    if (product > limit) {
      exhaustive_ = false;
      break;
    }
  }
  if (exhaustive_) {
    fixed_ = product;
    return;
  }
  const std::uint64_t n = set_.units.size();
  // Groups, in order of first appearance.
  group_units_.resize(n);
  std::iota(group_units_.begin(), group_units_.end(), 0u);
  std::stable_sort(group_units_.begin(), group_units_.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return set_.units[a].group < set_.units[b].group; });
  for (std::uint32_t i = 0; i < n; ++i)
    if (i == 0 || set_.units[group_units_[i]].group != set_.units[group_units_[i - 1]].group) group_first_.push_back(i);
  const std::uint64_t groups = group_first_.size();
  group_first_.push_back(static_cast<std::uint32_t>(n));
  bool any3 = std::any_of(set_.units.begin(), set_.units.end(), [](const Unit& u) { return u.n == 3; });

  family_count_[none] = 1;
  family_count_[all] = 1;
  family_count_[flushed] = any3 ? 1 : 0;
  family_count_[omit] = capped(n);
  family_count_[alone] = capped(n);
  family_count_[prefix] = n > 1 ? capped(n - 1) : 0;
  family_count_[suffix] = n > 1 ? capped(n - 1) : 0;
  family_count_[group_only] = groups > 1 ? capped(groups) : 0;
  family_count_[group_omit] = groups > 1 ? capped(groups) : 0;
  fixed_ = 0;
  for (auto c : family_count_) fixed_ += c;
}

void Enumerator::choices(std::uint64_t s, std::vector<std::uint8_t>& out) const {
  const auto& units = set_.units;
  const std::size_t n = units.size();
  out.assign(n, 0);
  if (exhaustive_) {
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = static_cast<std::uint8_t>(s % units[i].n);
      s /= units[i].n;
    }
    return;
  }
  auto current = [&](std::size_t i) { out[i] = static_cast<std::uint8_t>(units[i].n - 1); };
  if (s >= fixed_) {
    Rng rng(mix_seed(seed_, point_, s - fixed_, depth_));
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(rng.below(units[i].n));
    return;
  }
  unsigned f = 0;
  while (s >= family_count_[f]) s -= family_count_[f++];
  switch (static_cast<Family>(f)) {
    case none: break;
    case all:
      for (std::size_t i = 0; i < n; ++i) current(i);
      break;
    case flushed:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(units[i].n == 3 ? 1 : units[i].n - 1);
      break;
    case omit: {
      for (std::size_t i = 0; i < n; ++i) current(i);
      out[position(s, n)] = 0;
      break;
    }
    case alone: current(position(s, n)); break;
    case prefix: {
      const std::uint64_t k = 1 + position(s, n - 1);
      for (std::size_t i = 0; i < k; ++i) current(i);
      break;
    }
    case suffix: {
      const std::uint64_t k = 1 + position(s, n - 1);
      for (std::size_t i = n - k; i < n; ++i) current(i);
      break;
    }
    case group_only:
    case group_omit: {
      const std::uint64_t groups = group_first_.size() - 1;
      const std::uint64_t g = position(s, groups);
      if (f == group_omit)
        for (std::size_t i = 0; i < n; ++i) current(i);
      for (std::uint32_t j = group_first_[g]; j < group_first_[g + 1]; ++j) {
        const std::uint32_t i = group_units_[j];
        if (f == group_only)
          current(i);
        else
          out[i] = 0;
      }
      break;
    }
    case kFamilies: break;
  }
}

std::string Enumerator::family(std::uint64_t s) const {
  if (exhaustive_) return "exhaustive";
  if (s >= fixed_) return "random";
  static const char* const names[kFamilies] = {"none",        "all current",    "all at flush time",
                                               "one omitted", "one alone",      "prefix",
                                               "suffix",      "one line alone", "one line omitted"};
  unsigned f = 0;
  while (s >= family_count_[f]) s -= family_count_[f++];
  return names[f];
}

std::vector<std::uint64_t> Enumerator::depth2_picks(unsigned n) const {
  std::vector<std::uint64_t> picks;
  if (n == 0 || set_.units.empty()) return picks;
  const std::uint64_t all_current = exhaustive_ ? fixed_ - 1 : 1;
  picks.push_back(all_current);
  if (n > 1 && fixed_ > 2) {
    std::uint64_t other = mix_seed(seed_, point_, 0xd2, depth_) % fixed_;
    if (other == all_current || other == 0) other = (other + 1) % fixed_;
    if (other != all_current && other != 0) picks.push_back(other);
  }
  return picks;
}

}  // namespace cairn::testing::crashsim
