// conv2d and max_pool2d as ops: finite differences for every input, and the
// errors a caller can trigger. (Kernel values are tested in tests/kernels.)
#include <gtest/gtest.h>

#include <cmath>

#include "artel/autograd/ops.h"
#include "autograd/gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

TEST(Conv2dOp, GradientMatchesFiniteDifferences) {
  for (int64_t stride : {1, 2})
    for (int64_t padding : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "stride " << stride << " padding " << padding);
      gradcheck([=](auto& in) { return conv2d(in[0], in[1], in[2], stride, padding); },
                {random_tensor({2, 2, 6, 6}, 1), random_tensor({3, 2, 3, 3}, 2, 0.5f), random_tensor({3}, 3)});
    }
}

TEST(Conv2dOp, GradientWithoutBias) {
  gradcheck([](auto& in) { return conv2d(in[0], in[1], Variable(), 1, 2); },
            {random_tensor({1, 1, 5, 4}, 4), random_tensor({2, 1, 5, 5}, 5, 0.5f)});
}

TEST(Conv2dOp, ShapeFollowsStrideAndPadding) {
  Variable x(Tensor::zeros({2, 1, 28, 28})), w(Tensor::zeros({6, 1, 5, 5})), b(Tensor::zeros({6}));
  EXPECT_EQ(conv2d(x, w, b, 1, 2).shape(), (Shape{2, 6, 28, 28}));
  EXPECT_EQ(conv2d(x, w, b, 2, 0).shape(), (Shape{2, 6, 12, 12}));
}

TEST(MaxPool2dOp, GradientMatchesFiniteDifferences) {
  // Distinct values more than 2·eps apart, so no window changes its maximum
  // under the finite-difference probe.
  Tensor x = Tensor::empty({2, 2, 6, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.05f * static_cast<float>((i * 37) % x.numel());
  for (auto [kernel, stride] : {std::pair<int64_t, int64_t>{2, 2}, {3, 1}, {3, 2}}) {
    SCOPED_TRACE(::testing::Message() << "kernel " << kernel << " stride " << stride);
    gradcheck([=](auto& in) { return max_pool2d(in[0], kernel, stride); }, {x}, 1e-2f);
  }
}

template <class Fn>
void expect_error(Fn&& fn, const char* op) {
  try {
    fn();
    ADD_FAILURE() << "no error from " << op;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
  }
}

TEST(Conv2dOp, BadShapesAndParametersAreErrorsNamingTheOp) {
  Variable x(Tensor::zeros({2, 3, 6, 6})), w(Tensor::zeros({4, 3, 3, 3})), b(Tensor::zeros({4}));
  expect_error([&] { conv2d(x, Variable(Tensor::zeros({4, 2, 3, 3})), b); }, "conv2d");  // channels
  expect_error([&] { conv2d(x, Variable(Tensor::zeros({4, 3, 7, 7})), b); }, "conv2d");  // kernel > input
  expect_error([&] { conv2d(x, w, b, 0); }, "conv2d");
  expect_error([&] { conv2d(x, w, b, 1, -1); }, "conv2d");
  expect_error([&] { conv2d(x, w, Variable(Tensor::zeros({3}))); }, "conv2d");
  expect_error([&] { conv2d(Variable(Tensor::zeros({3, 6, 6})), w, b); }, "conv2d");
}

TEST(MaxPool2dOp, BadShapesAndParametersAreErrorsNamingTheOp) {
  Variable x(Tensor::zeros({1, 2, 4, 4}));
  expect_error([&] { max_pool2d(x, 5, 1); }, "max_pool2d");
  expect_error([&] { max_pool2d(x, 2, 0); }, "max_pool2d");
  expect_error([&] { max_pool2d(x, 0, 1); }, "max_pool2d");
  expect_error([&] { max_pool2d(Variable(Tensor::zeros({4, 4})), 2, 2); }, "max_pool2d");
}

}  // namespace
}  // namespace artel::autograd
