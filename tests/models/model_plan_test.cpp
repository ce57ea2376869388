// declare_model / make_model (Note [Declared parameters]) and the plan each
// bundled model declares next to it (nn/parallel_plan.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "artel/models/model.h"
#include "artel/nn/init.h"
#include "tiny_gpt.h"

namespace artel::models {
namespace {

using ::testing::ElementsAre;

TEST(Models, DeclareHasShapesOnlyAndMakeDrawsEachParameterFromItsName) {
  ModelConfig c = tiny_gpt();
  auto declared = declare_model(c);
  EXPECT_EQ(declared->num_parameters(), make_model(c)->num_parameters());
  for (auto& [n, p] : declared->named_parameters()) EXPECT_FALSE(p.value().defined()) << n;
  EXPECT_TRUE(declared->state_dict().empty());
  EXPECT_THROW(declared->forward(ids_of({1, 2}, 1, 2)), Error);  // nothing to compute with yet
  nn::materialize(*declared, c.seed);
  auto made = make_model(c);
  auto a = declared->state_dict(), b = made->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [n, t] : a) EXPECT_EQ(t.to_vector(), b.at(n).to_vector()) << n;
  // transformer.wte.weight is N(0, 0.02), element e from counter e of its name's stream.
  const Tensor& wte = b.at("transformer.wte.weight");
  for (uint64_t e = 0; e < static_cast<uint64_t>(wte.numel()); ++e)
    ASSERT_EQ(wte.data<float>()[e], 0.02f * Rng::normal_at(c.seed, nn::stream_of("transformer.wte.weight"), e)) << e;
  // Two blocks' identically declared weights differ: their names do.
  EXPECT_NE(b.at("transformer.h.0.mlp.c_fc.weight").to_vector(), b.at("transformer.h.1.mlp.c_fc.weight").to_vector());
}

// The plan is declared next to the model: every piece's modules exist, every
// parameter is used by a piece, every tensor-parallel pattern matches.
void expect_consistent_plan(nn::Model& m) {
  std::vector<std::string> paths;
  for (auto& [path, _] : m.named_modules()) paths.push_back(path);
  auto exists = [&](const std::string& p) { return std::find(paths.begin(), paths.end(), p) != paths.end(); };
  for (const nn::Piece& piece : m.plan().pieces)
    for (const std::string& mod : piece.modules) EXPECT_TRUE(exists(mod)) << piece.name << " uses " << mod;
  for (auto& [name, _] : m.named_parameters()) {
    bool used = false;
    for (const nn::Piece& piece : m.plan().pieces)
      for (const std::string& mod : piece.modules) used = used || nn::path_within(name, mod);
    EXPECT_TRUE(used) << name;
  }
  for (const nn::TensorParallelRule& rule : m.plan().tensor_parallel) {
    bool matched = false;
    for (const std::string& p : paths) matched = matched || nn::path_matches(rule.pattern, p);
    EXPECT_TRUE(matched) << rule.pattern;
  }
}

TEST(Models, EachDeclaresAConsistentPlan) {
  auto gpt = declare_model(tiny_gpt());
  const nn::ParallelPlan& plan = gpt->plan();
  std::vector<std::string> names;
  std::vector<bool> layers;
  for (const nn::Piece& p : plan.pieces) names.push_back(p.name), layers.push_back(p.layer);
  EXPECT_THAT(names, ElementsAre("embed", "h.0", "h.1", "head"));
  EXPECT_EQ(layers, (std::vector<bool>{false, true, true, false}));
  EXPECT_THAT(plan.pieces.back().modules, ::testing::Contains("transformer.wte"));  // the tied head
  EXPECT_EQ(plan.vocab_parallel_logits, "transformer.wte");
  ASSERT_EQ(plan.tensor_parallel.size(), 5u);
  EXPECT_EQ(plan.tensor_parallel[1].pattern, "transformer.h.*.attn.c_attn");
  EXPECT_EQ(plan.tensor_parallel[1].groups, 3);
  expect_consistent_plan(*gpt);
  ModelConfig c;
  c.kind = "mlp";
  auto mlp = declare_model(c);
  EXPECT_EQ(mlp->plan().pieces.size(), 6u);  // the input check, then net.0 ... net.4
  EXPECT_FALSE(mlp->plan().pieces[0].layer);
  expect_consistent_plan(*mlp);
  c.kind = "cnn";
  auto cnn = declare_model(c);
  EXPECT_EQ(cnn->plan().pieces.size(), 13u);
  EXPECT_TRUE(cnn->plan().tensor_parallel.empty());
  expect_consistent_plan(*cnn);
}

}  // namespace
}  // namespace artel::models
