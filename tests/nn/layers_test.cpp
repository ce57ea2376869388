#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "artel/nn/activations.h"
#include "artel/nn/conv2d.h"
#include "artel/nn/embedding.h"
#include "artel/nn/init.h"
#include "artel/nn/layer_norm.h"
#include "artel/nn/linear.h"
#include "artel/nn/max_pool2d.h"
#include "artel/nn/sequential.h"

namespace artel::nn {
namespace {

using ::testing::HasSubstr;

struct Stats {
  double mean = 0, std = 0, min = 1e30, max = -1e30;
};
Stats stats(const Tensor& t) {
  Stats s;
  std::vector<float> v = t.to_vector();
  for (float x : v) s.mean += x, s.min = std::min<double>(s.min, x), s.max = std::max<double>(s.max, x);
  s.mean /= v.size();
  for (float x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / v.size());
  return s;
}

TEST(Init, NormalHasTheRequestedMoments) {
  Rng rng(3);
  Tensor t = Tensor::empty({200, 500});
  init::normal(t, 0.0f, 0.02f, rng);
  Stats s = stats(t);
  EXPECT_NEAR(s.mean, 0.0, 2e-4);
  EXPECT_NEAR(s.std, 0.02, 2e-4);
}

TEST(Init, DefaultUniformIsBoundedByOneOverSqrtFanIn) {
  Linear fc(400, 300);
  materialize(fc, 3);
  double bound = 1.0 / std::sqrt(400.0);
  Stats w = stats(fc.weight().value()), b = stats(fc.bias().value());
  EXPECT_LE(w.max, bound);
  EXPECT_GE(w.min, -bound);
  EXPECT_GT(w.max, 0.99 * bound);  // fills the interval
  EXPECT_NEAR(w.std, bound / std::sqrt(3.0), 0.01 * bound);
  EXPECT_LE(b.max, bound);
  EXPECT_GE(b.min, -bound);
  EXPECT_GT(b.max, 0.9 * bound);
  Conv2d conv(6, 16, 5, 1, 0);
  materialize(conv, 3);
  EXPECT_LE(stats(conv.weight().value()).max, 1.0 / std::sqrt(150.0));
  EXPECT_GT(stats(conv.weight().value()).max, 0.95 / std::sqrt(150.0));
}

// Element e of a parameter is draw e of the stream of its name: no sequential state.
TEST(Init, SameSeedSameWeightsEachElementFromItsCounter) {
  Linear a(7, 5), b(7, 5), c(7, 5);
  materialize(a, 9);
  materialize(b, 9);
  materialize(c, 10);
  EXPECT_EQ(a.weight().value().to_vector(), b.weight().value().to_vector());
  EXPECT_NE(a.weight().value().to_vector(), c.weight().value().to_vector());
  const float bound = 1.0f / std::sqrt(7.0f);
  std::vector<float> w = a.weight().value().to_vector(), bias = a.bias().value().to_vector();
  for (uint64_t e = 0; e < w.size(); ++e)
    ASSERT_EQ(w[e], -bound + 2 * bound * Rng::uniform_at(9, stream_of("weight"), e)) << e;
  for (uint64_t e = 0; e < bias.size(); ++e)
    ASSERT_EQ(bias[e], -bound + 2 * bound * Rng::uniform_at(9, stream_of("bias"), e)) << e;
  EXPECT_NE(w[0], bias[0]);  // two streams
}

TEST(Linear, ComputesXWTransposedPlusBias) {
  Linear fc(3, 2);
  materialize(fc, 1);
  Tensor w = fc.weight().value(), b = fc.bias().value();  // handles on the parameters' storage
  w.copy_from(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}));
  b.copy_from(Tensor::from_vector({0.5f, -1}, {2}));
  Variable y = fc.forward(Variable(Tensor::from_vector({1, 0, -1, 2, 1, 0}, {2, 3})));
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.value().to_vector(), (std::vector<float>{-1.5f, -3, 4.5f, 12}));
  Variable r(Tensor::from_vector({10, 20, 30, 40}, {2, 2}));
  EXPECT_EQ(fc.forward_onto(r, Variable(Tensor::from_vector({1, 0, -1, 2, 1, 0}, {2, 3}))).value().to_vector(),
            (std::vector<float>{8.5f, 17, 34.5f, 52}));
  EXPECT_THROW(fc.forward(Variable(Tensor::zeros({2, 4}))), Error);
  EXPECT_THROW(Linear(0, 2), Error);
}

TEST(Linear, DeclaredButNotMaterialisedIsANamedError) {
  Linear fc(3, 2);
  EXPECT_FALSE(fc.weight().value().defined());
  EXPECT_EQ(fc.num_parameters(), 8);  // the declared shapes count
  EXPECT_THAT([&] { fc.forward(Variable(Tensor::zeros({1, 3}))); },
              ::testing::ThrowsMessage<Error>(HasSubstr("nn::materialize")));
  Embedding emb(4, 2);
  EXPECT_THAT([&] { emb.forward(Tensor::zeros({1}, DType::i64)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("never materialised")));
}

TEST(Layers, ShapesThroughAConvNet) {
  Sequential net;
  net.add(std::make_shared<Conv2d>(1, 6, 5, 1, 2));
  net.add(std::make_shared<ReLU>());
  net.add(std::make_shared<MaxPool2d>(2));
  net.add(std::make_shared<Flatten>());
  materialize(net, 1);
  Variable y = net.forward(Variable(Tensor::zeros({3, 1, 28, 28})));
  EXPECT_EQ(y.shape(), (Shape{3, 6 * 14 * 14}));
  EXPECT_THROW(net.forward(Variable(Tensor::zeros({3, 2, 28, 28}))), Error);
}

TEST(Layers, LayerNormStartsAsPlainNormalisation) {
  LayerNorm ln(4);
  materialize(ln, 1);
  EXPECT_EQ(ln.named_parameters()[0].second.value().to_vector(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(ln.named_parameters()[1].second.value().to_vector(), std::vector<float>(4, 0.0f));
  Variable y = ln.forward(Variable(Tensor::from_vector({1, 2, 3, 4}, {1, 4})));
  std::vector<float> v = y.value().to_vector();
  EXPECT_NEAR(v[0] + v[3], 0.0f, 1e-5f);
  EXPECT_NEAR(v[3], 1.5f / std::sqrt(1.25f + 1e-5f), 1e-4f);
}

TEST(Layers, EmbeddingLooksUpRows) {
  Embedding emb(5, 3);
  materialize(emb, 1);
  Tensor ids = Tensor::empty({2}, DType::i64);
  ids.data<int64_t>()[0] = 4;
  ids.data<int64_t>()[1] = 0;
  std::vector<float> w = emb.weight().value().to_vector();
  for (uint64_t e = 0; e < w.size(); ++e) ASSERT_EQ(w[e], Rng::normal_at(1, stream_of("weight"), e));  // N(0, 1)
  std::vector<float> y = emb.forward(ids).value().to_vector();
  EXPECT_EQ(y, (std::vector<float>{w[12], w[13], w[14], w[0], w[1], w[2]}));
  ids.data<int64_t>()[0] = 5;
  EXPECT_THROW(emb.forward(ids), Error);
}

TEST(Layers, EmbeddingAttendIsTheTransposedProduct) {
  Embedding emb(3, 2, Init::zeros());
  materialize(emb, 1);
  Variable w = emb.weight();  // shares the parameter
  w.value().copy_from(Tensor::from_vector({1, 0, 0, 1, 1, 1}, {3, 2}));
  EXPECT_EQ(emb.attend(Variable(Tensor::from_vector({2, 3}, {1, 2}))).value().to_vector(),
            (std::vector<float>{2, 3, 5}));
}

}  // namespace
}  // namespace artel::nn
