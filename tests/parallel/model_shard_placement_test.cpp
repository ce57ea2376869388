// ModelShard, continued: plans that do not fit the model are errors naming
// the rule or the parameter, and pipeline stages hold the parameters of their
// pieces — a weight tied across stages on each of them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "artel/models/model.h"
#include "artel/nn/activations.h"
#include "artel/nn/conv2d.h"
#include "artel/nn/linear.h"
#include "artel/parallel/model_shard.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

ShardPlace checked_against(int degree) {
  ShardPlace p;
  p.tp_degree = degree;
  return p;
}

ShardPlace stage_of(std::vector<PieceRange> stages, int stage) {
  ShardPlace p;
  p.stages = std::move(stages);
  p.stage = stage;
  return p;
}

// fc1 -> act -> fc2 with the rules given; `forget` leaves a module out of the pieces.
class Tiny : public nn::Model {
 public:
  Tiny(std::vector<nn::TensorParallelRule> rules, int64_t hidden = 6, const std::string& forget = "") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, hidden));
    act = register_module("act", std::make_shared<nn::ReLU>());
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, 3));
    nn::ParallelPlan plan;
    plan.tensor_parallel = std::move(rules);
    for (auto [path, layer] : {std::pair<std::string, nn::Layer*>{"fc1", fc1.get()}, {"act", act.get()}, {"fc2", fc2.get()}})
      if (path != forget) plan.pieces.push_back(nn::layer_piece(path, *layer));
    set_plan(std::move(plan));
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::ReLU> act;
};

using nn::TensorParallelStyle;

template <class M>
void expect_shard_error(M matcher, std::vector<nn::TensorParallelRule> rules, int64_t hidden = 6, int degree = 2,
                        const std::string& forget = "") {
  Tiny m(std::move(rules), hidden, forget);
  EXPECT_THAT([&] { ModelShard s(m, checked_against(degree)); }, ThrowsMessage<Error>(matcher));
}

// Sequence parallelism sums the gradients of the replicated parameters it
// knows (nn::Linear's, nn::LayerNorm's) over the group; any other module
// with parameters among the layer pieces is refused by name, and a plan
// without layer pieces has no stream to split.
TEST(ModelShardErrors, SequenceParallelRefusesLayersItCannotSum) {
  struct WithConv : nn::Model {
    WithConv() {
      conv = register_module("conv", std::make_shared<nn::Conv2d>(1, 2, 3, 1, 1));
      fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
      nn::ParallelPlan plan;
      plan.tensor_parallel = {{"fc", TensorParallelStyle::column}};
      plan.pieces = {nn::layer_piece("conv", *conv), nn::layer_piece("fc", *fc)};
      set_plan(std::move(plan));
    }
    std::shared_ptr<nn::Conv2d> conv;
    std::shared_ptr<nn::Linear> fc;
  } conv;
  ShardPlace place = checked_against(2);
  place.sequence_parallel = true;
  EXPECT_THAT([&] { ModelShard s(conv, place); },
              ThrowsMessage<Error>(AllOf(HasSubstr("sequence parallelism: conv.weight belongs to a module that is "
                                                   "neither an nn::Linear nor an nn::LayerNorm"),
                                         HasSubstr("drop --sequence-parallel"))));
  Tiny tiny({{"fc1", TensorParallelStyle::column}, {"fc2", TensorParallelStyle::row}});
  ModelShard fine(tiny, place);  // Linear layers only: accepted
  struct NoLayers : nn::Model {
    NoLayers() {
      fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
      nn::Piece piece = nn::layer_piece("fc", *fc);
      piece.layer = false;
      set_plan({.tensor_parallel = {{"fc", TensorParallelStyle::column}}, .pieces = {piece}});
    }
    std::shared_ptr<nn::Linear> fc;
  } no_layers;
  EXPECT_THAT([&] { ModelShard s(no_layers, place); },
              ThrowsMessage<Error>(HasSubstr("this model's plan declares none")));
}

TEST(ModelShardErrors, RulesThatMatchNothingOrTheWrongLayer) {
  expect_shard_error(HasSubstr("tensor-parallel rule 'fc3' matches no module"), {{"fc3", TensorParallelStyle::column}});
  // No partial matches: 'fc' is not fc1, and '*' is one component.
  expect_shard_error(HasSubstr("rule 'fc' matches no module"), {{"fc", TensorParallelStyle::column}});
  expect_shard_error(HasSubstr("rule '*.fc1' matches no module"), {{"*.fc1", TensorParallelStyle::column}});
  expect_shard_error(AllOf(HasSubstr("'act'"), HasSubstr("neither an nn::Linear nor an nn::Embedding")),
                     {{"act", TensorParallelStyle::column}});
  expect_shard_error(HasSubstr("fc1 is a Linear, not an Embedding"), {{"fc1", TensorParallelStyle::vocab}});
  // A fine plan is no error.
  Tiny ok({{"fc1", TensorParallelStyle::column}, {"fc2", TensorParallelStyle::row}});
  EXPECT_NO_THROW(ModelShard(ok, checked_against(2)));
}

TEST(ModelShardErrors, SplitsThatDoNotDivideNameTheParameter) {
  expect_shard_error(AllOf(HasSubstr("fc1.weight [5, 4] does not split over 2 ranks"), HasSubstr("--tp")),
                     {{"fc1", TensorParallelStyle::column}}, /*hidden=*/5);
  expect_shard_error(HasSubstr("fc2.weight [3, 5] does not split over 2 ranks"), {{"fc2", TensorParallelStyle::row}}, 5);
  expect_shard_error(HasSubstr("fc1.weight [6, 4] does not split over 4 ranks"), {{"fc1", TensorParallelStyle::column}}, 6, 4);
  // A GPT whose attention rows (18 per q, k, v) do not divide over 4 ranks.
  models::ModelConfig c;
  c.vocab_size = 65, c.n_layer = 2, c.n_head = 2, c.n_embd = 18, c.block_size = 8;
  auto gpt = models::declare_model(c);
  EXPECT_THAT([&] { ModelShard s(*gpt, checked_against(4)); },
              ThrowsMessage<Error>(HasSubstr("transformer.h.0.attn.c_attn.weight [54, 18] does not split over 4 ranks")));
}

// 2 heads of 8 features over 4 ranks: every split divides (16 rows of q, k, v
// by 4) but a rank would hold half a head. The plan declares the head width as
// the split's unit, so this is refused up front, naming c_attn.
TEST(ModelShardErrors, AHeadSplitAcrossRanksIsAnError) {
  for (auto [heads, embd, degree] : {std::tuple{2, 16, 4}, std::tuple{3, 24, 2}}) {
    models::ModelConfig c;
    c.vocab_size = 65, c.n_layer = 2, c.n_head = heads, c.n_embd = embd, c.block_size = 8;
    auto gpt = models::declare_model(c);
    EXPECT_THAT([&] { ModelShard s(*gpt, checked_against(degree)); },
                ThrowsMessage<Error>(HasSubstr("transformer.h.0.attn.c_attn.weight")))
        << heads << " heads over " << degree;
  }
}

TEST(ModelShardErrors, AParameterNoPieceUsesIsNamed) {
  expect_shard_error(HasSubstr("parameter fc2.weight is used by no piece"), {}, 6, 1, /*forget=*/"fc2");
}

std::vector<std::string> names_of(const ModelShard& s) {
  std::vector<std::string> out;
  for (const auto& [n, _] : s.parameters()) out.push_back(n);
  return out;
}

std::vector<std::string> with_prefix(const std::string& prefix, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& n : names) out.push_back(prefix + n);
  return out;
}

const std::vector<std::string> kBlock = {"ln_1.weight", "ln_1.bias",   "attn.c_attn.weight", "attn.c_attn.bias",
                                         "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                         "mlp.c_fc.weight",  "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};

TEST(ModelShardPipeline, GptStagesHoldTheirPiecesAndTheTiedEmbeddingOnBoth) {
  models::ModelConfig c;
  c.vocab_size = 65, c.n_layer = 2, c.n_head = 4, c.n_embd = 16, c.block_size = 8, c.seed = 5;
  const std::vector<PieceRange> stages = {{0, 2}, {2, 4}};  // {embed, h.0} {h.1, head}
  auto m0 = models::declare_model(c), m1 = models::declare_model(c);
  ModelShard s0(*m0, stage_of(stages, 0)), s1(*m1, stage_of(stages, 1));
  std::vector<std::string> want0 = {"transformer.wte.weight", "transformer.wpe.weight"}, want1 = {"transformer.wte.weight"};
  for (const std::string& n : with_prefix("transformer.h.0.", kBlock)) want0.push_back(n);
  for (const std::string& n : with_prefix("transformer.h.1.", kBlock)) want1.push_back(n);
  want1.insert(want1.end(), {"transformer.ln_f.weight", "transformer.ln_f.bias"});
  EXPECT_EQ(names_of(s0), want0);
  EXPECT_EQ(names_of(s1), want1);
  EXPECT_EQ(s0.placement("transformer.wte.weight").stages, (std::vector<int>{0, 1}));
  EXPECT_EQ(s1.placement("transformer.wpe.weight").stages, (std::vector<int>{0}));
  EXPECT_EQ(s0.placement("transformer.h.1.ln_1.weight").stages, (std::vector<int>{1}));
  EXPECT_EQ(s0.placement("transformer.ln_f.bias").stages, (std::vector<int>{1}));
  ASSERT_EQ(s0.tied().size(), 1u);
  ASSERT_EQ(s1.tied().size(), 1u);
  EXPECT_EQ(s0.tied()[0].first, "transformer.wte.weight");
  EXPECT_EQ(s1.tied()[0].first, "transformer.wte.weight");
  EXPECT_TRUE(s0.first_stage() && !s0.last_stage());
  EXPECT_TRUE(s1.last_stage() && !s1.first_stage());

  // Each stage draws only its own parameters, exactly as the whole model holds them.
  s0.materialize(c.seed);
  s1.materialize(c.seed);
  auto whole = models::make_model(c);
  const nn::StateDict sd = whole->state_dict();
  for (const ModelShard* s : {&s0, &s1})
    for (const auto& [n, p] : s->parameters()) EXPECT_EQ(p.value().to_vector(), sd.at(n).to_vector()) << n;
  EXPECT_EQ(m0->state_dict().size(), want0.size());  // stage 0 allocated nothing of stage 1
  EXPECT_EQ(m1->state_dict().size(), want1.size());

  // Stage 0's output, handed to stage 1, gives the whole model's logits.
  Tensor ids = parallel_testing::ids_tensor({1, 5, 64, 0, 7, 7, 30, 2}, {2, 4});
  nn::Activations mid = s0.forward({Variable(ids)});
  ASSERT_EQ(mid.size(), 1u);
  EXPECT_EQ(mid[0].shape(), (Shape{2, 4, 16}));
  nn::Activations out = s1.forward(mid);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].value().to_vector(), whole->forward(ids).value().to_vector());
}

TEST(ModelShardPipeline, AnMlpCutInTwoHoldsDisjointParameters) {
  models::ModelConfig c;
  c.kind = "mlp";
  auto m0 = models::declare_model(c), m1 = models::declare_model(c);
  const std::vector<PieceRange> stages = balanced_stages(piece_layers(*m0), piece_parameter_counts(*m0), 2);
  EXPECT_EQ(stages, (std::vector<PieceRange>{{0, 2}, {2, 6}}));  // input, net.0 | net.1 ... net.4
  ModelShard s0(*m0, stage_of(stages, 0)), s1(*m1, stage_of(stages, 1));
  EXPECT_THAT(names_of(s0), ElementsAre("net.0.weight", "net.0.bias"));
  EXPECT_THAT(names_of(s1), ElementsAre("net.2.weight", "net.2.bias", "net.4.weight", "net.4.bias"));
  std::set<std::string> all;
  for (const ModelShard* s : {&s0, &s1})
    for (const std::string& n : names_of(*s)) EXPECT_TRUE(all.insert(n).second) << n << " held twice";
  EXPECT_EQ(all.size(), m0->named_parameters().size());
  EXPECT_TRUE(s0.tied().empty());
  EXPECT_TRUE(s1.tied().empty());
  s0.materialize(c.seed);
  s1.materialize(c.seed);
  auto whole = models::make_model(c);
  Tensor x = parallel_testing::randn({3, 784}, 8);
  EXPECT_EQ(s1.forward(s0.forward({Variable(x)}))[0].value().to_vector(), whole->forward(x).value().to_vector());
}

// The interleaved schedule's virtual stages: the MLP cut into 4 chunks over
// 2 stages, stage s holding chunks s and s + 2; a micro-batch through
// s0c0, s1c0, s0c1, s1c1 is the whole model's forward.
TEST(ModelShardPipeline, AnMlpInChunksHoldsEveryOtherVirtualStage) {
  models::ModelConfig c;
  c.kind = "mlp";
  auto m0 = models::declare_model(c), m1 = models::declare_model(c);
  const std::vector<PieceRange> chunks = balanced_stages(piece_layers(*m0), piece_parameter_counts(*m0), 4);
  ShardPlace p0 = stage_of(chunks, 0), p1 = stage_of(chunks, 1);
  p0.chunks = p1.chunks = 2;
  ModelShard s0(*m0, p0), s1(*m1, p1);
  EXPECT_EQ(s0.stages(), 2);
  EXPECT_EQ(s0.held_pieces(), (std::vector<PieceRange>{chunks[0], chunks[2]}));
  EXPECT_EQ(s1.held_pieces(), (std::vector<PieceRange>{chunks[1], chunks[3]}));
  EXPECT_TRUE(s0.starts_pipeline(0) && !s0.starts_pipeline(1) && !s0.ends_pipeline(1));
  EXPECT_TRUE(s1.ends_pipeline(1) && !s1.ends_pipeline(0));
  s0.materialize(c.seed);
  s1.materialize(c.seed);
  auto whole = models::make_model(c);
  Tensor x = parallel_testing::randn({3, 784}, 9);
  nn::Activations h = s1.forward(s0.forward({Variable(x)}, 0), 0);
  EXPECT_EQ(s1.forward(s0.forward(h, 1), 1)[0].value().to_vector(), whole->forward(x).value().to_vector());
  EXPECT_THROW(s0.forward(h, 2), Error);
}

// Each chunk's gradients are final after its own last backward (data
// parallelism syncs them then), so two chunks of one stage may not share a
// weight: a GPT in 2 chunks on one stage has its tied embedding in both.
TEST(ModelShardPipeline, ChunksOfOneStageSharingAWeightAreRefused) {
  models::ModelConfig c;
  c.n_layer = 2;
  auto m = models::declare_model(c);
  ShardPlace p = stage_of(balanced_stages(piece_layers(*m), piece_parameter_counts(*m), 2), 0);
  p.chunks = 2;
  EXPECT_THAT([&] { ModelShard s(*m, p); },
              ThrowsMessage<Error>(AllOf(HasSubstr("transformer.wte.weight is used by chunks 0 and 1 of stage 0"),
                                         HasSubstr("must not share parameters"))));
}

TEST(ModelShardPipeline, AStageOutsideThePipelineIsAnError) {
  auto m = models::declare_model(models::ModelConfig{});
  EXPECT_THROW(ModelShard(*m, stage_of({{0, 2}, {2, 6}}, 2)), Error);
}

// Stages a user wrote by hand must cut the pieces in order and cover them:
// a stage past the last piece read outside the plan (a segfault), and a
// skipped piece was blamed on the plan ("used by no piece").
TEST(ModelShardPipeline, StagesThatDoNotCutThePiecesInOrderAreRefused) {
  models::ModelConfig c;
  c.kind = "mlp";  // 6 pieces: input, net.0 ... net.4
  auto m = models::declare_model(c);
  auto refusal = [&](std::vector<PieceRange> stages, int stage) {
    return [&m, stages, stage] { ModelShard s(*m, stage_of(stages, stage)); };
  };
  EXPECT_THAT(refusal({{0, 2}, {2, 9}}, 1),
              ThrowsMessage<Error>(HasSubstr("model shard: stage 1 holds pieces [2, 9), but the stages must cut the "
                                             "model's 6 pieces in order")));
  EXPECT_THAT(refusal({{0, 6}, {6, 0}}, 0), ThrowsMessage<Error>(HasSubstr("stage 1 holds pieces [6, 0)")));
  EXPECT_THAT(refusal({{0, 1}, {2, 6}}, 0),
              ThrowsMessage<Error>(HasSubstr("stage 1 holds pieces [2, 6), but the stages must cut the model's 6 "
                                             "pieces in order, each stage non-empty and starting where the last "
                                             "ended (at 1)")));
  EXPECT_THAT(refusal({{0, 2}, {2, 4}}, 1),
              ThrowsMessage<Error>(HasSubstr("the stages end at piece 4 of the model's 6; the pieces after it would "
                                             "run nowhere")));
  EXPECT_NO_THROW(refusal({{0, 2}, {2, 6}}, 1)());
}

}  // namespace
}  // namespace artel::parallel
