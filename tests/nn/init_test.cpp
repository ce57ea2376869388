// Counter-based initialisation (Note [Declared parameters]): every part of a
// parameter, however it is split, is drawn bit-for-bit as the whole tensor's
// part; materialize draws each parameter from the stream of its name; and the
// addressed draws have the right distributions.
#include "artel/nn/init.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "artel/nn/module.h"
#include "core/same_bits.h"

namespace artel::nn {
namespace {

using ::testing::HasSubstr;

using artel_test::same_bits;

struct NamedInit {
  const char* name;
  Init init;
};

const std::vector<NamedInit> kInits = {{"zeros", Init::zeros()},
                                       {"ones", Init::ones()},
                                       {"normal", Init::normal(0.5f, 2.0f)},
                                       {"uniform", Init::uniform(-3.0f, 1.0f)}};

struct NamedSplit {
  const char* name;
  Split split;
  std::vector<int> parts;
};

const std::vector<NamedSplit> kSplits = {{"rows", {.dim = 0}, {1, 2, 3, 6}},
                                         {"columns", {.dim = 1}, {2, 4, 8}},
                                         {"qkv groups", {.dim = 0, .groups = 3}, {2}},
                                         {"padded rows", {.dim = 0, .pad = true}, {4, 5}},
                                         {"padded columns", {.dim = 1, .pad = true}, {3}},
                                         {"replicated", {}, {2}}};

TEST(Fill, EveryPartIsTheWholeTensorsPartBitForBit) {
  const Shape whole_shape{6, 8};
  const uint64_t seed = 1234, stream = stream_of("h.0.fc.weight");
  for (const NamedInit& ni : kInits) {
    Tensor whole = Tensor::empty(whole_shape);
    fill(whole, ni.init, seed, stream, whole_shape);
    for (const NamedSplit& ns : kSplits)
      for (int parts : ns.parts)
        for (int p = 0; p < parts; ++p) {
          Tensor mine = Tensor::full(part_geometry(whole_shape, ns.split, p, parts).shape, 42.0f);
          fill(mine, ni.init, seed, stream, whole_shape, ns.split, p, parts);
          EXPECT_TRUE(same_bits(mine, take_part(whole, ns.split, p, parts)))
              << ni.name << ", " << ns.name << ", part " << p << " of " << parts;
        }
  }
}

TEST(Fill, ElementEIsDrawEOfTheStream) {
  Tensor t = Tensor::empty({6, 8});
  fill(t, Init::normal(0.5f, 2.0f), 7, 99, t.shape());
  for (uint64_t e = 0; e < 48; ++e) ASSERT_EQ(t.data<float>()[e], 0.5f + 2.0f * Rng::normal_at(7, 99, e)) << e;
  fill(t, Init::uniform(-3.0f, 1.0f), 7, 99, t.shape());
  for (uint64_t e = 0; e < 48; ++e) ASSERT_EQ(t.data<float>()[e], -3.0f + 4.0f * Rng::uniform_at(7, 99, e)) << e;
  fill(t, Init::ones(), 7, 99, t.shape());
  EXPECT_EQ(t.to_vector(), std::vector<float>(48, 1.0f));
  fill(t, Init::zeros(), 7, 99, t.shape());
  EXPECT_EQ(t.to_vector(), std::vector<float>(48, 0.0f));
}

TEST(Fill, RejectsAPartOfTheWrongShapeOrDtype) {
  Tensor wrong = Tensor::empty({3, 8});
  EXPECT_THAT([&] { fill(wrong, Init::ones(), 1, 1, {6, 8}, {.dim = 1}, 0, 2); },
              ::testing::ThrowsMessage<Error>(HasSubstr("part 0 of 2 ([6, 4]) of [6, 8]")));
  Tensor ints = Tensor::empty({6, 8}, DType::i64);
  EXPECT_THROW(fill(ints, Init::ones(), 1, 1, {6, 8}), Error);
  EXPECT_THROW(Init::normal(0.0f, -1.0f), Error);
  EXPECT_THROW(Init::uniform(1.0f, 0.0f), Error);
  EXPECT_THROW(Init::default_uniform(0), Error);
}

TEST(StreamOf, IsFnv1aOfTheName) {
  EXPECT_EQ(stream_of(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(stream_of("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(stream_of("fc.weight"), stream_of("fc.bias"));
}

class TwoOfAShape : public Module {
 public:
  TwoOfAShape() {
    a = declare_parameter("a", {6, 8}, Init::normal(0.0f, 1.0f));
    b = declare_parameter("b", {6, 8}, Init::normal(0.0f, 1.0f));
  }
  Variable a, b;
};

TEST(Materialize, IsDeterministicAndDependsOnTheName) {
  TwoOfAShape x, y, z;
  materialize(x, 5);
  materialize(y, 5);
  materialize(z, 6);
  EXPECT_TRUE(same_bits(x.a.value(), y.a.value()));
  EXPECT_TRUE(same_bits(x.b.value(), y.b.value()));
  EXPECT_NE(x.a.value().to_vector(), x.b.value().to_vector());  // same shape and init, other name
  EXPECT_NE(x.a.value().to_vector(), z.a.value().to_vector());  // other seed
  Tensor want = Tensor::empty({6, 8});
  fill(want, Init::normal(0.0f, 1.0f), 5, stream_of("b"), want.shape());
  EXPECT_TRUE(same_bits(x.b.value(), want));
}

TEST(Rng, AddressedDrawsHaveTheirDistributions) {
  constexpr int kN = 100000;
  double su = 0, su2 = 0, sn = 0, sn2 = 0, lo = 1, hi = 0;
  for (uint64_t i = 0; i < kN; ++i) {
    const double u = Rng::uniform_at(3, 17, i), n = Rng::normal_at(3, 17, i);
    su += u, su2 += u * u, sn += n, sn2 += n * n;
    lo = std::min(lo, u), hi = std::max(hi, u);
  }
  const double mu = su / kN, mn = sn / kN;
  EXPECT_NEAR(mu, 0.5, 0.005);
  EXPECT_NEAR(std::sqrt(su2 / kN - mu * mu), 1.0 / std::sqrt(12.0), 0.005);
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_LT(lo, 1e-3);
  EXPECT_GT(hi, 1 - 1e-3);
  EXPECT_NEAR(mn, 0.0, 0.015);
  EXPECT_NEAR(std::sqrt(sn2 / kN - mn * mn), 1.0, 0.015);
  // Pure functions of (seed, stream, index): other streams and seeds draw otherwise.
  EXPECT_EQ(Rng::uniform_at(3, 17, 5), Rng::uniform_at(3, 17, 5));
  EXPECT_NE(Rng::uniform_at(3, 17, 5), Rng::uniform_at(3, 18, 5));
  EXPECT_NE(Rng::uniform_at(3, 17, 5), Rng::uniform_at(4, 17, 5));
  EXPECT_NE(Rng::normal_at(3, 17, 5), Rng::normal_at(3, 17, 6));
}

}  // namespace
}  // namespace artel::nn
