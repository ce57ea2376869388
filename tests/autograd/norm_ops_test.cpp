// layer_norm: values as torch.nn.LayerNorm (eps 1e-5, biased variance), gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "artel/autograd/ops.h"
#include "artel/core/threads.h"
#include "gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

TEST(LayerNorm, ForwardMatchesNaive) {
  Tensor x = random_tensor({2, 3, 6}, 1, 3.0f), w = random_tensor({6}, 2), b = random_tensor({6}, 3);
  Tensor y = layer_norm(Variable(x), Variable(w), Variable(b)).value();
  for (int64_t r = 0; r < 6; ++r) {
    const float* p = x.data<float>() + r * 6;
    double mu = 0, var = 0;
    for (int c = 0; c < 6; ++c) mu += p[c];
    mu /= 6;
    for (int c = 0; c < 6; ++c) var += (p[c] - mu) * (p[c] - mu);
    var /= 6;
    for (int c = 0; c < 6; ++c)
      EXPECT_NEAR(y.data<float>()[r * 6 + c], (p[c] - mu) / std::sqrt(var + 1e-5) * w.data<float>()[c] + b.data<float>()[c],
                  1e-5);
  }
  // eps matters for a constant row: output is the bias.
  Tensor c = Tensor::full({1, 4}, 2.0f);
  EXPECT_NEAR(layer_norm(Variable(c), Variable(), Variable(Tensor::full({4}, 0.5f))).value().data<float>()[0], 0.5f, 1e-7);
}

TEST(LayerNorm, Gradients) {
  gradcheck([](std::vector<Variable>& v) { return layer_norm(v[0], v[1], v[2]); },
            {random_tensor({2, 3, 5}, 4), random_tensor({5}, 5), random_tensor({5}, 6)}, 1e-2f, 3e-2f, 3e-3f);
  gradcheck([](std::vector<Variable>& v) { return layer_norm(v[0], Variable(), Variable()); },
            {random_tensor({4, 5}, 7)}, 1e-2f, 3e-2f, 3e-3f);
}

TEST(LayerNorm, WholeVectorRowsMatchNaiveAndGradients) {
  // C a multiple of 16 with a weight takes the kernel's vector path.
  Tensor x = random_tensor({3, 32}, 12, 2.0f), w = random_tensor({32}, 13), b = random_tensor({32}, 14);
  Tensor y = layer_norm(Variable(x), Variable(w), Variable(b)).value();
  Tensor y_no_bias = layer_norm(Variable(x), Variable(w), Variable()).value();
  for (int64_t r = 0; r < 3; ++r) {
    const float* p = x.data<float>() + r * 32;
    double mu = 0, var = 0;
    for (int c = 0; c < 32; ++c) mu += p[c];
    mu /= 32;
    for (int c = 0; c < 32; ++c) var += (p[c] - mu) * (p[c] - mu);
    var /= 32;
    for (int c = 0; c < 32; ++c) {
      double xh = (p[c] - mu) / std::sqrt(var + 1e-5) * w.data<float>()[c];
      EXPECT_NEAR(y.data<float>()[r * 32 + c], xh + b.data<float>()[c], 1e-5);
      EXPECT_NEAR(y_no_bias.data<float>()[r * 32 + c], xh, 1e-5);
    }
  }
  gradcheck([](std::vector<Variable>& v) { return layer_norm(v[0], v[1], v[2]); },
            {random_tensor({2, 2, 16}, 15), random_tensor({16}, 16), random_tensor({16}, 17)}, 1e-2f, 3e-2f, 3e-3f);
  gradcheck([](std::vector<Variable>& v) { return layer_norm(v[0], v[1], Variable()); },
            {random_tensor({3, 32}, 18), random_tensor({32}, 19)}, 1e-2f, 3e-2f, 3e-3f);
  // Only the parameters need gradients (no dx): dw = Σ dy·x̂, db = Σ dy.
  Variable vw(w, true), vb(b, true);
  Tensor g = random_tensor({3, 32}, 20);
  layer_norm(Variable(x), vw, vb).backward(g);
  for (int c = 0; c < 32; ++c) {
    double dw = 0, db = 0;
    for (int64_t r = 0; r < 3; ++r) {
      float gi = g.data<float>()[r * 32 + c];
      dw += gi * (y.data<float>()[r * 32 + c] - b.data<float>()[c]) / w.data<float>()[c];
      db += gi;
    }
    EXPECT_NEAR(vw.grad().data<float>()[c], dw, 1e-4);
    EXPECT_NEAR(vb.grad().data<float>()[c], db, 1e-5);
  }
}

TEST(LayerNorm, TwoThreadsAgreeWithOne) {
  Tensor x = random_tensor({768, 128}, 8), w = random_tensor({128}, 9), b = random_tensor({128}, 10);
  Tensor g = random_tensor({768, 128}, 11);
  std::vector<std::vector<float>> results[2];
  for (int t : {1, 2}) {
    set_num_threads(t);
    Variable vx(x, true), vw(w, true), vb(b, true);
    layer_norm(vx, vw, vb).backward(g);
    results[t - 1] = {vx.grad().to_vector(), vw.grad().to_vector(), vb.grad().to_vector()};
  }
  set_num_threads(1);
  for (int k = 0; k < 3; ++k)
    for (size_t i = 0; i < results[0][k].size(); ++i) ASSERT_NEAR(results[0][k][i], results[1][k][i], 1e-3) << k;
}

TEST(LayerNorm, BadParamShapeThrows) {
  EXPECT_THROW(layer_norm(Variable(random_tensor({2, 4}, 1)), Variable(random_tensor({3}, 2)), Variable()), Error);
}

}  // namespace
}  // namespace artel::autograd
