// Note [Gradient destinations]: a leaf's gradient lands in the memory it
// names (no copy) when the op can write it there, and is right either way.
#include <gtest/gtest.h>

#include <cmath>

#include "artel/autograd/ops.h"
#include "artel/core/memory_stats.h"

namespace artel::autograd {
namespace {

Tensor filled(const Shape& s, float start) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + 0.25f * static_cast<float>(i % 7);
  return t;
}

// The gradient of sum(linear(x, w, b)) without destinations.
std::pair<std::vector<float>, std::vector<float>> plain_grads(const Tensor& x) {
  Variable w(filled({3, 4}, -0.5f), true), b(filled({3}, 0.1f), true);
  sum(linear(Variable(x), w, b)).backward();
  return {w.grad().to_vector(), b.grad().to_vector()};
}

TEST(GradientDestination, LinearWritesWeightAndBiasGradientsInPlace) {
  Tensor x = filled({5, 4}, 1.0f);
  auto [want_w, want_b] = plain_grads(x);
  Variable w(filled({3, 4}, -0.5f), true), b(filled({3}, 0.1f), true);
  Tensor dw = Tensor::full({3, 4}, 99.0f), db = Tensor::full({3}, 99.0f);  // stale contents must not leak in
  w.set_grad_destination(dw);
  b.set_grad_destination(db);
  sum(linear(Variable(x), w, b)).backward();
  EXPECT_EQ(w.grad().raw(), dw.raw());
  EXPECT_EQ(b.grad().raw(), db.raw());
  EXPECT_EQ(w.grad().to_vector(), want_w);
  EXPECT_EQ(b.grad().to_vector(), want_b);

  // A second backward without zero_grad accumulates into the same memory.
  sum(linear(Variable(x), w, b)).backward();
  EXPECT_EQ(w.grad().raw(), dw.raw());
  EXPECT_EQ(b.grad().raw(), db.raw());
  for (size_t i = 0; i < want_w.size(); ++i) EXPECT_FLOAT_EQ(w.grad().to_vector()[i], 2 * want_w[i]);
  for (size_t i = 0; i < want_b.size(); ++i) EXPECT_FLOAT_EQ(b.grad().to_vector()[i], 2 * want_b[i]);
}

// Note [Adding a product onto a gradient]: a later backward adds a weight's
// product onto its gradient so far, with no gradient-sized tensor beside it.
// The weight is large and the rows few, so such a tensor would be the peak.
void expect_second_backward_adds_in_place(bool with_destination, bool through_matmul) {
  Tensor x = filled({2, 256}, 0.5f);
  const Shape ws = through_matmul ? Shape{256, 512} : Shape{512, 256};  // (K, N) or (out, in)
  Variable w(filled(ws, -0.25f), true);
  Tensor dest = Tensor::empty(ws);
  if (with_destination) w.set_grad_destination(dest);
  auto loss = [&] { return sum(through_matmul ? matmul(Variable(x), w) : linear(Variable(x), w, Variable())); };
  loss().backward();
  const std::vector<float> once = w.grad().to_vector();
  const void* first = w.grad().raw();
  Variable l = loss();
  reset_peak_tensor_bytes();
  const int64_t before = live_tensor_bytes();
  l.backward();
  EXPECT_LT(peak_tensor_bytes() - before, w.value().numel() * 4) << "a fresh gradient-sized tensor was allocated";
  EXPECT_EQ(w.grad().raw(), first);
  const std::vector<float> twice = w.grad().to_vector();
  for (size_t i = 0; i < once.size(); ++i) ASSERT_FLOAT_EQ(twice[i], 2 * once[i]) << i;
}

TEST(GradientDestination, ALaterLinearGradientIsAddedOntoTheSumSoFar) {
  expect_second_backward_adds_in_place(true, false);
  expect_second_backward_adds_in_place(false, false);
}

TEST(GradientDestination, ALaterMatmulGradientIsAddedOntoTheSumSoFar) {
  expect_second_backward_adds_in_place(true, true);
  expect_second_backward_adds_in_place(false, true);
}

// An op that only writes its gradient (layer norm's dγ, a product's bias)
// is never handed a sum so far to overwrite: the engine adds its fresh one.
TEST(GradientDestination, OpsThatOnlyWriteDoNotOverwriteTheSumSoFar) {
  Tensor x = filled({3, 4}, 0.3f);
  Variable gamma(filled({4}, 1.0f), true), beta(filled({4}, 0.0f), true);
  auto loss = [&] { return sum(mul(layer_norm(Variable(x), gamma, beta, 1e-5f), Variable(filled({3, 4}, 0.7f)))); };
  loss().backward();
  const std::vector<float> once = gamma.grad().to_vector(), once_b = beta.grad().to_vector();
  loss().backward();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(gamma.grad().to_vector()[i], 2 * once[i]);
  for (size_t i = 0; i < once_b.size(); ++i) EXPECT_FLOAT_EQ(beta.grad().to_vector()[i], 2 * once_b[i]);
}

TEST(GradientDestination, OpsThatCannotWriteInPlaceStillGiveTheRightGradient) {
  Variable w(filled({4}, 0.5f), true);
  Tensor dest = Tensor::full({4}, 7.0f);
  w.set_grad_destination(dest);
  sum(mul(w, w)).backward();  // the leaf is both inputs: no destination offered
  std::vector<float> g = w.grad().to_vector();
  for (int64_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(g[static_cast<size_t>(i)], 2 * w.value().data<float>()[i]);
  EXPECT_EQ(dest.to_vector(), std::vector<float>(4, 7.0f));  // untouched

  Variable v(filled({4}, 0.5f), true);
  v.set_grad_destination(Tensor::zeros({4}));
  sum(tanh(v)).backward();  // tanh allocates its own gradient: the engine takes that
  for (int64_t i = 0; i < 4; ++i) {
    float t = std::tanh(v.value().data<float>()[i]);
    EXPECT_NEAR(v.grad().to_vector()[static_cast<size_t>(i)], 1 - t * t, 1e-6);
  }
}

TEST(GradientDestination, MustMatchTheLeaf) {
  Variable w(Tensor::zeros({3, 4}), true);
  EXPECT_THROW(w.set_grad_destination(Tensor::zeros({4, 3})), Error);
  Variable y = mul(w, 2.0f);
  EXPECT_THROW(y.set_grad_destination(Tensor::zeros({3, 4})), Error);
  w.set_grad_destination(Tensor());  // clearing is always allowed
}

}  // namespace
}  // namespace artel::autograd
