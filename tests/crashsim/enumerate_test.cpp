// enumerate_test.cpp — crash-state enumeration: exhaustive below the limit,
// the structured families and seeded random states above it, determinism.
#include "tests/crashsim/enumerate.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "tests/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim {
namespace {

UnitSet words(std::size_t n, unsigned three_every = 0) {
  UnitSet s;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t v[3] = {0, 100 + i, 200 + i};
    const std::byte* p[3] = {reinterpret_cast<std::byte*>(&v[0]), reinterpret_cast<std::byte*>(&v[1]),
                             reinterpret_cast<std::byte*>(&v[2])};
    const unsigned n_c = (three_every != 0 && i % three_every == 0) ? 3 : 2;
    s.add(i * 8, 8, i / 8, p, n_c);
  }
  return s;
}

TEST(crashsim_enumerate, UpToSixteenWordsAreEnumeratedExhaustively) {
  for (std::size_t n : {0u, 1u, 5u, 16u}) {
    UnitSet s = words(n);
    Enumerator e(s, 1, 7, 1);
    EXPECT_TRUE(e.exhaustive()) << n;
    EXPECT_EQ(e.count(8), std::uint64_t{1} << n);
    // Kept as strings: GCC 12 at -O3 warns (falsely) on a set of vectors.
    std::set<std::string> all;
    std::vector<std::uint8_t> c;
    for (std::uint64_t i = 0; i < e.count(8); ++i) {
      e.choices(i, c);
      all.insert(std::string(c.begin(), c.end()));
    }
    EXPECT_EQ(all.size(), std::uint64_t{1} << n) << "every combination exactly once";
  }
}

TEST(crashsim_enumerate, ThreeCandidateWordsCountThree) {
  UnitSet s = words(4, 2);  // words 0 and 2 have a flush-time value
  Enumerator e(s, 1, 7, 1);
  ASSERT_TRUE(e.exhaustive());
  EXPECT_EQ(e.count(0), 3u * 2 * 3 * 2);
}

TEST(crashsim_enumerate, LargerSetsGetStructuredFamiliesThenRandom) {
  UnitSet s = words(40, 5);
  Enumerator e(s, 9, 3, 1);
  ASSERT_FALSE(e.exhaustive());
  // none, all, all-at-flush-time, 40 omitted, 40 alone, 39 prefixes, 39 suffixes, 5 lines alone, 5 omitted
  EXPECT_EQ(e.fixed(), 1u + 1 + 1 + 40 + 40 + 39 + 39 + 5 + 5);
  EXPECT_EQ(e.count(10), e.fixed() + 10);
  std::vector<std::uint8_t> c;
  e.choices(0, c);
  EXPECT_EQ(std::count(c.begin(), c.end(), 0), 40) << "none";
  e.choices(1, c);
  for (std::size_t i = 0; i < 40; ++i) EXPECT_EQ(c[i], s.units[i].n - 1) << "all current";
  e.choices(2, c);
  EXPECT_EQ(c[0], 1) << "word 0's flush-time value";
  e.choices(3, c);  // first "omitted": word 0 durable, the rest current
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], 1);
  EXPECT_EQ(e.family(3), "one omitted");
  e.choices(3 + 40, c);  // first "alone"
  EXPECT_EQ(c[0], 2);
  EXPECT_EQ(std::count(c.begin(), c.end(), 0), 39);
  e.choices(3 + 80, c);  // first prefix: word 0 only
  EXPECT_NE(c[0], 0);
  EXPECT_EQ(std::count(c.begin(), c.end(), 0), 39);
  EXPECT_EQ(e.family(3 + 80 + 39), "suffix");
  e.choices(3 + 80 + 39, c);  // first suffix: last word only
  EXPECT_NE(c[39], 0);
  EXPECT_EQ(std::count(c.begin(), c.end(), 0), 39);
  e.choices(3 + 80 + 78, c);  // line 0 alone: words 0..7
  for (std::size_t i = 0; i < 40; ++i) EXPECT_EQ(c[i] != 0, i < 8) << i;
  EXPECT_EQ(e.family(e.fixed()), "random");
}

TEST(crashsim_enumerate, PositionFamiliesAreCappedForHugeSets) {
  UnitSet s = words(100000);
  Enumerator e(s, 1, 1, 1);
  EXPECT_LE(e.fixed(), 2 + 6 * kMaxPositions + 1);
}

TEST(crashsim_enumerate, StatesAreDeterministicFromSeedPointAndNumber) {
  UnitSet s = words(30);
  Enumerator a(s, 5, 12, 1), b(s, 5, 12, 1), other(s, 6, 12, 1);
  std::vector<std::uint8_t> ca, cb, co;
  int differ = 0;
  for (std::uint64_t r = 0; r < 20; ++r) {
    a.choices(a.fixed() + r, ca);
    b.choices(b.fixed() + r, cb);
    other.choices(other.fixed() + r, co);
    EXPECT_EQ(ca, cb);
    differ += ca != co;
  }
  EXPECT_GT(differ, 15) << "another seed gives other random states";
}

TEST(crashsim_enumerate, DepthTwoHasASmallerExhaustiveLimit) {
  UnitSet s = words(12);
  EXPECT_TRUE(Enumerator(s, 1, 1, 1).exhaustive());
  EXPECT_FALSE(Enumerator(s, 1, 1, 2).exhaustive());
}

TEST(crashsim_enumerate, KeysRoundTrip) {
  CrashKey k;
  k.workload = "refarray.missing_flush";
  k.durability = Durability::msync;
  k.seed = 77;
  k.steps = 24;
  k.extend_ops = 3;
  k.point = 123;
  k.subset = 4567;
  const std::string text = format_key(k);
  EXPECT_EQ(text, "cs1:refarray.missing_flush:msync:77:24:3:123.4567");
  auto back = parse_key(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(format_key(back.value()), text);
  k.depth2 = true;
  k.point2 = 9;
  k.subset2 = 1;
  auto back2 = parse_key(format_key(k));
  ASSERT_TRUE(back2.ok());
  EXPECT_TRUE(back2.value().depth2);
  EXPECT_EQ(back2.value().point2, 9u);
  EXPECT_EQ(back2.value().subset2, 1u);
  for (const char* bad : {"", "cs1:x", "cs2:a:adr:1:2:3:4.5", "cs1:a:nvm:1:2:3:4.5", "cs1:a:adr:1:2:3:45",
                          "cs1:a:adr:x:2:3:4.5", "cs1::adr:1:2:3:4.5", "cs1:a:adr:1:2:3:4.5+6"})
    EXPECT_FALSE(parse_key(bad).ok()) << bad;
}

}  // namespace
}  // namespace cairn::testing::crashsim
