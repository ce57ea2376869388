// add/sub/mul/div with broadcasting in both directions, and scalar ops.
#include <gtest/gtest.h>

#include "artel/autograd/ops.h"
#include "gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

// Keeps divisors away from zero so finite differences stay well conditioned.
Tensor away_from_zero(const Shape& s, uint64_t seed) {
  Tensor t = random_tensor(s, seed);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] >= 0 ? p[i] + 0.5f : p[i] - 0.5f;
  return t;
}

const std::vector<std::pair<Shape, Shape>> kPairs = {
    {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}},    {{4}, {2, 3, 4}}, {{2, 1, 4}, {2, 3, 4}},
    {{2, 3, 4}, {3, 4}},    {{3, 1}, {1, 4}},    {{}, {2, 3}},     {{2, 3}, {1}}};

TEST(Elementwise, BroadcastGradientsAllOps) {
  for (const auto& [sa, sb] : kPairs) {
    SCOPED_TRACE(shape_str(sa) + " with " + shape_str(sb));
    std::vector<Tensor> in = {random_tensor(sa, 1), away_from_zero(sb, 2)};
    gradcheck([](std::vector<Variable>& v) { return v[0] + v[1]; }, in);
    gradcheck([](std::vector<Variable>& v) { return v[0] - v[1]; }, in);
    gradcheck([](std::vector<Variable>& v) { return v[0] * v[1]; }, in);
    gradcheck([](std::vector<Variable>& v) { return v[0] / v[1]; }, in);
  }
}

TEST(Elementwise, BiasBroadcastValuesAndGradientReduction) {
  // (B, T, C) + (C): the bias gradient is the sum over B and T.
  Variable x(Tensor::full({2, 3, 4}, 1.0f), true);
  Variable b(Tensor::from_vector({1, 2, 3, 4}, {4}), true);
  Variable y = x + b;
  EXPECT_FLOAT_EQ(y.value().data<float>()[4 + 2], 4.0f);
  sum(y).backward();
  for (float g : b.grad().to_vector()) EXPECT_FLOAT_EQ(g, 6.0f);
  ASSERT_EQ(b.grad().shape(), (Shape{4}));
  ASSERT_EQ(x.grad().shape(), (Shape{2, 3, 4}));
  // (B, 1, C) * (B, T, C): the keepdim-like operand sums over T.
  Variable s(Tensor::from_vector({1, 2, 3, 4}, {2, 1, 2}), true);
  Variable z(Tensor::full({2, 3, 2}, 2.0f), true);
  Variable m = s * z;
  EXPECT_FLOAT_EQ(m.value().data<float>()[6 + 2 * 2 + 1], 8.0f);  // s[1,0,1]·2
  sum(m).backward();
  for (float g : s.grad().to_vector()) EXPECT_FLOAT_EQ(g, 6.0f);  // 3 positions × 2
}

TEST(Elementwise, SameShapeAddHandsBackTheGradient) {
  Variable a(random_tensor({3}, 1), true), b(random_tensor({3}, 2), true);
  Variable y = a + b;
  Tensor g = Tensor::from_vector({1, 2, 3}, {3});
  y.backward(g);
  EXPECT_EQ(a.grad().to_vector(), g.to_vector());
  EXPECT_EQ(b.grad().to_vector(), g.to_vector());
  EXPECT_EQ(g.to_vector(), (std::vector<float>{1, 2, 3}));  // untouched
}

TEST(Elementwise, ScalarOps) {
  Tensor x = random_tensor({2, 3}, 3);
  Variable y = mul(add(Variable(x), 2.0f), -3.0f);
  EXPECT_FLOAT_EQ(y.value().data<float>()[4], (x.data<float>()[4] + 2.0f) * -3.0f);
  gradcheck([](std::vector<Variable>& v) { return mul(add(v[0], 1.5f), 0.25f); }, {x});
}

TEST(Elementwise, ShapesThatDoNotBroadcastThrow) {
  Variable a(random_tensor({2, 3}, 1)), b(random_tensor({4}, 2));
  try {
    mul(a, b);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mul: shapes [2, 3] and [4] do not broadcast"), std::string::npos);
  }
}

}  // namespace
}  // namespace artel::autograd
