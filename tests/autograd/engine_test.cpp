// The backward engine itself, with a tiny differentiable op defined here so the
// test does not depend on ops.cpp.
#include <gtest/gtest.h>

#include "artel/autograd/variable.h"
#include "artel/core/memory_stats.h"

namespace artel::autograd {
namespace {

// y = a * b elementwise (same shapes).
Variable times(const Variable& a, const Variable& b) {
  Tensor y = Tensor::empty(a.shape());
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = a.value().data<float>()[i] * b.value().data<float>()[i];
  return make_result(y, {a, b}, "times", [a, b](const Tensor& g, std::vector<Tensor>& gi) {
    for (int k = 0; k < 2; ++k) {
      const Variable& other = k == 0 ? b : a;
      if (!needs_grad(k == 0 ? a : b)) continue;
      gi[k] = Tensor::empty(g.shape());
      for (int64_t i = 0; i < g.numel(); ++i)
        gi[k].data<float>()[i] = g.data<float>()[i] * other.value().data<float>()[i];
    }
  });
}

TEST(Engine, ChainAndFanOutAccumulate) {
  Variable x(Tensor::from_vector({3}, {1}), true);
  Variable c(Tensor::from_vector({2}, {1}), false);
  Variable y = times(times(x, x), c);  // 2x^2 -> dy/dx = 4x = 12
  y.backward();
  EXPECT_FLOAT_EQ(x.grad().item(), 12);
  EXPECT_FALSE(c.grad().defined());
  y.backward();  // accumulates
  EXPECT_FLOAT_EQ(x.grad().item(), 24);
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Engine, BorrowedGradientIsNotModifiedInPlace) {
  // identity-like op handing back grad_output itself for both inputs.
  Variable a(Tensor::from_vector({1}, {1}), true), b(Tensor::from_vector({2}, {1}), true);
  Variable s = make_result(Tensor::from_vector({3}, {1}), {a, b}, "plus",
                           [](const Tensor& g, std::vector<Tensor>& gi) { gi[0] = g, gi[1] = g; });
  Variable z = times(s, Variable(Tensor::from_vector({5}, {1})));
  Variable w = make_result(Tensor::from_vector({3}, {1}), {z, a}, "plus2",
                           [](const Tensor& g, std::vector<Tensor>& gi) { gi[0] = g, gi[1] = g; });
  w.backward();
  EXPECT_FLOAT_EQ(a.grad().item(), 6);  // 5 via s, 1 directly
  EXPECT_FLOAT_EQ(b.grad().item(), 5);
}

TEST(Engine, HookFiresOnceWhenLeafGradientIsFinal) {
  Variable x(Tensor::from_vector({2}, {1}), true);
  int fired = 0;
  float seen = 0;
  x.add_grad_ready_hook([&](Variable& v) {
    ++fired;
    seen = v.grad().item();
  });
  Variable y = times(times(x, x), x);  // x used three times: 3x^2 = 12
  y.backward();
  EXPECT_EQ(fired, 1);
  EXPECT_FLOAT_EQ(seen, 12);
}

TEST(Engine, NoGradRecordsNothing) {
  Variable x(Tensor::from_vector({2}, {1}), true);
  NoGradGuard guard;
  Variable y = times(x, x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
  EXPECT_THROW(y.backward(), Error);
}

TEST(Engine, ReusableGradIsTheOutputGradientOnlyWhenNothingElseHoldsIt) {
  Tensor g = Tensor::zeros({4});
  EXPECT_TRUE(reusable_grad(g).same_storage(g));
  Tensor alias = g.view({2, 2});
  EXPECT_FALSE(reusable_grad(g).same_storage(g));
  EXPECT_EQ(reusable_grad(g).shape(), g.shape());
}

// Note [Edges without values]: a sum's backward reads neither term, so the
// graph keeps an edge to the term's node, and the term's value goes when its
// last user lets go of it, not at backward; gradients still flow through it.
TEST(Engine, ANodeHoldsNoValueItsBackwardDoesNotRead) {
  Variable x(Tensor::full({1000}, 3.0f), true);
  auto plus = [](const Variable& a, const Variable& b) {
    Tensor y = Tensor::empty(a.shape());
    for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = a.value().data<float>()[i] + b.value().data<float>()[i];
    return make_result(y, {a, b}, "plus", [](const Tensor& g, std::vector<Tensor>& gi) { gi[0] = g, gi[1] = g; });
  };
  Variable square = times(x, x);  // a node's result: its value is 4000 bytes
  Variable z = plus(square, x);
  const int64_t before = live_tensor_bytes();
  square = Variable();
  EXPECT_EQ(live_tensor_bytes(), before - 4000);
  z.backward(Tensor::full({1000}, 1.0f));
  EXPECT_FLOAT_EQ(x.grad().data<float>()[999], 2 * 3 + 1);  // d(x² + x)/dx
}

}  // namespace
}  // namespace artel::autograd
