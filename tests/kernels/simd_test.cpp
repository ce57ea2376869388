// The vector math of simd.h and the GELU kernels built on it, against the C
// library in double.
#include "artel/kernels/simd.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "artel/core/threads.h"
#include "artel/kernels/activation.h"

namespace artel::kernels {
namespace {

double cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double pdf(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); }

// Evaluates fn on xs a native vector at a time (xs.size() a multiple of 16),
// as the kernels do.
template <class Fn>
std::vector<float> map_vectors(const std::vector<float>& xs, Fn fn) {
  std::vector<float> out(xs.size());
  for (size_t i = 0; i < xs.size(); i += kNat) store(out.data() + i, fn(load<vnat>(xs.data() + i)));
  return out;
}

std::vector<float> grid(double lo, double hi, double step) {
  std::vector<float> xs;
  for (double x = lo; x <= hi; x += step) xs.push_back(static_cast<float>(x));
  while (xs.size() % kLanes) xs.push_back(0.0f);
  return xs;
}

TEST(Simd, ExpNonpositiveMatchesStdExp) {
  std::vector<float> xs = grid(-86.0, 0.0, 0.0137);
  std::vector<float> got = map_vectors(xs, [](vnat x) { return exp_nonpositive(x); });
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(got[i] / std::exp(static_cast<double>(xs[i])), 1.0, 3e-7) << "x = " << xs[i];
  float low = exp_nonpositive(broadcast<vnat>(-INFINITY))[0];
  EXPECT_GE(low, 0.0f);
  EXPECT_LT(low, 1e-37f);
}

TEST(Simd, NormalCdfHasRelativeAccuracyInTheLeftTail) {
  std::vector<float> xs = grid(-12.0, 9.0, 0.00731);
  std::vector<float> got = map_vectors(xs, [](vnat x) { return normal_cdf_pdf(x).cdf; });
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i], want = cdf(x);
    // −x²/2 rounded to float carries an absolute error of ~x²·ulp into exp: the x² term.
    EXPECT_NEAR(got[i], want, (6e-7 + 1e-7 * x * x) * want + 1e-30) << "x = " << x;
  }
}

TEST(Simd, NormalPdf) {
  std::vector<float> xs = grid(-9.0, 9.0, 0.0173);
  std::vector<float> got = map_vectors(xs, [](vnat x) { return normal_cdf_pdf(x).pdf; });
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i], want = pdf(x);
    EXPECT_NEAR(got[i], want, (6e-7 + 1e-7 * x * x) * want + 1e-30) << "x = " << x;
  }
}

TEST(Simd, GeluKernelsMatchExactGeluIncludingTails) {
  // 1003 elements: whole vectors plus a tail, split over threads or not.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<float> x(1003), dy(1003), y(1003), dx(1003);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(-12.0 + 20.0 * static_cast<double>(i) / 1002.0);
      dy[i] = static_cast<float>(std::cos(0.37 * static_cast<double>(i)));
    }
    std::vector<float> y2(1003), dydx(1003);
    gelu_forward(1003, x.data(), y.data());
    gelu_backward(1003, x.data(), dy.data(), dx.data());
    gelu_forward_with_derivative(1003, x.data(), y2.data(), dydx.data());
    for (size_t i = 0; i < x.size(); ++i) {
      double xi = x[i], d = cdf(xi) + xi * pdf(xi);
      EXPECT_NEAR(y[i], xi * cdf(xi), 1e-6 + 1e-6 * std::abs(xi * cdf(xi))) << "x = " << xi;
      EXPECT_NEAR(dx[i], dy[i] * d, 1e-6) << "x = " << xi;
      EXPECT_EQ(y2[i], y[i]) << "x = " << xi;
      EXPECT_NEAR(dydx[i], d, 1e-6) << "x = " << xi;
    }
    EXPECT_EQ(y[0], y[0]);  // not NaN at the far left
    EXPECT_LE(std::abs(y[0]), 1e-30f);
  }
  set_num_threads(1);
}

// The kernels take four vectors at a time, then single ones, then a padded
// tail: an element gets the same bits whichever of them it falls in (as it
// must for results independent of how a tensor is split over threads).
TEST(Simd, GeluGivesTheSameBitsInBlocksSingleVectorsAndTails) {
  std::vector<float> x(301);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(-7.0 + 0.047 * static_cast<double>(i));
  std::vector<float> whole(x.size()), whole_d(x.size());
  gelu_forward_with_derivative(static_cast<int64_t>(x.size()), x.data(), whole.data(), whole_d.data());
  for (size_t start : {1, 16, 17, 48, 64, 250, 290}) {
    const int64_t n = static_cast<int64_t>(x.size() - start);
    std::vector<float> part(n), part_d(n), fwd(n), bwd(n), ones(n, 1.0f);
    gelu_forward_with_derivative(n, x.data() + start, part.data(), part_d.data());
    gelu_forward(n, x.data() + start, fwd.data());
    gelu_backward(n, x.data() + start, ones.data(), bwd.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(part[i], whole[start + i]) << "start " << start << ", element " << i;
      ASSERT_EQ(part_d[i], whole_d[start + i]) << "start " << start << ", element " << i;
      ASSERT_EQ(fwd[i], whole[start + i]) << "start " << start << ", element " << i;
      ASSERT_EQ(bwd[i], whole_d[start + i]) << "start " << start << ", element " << i;
    }
  }
}

// A linear layer's bias added as GELU reads its input: the bits of adding the
// bias first, on rows whose length is whole blocks, single vectors and a tail.
TEST(Simd, BiasGeluIsGeluOfTheBiasedInput) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t cols : {1, 8, 37, 3072}) {
      const int64_t rows = 7;
      std::vector<float> x(static_cast<size_t>(rows * cols)), bias(static_cast<size_t>(cols));
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.731 * static_cast<double>(i)) * 4);
      for (size_t c = 0; c < bias.size(); ++c) bias[c] = static_cast<float>(std::cos(1.3 * static_cast<double>(c)));
      std::vector<float> biased(x.size()), want_y(x.size()), want_d(x.size()), y(x.size()), d(x.size()), y_only(x.size());
      for (size_t i = 0; i < x.size(); ++i) biased[i] = x[i] + bias[i % static_cast<size_t>(cols)];
      gelu_forward_with_derivative(rows * cols, biased.data(), want_y.data(), want_d.data());
      bias_gelu_forward_with_derivative(rows, cols, x.data(), bias.data(), y.data(), d.data());
      bias_gelu_forward_with_derivative(rows, cols, x.data(), bias.data(), y_only.data(), nullptr);
      EXPECT_EQ(y, want_y) << cols << " columns, " << threads << " thread(s)";
      EXPECT_EQ(d, want_d) << cols << " columns, " << threads << " thread(s)";
      EXPECT_EQ(y_only, want_y) << cols << " columns, " << threads << " thread(s)";
    }
  }
  set_num_threads(1);
}

// transpose on both vector widths: element (r, c) lands at (c, r), bits as
// they are (a NaN payload included).
template <class V, size_t W>
void expect_transposes() {
  V rows[W];
  for (size_t r = 0; r < W; ++r)
    for (size_t c = 0; c < W; ++c) rows[r][c] = static_cast<float>(100 * r + c);
  rows[1][2] = std::bit_cast<float>(0x7fc01234u);
  transpose(rows);
  for (size_t r = 0; r < W; ++r)
    for (size_t c = 0; c < W; ++c) {
      const float want = r == 2 && c == 1 ? std::bit_cast<float>(0x7fc01234u) : static_cast<float>(100 * c + r);
      ASSERT_EQ(std::bit_cast<uint32_t>(rows[r][c]), std::bit_cast<uint32_t>(want)) << W << " lanes, (" << r << ", " << c << ")";
    }
}

TEST(Simd, TransposeMovesEveryElementAcrossTheDiagonal) {
  expect_transposes<v16, 16>();
  expect_transposes<v8, 8>();
}

}  // namespace
}  // namespace artel::kernels
