#include "artel/kernels/pool.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

namespace artel::kernels {
namespace {

TEST(MaxPool, ForwardAndBackwardMatchNaiveLoops) {
  // 7 × 6 planes, and 9 × 35 ones: 17 outputs a row, more than a vector's 16 (pool.cpp's 2×2 windows).
  for (auto [kernel, stride, height, width] : {std::array<int64_t, 4>{2, 2, 7, 6}, {3, 1, 7, 6}, {3, 2, 7, 6},
                                               {2, 2, 9, 35}, {2, 2, 8, 32}, {3, 2, 9, 35}}) {
    Pool2dDims d{2, 3, height, width, kernel, stride};
    const int64_t ho = d.out_height(), wo = d.out_width(), plane = d.height * d.width;
    std::vector<float> x(d.batch * d.channels * plane);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(1.7f * i);  // distinct values
    std::vector<float> y(d.batch * d.channels * ho * wo), dy(y.size()), dx(x.size(), NAN), want_dx(x.size(), 0);
    std::vector<int32_t> arg(y.size());
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.5f + i;
    max_pool2d_forward(d, x.data(), y.data(), arg.data());
    max_pool2d_backward(d, dy.data(), arg.data(), dx.data());
    for (int64_t p = 0; p < d.batch * d.channels; ++p)
      for (int64_t oh = 0; oh < ho; ++oh)
        for (int64_t ow = 0; ow < wo; ++ow) {
          float best = -INFINITY;
          int64_t best_at = -1;
          for (int64_t i = oh * stride; i < oh * stride + kernel; ++i)
            for (int64_t j = ow * stride; j < ow * stride + kernel; ++j)
              if (x[p * plane + i * d.width + j] > best) best = x[p * plane + i * d.width + j], best_at = i * d.width + j;
          int64_t o = (p * ho + oh) * wo + ow;
          ASSERT_EQ(y[o], best) << "kernel " << kernel << " stride " << stride << " output " << o;
          ASSERT_EQ(arg[o], best_at);
          want_dx[p * plane + best_at] += dy[o];
        }
    for (size_t i = 0; i < dx.size(); ++i) ASSERT_FLOAT_EQ(dx[i], want_dx[i]) << "dx element " << i;
  }
}

// The same in a window past a vector's 16 outputs, and in every corner.
TEST(MaxPool, TiesAndNaNsGoAsInTheFirstWindowsInWideRows) {
  Pool2dDims d{1, 1, 2, 40, 2, 2};  // 20 windows a row
  std::vector<float> x(80, 0.0f);
  auto set = [&](int64_t row, int64_t col, float v) { x[static_cast<size_t>(row * 40 + col)] = v; };
  set(0, 34, 5), set(1, 34, 5);       // window 17: a tie between (0, 0) and (1, 0)
  set(0, 37, NAN), set(1, 36, NAN);   // window 18: the first NaN, (0, 1)
  set(1, 39, 7), set(0, 38, -1);      // window 19: the last corner, (1, 1)
  std::vector<float> y(20);
  std::vector<int32_t> arg(20);
  max_pool2d_forward(d, x.data(), y.data(), arg.data());
  EXPECT_EQ(y[17], 5);
  EXPECT_EQ(arg[17], 34);
  EXPECT_TRUE(std::isnan(y[18]));
  EXPECT_EQ(arg[18], 37);
  EXPECT_EQ(y[19], 7);
  EXPECT_EQ(arg[19], 40 + 39);
  EXPECT_EQ(y[16], 0);
  EXPECT_EQ(arg[16], 32);  // all zeros: the window's first
}

TEST(MaxPool, TiesGoToTheFirstMaximumAndNaNWins) {
  Pool2dDims d{1, 1, 2, 4, 2, 2};
  std::vector<float> x = {1, 5, NAN, 0,  //
                          5, 2, 3, NAN};
  std::vector<float> y(2);
  std::vector<int32_t> arg(2);
  max_pool2d_forward(d, x.data(), y.data(), arg.data());
  EXPECT_EQ(y[0], 5);
  EXPECT_EQ(arg[0], 1);  // (0, 1) before (1, 0)
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(arg[1], 2);  // the first NaN
}

}  // namespace
}  // namespace artel::kernels
