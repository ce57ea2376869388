// im2col + GEMM convolution against the definition written as nested loops,
// forward and all three gradients, over strides, paddings and a 1×1 kernel.
#include "artel/kernels/conv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "artel/core/rng.h"
#include "artel/core/threads.h"
#include "kernels/random_values.h"

namespace artel::kernels {
namespace {

using artel_test::random_values;
constexpr uint64_t kConvStream = 11;  // this file's inputs: random_values(n, seed, kConvStream)

struct Naive {
  std::vector<double> y, dx, dw, db;
};

// Visits every (n, co, oh, ow, ci, ki, kj) term whose input position is inside.
template <class Fn>
void for_each_term(const Conv2dDims& d, Fn&& fn) {
  for (int64_t n = 0; n < d.batch; ++n)
    for (int64_t co = 0; co < d.c_out; ++co)
      for (int64_t oh = 0; oh < d.out_height(); ++oh)
        for (int64_t ow = 0; ow < d.out_width(); ++ow)
          for (int64_t ci = 0; ci < d.c_in; ++ci)
            for (int64_t ki = 0; ki < d.kernel_h; ++ki)
              for (int64_t kj = 0; kj < d.kernel_w; ++kj) {
                int64_t ih = oh * d.stride - d.padding + ki, iw = ow * d.stride - d.padding + kj;
                if (ih < 0 || ih >= d.height || iw < 0 || iw >= d.width) continue;
                int64_t yi = ((n * d.c_out + co) * d.out_height() + oh) * d.out_width() + ow;
                int64_t xi = ((n * d.c_in + ci) * d.height + ih) * d.width + iw;
                int64_t wi = ((co * d.c_in + ci) * d.kernel_h + ki) * d.kernel_w + kj;
                fn(yi, xi, wi, co);
              }
}

Naive naive(const Conv2dDims& d, const std::vector<float>& x, const std::vector<float>& w,
            const std::vector<float>& b, const std::vector<float>& dy) {
  Naive r{std::vector<double>(dy.size()), std::vector<double>(x.size()), std::vector<double>(w.size()),
          std::vector<double>(b.size())};
  const int64_t hw = d.out_height() * d.out_width();
  for (size_t i = 0; i < dy.size(); ++i) {
    int64_t co = static_cast<int64_t>(i) / hw % d.c_out;
    r.y[i] = b[co];
    r.db[co] += dy[i];
  }
  for_each_term(d, [&](int64_t yi, int64_t xi, int64_t wi, int64_t) {
    r.y[yi] += double(x[xi]) * w[wi];
    r.dx[xi] += double(dy[yi]) * w[wi];
    r.dw[wi] += double(dy[yi]) * x[xi];
  });
  return r;
}

template <class A, class B>
void expect_near(const A& got, const B& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

void expect_matches(const Conv2dDims& d, int threads) {
  set_num_threads(threads);
  auto x = random_values(d.batch * d.c_in * d.height * d.width, 1, kConvStream);
  auto w = random_values(d.c_out * d.patch_size(), 2, kConvStream);
  auto b = random_values(d.c_out, 3, kConvStream);
  auto dy = random_values(d.batch * d.c_out * d.out_height() * d.out_width(), 4, kConvStream);
  std::vector<float> y(dy.size()), dx(x.size(), NAN), dw(w.size(), NAN), db(b.size(), NAN);
  conv2d_forward(d, x.data(), w.data(), b.data(), y.data());
  conv2d_backward(d, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
  set_num_threads(1);
  Naive want = naive(d, x, w, b, dy);
  expect_near(y, want.y, 1e-4, "y");
  expect_near(dx, want.dx, 1e-4, "dx");
  expect_near(dw, want.dw, 1e-3, "dweight");
  expect_near(db, want.db, 1e-3, "dbias");
}

TEST(Conv2d, MatchesNaiveLoops) {
  for (int64_t stride : {1, 2})
    for (int64_t padding : {0, 1, 2}) {
      SCOPED_TRACE(testing::Message() << "stride " << stride << " padding " << padding);
      expect_matches({2, 2, 6, 7, 3, 3, 2, stride, padding}, 1);
    }
}

TEST(Conv2d, MatchesNaiveLoopsForLeNetLayersOnTwoThreads) {
  expect_matches({3, 1, 28, 28, 6, 5, 5, 1, 2}, 2);
  expect_matches({3, 6, 14, 14, 16, 5, 5, 1, 0}, 2);
}

// Rows of more than 16 outputs, whose runs start and end in the padding at
// every offset (Note [Unit-stride patch rows], conv.cpp).
TEST(Conv2d, MatchesNaiveLoopsOnRowsWiderThanAVectorAtUnitStride) {
  expect_matches({2, 2, 9, 37, 3, 7, 7, 1, 3}, 1);
  expect_matches({1, 1, 5, 33, 2, 3, 4, 1, 0}, 2);
  expect_matches({1, 2, 4, 16, 2, 3, 3, 1, 1}, 1);
}

TEST(Conv2d, PointwiseKernelUsesTheInputDirectly) { expect_matches({2, 4, 5, 3, 3, 1, 1, 1, 0}, 1); }
TEST(Conv2d, StrideLargerThanKernelSkipsInputs) { expect_matches({1, 2, 7, 7, 2, 1, 2, 3, 1}, 1); }

TEST(Conv2d, BackwardWithoutBiasOrInputGradient) {
  Conv2dDims d{2, 2, 5, 5, 2, 3, 3, 1, 1};
  auto x = random_values(d.batch * d.c_in * 25, 5, kConvStream), w = random_values(d.c_out * d.patch_size(), 6, kConvStream);
  auto dy = random_values(d.batch * d.c_out * 25, 7, kConvStream);
  std::vector<float> y(dy.size()), dw(w.size(), NAN);
  conv2d_forward(d, x.data(), w.data(), nullptr, y.data());
  conv2d_backward(d, x.data(), w.data(), dy.data(), nullptr, dw.data(), nullptr);
  Naive want = naive(d, x, w, std::vector<float>(d.c_out, 0.0f), dy);
  expect_near(y, want.y, 1e-4, "y");
  expect_near(dw, want.dw, 1e-3, "dweight");
}

TEST(Conv2d, Im2colPadsWithZerosAndCol2imIsItsAdjoint) {
  Conv2dDims d{1, 1, 3, 3, 1, 2, 2, 2, 1};  // out 2×2
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, col(4 * 4);
  im2col(d, x.data(), col.data());
  // rows: (ki, kj) = (0,0), (0,1), (1,0), (1,1); columns: output positions
  EXPECT_EQ(col, (std::vector<float>{0, 0, 0, 5, 0, 0, 4, 6, 0, 2, 0, 8, 1, 3, 7, 9}));
  // <im2col(x), c> == <x, col2im(c)> for any c
  std::vector<float> c = random_values(16, 8, kConvStream), back(9, 0.0f);
  col2im_add(d, c.data(), back.data());
  double lhs = 0, rhs = 0;
  for (int i = 0; i < 16; ++i) lhs += double(col[i]) * c[i];
  for (int i = 0; i < 9; ++i) rhs += double(x[i]) * back[i];
  EXPECT_NEAR(lhs, rhs, 1e-4);
}

}  // namespace
}  // namespace artel::kernels
