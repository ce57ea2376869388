#include "artel/nn/module.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

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
  // Declared; materialised from `seed` unless it is 0.
  explicit Toy(uint64_t seed) {
    scale = register_parameter("scale", Tensor::full({3}, 2.0f));
    fc = register_module("fc", std::make_shared<Linear>(3, 2, true));
    seq = register_module("seq", std::make_shared<Sequential>());
    seq->add(std::make_shared<LayerNorm>(2));
    seq->add(std::make_shared<ReLU>());
    seq->add(std::make_shared<Linear>(2, 4, false));
    count = register_buffer("count", Tensor::zeros({1}));
    register_alias("head.weight", "fc.weight");
    if (seed) materialize(*this, seed);
  }
  Variable scale;
  Tensor count;
  std::shared_ptr<Linear> fc;
  std::shared_ptr<Sequential> seq;
};

TEST(Module, NamesFollowRegistrationOrderWithDottedPaths) {
  Toy toy(1);
  EXPECT_THAT(names(toy), ElementsAre("scale", "fc.weight", "fc.bias", "seq.0.weight", "seq.0.bias", "seq.2.weight"));
  EXPECT_EQ(toy.parameters().size(), 6u);
  EXPECT_EQ(toy.num_parameters(), 3 + 6 + 2 + 2 + 2 + 8);
  EXPECT_EQ(toy.named_buffers().size(), 1u);
  EXPECT_EQ(toy.named_buffers()[0].first, "count");
  EXPECT_EQ(toy.aliases().at("head.weight"), "fc.weight");
  EXPECT_EQ(toy.fc->weight().shape(), (Shape{2, 3}));  // [out, in]
}

// Note [Declared parameters]: shapes and inits first, storage at materialize().
TEST(Module, DeclaredParametersHaveShapesButNoStorageUntilMaterialised) {
  Toy toy(0);
  std::vector<DeclaredParameter> d = toy.declared_parameters();
  ASSERT_EQ(d.size(), 6u);
  EXPECT_EQ(d[0].name, "scale");
  EXPECT_FALSE(d[0].init.has_value());  // given a value at registration
  EXPECT_TRUE(d[0].param.value().defined());
  EXPECT_EQ(d[1].name, "fc.weight");
  EXPECT_EQ(d[1].shape, (Shape{2, 3}));
  ASSERT_TRUE(d[1].init.has_value());
  EXPECT_EQ(d[1].init->kind, Init::Kind::uniform);
  EXPECT_EQ(d[3].init->kind, Init::Kind::ones);  // seq.0.weight: LayerNorm
  EXPECT_FALSE(d[1].param.value().defined());
  EXPECT_EQ(toy.num_parameters(), 3 + 6 + 2 + 2 + 2 + 8);
  StateDict s = toy.state_dict();  // only what has values
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(s.count("scale") && s.count("count"));

  materialize(toy, 5);
  for (const auto& [n, p] : toy.named_parameters()) EXPECT_TRUE(p.value().defined()) << n;
  EXPECT_EQ(toy.scale.value().to_vector(), std::vector<float>(3, 2.0f));  // left alone
  // Each parameter from the stream of its name within the module materialised.
  const float bound = 1.0f / std::sqrt(3.0f);
  std::vector<float> w = toy.fc->weight().value().to_vector();
  for (uint64_t e = 0; e < w.size(); ++e)
    EXPECT_EQ(w[e], -bound + 2 * bound * Rng::uniform_at(5, stream_of("fc.weight"), e)) << e;
  // A parameter that has a value is not drawn again.
  materialize(toy, 6);
  EXPECT_EQ(toy.fc->weight().value().to_vector(), w);
}

TEST(Module, LoadingGivesADeclaredModuleItsStorage) {
  Toy a(1), b(0);
  b.load_state_dict(a.state_dict());
  for (const auto& [name, t] : a.state_dict()) EXPECT_EQ(t.to_vector(), b.state_dict().at(name).to_vector()) << name;
  EXPECT_FALSE(b.fc->weight().value().same_storage(a.fc->weight().value()));
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

// One module under two names listed its parameters twice, and an optimizer
// stepped them twice: refused, pointing at register_alias for tied weights.
TEST(Module, OneModuleRegisteredTwiceIsRefused) {
  struct Twice : Module {
    void add() {
      auto l = std::make_shared<Linear>(2, 2, true);
      register_module("a", l);
      register_module("b", l);
    }
  };
  Twice t;
  EXPECT_THAT([&] { t.add(); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                                    "register_module('b'): this module is registered already as 'a'")));
}

// Names are JSON keys in weights files and checkpoints: invalid UTF-8 failed
// there, after training, as nlohmann's type_error; a NUL cut names short.
TEST(Module, NamesThatAreNotUtf8TextAreRefused) {
  struct Named : Module {
    void add(const std::string& name) { register_parameter(name, Tensor::zeros({2})); }
  };
  Named m;
  for (const std::string& bad : {std::string("w\xff\xfe"), std::string("a\0b", 3)})
    EXPECT_THAT([&] { m.add(bad); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                                         "is not UTF-8 text without NUL (weights files and checkpoints keep names")));
  EXPECT_NO_THROW(m.add("gewicht_\u00fc"));
}

TEST(Module, StateDictRoundTripKeepsParameterIdentity) {
  Toy a(1), b(2);
  ASSERT_NE(a.fc->weight().value().to_vector(), b.fc->weight().value().to_vector());
  a.count.fill(7.0f);
  Variable w_before = b.fc->weight();
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.fc->weight().impl(), w_before.impl());  // copied into, not replaced
  for (const auto& [name, t] : a.state_dict()) EXPECT_EQ(t.to_vector(), b.state_dict().at(name).to_vector()) << name;
  EXPECT_EQ(b.count.to_vector(), std::vector<float>{7.0f});
  EXPECT_FALSE(a.state_dict().count("head.weight"));  // aliases are written once, under the target
}

TEST(Module, LoadErrorsNameMissingUnexpectedAndMisshapedTensors) {
  Toy toy(1);
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
  Toy a(1), b(2);
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

// An alias whose target is no tensor of the model (a typo), or that shadows
// one, is named when the aliases are first read (saving, loading, a strategy).
TEST(Module, AnAliasToNothingOrOverATensorIsRefused) {
  struct Tied : Module {
    Tied(const std::string& alias, const std::string& target) {
      register_module("fc", std::make_shared<Linear>(3, 2, true));
      register_alias(alias, target);
    }
  };
  try {
    Tied("head.weight", "fc.weights").aliases();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("alias 'head.weight' names 'fc.weights', which is no parameter or buffer"));
  }
  try {
    Tied("fc.bias", "fc.weight").aliases();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("alias 'fc.bias' is also the name of a parameter or buffer"));
  }
  EXPECT_EQ(Tied("head.weight", "fc.weight").aliases().at("head.weight"), "fc.weight");
}

TEST(Module, TrainEvalPropagatesToChildrenAndNewChildren) {
  Toy toy(1);
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
  Toy toy(1);
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
