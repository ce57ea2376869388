// causal_self_attention as an op: finite differences through the whole graph,
// causality, and the errors a caller can trigger.
#include <gtest/gtest.h>

#include <cmath>

#include "artel/autograd/ops.h"
#include "autograd/gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

TEST(CausalSelfAttention, GradientMatchesFiniteDifferences) {
  gradcheck([](auto& in) { return causal_self_attention(in[0], 2); }, {random_tensor({2, 5, 24}, 1)});
}

TEST(CausalSelfAttention, GradientMatchesFiniteDifferencesWithOneHeadAndRaggedSizes) {
  gradcheck([](auto& in) { return causal_self_attention(in[0], 1); }, {random_tensor({1, 18, 9}, 2)});
}

TEST(CausalSelfAttention, OneStepReturnsItsOwnValue) {
  Tensor qkv = random_tensor({2, 1, 12}, 3);  // T = 1: softmax of one score is 1, so y = v
  Variable y = causal_self_attention(Variable(qkv), 2);
  ASSERT_EQ(y.shape(), (Shape{2, 1, 4}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(y.value().data<float>()[b * 4 + c], qkv.data<float>()[b * 12 + 8 + c]);
}

TEST(CausalSelfAttention, FutureKeysAndValuesDoNotChangeEarlierOutputs) {
  const int64_t t = 7, c = 8;
  Tensor qkv = random_tensor({1, t, 3 * c}, 4);
  Tensor before = causal_self_attention(Variable(qkv.clone()), 2).value();
  Tensor changed = qkv.clone();
  for (int64_t j = c; j < 3 * c; ++j) changed.data<float>()[(t - 1) * 3 * c + j] += 3.0f;  // last step's k and v
  Tensor after = causal_self_attention(Variable(changed), 2).value();
  for (int64_t i = 0; i < (t - 1) * c; ++i) EXPECT_EQ(before.data<float>()[i], after.data<float>()[i]) << i;
  bool last_changed = false;
  for (int64_t i = (t - 1) * c; i < t * c; ++i) last_changed |= before.data<float>()[i] != after.data<float>()[i];
  EXPECT_TRUE(last_changed);
}

TEST(CausalSelfAttention, BackwardLeavesTheOutputGradientAlone) {
  Variable qkv(random_tensor({2, 4, 12}, 5), true);
  Variable y = causal_self_attention(qkv, 2);
  Tensor g = random_tensor({2, 4, 4}, 6);
  Tensor copy = g.clone();
  y.backward(g);
  EXPECT_EQ(g.to_vector(), copy.to_vector());
  EXPECT_EQ(qkv.grad().shape(), qkv.shape());
}

TEST(CausalSelfAttention, BadShapesAreErrorsNamingTheOp) {
  auto expect_error = [](const Shape& shape, int64_t n_head) {
    try {
      causal_self_attention(Variable(Tensor::zeros(shape)), n_head);
      ADD_FAILURE() << "no error for " << shape_str(shape) << " with n_head " << n_head;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("causal_self_attention"), std::string::npos) << e.what();
    }
  };
  expect_error({2, 5, 24}, 5);   // C = 8 not divisible by 5
  expect_error({2, 5, 24}, 0);
  expect_error({2, 5, 25}, 1);   // not 3C
  expect_error({10, 24}, 2);     // not (B, T, 3C)
}

}  // namespace
}  // namespace artel::autograd
