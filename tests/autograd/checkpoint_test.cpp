// Activation recomputation: a checkpointed function gives its input and its
// parameters the gradients the plain function gives, bit for bit (it runs the
// same ops again), draws the same dropout masks in its rerun, keeps none of its
// inside activations, and records nothing under no-grad.
#include "artel/autograd/checkpoint.h"

#include <gtest/gtest.h>

#include "artel/autograd/ops.h"
#include "autograd/gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

struct Net {
  Variable w1{random_tensor({6, 4}, 1), true}, w2{random_tensor({3, 6}, 2), true};
  Rng rng{9, 1};
  Variable forward(const Variable& x) { return linear(dropout(gelu(linear(x, w1, {})), 0.3f, true, rng), w2, {}); }
};

TEST(Checkpoint, GradientsAreThoseOfThePlainFunctionBitForBit) {
  for (bool x_needs_grad : {true, false}) {
    Net plain, recomputed;
    Variable x1(random_tensor({5, 4}, 3), x_needs_grad), x2(random_tensor({5, 4}, 3), x_needs_grad);
    Variable y1 = plain.forward(x1);
    Variable y2 = checkpoint([&](const Variable& x) { return recomputed.forward(x); }, x2, &recomputed.rng);
    EXPECT_EQ(y1.value().to_vector(), y2.value().to_vector());
    EXPECT_EQ(y2.grad_fn()->name(), std::string("checkpoint"));
    EXPECT_EQ(y2.grad_fn()->inputs().size(), 1u);  // nothing inside is kept: one edge, the input
    const RngState after_forward = recomputed.rng.state();
    Tensor g = random_tensor(y1.shape(), 4);
    y1.backward(g);
    y2.backward(g);
    EXPECT_EQ(recomputed.rng.state().counter, after_forward.counter) << "the rerun's draws are put back";
    EXPECT_EQ(plain.w1.grad().to_vector(), recomputed.w1.grad().to_vector());
    EXPECT_EQ(plain.w2.grad().to_vector(), recomputed.w2.grad().to_vector());
    if (x_needs_grad) EXPECT_EQ(x1.grad().to_vector(), x2.grad().to_vector());
    else EXPECT_FALSE(x2.grad().defined());
  }
}

TEST(Checkpoint, GradientMatchesFiniteDifferences) {
  Variable w(random_tensor({3, 4}, 5), true);
  gradcheck([&](auto& in) { return checkpoint([&](const Variable& x) { return tanh(linear(x, w, {})); }, in[0]); },
            {random_tensor({2, 4}, 6)});
}

TEST(Checkpoint, UnderNoGradItIsThePlainFunction) {
  Net net;
  NoGradGuard no_grad;
  Variable y = checkpoint([&](const Variable& x) { return net.forward(x); }, Variable(random_tensor({2, 4}, 7)));
  EXPECT_FALSE(y.requires_grad());
}

}  // namespace
}  // namespace artel::autograd
