// Cutting a model's pieces into pipeline stages: pieces that are no layer (a
// GPT's embed and head) ride with their neighbouring layer, the stages balance
// any costs, ties go to the earliest cut, and counts that cannot work are errors.
#include "artel/parallel/stages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artel/core/error.h"
#include "artel/models/model.h"
#include "artel/parallel/model_shard.h"

namespace artel::parallel {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Ranges = std::vector<PieceRange>;

// A GPT of 4 blocks: embed, h.0 ... h.3, head.
const std::vector<bool> kGpt = {false, true, true, true, true, false};

TEST(Stages, BalancedEqualCostsCutBetweenBlocksAndKeepTheEndsWithTheirBlocks) {
  const std::vector<double> ones(6, 1.0);
  // Units: embed + h.0 (2), h.1 (1), h.2 (1), h.3 + head (2).
  EXPECT_EQ(balanced_stages(kGpt, ones, 2), (Ranges{{0, 3}, {3, 6}}));
  EXPECT_EQ(balanced_stages(kGpt, ones, 4), (Ranges{{0, 2}, {2, 3}, {3, 4}, {4, 6}}));
  EXPECT_EQ(balanced_stages(kGpt, ones, 1), (Ranges{{0, 6}}));
  // Free ends: blocks alone decide.
  EXPECT_EQ(balanced_stages(kGpt, {0, 1, 1, 1, 1, 0}, 2), (Ranges{{0, 3}, {3, 6}}));
}

TEST(Stages, BalancedFollowsTheCosts) {
  // A heavy embedding: the first stage keeps one block.
  EXPECT_EQ(balanced_stages(kGpt, {10, 1, 1, 1, 1, 0}, 2), (Ranges{{0, 2}, {2, 6}}));
  // A head as costly as three blocks: the last stage keeps one block.
  EXPECT_EQ(balanced_stages(kGpt, {0.1, 1, 1, 1, 1, 3}, 2), (Ranges{{0, 4}, {4, 6}}));
  // Uneven blocks.
  EXPECT_EQ(balanced_stages(kGpt, {0, 4, 1, 1, 1, 0}, 2), (Ranges{{0, 2}, {2, 6}}));
  EXPECT_EQ(balanced_stages(kGpt, {0, 1, 1, 1, 4, 0}, 3), (Ranges{{0, 2}, {2, 4}, {4, 6}}));
}

TEST(Stages, TiesGoToTheEarliestCut) {
  // embed, h.0 (1), h.1 (2), h.2 (1), head: cutting after h.0 or after h.1 both give a largest stage of 3.
  EXPECT_EQ(balanced_stages({false, true, true, true, false}, {0, 1, 2, 1, 0}, 2), (Ranges{{0, 2}, {2, 5}}));
  EXPECT_EQ(balanced_stages({true, true, true}, {1, 2, 1}, 2), (Ranges{{0, 1}, {1, 3}}));
  // All equal, three layers in two stages: 1 | 2, not 2 | 1.
  EXPECT_EQ(balanced_stages({true, true, true}, {1, 1, 1}, 2), (Ranges{{0, 1}, {1, 3}}));
}

TEST(Stages, BalancedErrors) {
  const std::vector<double> ones(6, 1.0);
  EXPECT_THAT([&] { balanced_stages(kGpt, ones, 5); },
              ThrowsMessage<Error>(HasSubstr("5 stages for a model of 4 layers")));
  EXPECT_THROW(balanced_stages(kGpt, ones, 0), Error);
  EXPECT_THAT([&] { balanced_stages(kGpt, {1, 1}, 2); }, ThrowsMessage<Error>(HasSubstr("6 pieces, 2 costs")));
  // A model of the user's own without a plan: said so, not "a model of 0 layers ... (a GPT block)".
  EXPECT_THAT([&] { balanced_stages({}, {}, 2); },
              ThrowsMessage<Error>(HasSubstr("2 stages for a model that declares no layer pieces to cut")));
}

TEST(Stages, ExplicitLayersPerStage) {
  EXPECT_EQ(explicit_stages(kGpt, {1, 3}), (Ranges{{0, 2}, {2, 6}}));
  EXPECT_EQ(explicit_stages(kGpt, {3, 1}), (Ranges{{0, 4}, {4, 6}}));
  EXPECT_EQ(explicit_stages(kGpt, {1, 1, 1, 1}), (Ranges{{0, 2}, {2, 3}, {3, 4}, {4, 6}}));
  EXPECT_EQ(explicit_stages(kGpt, {4}), (Ranges{{0, 6}}));
  // Without non-layer pieces.
  EXPECT_EQ(explicit_stages({true, true, true}, {2, 1}), (Ranges{{0, 2}, {2, 3}}));
}

TEST(Stages, ExplicitErrors) {
  EXPECT_THAT([&] { explicit_stages(kGpt, {1, 2}); },
              ThrowsMessage<Error>(HasSubstr("add up to 3 layers, the model has 4")));
  EXPECT_THAT([&] { explicit_stages(kGpt, {2, 3}); },
              ThrowsMessage<Error>(HasSubstr("add up to 5 layers, the model has 4")));
  EXPECT_THAT([&] { explicit_stages(kGpt, {0, 4}); }, ThrowsMessage<Error>(HasSubstr("stage 0 is given 0 layers")));
  EXPECT_THAT([&] { explicit_stages(kGpt, {1, 1, 1, 1, 0}); },
              ThrowsMessage<Error>(HasSubstr("5 stages for a model of 4 layers")));
  EXPECT_THROW(explicit_stages(kGpt, {}), Error);
}

TEST(Stages, LayersOfCountsOnlyLayers) {
  EXPECT_EQ(layers_of(kGpt, {{0, 2}, {2, 6}}), (Ranges{{0, 1}, {1, 4}}));
  EXPECT_EQ(layers_of(kGpt, {{0, 6}}), (Ranges{{0, 4}}));
  EXPECT_EQ(layers_of(kGpt, explicit_stages(kGpt, {2, 2})), (Ranges{{0, 2}, {2, 4}}));
}

// On a real model: the GPT's pieces and their parameter counts (the tied
// embedding counts in embed and in head).
TEST(Stages, AGptsPiecesAndTheirParameterCounts) {
  models::ModelConfig c;
  c.vocab_size = 65, c.n_layer = 2, c.n_head = 4, c.n_embd = 16, c.block_size = 8;
  auto m = models::declare_model(c);
  EXPECT_EQ(piece_layers(*m), (std::vector<bool>{false, true, true, false}));
  const double wte = 65 * 16, wpe = 8 * 16, ln = 2 * 16;
  const double block = 2 * ln + (48 * 16 + 48) + (16 * 16 + 16) + (64 * 16 + 64) + (16 * 64 + 16);
  EXPECT_EQ(piece_parameter_counts(*m), (std::vector<double>{wte + wpe, block, block, ln + wte}));
  EXPECT_EQ(balanced_stages(piece_layers(*m), piece_parameter_counts(*m), 2), (Ranges{{0, 2}, {2, 4}}));
}

}  // namespace
}  // namespace artel::parallel
