// main.cpp — the `jacobi` proxy application: seed 003's stream-function
// Jacobi solver (default) or its sharpening stencil (--kernel sharpen), with
// any persistence strategy. Options: `jacobi --help`; framework: apps/common/app.hpp.
//
// Sample runs:
//   jacobi --size 1024 --iterations 1000 --strategy in-place --crash-at 400
//   jacobi --size 1024 --iterations 1000 --strategy in-place --resume
//     (the final checksum equals that of `jacobi --size 1024 --iterations 1000`)
//   jacobi --kernel sharpen --size 2048 --strategy undo-log --json out.json
#include "apps/jacobi/kernels.hpp"

namespace cairn::apps::jacobi {
namespace {

// Picks the kernel once --kernel is parsed and forwards everything to it.
class JacobiApp final : public Simulation {
 public:
  std::string name() const override { return impl_ ? impl_->name() : "jacobi"; }
  void add_options(CLI::App& cli) override {
    cli.add_option("--kernel", kernel_, "stream (Jacobi stream-function solver) or sharpen (image sharpening)")
        ->check(CLI::IsMember({"stream", "sharpen"}));
    cli.add_option("--stores", stores_,
                   "stream kernel: streaming (rows leave the cache by non-temporal stores, default) or cached")
        ->check(CLI::IsMember({"streaming", "cached"}));
  }
  Result<void> configure(const RunOptions& options) override {
    impl_ = kernel_ == "sharpen" ? make_sharpen()
                                 : make_stream_function(stores_ == "cached" ? Stores::cached : Stores::streaming);
    return impl_->configure(options);
  }
  std::string describe() const override { return impl_->describe(); }
  std::uint64_t default_iterations() const override { return impl_->default_iterations(); }
  void declare(FieldSet& fields) override { impl_->declare(fields); }
  void initialize(Team& team) override { impl_->initialize(team); }
  void step(std::uint64_t iteration, Team& team) override { impl_->step(iteration, team); }
  std::string progress_note(Team& team) override { return impl_->progress_note(team); }
  Verification verify(std::uint64_t iterations, Team& team) override { return impl_->verify(iterations, team); }

 private:
  std::string kernel_ = "stream";
  std::string stores_ = "streaming";
  std::unique_ptr<Simulation> impl_;
};

}  // namespace
}  // namespace cairn::apps::jacobi

int main(int argc, char** argv) {
  return cairn::apps::run_main(argc, argv, std::make_unique<cairn::apps::jacobi::JacobiApp>(),
                               "jacobi: seed 003's stream-function Jacobi solver and sharpening stencil");
}
