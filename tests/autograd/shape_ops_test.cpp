// reshape/flatten views, transpose, slice and concat.
#include <gtest/gtest.h>

#include "artel/autograd/ops.h"
#include "gradcheck.h"

namespace artel::autograd {
namespace {

using testing::gradcheck;
using testing::random_tensor;

TEST(Shape, ReshapeAndFlattenAreViews) {
  Variable x(random_tensor({2, 3, 4}, 1), true);
  Variable r = reshape(x, {6, -1});
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  EXPECT_TRUE(r.value().same_storage(x.value()));
  Variable f = flatten(x);
  EXPECT_EQ(f.shape(), (Shape{2, 12}));
  EXPECT_TRUE(f.value().same_storage(x.value()));
  EXPECT_EQ(flatten(x, 0).shape(), (Shape{24}));
  sum(mul(f, 2.0f)).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{2, 3, 4}));
  EXPECT_FLOAT_EQ(x.grad().data<float>()[23], 2.0f);
  EXPECT_THROW(reshape(x, {5, -1}), Error);
  gradcheck([](std::vector<Variable>& v) { return reshape(v[0], {4, 6}); }, {random_tensor({2, 3, 4}, 2)});
}

TEST(Shape, TransposeValuesAndGradients) {
  Tensor x = random_tensor({2, 3, 4, 5}, 3);
  Variable y = transpose(Variable(x), 1, 3);
  ASSERT_EQ(y.shape(), (Shape{2, 5, 4, 3}));
  // y[1, 4, 2, 0] == x[1, 0, 2, 4]
  EXPECT_EQ(y.value().data<float>()[((1 * 5 + 4) * 4 + 2) * 3 + 0], x.data<float>()[((1 * 3 + 0) * 4 + 2) * 5 + 4]);
  EXPECT_EQ(transpose(Variable(x), -1, -2).shape(), (Shape{2, 3, 5, 4}));
  gradcheck([](std::vector<Variable>& v) { return transpose(v[0], 1, 3); }, {x});
  gradcheck([](std::vector<Variable>& v) { return transpose(v[0], 0, 1); }, {random_tensor({3, 4}, 4)});
}

TEST(Shape, SliceAlongAnyDimension) {
  Variable x(Tensor::from_vector({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2}));
  EXPECT_EQ(slice(x, 1, 1, 3).value().to_vector(), (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));
  EXPECT_EQ(slice(x, 0, 1, 2).value().to_vector(), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(slice(x, -1, 0, 1).value().to_vector(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  EXPECT_THROW(slice(x, 1, 2, 4), Error);
  for (int64_t d : {0, 1, 2})
    gradcheck([d](std::vector<Variable>& v) { return slice(v[0], d, 1, 2); }, {random_tensor({3, 4, 2}, 5)});
}

TEST(Shape, ConcatAlongAnyDimension) {
  Variable a(Tensor::from_vector({1, 2, 3, 4}, {2, 2})), b(Tensor::from_vector({5, 6}, {2, 1}));
  EXPECT_EQ(concat({a, b}, 1).value().to_vector(), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(concat({a, a}, 0).shape(), (Shape{4, 2}));
  EXPECT_THROW(concat({a, b}, 0), Error);
  gradcheck([](std::vector<Variable>& v) { return concat({v[0], v[1], v[0]}, 1); },
            {random_tensor({2, 3, 2}, 6), random_tensor({2, 1, 2}, 7)});
  gradcheck([](std::vector<Variable>& v) { return concat({v[0], v[1]}, 0); },
            {random_tensor({1, 3}, 8), random_tensor({2, 3}, 9)});
}

}  // namespace
}  // namespace artel::autograd
