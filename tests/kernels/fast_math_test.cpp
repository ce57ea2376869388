// The vectorisable exp and row reductions against the C library in double.
#include "artel/kernels/fast_math.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

namespace artel::kernels {
namespace {

TEST(FastMath, ExpMatchesStdExp) {
  for (double x = -80.0; x <= 80.0; x += 0.01237) {
    double want = std::exp(x);
    EXPECT_NEAR(exp_approx(static_cast<float>(x)) / std::exp(static_cast<double>(static_cast<float>(x))), 1.0, 3e-7)
        << "x = " << x << " want " << want;
  }
  EXPECT_FLOAT_EQ(exp_approx(0.0f), 1.0f);
  EXPECT_LT(exp_approx(-1000.0f), 1e-37f);  // clamped, not NaN
  EXPECT_GE(exp_approx(-1000.0f), 0.0f);
}

// The vector form is the scalar one on the machine's vector, bit for bit, so a row's
// result does not depend on which of its elements fall in the scalar tail.
TEST(FastMath, VectorExpEqualsScalarExp) {
  for (float x0 = -100.0f; x0 <= 100.0f; x0 += 0.37f) {
    vnat x;
    for (int j = 0; j < kNat; ++j) x[j] = x0 + 0.0123f * static_cast<float>(j);
    const vnat y = exp_approx(x);
    for (int j = 0; j < kNat; ++j)
      ASSERT_EQ(std::bit_cast<uint32_t>(y[j]), std::bit_cast<uint32_t>(exp_approx(x[j]))) << "x = " << x[j];
  }
}

TEST(FastMath, RowReductions) {
  float x[37];
  double s = 0, m = -1e30, d = 0, se = 0;
  for (int i = 0; i < 37; ++i) {
    x[i] = std::sin(static_cast<float>(i) * 1.3f) * 3.0f;
    s += x[i], d += x[i] * x[i], m = std::max<double>(m, x[i]);
  }
  for (int i = 0; i < 37; ++i) se += std::exp(x[i] - m);
  EXPECT_NEAR(row_sum(37, x), s, 1e-5);
  EXPECT_FLOAT_EQ(row_max(37, x), static_cast<float>(m));
  EXPECT_NEAR(row_dot(37, x, x), d, 1e-4);
  EXPECT_NEAR(row_sum_exp(37, x, static_cast<float>(m)), se, 1e-5);
}

}  // namespace
}  // namespace artel::kernels
