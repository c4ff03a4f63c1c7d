// verify_test.cpp — the sph verification is not vacuous, and the layouts and
// thread counts agree. In-process runs (native, --size test): at the end of a
// real run the state passes, while the same state with a particle removed,
// duplicated, poisoned with NaN, pushed out of the box, made heavier, or
// judged as if nothing had moved, fails. The three layouts run the same
// arithmetic in the same order, so their particles are bit-identical after N
// steps (the stated tolerance is zero), for 1 and 2 threads alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "apps/sph/sph.hpp"

namespace cairn::apps::sph {
namespace {

// Wraps the app; at verification it keeps a snapshot and judges broken states.
class Probe final : public Simulation {
 public:
  explicit Probe(Layout layout, bool tamper) : app_(layout), tamper_(tamper) {}
  std::string name() const override { return app_.name(); }
  Result<void> configure(const RunOptions& o) override { return app_.configure(o); }
  std::string describe() const override { return app_.describe(); }
  std::uint64_t default_iterations() const override { return app_.default_iterations(); }
  void declare(FieldSet& fields) override { app_.declare(fields); }
  void initialize(Team& team) override { app_.initialize(team); }
  void step(std::uint64_t i, Team& team) override { app_.step(i, team); }
  void before_commit(Team& team) override { app_.before_commit(team); }
  void after_restore(Team& team) override { app_.after_restore(team); }

  Verification verify(std::uint64_t n, Team& team) override {
    const Verification ok = app_.verify(n, team);
    std::size_t misplaced = 0;
    snapshot = app_.snapshot(&misplaced);
    EXPECT_EQ(misplaced, 0u);
    if (!tamper_) return ok;
    auto judge = [&](std::vector<Particle> q) { return app_.judge(q, 0, n); };
    std::vector<Particle> q = snapshot;
    q.erase(q.begin() + static_cast<std::ptrdiff_t>(q.size() / 2));
    removed = judge(q);
    q = snapshot;
    q[10] = q[11];  // two copies of one particle, one particle lost
    duplicated = judge(q);
    q = snapshot;
    q[q.size() / 3].v[1] = std::numeric_limits<float>::quiet_NaN();
    nan = judge(q);
    q = snapshot;
    q[5].p[0] = -0.01f;
    outside = judge(q);
    q = snapshot;
    q[7].mass *= 1.0001f;
    heavier = judge(q);
    q = snapshot;
    std::swap(q[0], q.back());  // out of cell order
    unsorted = judge(q);
    as_if_at_rest = app_.judge(snapshot, 0, n);  // sanity: the same state passes
    q = snapshot;
    for (Particle& p : q) p.v[0] += 0.5f;  // energy from nowhere: + 0.5 m/s everywhere
    energy = judge(q);
    // And on the live state, through the layout's own structure: a NaN in one
    // particle's position.
    std::size_t k = 0;
    app_.visit([&](Particle& p) {
      if (k++ == 100) p.p[1] = std::numeric_limits<float>::quiet_NaN();
    });
    live_nan = app_.verify(n, team);
    k = 0;
    app_.visit([&](Particle& p) {
      if (k++ == 100) p.p[1] = snapshot[100].p[1];
    });
    live_repaired = app_.verify(n, team);
    return ok;
  }

  SphApp app_;
  bool tamper_;
  std::vector<Particle> snapshot;
  Verification removed, duplicated, nan, outside, heavier, unsorted, as_if_at_rest, energy, live_nan, live_repaired;
};

RunOptions options(std::uint64_t iterations, unsigned threads) {
  RunOptions o;
  o.size = "test";
  o.iterations = iterations;
  o.threads = threads;
  o.quiet = true;
  return o;
}

class SphVerify : public ::testing::TestWithParam<Layout> {};

TEST_P(SphVerify, BrokenStatesFail) {
  Probe probe(GetParam(), true);
  auto r = run_simulation(probe, options(15, 2));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->verification.passed) << r->verification.detail;
  EXPECT_EQ(probe.snapshot.size(), probe.app_.setup().particles);
  EXPECT_TRUE(probe.as_if_at_rest.passed) << probe.as_if_at_rest.detail;
  for (const auto* v : {&probe.removed, &probe.duplicated, &probe.nan, &probe.outside, &probe.heavier, &probe.unsorted,
                        &probe.energy, &probe.live_nan})
    EXPECT_FALSE(v->passed) << v->detail;
  EXPECT_NE(probe.removed.detail.find("3455 particles instead of 3456"), std::string::npos) << probe.removed.detail;
  EXPECT_NE(probe.duplicated.detail.find("duplicate"), std::string::npos) << probe.duplicated.detail;
  EXPECT_NE(probe.nan.detail.find("not finite"), std::string::npos) << probe.nan.detail;
  EXPECT_NE(probe.outside.detail.find("outside the box"), std::string::npos) << probe.outside.detail;
  EXPECT_NE(probe.heavier.detail.find("total mass"), std::string::npos) << probe.heavier.detail;
  EXPECT_NE(probe.unsorted.detail.find("cell order"), std::string::npos) << probe.unsorted.detail;
  EXPECT_GT(probe.energy.value, probe.energy.tolerance);
  EXPECT_NE(probe.live_nan.detail.find("not finite"), std::string::npos) << probe.live_nan.detail;
  EXPECT_TRUE(probe.live_repaired.passed) << probe.live_repaired.detail;
}

INSTANTIATE_TEST_SUITE_P(Layouts, SphVerify, ::testing::Values(Layout::list, Layout::array, Layout::blocked),
                         [](const auto& p) { return std::string(layout_name(p.param)); });

// Before any step the dam has not dropped: judged as N = 1 it fails.
TEST(SphVerifyPhysics, TheDamMustFall) {
  SphApp app;
  ASSERT_TRUE(app.configure(options(1, 1)).ok());
  std::vector<Particle> q = initial_particles(app.setup());
  std::stable_sort(q.begin(), q.end(), [](const Particle& a, const Particle& b) { return a.cell < b.cell; });
  EXPECT_TRUE(app.judge(q, 0, 0).passed) << app.judge(q, 0, 0).detail;
  const Verification v = app.judge(q, 0, 1);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.detail.find("did not drop"), std::string::npos) << v.detail;
}

// Stated tolerance between layouts: zero. Every layout, 1 and 2 threads, gives
// the same particles bit for bit after 25 steps.
TEST(SphAgreement, LayoutsAndThreadCountsAreBitIdentical) {
  std::vector<Particle> reference;
  std::uint64_t reference_sum[3] = {};
  for (const Layout layout : {Layout::blocked, Layout::list, Layout::array}) {
    for (const unsigned threads : {1u, 2u}) {
      SCOPED_TRACE(std::string(layout_name(layout)) + ", " + std::to_string(threads) + " threads");
      Probe probe(layout, false);
      auto r = run_simulation(probe, options(25, threads));
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_TRUE(r->verification.passed) << r->verification.detail;
      ASSERT_EQ(probe.snapshot.size(), probe.app_.setup().particles);
      if (reference.empty()) reference = probe.snapshot;
      EXPECT_EQ(std::memcmp(probe.snapshot.data(), reference.data(), reference.size() * sizeof(Particle)), 0);
      // The persisted state of one layout, whatever the thread count.
      auto& sum = reference_sum[static_cast<int>(layout)];
      if (threads == 1) sum = r->checksum;
      EXPECT_EQ(r->checksum, sum);
    }
  }
  // The particles moved: the comparison is not between initial states.
  auto setup = make_setup("test");
  ASSERT_TRUE(setup.ok());
  const std::vector<Particle> start = initial_particles(*setup);
  double moved = 0;
  for (const Particle& p : reference)
    moved = std::max(moved, std::fabs(static_cast<double>(p.p[1]) - start[p.id].p[1]));
  EXPECT_GT(moved, 1e-4);
}

}  // namespace
}  // namespace cairn::apps::sph
