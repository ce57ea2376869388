// sum and mean, over everything and along a dimension.
#include <gtest/gtest.h>

#include "artel/autograd/ops.h"
#include "gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

TEST(Reduce, Values) {
  Variable x(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_FLOAT_EQ(sum(x).item(), 21);
  EXPECT_FLOAT_EQ(mean(x).item(), 3.5);
  EXPECT_EQ(sum(x, 0).value().to_vector(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(sum(x, -1).value().to_vector(), (std::vector<float>{6, 15}));
  EXPECT_EQ(mean(x, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(mean(x, 1, true).value().to_vector(), (std::vector<float>{2, 5}));
  EXPECT_EQ(sum(x, 0, false).shape(), (Shape{3}));
  EXPECT_THROW(sum(x, 2), Error);
}

TEST(Reduce, Gradients) {
  Tensor x = random_tensor({2, 3, 4}, 1);
  gradcheck([](std::vector<Variable>& v) { return sum(v[0]); }, {x});
  gradcheck([](std::vector<Variable>& v) { return mean(v[0]); }, {x});
  for (int64_t d : {0, 1, 2, -1})
    for (bool keep : {false, true}) {
      gradcheck([d, keep](std::vector<Variable>& v) { return sum(v[0], d, keep); }, {x});
      gradcheck([d, keep](std::vector<Variable>& v) { return mean(v[0], d, keep); }, {x});
    }
}

}  // namespace
}  // namespace artel::autograd
