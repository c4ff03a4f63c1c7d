// verify_test.cpp — the jacobi kernels' verification is not vacuous: in the
// middle of a real (native, in-process) run, the state after N iterations
// passes, while the same state judged as N-1 or N+1 iterations, or with one
// value changed, fails.
#include <gtest/gtest.h>

#include <cstring>

#include "apps/jacobi/kernels.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::apps::jacobi {
namespace {

using cairn::testing::TempDir;

// Wraps a kernel; at verification it also judges tampered variants.
class Probe final : public Simulation {
 public:
  explicit Probe(std::unique_ptr<Simulation> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  Result<void> configure(const RunOptions& o) override { return inner_->configure(o); }
  std::string describe() const override { return inner_->describe(); }
  std::uint64_t default_iterations() const override { return inner_->default_iterations(); }
  void declare(FieldSet& fields) override {
    inner_->declare(fields);
    fields_ = &fields;
  }
  void initialize(Team& team) override { inner_->initialize(team); }
  void step(std::uint64_t i, Team& team) override { inner_->step(i, team); }

  Verification verify(std::uint64_t n, Team& team) override {
    const Verification ok = inner_->verify(n, team);
    previous = inner_->verify(n - 1, team);
    next = inner_->verify(n + 1, team);
    // Change one value in the middle of the first field holding doubles that
    // the run computed (psi.0 / the convolution), judge, restore.
    for (const auto& f : fields_->all()) {
      if (f->name() != "psi.0" && f->name() != "convolution") continue;
      auto* v = const_cast<double*>(f->kind() == FieldKind::dual ? f->in<double>() : f->data<double>());
      double& x = v[f->count<double>() / 2 + 3];
      const double saved = x;
      x += 1e-8;
      tampered = inner_->verify(n, team);
      x = saved;
    }
    return ok;
  }

  Verification previous, next, tampered;

 private:
  std::unique_ptr<Simulation> inner_;
  FieldSet* fields_ = nullptr;
};

RunOptions options(const char* size, std::uint64_t iterations) {
  RunOptions o;
  o.size = size;
  o.iterations = iterations;
  o.threads = 2;
  o.quiet = true;
  return o;
}

TEST(JacobiVerify, StreamFunctionCatchesWrongIterationCountAndTampering) {
  Probe probe(make_stream_function());
  auto r = run_simulation(probe, options("40", 50));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->verification.passed) << r->verification.value;
  EXPECT_LT(r->verification.value, 1e-14);
  EXPECT_GT(r->verification.tolerance, 0);
  // One iteration off: the oscillating mode alone is off by ~0.25 |lambda|^N.
  EXPECT_FALSE(probe.previous.passed);
  EXPECT_GT(probe.previous.value, 0.1);
  EXPECT_FALSE(probe.next.passed);
  EXPECT_GT(probe.next.value, 0.1);
  EXPECT_FALSE(probe.tampered.passed);
  EXPECT_NEAR(probe.tampered.value, 1e-8, 1e-12);
}

// The streaming kernel (rows through a buffer and non-temporal stores) and
// the cached one compute the same bits, natively and persisted in place.
TEST(JacobiVerify, StreamingAndCachedStoresGiveTheSameBits) {
  std::uint64_t sum[2][2] = {};
  int k = 0;
  for (const Stores stores : {Stores::streaming, Stores::cached}) {
    auto native = make_stream_function(stores);
    auto a = run_simulation(*native, options("61", 37));
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_TRUE(a->verification.passed);
    sum[k][0] = a->checksum;
    auto persisted = make_stream_function(stores);
    TempDir dir;
    RunOptions o = options("61", 37);
    o.strategy = "in-place";
    o.dir = dir.path();
    auto b = run_simulation(*persisted, o);
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_TRUE(b->verification.passed);
    sum[k][1] = b->checksum;
    ++k;
  }
  EXPECT_EQ(sum[0][0], sum[1][0]);
  EXPECT_EQ(sum[0][0], sum[0][1]);
  EXPECT_EQ(sum[0][0], sum[1][1]);
}

TEST(JacobiVerify, SharpenCatchesAMissingBandAndTampering) {
  Probe probe(make_sharpen());
  auto r = run_simulation(probe, options("48", 8));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->verification.passed) << r->verification.detail;
  EXPECT_LT(r->verification.value, 1e-9);
  // Judged as 7 bands done, the eighth band holds values that should be 0.
  EXPECT_FALSE(probe.previous.passed);
  EXPECT_GT(probe.previous.value, 1.0);
  EXPECT_FALSE(probe.tampered.passed);
  EXPECT_NEAR(probe.tampered.value, 1e-8, 1e-10);
}

}  // namespace
}  // namespace cairn::apps::jacobi
