// cg_app.cpp — the `npb-cg` proxy application's Simulation: NPB CG (inverse power iteration
// with 25 conjugate gradient iterations per outer step; apps/npb/cg.hpp) with
// any persistence strategy. Options: `npb-cg --help`; framework:
// apps/common/app.hpp.
//
// Sample runs:
//   npb-cg --size A                                       native, class A, verifies zeta
//   npb-cg --size A --strategy in-place --threads 2       p, r, z versioned in place every CG iteration
//   npb-cg --size S --strategy undo-log --crash-at 200 ; npb-cg --size S --strategy undo-log --resume
//     (the resumed run verifies and ends with the checksum of an uninterrupted run)
//   npb-cg --size W --strategy file --persist-every 25    one checkpoint per outer iteration
//
// Persisted state (seed 004 Table 2: CG's target objects are p, r and z):
//   z, r, p   dual fields: one iteration of the app is one CG iteration, which
//             reads the versions of the last one and writes all of the other
//             (in-place versioning, no copy)
//   x         plain: it changes only when an outer iteration ends (x = z/|z|)
//   scalars   dual: rho, zeta, ||r||, outer and inner iteration counts
// The sparse matrix is rebuilt (deterministically) at every start; it is read-only.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "apps/common/app.hpp"
#include "apps/npb/apps.hpp"
#include "apps/npb/cg.hpp"

namespace cairn::apps {
namespace {

npb::LoopRunner team_loops(Team& team) {
  return [&team](std::size_t n, const npb::LoopBody& body) { team.parallel_for(0, n, body); };
}

class NpbCg final : public Simulation {
 public:
  std::string name() const override { return "npb-cg"; }

  Result<void> configure(const RunOptions& options) override {
    const std::string size = options.size.empty() ? "W" : options.size;
    std::optional<npb::CgClass> cls;
    if (size.size() == 1) cls = npb::cg_class(static_cast<char>(std::toupper(static_cast<unsigned char>(size[0]))));
    if (!cls)
      return make_error(Errc::invalid_argument, "--size '" + options.size +
                                                    "': npb-cg takes an NPB class: S (na 1400), W (7000), A (14000), "
                                                    "B (75000) or C (150000)");
    solver_.emplace(*cls);
    return {};
  }

  std::string describe() const override {
    const auto& c = solver_->problem();
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "NPB CG class %c: na %d, %zu nonzeros, shift %g; %d outer x %d CG iterations, one per app iteration",
                  c.name, c.na, solver_->nonzeros(), c.shift, c.niter, npb::kCgIterations);
    return buf;
  }

  std::uint64_t default_iterations() const override { return static_cast<std::uint64_t>(solver_->total_steps()); }

  void declare(FieldSet& fields) override {
    const std::size_t bytes = static_cast<std::size_t>(solver_->n()) * sizeof(double);
    z_ = fields.dual("z", bytes);
    r_ = fields.dual("r", bytes);
    p_ = fields.dual("p", bytes);
    x_ = fields.plain("x", bytes);
    scalars_ = fields.dual("scalars", sizeof(npb::CgScalars));
  }

  void initialize(Team& team) override {
    solver_->init(
        npb::CgVectors{x_->data<double>(), z_->initial<double>(), r_->initial<double>(), p_->initial<double>()},
        *scalars_->initial<npb::CgScalars>(), team_loops(team));
  }

  void step(std::uint64_t iteration, Team& team) override {
    const npb::CgScalars& s_in = *scalars_->in<npb::CgScalars>();
    if (static_cast<std::uint64_t>(npb::CgSolver::steps_done(s_in)) != iteration) {
      // The persisted counters and the driver's disagree: a restore mixed versions.
      std::fprintf(stderr, "npb-cg: iteration %llu, but the state is after CG iteration %lld\n",
                   static_cast<unsigned long long>(iteration), static_cast<long long>(npb::CgSolver::steps_done(s_in)));
      std::abort();
    }
    double* x = x_->data<double>();
    const npb::CgInputs in{x, z_->in<double>(), r_->in<double>(), p_->in<double>()};
    const npb::CgVectors out{x, z_->out<double>(), r_->out<double>(), p_->out<double>()};
    // Hand each vector to the flusher as soon as this iteration has written it.
    solver_->step(in, out, s_in, *scalars_->out<npb::CgScalars>(), team_loops(team), [&](npb::CgPart part) {
      switch (part) {
        case npb::CgPart::z: z_->done_writing(); break;
        case npb::CgPart::r: r_->done_writing(); break;
        case npb::CgPart::p: p_->done_writing(); break;
        case npb::CgPart::x: x_->done_writing(); break;
      }
    });
  }

  std::string progress_note(Team&) override {
    const npb::CgScalars& s = *scalars_->in<npb::CgScalars>();
    char buf[96];
    std::snprintf(buf, sizeof buf, "outer %lld/%d, zeta %.13f", static_cast<long long>(s.outer),
                  solver_->problem().niter, s.zeta);
    return buf;
  }

  Verification verify(std::uint64_t iterations, Team&) override {
    const npb::CgScalars& s = *scalars_->in<npb::CgScalars>();
    const auto res = solver_->verify(s);
    const auto& c = solver_->problem();
    Verification v;
    v.passed = res.verified;
    char buf[240];
    std::snprintf(buf, sizeof buf, "zeta %.13f, relative error", res.zeta);
    v.quantity = buf;
    v.value = res.relative_error;
    v.tolerance = npb::kCgTolerance;
    if (iterations == static_cast<std::uint64_t>(solver_->total_steps()))
      std::snprintf(buf, sizeof buf, "zeta = %.13f, official class %c value %.13f, ||x - A z|| = %.3e", res.zeta,
                    c.name, res.reference, s.rnorm);
    else
      std::snprintf(buf, sizeof buf,
                    "zeta = %.13f after %llu CG iterations; the official value %.13f is for exactly %lld (%d x %d)",
                    res.zeta, static_cast<unsigned long long>(iterations), res.reference,
                    static_cast<long long>(solver_->total_steps()), c.niter, npb::kCgIterations);
    v.detail = buf;
    return v;
  }

 private:
  std::optional<npb::CgSolver> solver_;
  Field *z_ = nullptr, *r_ = nullptr, *p_ = nullptr, *x_ = nullptr, *scalars_ = nullptr;
};

}  // namespace

std::unique_ptr<Simulation> make_npb_cg() { return std::make_unique<NpbCg>(); }

}  // namespace cairn::apps
