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
  Rng rng(3);
  Linear fc(400, 300, true, rng);
  double bound = 1.0 / std::sqrt(400.0);
  Stats w = stats(fc.weight().value()), b = stats(fc.bias().value());
  EXPECT_LE(w.max, bound);
  EXPECT_GE(w.min, -bound);
  EXPECT_GT(w.max, 0.99 * bound);  // fills the interval
  EXPECT_NEAR(w.std, bound / std::sqrt(3.0), 0.01 * bound);
  EXPECT_LE(b.max, bound);
  EXPECT_GE(b.min, -bound);
  Conv2d conv(6, 16, 5, 1, 0, rng);
  EXPECT_LE(stats(conv.weight().value()).max, 1.0 / std::sqrt(150.0));
  EXPECT_GT(stats(conv.weight().value()).max, 0.95 / std::sqrt(150.0));
}

TEST(Init, SameSeedSameWeights) {
  Rng a(9), b(9);
  EXPECT_EQ(Linear(7, 5, true, a).weight().value().to_vector(), Linear(7, 5, true, b).weight().value().to_vector());
}

TEST(Linear, ComputesXWTransposedPlusBias) {
  Rng rng(1);
  Linear fc(3, 2, true, rng);
  Tensor w = fc.weight().value(), b = fc.bias().value();  // handles on the parameters' storage
  w.copy_from(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}));
  b.copy_from(Tensor::from_vector({0.5f, -1}, {2}));
  Variable y = fc.forward(Variable(Tensor::from_vector({1, 0, -1, 2, 1, 0}, {2, 3})));
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.value().to_vector(), (std::vector<float>{-1.5f, -3, 4.5f, 12}));
  EXPECT_THROW(fc.forward(Variable(Tensor::zeros({2, 4}))), Error);
  EXPECT_THROW(Linear(0, 2, true, rng), Error);
}

TEST(Layers, ShapesThroughAConvNet) {
  Rng rng(1);
  Sequential net;
  net.add(std::make_shared<Conv2d>(1, 6, 5, 1, 2, rng));
  net.add(std::make_shared<ReLU>());
  net.add(std::make_shared<MaxPool2d>(2));
  net.add(std::make_shared<Flatten>());
  Variable y = net.forward(Variable(Tensor::zeros({3, 1, 28, 28})));
  EXPECT_EQ(y.shape(), (Shape{3, 6 * 14 * 14}));
  EXPECT_THROW(net.forward(Variable(Tensor::zeros({3, 2, 28, 28}))), Error);
}

TEST(Layers, LayerNormStartsAsPlainNormalisation) {
  LayerNorm ln(4);
  Variable y = ln.forward(Variable(Tensor::from_vector({1, 2, 3, 4}, {1, 4})));
  std::vector<float> v = y.value().to_vector();
  EXPECT_NEAR(v[0] + v[3], 0.0f, 1e-5f);
  EXPECT_NEAR(v[3], 1.5f / std::sqrt(1.25f + 1e-5f), 1e-4f);
}

TEST(Layers, EmbeddingLooksUpRows) {
  Rng rng(1);
  Embedding emb(5, 3, rng);
  Tensor ids = Tensor::empty({2}, DType::i64);
  ids.data<int64_t>()[0] = 4;
  ids.data<int64_t>()[1] = 0;
  std::vector<float> w = emb.weight().value().to_vector();
  std::vector<float> y = emb.forward(ids).value().to_vector();
  EXPECT_EQ(y, (std::vector<float>{w[12], w[13], w[14], w[0], w[1], w[2]}));
  EXPECT_NEAR(stats(emb.weight().value()).std, 1.0, 0.6);  // N(0, 1), as PyTorch
}

}  // namespace
}  // namespace artel::nn
