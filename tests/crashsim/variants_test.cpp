// variants_test.cpp — testing the tester: every deliberately broken variant
// must produce at least one failing crash state, and replaying its key must
// fail again with the same reason (a key is a complete description).
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim {
namespace {

std::vector<std::string> broken_names() {
  std::vector<std::string> out;
  // File workloads' variants need interpose.cpp, which this executable does
  // not link: undo_log_crash_test.cpp tests them.
  for (const Workload* w : workloads())
    if (w->broken && !w->make_file) out.push_back(w->name);
  return out;
}

class BrokenVariant : public ::testing::TestWithParam<std::string> {};

TEST_P(BrokenVariant, IsCaughtAndItsKeyReplays) {
  const Workload* w = find_workload(GetParam());
  ASSERT_NE(w, nullptr);
  Options o;
  o.max_failures = 1;
  const Report r = run(*w, o);
  ASSERT_FALSE(r.passed()) << GetParam() << " is broken on purpose but every state passed: " << r.summary();
  ASSERT_EQ(r.failures.size(), 1u);
  const Failure& f = r.failures.front();
  EXPECT_EQ(f.key.rfind("cs1:" + GetParam() + ":adr:", 0), 0u) << f.key;

  auto again = replay(f.key);
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_FALSE(again.value().passed()) << "replaying " << f.key << " passed";
  EXPECT_EQ(again.value().failures.front().key, f.key);
  EXPECT_EQ(again.value().failures.front().reason, f.reason);
  EXPECT_LE(again.value().states, 2u);  // the depth-1 state (and the depth-2 one if the key has one)
}

INSTANTIATE_TEST_SUITE_P(All, BrokenVariant, ::testing::ValuesIn(broken_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& c : n)
                             if (c == '.') c = '_';
                           return n;
                         });

TEST(BrokenVariants, ThereAreAtLeastTen) { EXPECT_GE(broken_names().size(), 10u); }

// The PM-octree's broken variants (octree/internal.hpp) stay in the list above.
TEST(BrokenVariants, IncludeThePmOctreeOnes) {
  const auto names = broken_names();
  for (const char* n : {"octree.publish_before_flush", "octree.no_copy_on_write", "octree.gc_ignores_committed",
                        "octree.stale_twin", "octree.gc_ignores_previous"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

}  // namespace
}  // namespace cairn::testing::crashsim
