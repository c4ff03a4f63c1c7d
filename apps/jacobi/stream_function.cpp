// stream_function.cpp — seed 003's 2D stream-function kernel: Jacobi
// iterations for Laplace's equation, psi_new[i][j] = 0.25 * (psi[i+1][j] +
// psi[i-1][j] + psi[i][j+1] + psi[i][j-1]), on an (n+2)x(n+2) grid of the
// unit square whose outer rows and columns hold the boundary values.
//
// Sample runs:
//   jacobi --size 256                                   2000 iterations, native
//   jacobi --size 2048 --iterations 500 --strategy in-place --threads 2
//   jacobi --size 64 --iterations 300 --strategy undo-log --crash-at 123 ; jacobi ... --resume
//
// The problem, chosen so that the result after ANY number of iterations is
// known in closed form (so a run that skipped, repeated or mixed iterations
// fails verification, not just one that diverged):
//   boundary   psi* = x^2 - y^2, the stream function of stagnation-point flow.
//              It is harmonic, and the 5-point Laplacian of a quadratic is
//              exact, so psi* is also the exact fixed point of the discrete
//              iteration: no discretisation error at all.
//   start      psi* plus three eigenvectors of the Jacobi operator with zero
//              boundary values, phi_pq = sin(p pi x) sin(q pi y), whose
//              eigenvalue is lambda_pq = (cos(p pi h) + cos(q pi h)) / 2:
//              a smooth mode (1,1), a middle one (3,2) and the oscillating
//              mode (n,n), whose eigenvalue is -cos(pi h) ~ -1 (it changes
//              sign every iteration, so an iteration lost or done twice flips
//              it).
//   after N    psi_N = psi* + sum_k A_k lambda_k^N phi_k exactly, in exact
//              arithmetic. Verification: max |psi_N - that| <= tolerance.
// The state is split into row blocks (fields psi.0, psi.1, ...) so that each
// block is handed to the in-place flusher (Field::done_writing) as soon as a
// step has computed it: the flush of block b overlaps the computation of b+1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "apps/jacobi/kernels.hpp"

namespace cairn::apps::jacobi {
namespace {

struct Mode {
  std::size_t p, q;
  double amplitude;
};

class StreamFunction final : public Simulation {
 public:
  explicit StreamFunction(Stores stores) : streaming_(stores == Stores::streaming) {}
  std::string name() const override { return "jacobi"; }

  Result<void> configure(const RunOptions& options) override {
    if (!options.size.empty()) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(options.size.c_str(), &end, 10);
      if (*end != '\0' || v < 4 || v > 65536)
        return make_error(Errc::invalid_argument, "--size '" + options.size +
                                                      "': the stream kernel takes the number of interior grid points "
                                                      "per side, an integer from 4 to 65536");
      n_ = static_cast<std::size_t>(v);
    }
    w_ = n_ + 2;
    h_ = 1.0 / static_cast<double>(n_ + 1);
    modes_ = {{1, 1, 0.5}, {3, 2, 0.25}, {n_, n_, 0.125}};
    // Blocks of at least 8 rows, at most 8 blocks (each is one region).
    blocks_ = std::clamp<std::size_t>(w_ / 8, 1, 8);
    for (std::size_t b = 0; b <= blocks_; ++b) first_row_.push_back(w_ * b / blocks_);
    return {};
  }

  std::string describe() const override {
    return std::to_string(n_) + "x" + std::to_string(n_) +
           " stream function (Laplace, psi = x^2 - y^2 on the boundary), Jacobi iterations, " +
           std::to_string(blocks_) + " row blocks";
  }
  std::uint64_t default_iterations() const override { return 2000; }

  void declare(FieldSet& fields) override {
    for (std::size_t b = 0; b < blocks_; ++b)
      block_.push_back(
          fields.dual("psi." + std::to_string(b), (first_row_[b + 1] - first_row_[b]) * w_ * sizeof(double)));
    for (std::size_t b = 0; b < blocks_; ++b)
      for (std::size_t r = first_row_[b]; r < first_row_[b + 1]; ++r) block_of_row_.push_back(b);
  }

  void initialize(Team& team) override {
    const auto sines = mode_tables();
    team.parallel_for(0, w_, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t r = lo; r < hi; ++r) {
        double* row = initial_row(r);
        for (std::size_t c = 0; c < w_; ++c) {
          double v = exact(c, r);
          if (r > 0 && r <= n_ && c > 0 && c <= n_)
            for (std::size_t k = 0; k < modes_.size(); ++k) v += modes_[k].amplitude * sines.x[k][c] * sines.y[k][r];
          row[c] = v;
        }
      }
    });
  }

  void step(std::uint64_t, Team& team) override {
    for (std::size_t b = 0; b < blocks_; ++b) {
      Field& block = *block_[b];
      team.parallel_for(first_row_[b], first_row_[b + 1], [&](std::size_t lo, std::size_t hi) {
        // Streaming: each row is computed into a buffer that stays in cache,
        // then leaves it with non-temporal stores.
        thread_local std::vector<double> buffer;
        if (streaming_) buffer.resize(w_);
        for (std::size_t r = lo; r < hi; ++r) {
          double* out = out_row(r);
          compute_row(r, streaming_ ? buffer.data() : out);
          if (streaming_) block.stream(out, buffer.data(), w_ * sizeof(double));
        }
        if (streaming_) block.stream_fence();
      });
      if (streaming_)
        block.done_streaming();
      else
        block.done_writing();
    }
  }

  std::string progress_note(Team& team) override {
    const double d = team.parallel_reduce(
        0, w_, 0.0,
        [&](std::size_t lo, std::size_t hi) {
          double m = 0;
          for (std::size_t r = lo; r < hi; ++r)
            for (std::size_t c = 0; c < w_; ++c) m = std::max(m, std::fabs(in_row(r)[c] - exact(c, r)));
          return m;
        },
        [](double a, double b) { return std::max(a, b); });
    char buf[64];
    std::snprintf(buf, sizeof buf, "max |psi - psi*| = %.3e", d);
    return buf;
  }

  Verification verify(std::uint64_t iterations, Team& team) override {
    // The prediction psi* + sum_k A_k lambda_k^N phi_k, from tables of the
    // sines per axis.
    std::vector<double> decay;
    for (const Mode& m : modes_)
      decay.push_back(m.amplitude * std::pow(eigenvalue(m), static_cast<double>(iterations)));
    const auto sines = mode_tables();
    const auto& sx = sines.x;
    const auto& sy = sines.y;
    struct Err {
      double predicted = 0, solution = 0, residual = 0;
    };
    auto worst = [](Err a, Err b) {
      return Err{std::max(a.predicted, b.predicted), std::max(a.solution, b.solution),
                 std::max(a.residual, b.residual)};
    };
    const Err e = team.parallel_reduce(
        0, w_, Err{},
        [&](std::size_t lo, std::size_t hi) {
          Err acc;
          for (std::size_t r = lo; r < hi; ++r) {
            const double* row = in_row(r);
            for (std::size_t c = 0; c < w_; ++c) {
              double pred = exact(c, r);
              const bool interior = r > 0 && r <= n_ && c > 0 && c <= n_;
              if (interior)
                for (std::size_t k = 0; k < modes_.size(); ++k) pred += decay[k] * sx[k][c] * sy[k][r];
              acc.predicted = std::max(acc.predicted, std::fabs(row[c] - pred));
              acc.solution = std::max(acc.solution, std::fabs(row[c] - exact(c, r)));
              if (interior)
                acc.residual = std::max(acc.residual, std::fabs(in_row(r - 1)[c] + in_row(r + 1)[c] + row[c - 1] +
                                                                row[c + 1] - 4 * row[c]));
            }
          }
          return acc;
        },
        worst);
    // Tolerance. In exact arithmetic the difference is 0. In floating point,
    // every step adds to each point at most ~1.2 eps S of rounding (three
    // additions of terms bounded by S = max|psi*| + sum A_k, then an exact
    // multiplication by 0.25), the rounded grid coordinates make psi* a fixed
    // point only up to ~2 eps S, and the prediction's pow() and sines carry
    // ~N eps sum A_k. The Jacobi operator does not amplify errors in the max
    // norm (an average of four values), so the errors add at most linearly:
    // |difference| <= ~4 (N + 16) eps S. Twice that is the tolerance: about
    // 1e-11 for 4000 iterations, while one lost or repeated iteration moves
    // the oscillating mode alone by 2 * 0.125 * |lambda|^N (0.18 for n = 256
    // after 4000 iterations).
    double amplitude_sum = 0;
    for (const Mode& m : modes_) amplitude_sum += m.amplitude;
    const double s = 1.0 + amplitude_sum;
    Verification v;
    v.quantity = "max |psi - closed form|";
    v.value = e.predicted;
    v.tolerance = 8.0 * (static_cast<double>(iterations) + 16.0) * std::numeric_limits<double>::epsilon() * s;
    v.passed = e.predicted <= v.tolerance;
    char buf[160];
    std::snprintf(buf, sizeof buf, "distance to the solution psi* = %.3e, max residual |lap psi| = %.3e (h^2 units)",
                  e.solution, e.residual);
    v.detail = buf;
    return v;
  }

 private:
  void compute_row(std::size_t r, double* out) const {
    const double* mid = in_row(r);
    if (r == 0 || r == n_ + 1) {  // boundary rows: carried over unchanged
      std::copy(mid, mid + w_, out);
      return;
    }
    const double* up = in_row(r - 1);
    const double* down = in_row(r + 1);
    out[0] = mid[0];
    for (std::size_t c = 1; c <= n_; ++c) out[c] = 0.25 * (up[c] + down[c] + mid[c - 1] + mid[c + 1]);
    out[n_ + 1] = mid[n_ + 1];
  }
  double coordinate(std::size_t i) const { return static_cast<double>(i) * h_; }
  double exact(std::size_t c, std::size_t r) const {
    const double x = coordinate(c), y = coordinate(r);
    return x * x - y * y;
  }
  // sin(p pi x_i) = sin(pi p i / (n+1)), with p i reduced modulo 2(n+1) in
  // integers first so the argument stays below 2 pi and the sine is accurate
  // to a few ulps even for the (n, n) mode.
  double mode_factor(std::size_t p, std::size_t i) const {
    const std::size_t k = (p * i) % (2 * (n_ + 1));
    return std::sin(std::numbers::pi * static_cast<double>(k) * h_);
  }
  // sin(p pi x_c) and sin(q pi y_r) of every mode, per grid index.
  struct Sines {
    std::vector<std::vector<double>> x, y;
  };
  Sines mode_tables() const {
    Sines s;
    for (const Mode& m : modes_) {
      std::vector<double> x(w_), y(w_);
      for (std::size_t i = 0; i < w_; ++i) {
        x[i] = mode_factor(m.p, i);
        y[i] = mode_factor(m.q, i);
      }
      s.x.push_back(std::move(x));
      s.y.push_back(std::move(y));
    }
    return s;
  }
  double eigenvalue(const Mode& m) const {
    return 0.5 * (std::cos(static_cast<double>(m.p) * std::numbers::pi * h_) +
                  std::cos(static_cast<double>(m.q) * std::numbers::pi * h_));
  }
  const double* in_row(std::size_t r) const {
    const std::size_t b = block_of_row_[r];
    return block_[b]->in<double>() + (r - first_row_[b]) * w_;
  }
  double* out_row(std::size_t r) const {
    const std::size_t b = block_of_row_[r];
    return block_[b]->out<double>() + (r - first_row_[b]) * w_;
  }
  double* initial_row(std::size_t r) const {
    const std::size_t b = block_of_row_[r];
    return block_[b]->initial<double>() + (r - first_row_[b]) * w_;
  }

  bool streaming_ = true;
  std::size_t n_ = 256, w_ = 0, blocks_ = 1;
  double h_ = 0;
  std::vector<Mode> modes_;
  std::vector<std::size_t> first_row_, block_of_row_;
  std::vector<Field*> block_;
};

}  // namespace

std::unique_ptr<Simulation> make_stream_function(Stores stores) { return std::make_unique<StreamFunction>(stores); }

}  // namespace cairn::apps::jacobi
