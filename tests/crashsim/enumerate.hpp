// enumerate.hpp — pending units at a crash point and the crash states built
// from them (internal to tests/crashsim).
//
// A unit is the granule that is failure-atomic: an aligned 8-byte word (adr,
// eadr) or a 512-byte sector (msync). Each pending unit has 2 or 3 candidate
// values, always in the order durable, [value when flushed,] current. A crash
// state is one choice per unit; state number `s` of a crash point decodes to
// the same choices on every run, which is what makes keys replayable:
//   - at most kExhaustiveLimit[depth] combinations: all of them, s in mixed
//     radix (unit 0 least significant);
//   - otherwise a structured list — none, all current, all at flush time,
//     each unit omitted, each unit alone, program-order prefixes and suffixes,
//     each group (cache line / page) alone and omitted, position families
//     capped at kMaxPositions evenly spaced positions — followed by seeded
//     random states (s - structured = r, choices from mix(seed, point, r)).
// "Program order" is the order of units in the set: flushed words by the
// order of their flushes, then unflushed dirty words by address (stores are
// not intercepted, so their exact order is not known).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::testing::crashsim {

inline constexpr std::uint64_t kExhaustiveLimit[2] = {std::uint64_t{1} << 16, std::uint64_t{1} << 8};
inline constexpr std::size_t kMaxPositions = 64;

struct Unit {
  std::uint64_t offset = 0;  // in the image
  std::uint32_t len = 8;
  std::uint8_t n = 2;        // candidates
  std::uint32_t value[3]{};  // offsets into UnitSet::bytes
  std::uint64_t group = 0;   // cache line or page
};

struct UnitSet {
  std::vector<Unit> units;
  std::vector<std::byte> bytes;
  void clear() {
    units.clear();
    bytes.clear();
  }
  // Adds a unit whose candidates are vals[0..n) (each `len` bytes).
  void add(std::uint64_t offset, std::uint32_t len, std::uint64_t group, const std::byte* const* vals, unsigned n);
  const std::byte* candidate(const Unit& u, unsigned i) const { return bytes.data() + u.value[i]; }
  // A hash of offsets and values (duplicate crash points are skipped).
  std::uint64_t signature() const;
};

class Enumerator {
 public:
  Enumerator(const UnitSet& set, std::uint64_t seed, std::uint64_t point, unsigned depth);
  bool exhaustive() const { return exhaustive_; }
  // Exhaustive: all combinations; otherwise the structured list.
  std::uint64_t fixed() const { return fixed_; }
  std::uint64_t count(unsigned random_subsets) const { return exhaustive_ ? fixed_ : fixed_ + random_subsets; }
  // Choices for state s (one per unit, index into its candidates).
  void choices(std::uint64_t s, std::vector<std::uint8_t>& out) const;
  // The family state s belongs to ("exhaustive", "none", "all", "prefix", ...).
  std::string family(std::uint64_t s) const;
  // State numbers worth crashing again during recovery: all current, and
  // one seeded other.
  std::vector<std::uint64_t> depth2_picks(unsigned n) const;

 private:
  enum Family : unsigned { none, all, flushed, omit, alone, prefix, suffix, group_only, group_omit, kFamilies };
  const UnitSet& set_;
  std::uint64_t seed_, point_;
  unsigned depth_;
  bool exhaustive_ = false;
  std::uint64_t fixed_ = 0;
  std::uint64_t family_count_[kFamilies]{};
  std::vector<std::uint32_t> group_units_;  // unit indices ordered by group (stable)
  std::vector<std::uint32_t> group_first_;  // start of each group in group_units_, plus the end
};

}  // namespace cairn::testing::crashsim
