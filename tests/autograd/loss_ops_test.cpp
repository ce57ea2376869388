// cross_entropy: value vs a naive log-softmax, ignore_index, gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "artel/autograd/ops.h"
#include "gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

Tensor ids64(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i64);
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

double naive_nll(const Tensor& x, int64_t row, int64_t V, int64_t target) {
  const float* p = x.data<float>() + row * V;
  double m = -1e30, z = 0;
  for (int64_t c = 0; c < V; ++c) m = std::max<double>(m, p[c]);
  for (int64_t c = 0; c < V; ++c) z += std::exp(p[c] - m);
  return m + std::log(z) - p[target];
}

TEST(CrossEntropy, MeanOverNonIgnoredTargets) {
  Tensor x = random_tensor({4, 7}, 1, 2.0f);
  Tensor t = ids64({3, -100, 0, 6});
  double want = (naive_nll(x, 0, 7, 3) + naive_nll(x, 2, 7, 0) + naive_nll(x, 3, 7, 6)) / 3;
  Variable logits(x, true);
  Variable loss = cross_entropy(logits, t);
  EXPECT_EQ(loss.shape(), Shape{});
  EXPECT_NEAR(loss.item(), want, 1e-5);
  loss.backward();
  for (int64_t c = 0; c < 7; ++c) EXPECT_EQ(logits.grad().data<float>()[7 + c], 0.0f);  // ignored row
  // Row 0: (softmax − onehot) / 3.
  double z = 0;
  for (int64_t c = 0; c < 7; ++c) z += std::exp(x.data<float>()[c]);
  EXPECT_NEAR(logits.grad().data<float>()[3], (std::exp(x.data<float>()[3]) / z - 1) / 3, 1e-6);
  gradcheck([t](std::vector<Variable>& v) { return cross_entropy(v[0], t); }, {x});
}

TEST(CrossEntropy, Int32TargetsAndLeadingDims) {
  Tensor x = random_tensor({2, 3, 5}, 2);
  Tensor t = Tensor::empty({2, 3}, DType::i32);
  for (int i = 0; i < 6; ++i) t.data<int32_t>()[i] = (i * 2) % 5;
  double want = 0;
  for (int i = 0; i < 6; ++i) want += naive_nll(x, i, 5, (i * 2) % 5);
  EXPECT_NEAR(cross_entropy(Variable(x), t).item(), want / 6, 1e-5);
  gradcheck([t](std::vector<Variable>& v) { return cross_entropy(v[0], t); }, {x});
}

TEST(CrossEntropy, AllIgnoredIsZeroWithZeroGradient) {
  Variable logits(random_tensor({2, 3}, 3), true);
  Variable loss = cross_entropy(logits, ids64({-1, -1}), -1);
  EXPECT_EQ(loss.item(), 0.0f);
  loss.backward();
  for (float g : logits.grad().to_vector()) EXPECT_EQ(g, 0.0f);
}

TEST(CrossEntropy, BadTargetsThrow) {
  Variable logits(random_tensor({2, 3}, 4));
  EXPECT_THROW(cross_entropy(logits, ids64({0, 3})), Error);
  EXPECT_THROW(cross_entropy(logits, ids64({0, -2})), Error);
  EXPECT_THROW(cross_entropy(logits, ids64({0, 1, 2})), Error);
  EXPECT_THROW(cross_entropy(logits, Tensor::zeros({2})), Error);  // float targets
  try {
    cross_entropy(logits, ids64({0, 7}));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cross_entropy: target 7 at position 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace artel::autograd
