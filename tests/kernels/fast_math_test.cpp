// The vectorisable exp and row reductions against the C library in double.
#include "artel/kernels/fast_math.h"

#include <gtest/gtest.h>

#include <cmath>

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
