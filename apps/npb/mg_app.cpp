// mg_app.cpp — the `npb-mg` proxy application's Simulation: NPB MG (V-cycle multigrid for a
// periodic 3D Poisson problem; apps/npb/mg.hpp) with any persistence strategy.
// Options: `npb-mg --help`; framework: apps/common/app.hpp.
//
// Sample runs:
//   npb-mg --size A                                       native, class A, verifies the residual norm
//   npb-mg --size A --strategy in-place --threads 2       u and r versioned in place every V-cycle
//   npb-mg --size S --strategy shadow --crash-at 2 ; npb-mg --size S --strategy shadow --resume
//     (the resumed run verifies and ends with the checksum of an uninterrupted run)
//   npb-mg --size B --strategy nt-copy --json mg-b.json
//
// Persisted state: one app iteration is one V-cycle plus the residual update.
//   u, r      dual fields, the finest level with its periodic ghosts. A
//             V-cycle reads r only to restrict it, then writes every point of
//             u and r afresh, so in-place versioning needs no carry-over
//             (seed 004 Table 2 lists MG's r as non-uniformly updated; in this
//             formulation it is not)
//   scalars   dual: V-cycles done, the last residual norms
// The right-hand side v (zran3) is regenerated at every start; it is read-only.
// The coarse levels are scratch inside the kernel.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "apps/common/app.hpp"
#include "apps/npb/apps.hpp"
#include "apps/npb/mg.hpp"

namespace cairn::apps {
namespace {

npb::LoopRunner team_loops(Team& team) {
  return [&team](std::size_t n, const npb::LoopBody& body) { team.parallel_for(0, n, body); };
}

class NpbMg final : public Simulation {
 public:
  std::string name() const override { return "npb-mg"; }

  Result<void> configure(const RunOptions& options) override {
    const std::string size = options.size.empty() ? "W" : options.size;
    std::optional<npb::MgClass> cls;
    if (size.size() == 1) cls = npb::mg_class(static_cast<char>(std::toupper(static_cast<unsigned char>(size[0]))));
    if (!cls)
      return make_error(Errc::invalid_argument, "--size '" + options.size +
                                                    "': npb-mg takes an NPB class: S (32^3), W (128^3), A (256^3, 4 "
                                                    "V-cycles), B (256^3, 20) or C (512^3, 20)");
    solver_.emplace(*cls);
    return {};
  }

  std::string describe() const override {
    const auto& c = solver_->problem();
    char buf[160];
    std::snprintf(buf, sizeof buf, "NPB MG class %c: %d^3 periodic grid, %d V-cycles, one per app iteration", c.name,
                  c.n, c.nit);
    return buf;
  }

  std::uint64_t default_iterations() const override { return static_cast<std::uint64_t>(solver_->total_steps()); }

  void declare(FieldSet& fields) override {
    const std::size_t bytes = solver_->points() * sizeof(double);
    u_ = fields.dual("u", bytes);
    r_ = fields.dual("r", bytes);
    scalars_ = fields.dual("scalars", sizeof(npb::MgScalars));
  }

  void initialize(Team& team) override {
    solver_->init(u_->initial<double>(), r_->initial<double>(), *scalars_->initial<npb::MgScalars>(), team_loops(team));
  }

  void step(std::uint64_t iteration, Team& team) override {
    const npb::MgScalars& s_in = *scalars_->in<npb::MgScalars>();
    if (static_cast<std::uint64_t>(s_in.iter) != iteration) {
      // The persisted counter and the driver's disagree: a restore mixed versions.
      std::fprintf(stderr, "npb-mg: iteration %llu, but the state is after V-cycle %lld\n",
                   static_cast<unsigned long long>(iteration), static_cast<long long>(s_in.iter));
      std::abort();
    }
    solver_->step(u_->in<double>(), r_->in<double>(), u_->out<double>(), r_->out<double>(), s_in,
                  *scalars_->out<npb::MgScalars>(), team_loops(team), [&](npb::MgPart part) {
                    if (part == npb::MgPart::u) u_->done_writing();
                    if (part == npb::MgPart::r) r_->done_writing();
                  });
  }

  std::string progress_note(Team&) override {
    char buf[64];
    std::snprintf(buf, sizeof buf, "||r|| = %.13e", scalars_->in<npb::MgScalars>()->rnm2);
    return buf;
  }

  Verification verify(std::uint64_t iterations, Team&) override {
    const npb::MgScalars& s = *scalars_->in<npb::MgScalars>();
    const auto res = solver_->verify(s);
    const auto& c = solver_->problem();
    Verification v;
    v.passed = res.verified;
    char buf[240];
    std::snprintf(buf, sizeof buf, "L2 residual norm %.13e, relative error", res.rnm2);
    v.quantity = buf;
    v.value = res.relative_error;
    v.tolerance = npb::kMgTolerance;
    if (iterations == static_cast<std::uint64_t>(c.nit))
      std::snprintf(buf, sizeof buf, "||r||_2 = %.13e, official class %c value %.13e; max |r| = %.3e", res.rnm2, c.name,
                    res.reference, s.rnmu);
    else
      std::snprintf(buf, sizeof buf, "||r||_2 = %.13e after %llu V-cycles; the official value %.13e is for exactly %d",
                    res.rnm2, static_cast<unsigned long long>(iterations), res.reference, c.nit);
    v.detail = buf;
    return v;
  }

 private:
  std::optional<npb::MgSolver> solver_;
  Field *u_ = nullptr, *r_ = nullptr, *scalars_ = nullptr;
};

}  // namespace

std::unique_ptr<Simulation> make_npb_mg() { return std::make_unique<NpbMg>(); }

}  // namespace cairn::apps
