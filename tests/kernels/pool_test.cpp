#include "artel/kernels/pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace artel::kernels {
namespace {

TEST(MaxPool, ForwardAndBackwardMatchNaiveLoops) {
  for (auto [kernel, stride] : {std::pair<int64_t, int64_t>{2, 2}, {3, 1}, {3, 2}}) {
    Pool2dDims d{2, 3, 7, 6, kernel, stride};
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
