#include "artel/nn/module.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artel/nn/activations.h"
#include "artel/nn/dropout.h"
#include "artel/nn/layer_norm.h"
#include "artel/nn/linear.h"
#include "artel/nn/sequential.h"

namespace artel::nn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> names(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, _] : m.named_parameters()) out.push_back(n);
  return out;
}

// Own parameter, a buffer, then two submodules, one nested, and a tied alias.
class Toy : public Module {
 public:
  explicit Toy(Rng& rng) {
    scale = register_parameter("scale", Tensor::full({3}, 2.0f));
    fc = register_module("fc", std::make_shared<Linear>(3, 2, true, rng));
    seq = register_module("seq", std::make_shared<Sequential>());
    seq->add(std::make_shared<LayerNorm>(2));
    seq->add(std::make_shared<ReLU>());
    seq->add(std::make_shared<Linear>(2, 4, false, rng));
    count = register_buffer("count", Tensor::zeros({1}));
    register_alias("head.weight", "fc.weight");
  }
  Variable scale;
  Tensor count;
  std::shared_ptr<Linear> fc;
  std::shared_ptr<Sequential> seq;
};

TEST(Module, NamesFollowRegistrationOrderWithDottedPaths) {
  Rng rng(1);
  Toy toy(rng);
  EXPECT_THAT(names(toy), ElementsAre("scale", "fc.weight", "fc.bias", "seq.0.weight", "seq.0.bias", "seq.2.weight"));
  EXPECT_EQ(toy.parameters().size(), 6u);
  EXPECT_EQ(toy.num_parameters(), 3 + 6 + 2 + 2 + 2 + 8);
  EXPECT_EQ(toy.named_buffers().size(), 1u);
  EXPECT_EQ(toy.named_buffers()[0].first, "count");
  EXPECT_EQ(toy.aliases().at("head.weight"), "fc.weight");
  EXPECT_EQ(toy.fc->weight().shape(), (Shape{2, 3}));  // [out, in]
}

TEST(Module, DuplicateOrDottedNamesAreRejected) {
  struct Bad : Module {
    void twice() {
      register_parameter("w", Tensor::zeros({1}));
      register_parameter("w", Tensor::zeros({1}));
    }
    void dotted() { register_parameter("a.b", Tensor::zeros({1})); }
  };
  Bad a, b;
  EXPECT_THROW(a.twice(), Error);
  EXPECT_THROW(b.dotted(), Error);
}

TEST(Module, StateDictRoundTripKeepsParameterIdentity) {
  Rng r1(1), r2(2);
  Toy a(r1), b(r2);
  a.count.fill(7.0f);
  Variable w_before = b.fc->weight();
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.fc->weight().impl(), w_before.impl());  // copied into, not replaced
  for (const auto& [name, t] : a.state_dict()) EXPECT_EQ(t.to_vector(), b.state_dict().at(name).to_vector()) << name;
  EXPECT_EQ(b.count.to_vector(), std::vector<float>{7.0f});
  EXPECT_FALSE(a.state_dict().count("head.weight"));  // aliases are written once, under the target
}

TEST(Module, LoadErrorsNameMissingUnexpectedAndMisshapedTensors) {
  Rng rng(1);
  Toy toy(rng);
  StateDict s = toy.state_dict();
  StateDict missing = s;
  missing.erase("seq.2.weight");
  try {
    toy.load_state_dict(missing);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing seq.2.weight"));
  }
  StateDict extra = s;
  extra["bogus.weight"] = Tensor::zeros({1});
  try {
    toy.load_state_dict(extra);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unexpected bogus.weight"));
  }
  StateDict shape = s;
  shape["fc.weight"] = Tensor::zeros({3, 2});
  try {
    toy.load_state_dict(shape, /*strict=*/false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("fc.weight (given float32 [3, 2], model has float32 [2, 3])"));
  }
  // Non-strict: missing and unexpected are fine, and nothing is half-loaded on error.
  Tensor before = toy.fc->bias().value().clone();
  extra.erase("fc.bias");
  EXPECT_NO_THROW(toy.load_state_dict(extra, /*strict=*/false));
  EXPECT_EQ(toy.fc->bias().value().to_vector(), before.to_vector());
}

TEST(Module, AliasIsAcceptedInPlaceOfOrNextToItsTarget) {
  Rng r1(1), r2(2);
  Toy a(r1), b(r2);
  StateDict s = a.state_dict();
  s["head.weight"] = s.at("fc.weight").clone();
  EXPECT_NO_THROW(b.load_state_dict(s));  // both names, same values
  EXPECT_EQ(b.fc->weight().value().to_vector(), a.fc->weight().value().to_vector());

  StateDict only_alias = a.state_dict();
  only_alias["head.weight"] = Tensor::full({2, 3}, 0.5f);
  only_alias.erase("fc.weight");
  b.load_state_dict(only_alias);
  EXPECT_EQ(b.fc->weight().value().to_vector(), std::vector<float>(6, 0.5f));

  s["head.weight"] = Tensor::full({2, 3}, 9.0f);  // differs from fc.weight
  try {
    b.load_state_dict(s);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("head.weight (tied to fc.weight"));
  }
}

TEST(Module, TrainEvalPropagatesToChildrenAndNewChildren) {
  Rng rng(1);
  Toy toy(rng);
  EXPECT_TRUE(toy.seq->is_training());
  toy.eval();
  EXPECT_FALSE(toy.is_training());
  EXPECT_FALSE(toy.fc->is_training());
  EXPECT_FALSE(toy.seq->operator[](2).is_training());
  toy.seq->add(std::make_shared<ReLU>());
  EXPECT_FALSE(toy.seq->operator[](3).is_training());
  toy.train();
  EXPECT_TRUE(toy.seq->operator[](0).is_training());
}

TEST(Module, ZeroGradDropsEveryGradient) {
  Rng rng(1);
  Toy toy(rng);
  for (auto& p : toy.parameters()) p.set_grad(Tensor::full(p.shape(), 1.0f));
  toy.zero_grad();
  for (auto& p : toy.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Dropout, RespectsTrainingModeAndProbability) {
  auto rng = std::make_shared<Rng>(5, 1);
  Dropout drop(0.5f, rng);
  Variable x(Tensor::full({1000}, 1.0f));
  drop.eval();
  EXPECT_EQ(drop.forward(x).value().to_vector(), x.value().to_vector());
  drop.train();
  int zeros = 0;
  for (float v : drop.forward(x).value().to_vector()) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;
    zeros += v == 0.0f;
  }
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 600);
  EXPECT_THROW(Dropout(1.0f, rng), Error);
  EXPECT_THROW(Dropout(0.1f, nullptr), Error);
}

}  // namespace
}  // namespace artel::nn
