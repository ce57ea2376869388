// relu, gelu (exact, as torch.nn.GELU()), tanh, softmax, log_softmax.
#include <gtest/gtest.h>

#include <cmath>

#include "artel/autograd/ops.h"
#include "gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

// Keeps inputs off ReLU's kink so central differences are valid.
Tensor off_zero(const Shape& s, uint64_t seed) {
  Tensor t = random_tensor(s, seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] += t.data<float>()[i] >= 0 ? 0.1f : -0.1f;
  return t;
}

TEST(Activation, GeluMatchesTorchExact) {
  // torch.nn.GELU()(torch.tensor([-3., -1., -0.1, 0., 0.5, 2., 5.]))
  Variable x(Tensor::from_vector({-3, -1, -0.1f, 0, 0.5f, 2, 5}, {7}));
  std::vector<float> want = {-4.0496e-03f, -1.5865525e-01f, -4.6017223e-02f, 0.0f, 3.4573123e-01f, 1.9544997f, 5.0f};
  std::vector<float> got = gelu(x).value().to_vector();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6f * std::abs(want[i]) + 1e-7f) << i;
  gradcheck([](std::vector<Variable>& v) { return gelu(v[0]); }, {random_tensor({3, 7}, 1, 2.0f)});
}

TEST(Activation, GeluTanhMatchesTorchsApproximation) {
  // torch.nn.GELU(approximate="tanh")(torch.tensor([-3., -1., -0.1, 0., 0.5, 2., 5.]))
  Variable x(Tensor::from_vector({-3, -1, -0.1f, 0, 0.5f, 2, 5}, {7}));
  std::vector<float> want = {-3.6374331e-03f, -1.5880799e-01f, -4.6017248e-02f, 0.0f, 3.45714e-01f, 1.9545977f, 4.9999995f};
  std::vector<float> got = gelu_tanh(x).value().to_vector();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6f * std::abs(want[i]) + 1e-7f) << i;
  gradcheck([](std::vector<Variable>& v) { return gelu_tanh(v[0]); }, {random_tensor({3, 7}, 3, 2.0f)});
}

// GELU's backward writes into its output gradient when nothing else holds it.
// add hands one gradient to both GELUs: the first must not overwrite it.
TEST(Activation, GeluGradientWithASharedAndThenAnUnsharedOutputGradient) {
  gradcheck([](std::vector<Variable>& v) { return mul(add(gelu(v[0]), gelu(mul(v[0], 0.5f))), 3.0f); },
            {random_tensor({3, 7}, 2, 2.0f)});
  Variable x(random_tensor({2, 3}, 3), true);
  Tensor w = Tensor::full({2, 3}, 1.0f);
  gelu(x).backward(w);
  for (float v : w.to_vector()) EXPECT_EQ(v, 1.0f) << "the caller's output gradient must stay untouched";
}

TEST(Activation, ReluAndTanh) {
  Variable x(Tensor::from_vector({-2, -0.5f, 0.5f, 3}, {4}));
  EXPECT_EQ(relu(x).value().to_vector(), (std::vector<float>{0, 0, 0.5f, 3}));
  EXPECT_NEAR(tanh(x).value().data<float>()[3], std::tanh(3.0f), 1e-7);
  gradcheck([](std::vector<Variable>& v) { return relu(v[0]); }, {off_zero({3, 5}, 2)});
  gradcheck([](std::vector<Variable>& v) { return tanh(v[0]); }, {random_tensor({3, 5}, 3)});
}

// torch.relu(torch.tensor([nan, -1., 2.])) is [nan, 0, 2]: a NaN input must
// reach the loss (it was 0, and a NaN batch trained with a finite loss).
// Its gradient is 0 there, as torch's threshold_backward gives.
TEST(Activation, ReluKeepsNanAsPyTorchDoes) {
  Variable x(Tensor::from_vector({NAN, -1, 2, -INFINITY, INFINITY}, {5}), true);
  Variable y = relu(x);
  const std::vector<float> v = y.value().to_vector();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(std::vector<float>(v.begin() + 1, v.end()), (std::vector<float>{0, 2, 0, INFINITY}));
  y.backward(Tensor::from_vector({1, 1, 1, 1, 1}, {5}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{0, 0, 1, 0, 1}));
}

TEST(Activation, SoftmaxRowsSumToOne) {
  Tensor x = random_tensor({4, 37}, 4, 3.0f);
  x.data<float>()[5] = 80.0f;  // large logits must not overflow
  Tensor y = softmax(Variable(x)).value();
  for (int64_t r = 0; r < 4; ++r) {
    double s = 0, m = -1e30;
    for (int64_t c = 0; c < 37; ++c) m = std::max<double>(m, x.data<float>()[r * 37 + c]);
    double z = 0;
    for (int64_t c = 0; c < 37; ++c) z += std::exp(x.data<float>()[r * 37 + c] - m);
    for (int64_t c = 0; c < 37; ++c) {
      s += y.data<float>()[r * 37 + c];
      EXPECT_NEAR(y.data<float>()[r * 37 + c], std::exp(x.data<float>()[r * 37 + c] - m) / z, 1e-6);
    }
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
  Tensor ls = log_softmax(Variable(x)).value();
  EXPECT_NEAR(ls.data<float>()[40], std::log(y.data<float>()[40]), 1e-5);
}

TEST(Activation, SoftmaxGradientsAnyDimension) {
  for (int64_t d : {-1, 0, 1}) {
    gradcheck([d](std::vector<Variable>& v) { return softmax(v[0], d); }, {random_tensor({3, 4, 5}, 5)});
    gradcheck([d](std::vector<Variable>& v) { return log_softmax(v[0], d); }, {random_tensor({3, 4, 5}, 6)});
  }
  // Along dim 0 the columns sum to one.
  Tensor y = softmax(Variable(random_tensor({3, 4}, 7)), 0).value();
  for (int64_t c = 0; c < 4; ++c)
    EXPECT_NEAR(y.data<float>()[c] + y.data<float>()[4 + c] + y.data<float>()[8 + c], 1.0f, 1e-6);
}

}  // namespace
}  // namespace artel::autograd
