// sharpen.cpp — seed 003's image-sharpening stencil: every pixel becomes a
// weighted sum over a (2d+1)^2 square around it, the weights being a 2D
// Gaussian of width 1.4 combined with a Laplacian into one filter.
//
// Sample runs:
//   jacobi --kernel sharpen                                1024x1024, 32 bands
//   jacobi --kernel sharpen --size 4096 --strategy in-place --persist-every 4
//   jacobi --kernel sharpen --size 512 --strategy file --crash-at 9 ; ... --resume
//
// Four arrays, as in the seed ("two that are updated and two that are source
// data"), all persisted as plain regions:
//   image        the fuzzy input (n x n, grey levels 0..255), written once
//   filter       the combined filter K = delta - c LoG_sigma, (2d+1)^2 weights
//   convolution  K * image, unclamped
//   sharp        the sharpened image, convolution rounded and clamped to 0..255
// LoG_sigma is the Laplacian of the Gaussian of width sigma = 1.4, truncated
// to d = 8 (a 17x17 square: "a large square region"). c = sigma^2 / 2 makes
// K * f ~ f + (f - G * f), i.e. unsharp masking with strength 1. Pixels
// outside the image count as 0.
// Iteration b computes band b of the rows (the image is cut into as many
// bands as there are iterations), so a crash loses at most K bands of work.
// Updates are non-uniform (one band per iteration), hence plain regions, as
// seed 004 prescribes for such data.
//
// Verification is independent of the step's code path: for every row (every
// pixel when n <= 256, else 16 spread over the row) the convolution is
// recomputed directly in long double with the weights evaluated from the
// formula, not the filter table, and the sharp pixel is compared with it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numbers>
#include <string>

#include "apps/jacobi/kernels.hpp"

namespace cairn::apps::jacobi {
namespace {

constexpr double kSigma = 1.4;
constexpr long kHalf = 8;  // d: the filter is (2d+1)^2
constexpr long kWidth = 2 * kHalf + 1;

class Sharpen final : public Simulation {
 public:
  std::string name() const override { return "jacobi-sharpen"; }

  Result<void> configure(const RunOptions& options) override {
    if (!options.size.empty()) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(options.size.c_str(), &end, 10);
      if (*end != '\0' || v < 16 || v > 65536)
        return make_error(Errc::invalid_argument, "--size '" + options.size +
                                                      "': the sharpen kernel takes the image width in pixels, "
                                                      "an integer from 16 to 65536");
      n_ = static_cast<long>(v);
    }
    bands_ = options.iterations.value_or(default_iterations());
    if (bands_ == 0 || bands_ > static_cast<std::uint64_t>(n_))
      return make_error(Errc::invalid_argument, "--iterations " + std::to_string(bands_) +
                                                    ": the sharpen kernel computes one band of rows per iteration; "
                                                    "give 1 to " +
                                                    std::to_string(n_) + " (the image height)");
    return {};
  }

  std::string describe() const override {
    return std::to_string(n_) + "x" + std::to_string(n_) + " image sharpening (Gaussian 1.4 + Laplacian, " +
           std::to_string(kWidth) + "x" + std::to_string(kWidth) + " filter) in " + std::to_string(bands_) + " bands";
  }
  std::uint64_t default_iterations() const override { return 32; }

  void declare(FieldSet& fields) override {
    const auto pixels = static_cast<std::size_t>(n_ * n_);
    image_ = fields.plain("image", pixels * sizeof(double));
    filter_ = fields.plain("filter", kWidth * kWidth * sizeof(double));
    conv_ = fields.plain("convolution", pixels * sizeof(double));
    sharp_ = fields.plain("sharp", pixels);
  }

  void initialize(Team& team) override {
    double* k = filter_->data<double>();
    for (long a = -kHalf; a <= kHalf; ++a)
      for (long b = -kHalf; b <= kHalf; ++b) k[(a + kHalf) * kWidth + (b + kHalf)] = weight(a, b);
    double* img = image_->data<double>();
    double* conv = conv_->data<double>();
    auto* sharp = sharp_->data<std::uint8_t>();
    team.parallel_for(0, static_cast<std::size_t>(n_), [&](std::size_t lo, std::size_t hi) {
      for (auto i = static_cast<long>(lo); i < static_cast<long>(hi); ++i)
        for (long j = 0; j < n_; ++j) {
          img[i * n_ + j] = fuzzy_pixel(i, j);
          conv[i * n_ + j] = 0;
          sharp[i * n_ + j] = 0;
        }
    });
  }

  void step(std::uint64_t iteration, Team& team) override {
    const auto rows = static_cast<std::uint64_t>(n_);
    const auto first = static_cast<std::size_t>(rows * iteration / bands_);
    const auto last = static_cast<std::size_t>(rows * (iteration + 1) / bands_);
    const double* img = image_->data<double>();
    const double* k = filter_->data<double>();
    double* conv = conv_->data<double>();
    auto* sharp = sharp_->data<std::uint8_t>();
    team.parallel_for(first, last, [&](std::size_t lo, std::size_t hi) {
      for (auto i = static_cast<long>(lo); i < static_cast<long>(hi); ++i)
        for (long j = 0; j < n_; ++j) {
          double sum = 0;
          for (long a = std::max(-kHalf, -i); a <= std::min(kHalf, n_ - 1 - i); ++a) {
            const double* krow = k + (a + kHalf) * kWidth + kHalf;
            const double* irow = img + (i + a) * n_ + j;
            for (long b = std::max(-kHalf, -j); b <= std::min(kHalf, n_ - 1 - j); ++b) sum += krow[b] * irow[b];
          }
          conv[i * n_ + j] = sum;
          sharp[i * n_ + j] = to_grey(sum);
        }
    });
    conv_->done_writing();
    sharp_->done_writing();
  }

  Verification verify(std::uint64_t iterations, Team& team) override {
    const double* conv = conv_->data<double>();
    const auto* sharp = sharp_->data<std::uint8_t>();
    const double* img = image_->data<double>();
    // Rows the run has computed so far; any other row must still be zero.
    const auto done_rows = static_cast<long>(static_cast<std::uint64_t>(n_) * std::min(iterations, bands_) / bands_);
    const long per_row = n_ <= 256 ? n_ : 16;
    struct Check {
      double conv_error = 0;
      std::uint64_t bad_sharp = 0, bad_input = 0;
    };
    const Check c = team.parallel_reduce(
        0, static_cast<std::size_t>(n_), Check{},
        [&](std::size_t lo, std::size_t hi) {
          Check acc;
          for (auto i = static_cast<long>(lo); i < static_cast<long>(hi); ++i)
            for (long s = 0; s < per_row; ++s) {
              const long j = per_row == n_ ? s : (s * n_ / per_row + i * 7) % n_;
              const long at = i * n_ + j;
              if (img[at] != fuzzy_pixel(i, j)) ++acc.bad_input;
              const long double want = i < done_rows ? direct(img, i, j) : 0.0L;
              acc.conv_error = std::max(acc.conv_error, static_cast<double>(std::fabs(conv[at] - want)));
              // The grey level may legitimately differ next to a rounding tie.
              const long double frac = want - std::floor(want);
              const bool near_tie = std::fabs(frac - 0.5L) < 1e-6L;
              const std::uint8_t grey = i < done_rows ? to_grey(static_cast<double>(want)) : 0;
              if (!near_tie && sharp[at] != grey) ++acc.bad_sharp;
            }
          return acc;
        },
        [](Check a, Check b) {
          return Check{std::max(a.conv_error, b.conv_error), a.bad_sharp + b.bad_sharp, a.bad_input + b.bad_input};
        });
    // Tolerance: each convolution is a sum of at most 289 products of
    // weights |K| <= ~1 (the centre weight; the rest are below 0.1) and grey
    // levels <= 255, accumulated in double: the rounding error is below
    // 289 * 255 * sum|K| * eps ~ 5e-11 (sum|K| ~ 3), and the long-double
    // reference is ~2000 times more precise. 1e-9 leaves a factor 20 of
    // margin while any wrong, missing or stale pixel is off by far more.
    Verification v;
    v.quantity = "max |convolution - direct|";
    v.value = c.conv_error;
    v.tolerance = 1e-9;
    v.passed = c.conv_error <= v.tolerance && c.bad_sharp == 0 && c.bad_input == 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%ld pixels per row checked; %llu sharp pixels and %llu input pixels differ",
                  per_row, static_cast<unsigned long long>(c.bad_sharp), static_cast<unsigned long long>(c.bad_input));
    v.detail = buf;
    return v;
  }

 private:
  // K(a, b) = delta(a, b) - c LoG(a, b), LoG(r) = (r^2 - 2 s^2) / s^4 * G(r),
  // G(r) = exp(-r^2 / (2 s^2)) / (2 pi s^2), c = s^2 / 2.
  static double weight(long a, long b) {
    const double r2 = static_cast<double>(a * a + b * b), s2 = kSigma * kSigma;
    const double g = std::exp(-r2 / (2 * s2)) / (2 * std::numbers::pi * s2);
    const double log = (r2 - 2 * s2) / (s2 * s2) * g;
    return (a == 0 && b == 0 ? 1.0 : 0.0) - 0.5 * s2 * log;
  }
  // The same sum, naively, in long double and with the weights recomputed.
  long double direct(const double* img, long i, long j) const {
    long double sum = 0;
    const long double s2 = static_cast<long double>(kSigma) * kSigma;
    for (long a = -kHalf; a <= kHalf; ++a)
      for (long b = -kHalf; b <= kHalf; ++b) {
        if (i + a < 0 || i + a >= n_ || j + b < 0 || j + b >= n_) continue;
        const long double r2 = static_cast<long double>(a * a + b * b);
        const long double g = std::exp(-r2 / (2 * s2)) / (2 * std::numbers::pi_v<long double> * s2);
        const long double w = (a == 0 && b == 0 ? 1.0L : 0.0L) - 0.5L * s2 * (r2 - 2 * s2) / (s2 * s2) * g;
        sum += w * img[(i + a) * n_ + (j + b)];
      }
    return sum;
  }
  static std::uint8_t to_grey(double v) { return static_cast<std::uint8_t>(std::clamp(std::nearbyint(v), 0.0, 255.0)); }
  // A synthetic fuzzy photograph: a soft-edged disc on a wavy background.
  double fuzzy_pixel(long i, long j) const {
    const double x = (static_cast<double>(j) + 0.5) / static_cast<double>(n_);
    const double y = (static_cast<double>(i) + 0.5) / static_cast<double>(n_);
    const double r = std::hypot(x - 0.5, y - 0.45);
    const double v = 110 + 40 * std::sin(6 * std::numbers::pi * x) * std::sin(4 * std::numbers::pi * y) +
                     90 * std::tanh((0.3 - r) / 0.02);
    return std::clamp(std::round(v), 0.0, 255.0);
  }

  long n_ = 1024;
  std::uint64_t bands_ = 32;
  Field *image_ = nullptr, *filter_ = nullptr, *conv_ = nullptr, *sharp_ = nullptr;
};

}  // namespace

std::unique_ptr<Simulation> make_sharpen() { return std::make_unique<Sharpen>(); }

}  // namespace cairn::apps::jacobi
