// How the GPT is cut up: stage ranges, owners, and tensor-parallel shards
// that join back into the whole tensor.
#include "artel/parallel/gpt_sharding.h"

#include <gtest/gtest.h>

#include "artel/core/error.h"
#include "artel/parallel/gpt_shard.h"

namespace artel::parallel {
namespace {

models::ModelConfig gpt(int64_t layers) {
  models::ModelConfig c;
  c.n_layer = layers;
  return c;
}

TEST(GptSharding, BalancedStagesAreContiguousAndEven) {
  EXPECT_EQ(balanced_stages(gpt(4), 2), (std::vector<BlockRange>{{0, 2}, {2, 4}}));
  EXPECT_EQ(balanced_stages(gpt(4), 4), (std::vector<BlockRange>{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  EXPECT_EQ(balanced_stages(gpt(4), 1), (std::vector<BlockRange>{{0, 4}}));
  // A huge vocabulary weighs on the first stage: it gets fewer blocks.
  models::ModelConfig big_vocab = gpt(4);
  big_vocab.vocab_size = 50000;
  EXPECT_EQ(balanced_stages(big_vocab, 2), (std::vector<BlockRange>{{0, 1}, {1, 4}}));
  EXPECT_THROW(balanced_stages(gpt(2), 3), Error);
}

TEST(GptSharding, StagesBalanceWhateverCostsTheyAreGiven) {
  // A head as costly as three blocks: the last stage keeps one block.
  EXPECT_EQ(balanced_stages(gpt(4), 2, {.embeddings = 0.1, .block = 1, .head = 3}),
            (std::vector<BlockRange>{{0, 3}, {3, 4}}));
  // Cheap ends: an even split.
  EXPECT_EQ(balanced_stages(gpt(8), 4, {.embeddings = 0.01, .block = 1, .head = 0.05}),
            (std::vector<BlockRange>{{0, 2}, {2, 4}, {4, 6}, {6, 8}}));
  EXPECT_THROW(balanced_stages(gpt(2), 3, {.block = 1}), Error);
}

// With a large vocabulary the head (lm_head product and loss) outweighs a
// block many times over while holding no parameters of its own: measured
// costs move blocks off the last stage, where parameter counts move them onto it.
TEST(GptSharding, MeasuredCostsSeeTheHeadThatParameterCountsMiss) {
  models::ModelConfig c = gpt(4);
  c.vocab_size = 8192, c.n_embd = 32, c.n_head = 2, c.block_size = 16;
  GptShard whole(c, {.stage = 0, .stages = 1, .blocks = {0, 4}});
  PieceCosts ms = whole.measure_costs(/*rows=*/8, /*repeats=*/3);
  EXPECT_GT(ms.block, 0);
  EXPECT_GT(ms.head, ms.embeddings + 2 * ms.block) << ms.embeddings << " " << ms.block << " " << ms.head;
  for (const auto& [name, p] : whole.named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
  std::vector<BlockRange> by_cost = balanced_stages(c, 2, ms), by_params = balanced_stages(c, 2);
  EXPECT_GT(by_cost[0].size(), by_cost[1].size());
  EXPECT_LT(by_params[0].size(), by_params[1].size());
  GptShard stage(c, {.stage = 0, .stages = 2, .blocks = {0, 2}});
  EXPECT_THROW(stage.measure_costs(2, 3), Error);
}

TEST(GptSharding, ExplicitStagesMustCoverEveryBlockOnce) {
  EXPECT_EQ(explicit_stages(gpt(4), {1, 3}), (std::vector<BlockRange>{{0, 1}, {1, 4}}));
  EXPECT_THROW(explicit_stages(gpt(4), {1, 2}), Error);
  EXPECT_THROW(explicit_stages(gpt(4), {0, 4}), Error);
}

TEST(GptSharding, EachParameterHasOneOwningStage) {
  std::vector<BlockRange> stages = {{0, 1}, {1, 4}};
  EXPECT_EQ(stage_of("transformer.wte.weight", stages), 0);
  EXPECT_EQ(stage_of("transformer.wpe.weight", stages), 0);
  EXPECT_EQ(stage_of("transformer.h.0.ln_1.weight", stages), 0);
  EXPECT_EQ(stage_of("transformer.h.3.mlp.c_fc.bias", stages), 1);
  EXPECT_EQ(stage_of("transformer.ln_f.bias", stages), 1);
  EXPECT_THROW(stage_of("transformer.h.7.ln_1.weight", stages), Error);
}

TEST(GptSharding, MegatronSplits) {
  EXPECT_EQ(shard_kind("transformer.wte.weight"), ShardKind::rows);
  EXPECT_EQ(shard_kind("transformer.h.0.attn.c_attn.weight"), ShardKind::qkv_rows);
  EXPECT_EQ(shard_kind("transformer.h.0.attn.c_attn.bias"), ShardKind::qkv_rows);
  EXPECT_EQ(shard_kind("transformer.h.0.attn.c_proj.weight"), ShardKind::columns);
  EXPECT_EQ(shard_kind("transformer.h.0.attn.c_proj.bias"), ShardKind::replicated);
  EXPECT_EQ(shard_kind("transformer.h.0.mlp.c_fc.weight"), ShardKind::rows);
  EXPECT_EQ(shard_kind("transformer.h.0.mlp.c_proj.weight"), ShardKind::columns);
  EXPECT_EQ(shard_kind("transformer.h.0.ln_2.weight"), ShardKind::replicated);
  EXPECT_EQ(shard_kind("transformer.wpe.weight"), ShardKind::replicated);
}

Tensor iota(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(GptSharding, QkvShardHoldsTheSameHeadsOfQKAndV) {
  // c_attn of C = 4: rows 0-3 q, 4-7 k, 8-11 v; 2 columns for brevity.
  Tensor full = iota({12, 2});
  Tensor second = take_shard(full, ShardKind::qkv_rows, 1, 2);
  ASSERT_EQ(second.shape(), (Shape{6, 2}));
  // rows 2-3 of q, of k and of v.
  EXPECT_EQ(second.to_vector(), (std::vector<float>{4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23}));
}

TEST(GptSharding, ShardsJoinBackIntoTheWholeTensor) {
  for (ShardKind kind : {ShardKind::rows, ShardKind::columns, ShardKind::qkv_rows, ShardKind::replicated})
    for (int parts : {1, 2, 4}) {
      Tensor full = iota({12, 8});
      std::vector<Tensor> pieces;
      for (int p = 0; p < parts; ++p) pieces.push_back(take_shard(full, kind, p, parts));
      EXPECT_EQ(join_shards(pieces, kind).to_vector(), full.to_vector()) << shard_kind_name(kind) << " / " << parts;
    }
  Tensor bias = iota({12});
  std::vector<Tensor> halves = {take_shard(bias, ShardKind::qkv_rows, 0, 2), take_shard(bias, ShardKind::qkv_rows, 1, 2)};
  EXPECT_EQ(join_shards(halves, ShardKind::qkv_rows).to_vector(), bias.to_vector());
  EXPECT_THROW(take_shard(iota({9, 2}), ShardKind::qkv_rows, 0, 2), Error);
}

}  // namespace
}  // namespace artel::parallel
