// A model's measured per-layer costs: on a GPT they are what the planner
// derives from its shape (transformer_shape.h, kept_activations.h), so the
// measurement counts what the planner's GPT model counts; on the MLP they
// are its Linears' products and parameters; and they round-trip through
// the model-costs file.
#include "artel/plan/measured_costs.h"

#include <gtest/gtest.h>

#include "artel/core/error.h"
#include "artel/kernels/attention.h"
#include "artel/models/model.h"
#include "artel/parallel/model_shard.h"
#include "artel/parallel/stages.h"
#include "artel/plan/kept_activations.h"
#include "artel/plan/stage_work.h"
#include "../models/tiny_gpt.h"
#include "test_cluster.h"

namespace artel::plan {
namespace {

TEST(MeasuredCosts, AGptsAreWhatItsShapeSays) {
  models::ModelConfig c = models::tiny_gpt();
  c.n_layer = 3;  // a middle block, with neither the embedding nor the head
  const TransformerShape shape{c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size};
  const int64_t s = c.block_size, h = c.n_embd, v = c.vocab_size;
  auto gpt = models::make_model(c);
  Tensor ids = Tensor::zeros({2, s}, DType::i64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 7) % v;
  const ModelDescription m = measure_model_costs("gpt", *gpt, ids);
  ASSERT_EQ(m.layers.size(), 3u);  // the embedding and the head join the first and last blocks
  EXPECT_EQ(m.layers[0].name, "h.0");
  const double block = block_parameters(shape), flops = block_forward_flops(shape, 1);
  EXPECT_DOUBLE_EQ(m.layers[0].parameters, block + embedding_parameters(shape));
  EXPECT_DOUBLE_EQ(m.layers[1].parameters, block);
  EXPECT_DOUBLE_EQ(m.layers[2].parameters, block + head_parameters(shape));  // the tied table not again
  EXPECT_DOUBLE_EQ(m.parameters(), static_cast<double>(gpt->num_parameters()));
  EXPECT_DOUBLE_EQ(m.layers[0].forward_flops, flops);
  EXPECT_DOUBLE_EQ(m.layers[1].forward_flops, flops);
  EXPECT_DOUBLE_EQ(m.layers[2].forward_flops, flops + logits_forward_flops(shape, 1));
  EXPECT_DOUBLE_EQ(m.layers[1].output_bytes, 4.0 * s * h);  // s·h floats
  EXPECT_DOUBLE_EQ(m.layers[2].output_bytes, 4.0 * s * v);  // the logits
  // What a middle block keeps is what the planner's artel accounting says it
  // keeps, and the layer norms' means and inverse deviations besides (2
  // norms × 2 floats a token), which the accounting leaves out.
  const ActivationShape x{.b = 1,
                          .s = static_cast<double>(s),
                          .h = static_cast<double>(h),
                          .a = static_cast<double>(c.n_head),
                          .v = static_cast<double>(v),
                          .accounting = Activations::artel};
  EXPECT_DOUBLE_EQ(m.layers[1].activation_bytes, block_activations(x).kept + 2.0 * 2 * 4 * s);
}

TEST(MeasuredCosts, AnMlpsLayersAreItsProductsAndParameters) {
  models::ModelConfig c;
  c.kind = "mlp";
  auto mlp = models::make_model(c);
  const ModelDescription m = measure_model_costs("mlp", *mlp, Tensor::zeros({3, 784}));
  ASSERT_EQ(m.layers.size(), 5u);  // Linear, ReLU, Linear, ReLU, Linear; the input check joins the first
  const double in[] = {784, 512, 512}, out[] = {512, 512, 10};
  for (int i = 0; i < 3; ++i) {
    const LayerCosts& l = m.layers[static_cast<size_t>(2 * i)];
    EXPECT_DOUBLE_EQ(l.forward_flops, 2 * in[i] * out[i]) << l.name;
    EXPECT_DOUBLE_EQ(l.parameters, in[i] * out[i] + out[i]) << l.name;
    EXPECT_DOUBLE_EQ(l.output_bytes, 4 * out[i]) << l.name;
  }
  EXPECT_DOUBLE_EQ(m.layers[1].forward_flops + m.layers[1].parameters, 0);  // a ReLU
  EXPECT_DOUBLE_EQ(m.parameters(), static_cast<double>(mlp->num_parameters()));

  const ModelDescription back = parse_model_costs(model_costs_json(m, "test"), "round trip");
  ASSERT_EQ(back.layers.size(), m.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    EXPECT_EQ(back.layers[i].name, m.layers[i].name);
    EXPECT_EQ(back.layers[i].forward_flops, m.layers[i].forward_flops);
    EXPECT_EQ(back.layers[i].activation_bytes, m.layers[i].activation_bytes);
  }
  EXPECT_THROW(measure_model_costs("mlp", *mlp, Tensor::zeros({0, 784})), Error);
}

// A model whose plan splits its blocks over tensor-parallel ranks, and
// marks their attention cores for selective recomputation, is also
// measured as one rank, and with the cores recomputed: the word LM's blocks split as Megatron's (every
// product, the matrices and the column biases), all-reduce two (s, h)
// activations in forward, and a rank keeps what the planner's GPT
// accounting says a rank of a tp-2 block keeps. Its table and head split
// nothing, and the degrees are those the 4 heads divide into.
TEST(MeasuredCosts, AModelsTensorParallelAndSelectivePartsAreWhatTrainingRuns) {
  models::ModelConfig c;
  c.kind = "wordlm", c.vocab_size = 50, c.n_layer = 3, c.n_head = 4, c.n_embd = 32, c.block_size = 8;
  const TransformerShape shape{c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size};
  const double s = static_cast<double>(c.block_size), h = static_cast<double>(c.n_embd);
  Tensor ids = Tensor::zeros({2, c.block_size}, DType::i64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 7) % c.vocab_size;
  const ModelDescription m = measure_model_costs("wordlm", [&] { return models::declare_model(c); }, ids, 5);
  EXPECT_EQ(m.tensor_parallel_degrees, (std::vector<int64_t>{2, 4}));
  ASSERT_EQ(m.layers.size(), 3u);
  for (const LayerCosts& l : m.layers) {
    EXPECT_DOUBLE_EQ(l.split_parameters, 12 * h * h + 7 * h) << l.name;  // the row layers' biases stay whole
    EXPECT_DOUBLE_EQ(l.split_forward_flops, block_forward_flops(shape, 1)) << l.name;
    EXPECT_DOUBLE_EQ(l.tensor_parallel_bytes, 2 * 4 * s * h) << l.name;
    EXPECT_EQ(l.tensor_parallel_collectives, 2) << l.name;
  }
  const LayerCosts& middle = m.layers[1];
  EXPECT_DOUBLE_EQ(middle.forward_flops, middle.split_forward_flops);
  const ActivationShape x{.b = 1, .s = s, .h = h, .a = 4, .v = 50, .t = 2, .accounting = Activations::artel};
  // Every rank keeps the same: rank 0 lays the row layers' bias and residual
  // into their sums where the others lay zeros, and the sums' terms are freed
  // once summed.
  EXPECT_DOUBLE_EQ(LayerCosts::per_rank(middle.activation_bytes, middle.split_activation_bytes, 2) +
                       middle.tensor_parallel_activation_bytes,
                   block_activations(x).kept + 2.0 * 2 * 4 * s);  // the norms' statistics, as above
  // What splitting adds, whatever the degree: nothing. The two row layers'
  // partial sums, (s, h) each, go once all-reduced: the sum's graph keeps an
  // edge to them, not their values (Note [Edges without values]).
  EXPECT_EQ(middle.tensor_parallel_activation_bytes, 0);

  // They round-trip through the costs file.
  const ModelDescription back = parse_model_costs(model_costs_json(m, "test"), "round trip");
  EXPECT_EQ(back.tensor_parallel_degrees, m.tensor_parallel_degrees);
  EXPECT_EQ(back.layers[1].split_activation_bytes, middle.split_activation_bytes);
  EXPECT_EQ(back.layers[1].tensor_parallel_collectives, 2);

  // Selective recomputation: the attention core each block marks is what the
  // planner's GPT accounting recomputes — its products rerun in backward,
  // its probabilities (4 bytes a head, a query and a padded key) not kept.
  const auto padded = static_cast<double>(kernels::AttentionDims{.time = c.block_size}.padded_time());
  for (const LayerCosts& l : m.layers) {
    EXPECT_DOUBLE_EQ(l.recomputed_forward_flops, attention_core_forward_flops(shape, 1)) << l.name;
    EXPECT_DOUBLE_EQ(l.recomputed_activation_bytes, 4 * s * 4 * padded) << l.name;
  }
  EXPECT_TRUE(m.recomputes_selectively());
  EXPECT_EQ(back.layers[2].recomputed_forward_flops, m.layers[2].recomputed_forward_flops);

  // A model whose plan splits nothing is measured whole alone.
  models::ModelConfig cnn;
  cnn.kind = "cnn";
  const ModelDescription whole =
      measure_model_costs("cnn", [&] { return models::declare_model(cnn); }, Tensor::zeros({2, 1, 28, 28}), 5);
  EXPECT_TRUE(whole.tensor_parallel_degrees.empty());
  EXPECT_FALSE(whole.recomputes_selectively()) << "the CNN marks no core";
  EXPECT_FALSE(model_costs_json(whole, "test")["layers"][0].contains("split_parameters"));
  EXPECT_FALSE(model_costs_json(whole, "test")["layers"][0].contains("recomputed_forward_flops"));

  // Parts not asked for are not measured (what artel train's memory check
  // leaves out of a layout that does not use them); the whole costs stay.
  const ModelDescription less = measure_model_costs("wordlm", [&] { return models::declare_model(c); }, ids, 5,
                                                    {.timing = std::nullopt, .selective = false, .tensor_parallel = false});
  EXPECT_TRUE(less.tensor_parallel_degrees.empty());
  EXPECT_FALSE(less.recomputes_selectively());
  ASSERT_EQ(less.layers.size(), m.layers.size());
  EXPECT_EQ(less.layers[1].activation_bytes, m.layers[1].activation_bytes);
  EXPECT_EQ(less.layers[1].forward_flops, m.layers[1].forward_flops);
}

// The work outside the products: timed on the CNN, whose im2col and
// pooling are most of its step, it is positive in forward and backward, and
// a layer's stream_bytes cost the planner those bytes at the device's
// streaming rate, per sample, backward its own (test cluster: 100 GB/s).
TEST(MeasuredCosts, WorkOutsideTheProductsIsTimedAndPlannedAsStreamedBytes) {
  models::ModelConfig c;
  c.kind = "cnn";
  const ModelDescription m = measure_model_costs("cnn", [&] { return models::declare_model(c); },
                                                 Tensor::zeros({2, 1, 28, 28}), 5,
                                                 {.timing = StreamTiming{.batch = Tensor::zeros({8, 1, 28, 28}),
                                                                         .bytes_per_second = 1e10}});
  double forward = 0, backward = 0;
  for (const LayerCosts& l : m.layers) forward += l.stream_bytes, backward += l.backward_stream_bytes;
  EXPECT_GT(forward, 0);
  EXPECT_GT(backward, 0);
  EXPECT_EQ(parse_model_costs(model_costs_json(m, "test"), "round trip").layers[0].backward_stream_bytes,
            m.layers[0].backward_stream_bytes);

  ModelDescription typed{.name = "typed", .transformer = std::nullopt,
                         .layers = {{.name = "l", .forward_flops = 1e6, .parameters = 1, .activation_bytes = 8,
                                     .output_bytes = 4}}};
  const Cluster cluster = testing::test_cluster();
  const Layout l{.dp = 8};
  const Workload w{.global_batch = 80};
  const StageWork before = stage_work(typed, cluster, l, w)[0];
  typed.layers[0].stream_bytes = 1e6, typed.layers[0].backward_stream_bytes = 3e6;
  const StageWork after = stage_work(typed, cluster, l, w)[0];
  EXPECT_DOUBLE_EQ(after.forward_compute - before.forward_compute, 10 * 1e6 / 1e11);  // 10 samples a worker
  EXPECT_DOUBLE_EQ(after.backward_compute - before.backward_compute, 10 * 3e6 / 1e11);
}

// The planner cuts a measured model's pipeline stages where `artel train`
// cuts its pieces (parallel::balanced_stages by parameter count), for every
// stage count: what it predicts is the layout that runs, and a pp that does
// not divide the layers (the MLP's 5) is a layout.
TEST(MeasuredCosts, StagesAreCutWhereTrainingCutsThem) {
  for (const char* kind : {"mlp", "cnn"}) {
    models::ModelConfig c;
    c.kind = kind;
    auto model = models::make_model(c);
    const Tensor batch = std::string(kind) == "mlp" ? Tensor::zeros({2, 784}) : Tensor::zeros({2, 1, 28, 28});
    const ModelDescription m = measure_model_costs(kind, *model, batch);
    const std::vector<bool> layers = parallel::piece_layers(*model);
    for (int pp = 1; pp <= static_cast<int>(m.layers.size()); ++pp) {
      const Layout l{.pp = pp};
      const std::vector<parallel::PieceRange> trained = parallel::layers_of(
          layers, parallel::balanced_stages(layers, parallel::piece_parameter_counts(*model), pp));
      EXPECT_EQ(listed_stage_layers(m, l), trained) << kind << " pp " << pp;
    }
  }
}

}  // namespace
}  // namespace artel::plan
