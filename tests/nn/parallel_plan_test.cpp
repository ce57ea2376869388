// Plan patterns and the piece-by-piece forward of an nn::Model.
#include "artel/nn/parallel_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artel/autograd/ops.h"
#include "artel/nn/activations.h"
#include "artel/nn/linear.h"
#include "artel/nn/model.h"

namespace artel::nn {
namespace {

TEST(PathMatches, StarIsExactlyOneComponent) {
  EXPECT_TRUE(path_matches("a.*.c", "a.b.c"));
  EXPECT_TRUE(path_matches("a.*.c", "a.17.c"));
  EXPECT_FALSE(path_matches("a.*.c", "a.b.c.d"));  // no prefix matches
  EXPECT_FALSE(path_matches("a.*.c", "a.c"));      // '*' is one component, not zero
  EXPECT_FALSE(path_matches("a.*.c", "a.b.x.c"));  // nor two
  EXPECT_FALSE(path_matches("a.*.c", "x.b.c"));
  EXPECT_TRUE(path_matches("*", "wte"));
  EXPECT_FALSE(path_matches("*", "h.0"));
  EXPECT_TRUE(path_matches("transformer.h.*.attn.c_attn", "transformer.h.11.attn.c_attn"));
  EXPECT_FALSE(path_matches("transformer.h.*.attn", "transformer.h.0.attn.c_attn"));
  EXPECT_FALSE(path_matches("transformer.h.*.attn.c_attn", "transformer.h.0.attn"));
}

TEST(PathMatches, NoPartialComponents) {
  EXPECT_TRUE(path_matches("net.0", "net.0"));
  EXPECT_FALSE(path_matches("net.0", "net.01"));
  EXPECT_FALSE(path_matches("net.0", "net.0.weight"));
  EXPECT_FALSE(path_matches("net", "network"));
  EXPECT_FALSE(path_matches("c_fc", "mlp.c_fc"));  // patterns are anchored at the root
  EXPECT_FALSE(path_matches("a.b", ""));
  EXPECT_TRUE(path_matches("", ""));
}

TEST(PathWithin, NamesTheModuleOrLiesInsideIt) {
  EXPECT_TRUE(path_within("a.b.c", "a.b"));
  EXPECT_TRUE(path_within("a.b", "a.b"));
  EXPECT_TRUE(path_within("transformer.wte.weight", "transformer.wte"));
  EXPECT_FALSE(path_within("a.bc", "a.b"));
  EXPECT_FALSE(path_within("a", "a.b"));
  EXPECT_FALSE(path_within("transformer.h.10.ln_1.weight", "transformer.h.1"));
  EXPECT_TRUE(path_within("anything.at.all", ""));  // the root holds everything
}

TEST(StyleName, NamesEachStyle) {
  EXPECT_STREQ(style_name(TensorParallelStyle::column), "column");
  EXPECT_STREQ(style_name(TensorParallelStyle::row), "row");
  EXPECT_STREQ(style_name(TensorParallelStyle::vocab), "vocab");
}

class TwoLayer : public Model {
 public:
  TwoLayer() {
    fc1 = register_module("fc1", std::make_shared<Linear>(4, 3));
    relu = register_module("relu", std::make_shared<ReLU>());
    fc2 = register_module("fc2", std::make_shared<Linear>(3, 2));
    ParallelPlan plan;
    plan.pieces = {layer_piece("fc1", *fc1), layer_piece("relu", *relu), layer_piece("fc2", *fc2)};
    set_plan(std::move(plan));
  }
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<ReLU> relu;
};

// A piece without a forward threw std::bad_function_call when run; one
// naming a module the model lacks was accepted and placed nothing.
TEST(Model, APlanPieceWithoutAForwardOrWithAnUnknownModuleIsRefused) {
  struct Planned : Model {
    explicit Planned(Piece piece) {
      fc = register_module("fc", std::make_shared<Linear>(4, 3));
      set_plan({.pieces = {layer_piece("fc", *fc), std::move(piece)}});
    }
    std::shared_ptr<Linear> fc;
  };
  try {
    Planned m(Piece{.name = "head", .modules = {"fc"}});
    ADD_FAILURE() << "a piece without a forward was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("plan: piece 1 ('head') has no forward"), std::string::npos) << e.what();
  }
  try {
    Planned m(Piece{.name = "head", .modules = {"fc2"}, .forward = [](const Activations& in) { return in; }});
    ADD_FAILURE() << "a piece naming a missing module was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("plan: piece 1 ('head') uses module 'fc2', which the model does not have"),
              std::string::npos)
        << e.what();
  }
}

TEST(Model, ForwardRunsThePiecesInOrder) {
  TwoLayer m;
  materialize(m, 3);
  Tensor x = Tensor::from_vector({1, -2, 3, 0.5f, -1, 0, 2, 1}, {2, 4});
  std::vector<float> want = m.fc2->forward(m.relu->forward(m.fc1->forward(Variable(x)))).value().to_vector();
  EXPECT_EQ(m.forward(x).value().to_vector(), want);
  ASSERT_EQ(m.plan().pieces.size(), 3u);
  EXPECT_EQ(m.plan().pieces[0].modules, std::vector<std::string>{"fc1"});
  // Any run of pieces, one after the other, is the same computation.
  Activations mid = m.run_pieces(0, 2, {Variable(x)});
  EXPECT_EQ(m.run_pieces(2, 3, mid)[0].value().to_vector(), want);
  EXPECT_EQ(m.run_pieces(1, 1, mid)[0].value().to_vector(), mid[0].value().to_vector());
  EXPECT_THROW(m.run_pieces(2, 4, mid), Error);
  EXPECT_THROW(m.plan().pieces[0].forward({Variable(x), Variable(x)}), Error);  // a layer piece takes one input
}

TEST(Model, SequentialPiecesAreNamedByIndex) {
  Sequential seq;
  seq.add(std::make_shared<Linear>(2, 2));
  seq.add(std::make_shared<ReLU>());
  std::vector<Piece> pieces = sequential_pieces("net", seq);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].name, "net.1");
  EXPECT_EQ(pieces[1].modules, std::vector<std::string>{"net.1"});
  EXPECT_TRUE(pieces[1].layer);
}

TEST(Model, WithoutPiecesForwardIsAnError) {
  Model empty;
  EXPECT_THAT([&] { empty.forward(Tensor::zeros({1})); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("declares no pieces")));
}

}  // namespace
}  // namespace artel::nn
