// Memory per worker against hand computation: ZeRO's shards, Korthikanti's
// activation bytes, and the live micro-batches of each schedule.
#include "artel/plan/memory_model.h"

#include <gtest/gtest.h>

#include "artel/plan/pipeline_timeline.h"
#include "artel/plan/step_model.h"
#include "test_cluster.h"

namespace artel::plan {
namespace {

using testing::test_cluster;

const TransformerShape kSmallShape{4, 4, 64, 32, 128};  // L, a, h, s, V

// Korthikanti's counts are for training with dropout (Megatron-LM's).
Workload fp32_workload(int64_t batch, bool dropout = true) {
  Workload w;
  w.global_batch = batch;
  w.precision = Precision::fp32;
  w.state = StateBytes::artel_adamw();
  w.dropout = dropout;
  return w;
}

TEST(MemoryModel, OneStageMatchesHandComputation) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const Layout l{.dp = 8, .micro_batches = 1, .zero = 0};
  const MemoryPrediction m = predict_memory(model, test_cluster(), l, fp32_workload(8));
  const double P = total_parameters(kSmallShape);
  EXPECT_DOUBLE_EQ(m.parameters, 4 * P);
  EXPECT_DOUBLE_EQ(m.gradients, 4 * P);
  EXPECT_DOUBLE_EQ(m.optimizer_state, 8 * P);
  // fp32 doubles Korthikanti's 16-bit bytes; micro-batch b = 1.
  const double s = 32, b = 1, h = 64, a = 4, V = 128;
  const double block = s * b * h * (34 + 5 * a * s / h) * 2;
  const double embedding_mask = s * b * h;
  const double head = 4 * s * b * (h + V) * 2;
  // Four blocks kept, plus one block's gradients while it runs backward.
  EXPECT_DOUBLE_EQ(m.activations, 4 * block + embedding_mask + head + block);
  EXPECT_DOUBLE_EQ(m.communication, 0);  // artel's buckets are the gradients themselves
  Workload copies = fp32_workload(8);
  copies.bucket_copy_bytes = 25.0 * (1 << 20);  // PyTorch's DDP without gradient_as_bucket_view
  EXPECT_DOUBLE_EQ(predict_memory(model, test_cluster(), l, copies).communication, 2 * 25.0 * (1 << 20));
}

TEST(MemoryModel, WithoutDropoutNoMaskNorDroppedCopyIsKept) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const Layout l{.dp = 8, .micro_batches = 1, .zero = 0};
  const MemoryPrediction m = predict_memory(model, test_cluster(), l, fp32_workload(8, /*dropout=*/false));
  // The block's two masks (2·s·b·h of the 10), the attention dropout's mask
  // and output (3 of the 5 bytes a score) and the embedding's mask are gone.
  const double s = 32, b = 1, h = 64, a = 4, V = 128;
  const double block = s * b * h * (32 + 2 * a * s / h) * 2;
  const double head = 4 * s * b * (h + V) * 2;
  EXPECT_DOUBLE_EQ(m.activations, 4 * block + head + block);
}

TEST(MemoryModel, ZeroStagesShardStateOverDataParallelism) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const double P = total_parameters(kSmallShape), N = 8;
  auto at = [&](int zero) {
    return predict_memory(model, test_cluster(), Layout{.dp = 8, .micro_batches = 1, .zero = zero}, fp32_workload(8));
  };
  // The ZeRO paper's terms (tools/zero_bytes_per_parameter.py): 16Ψ, 8Ψ + 8Ψ/N, 4Ψ + 12Ψ/N, 16Ψ/N + gathered.
  const MemoryPrediction z0 = at(0), z1 = at(1), z2 = at(2), z3 = at(3);
  EXPECT_DOUBLE_EQ(z0.parameters + z0.gradients + z0.optimizer_state, 16 * P);
  EXPECT_DOUBLE_EQ(z1.parameters + z1.gradients + z1.optimizer_state, 8 * P + 8 * P / N);
  EXPECT_DOUBLE_EQ(z2.parameters + z2.gradients + z2.optimizer_state, 4 * P + 12 * P / N);
  // ZeRO-3 gathers the two largest units whole, two blocks, and the
  // embedding, tied to the head, from the first forward to the last backward.
  const double gathered = 4 * (embedding_parameters(kSmallShape) + 2 * block_parameters(kSmallShape));
  EXPECT_DOUBLE_EQ(z3.gathered, gathered);
  EXPECT_DOUBLE_EQ(z3.parameters + z3.gradients + z3.optimizer_state, 16 * P / N + gathered);
  // Its gradient staging (parallel/fully_sharded.cpp): the embedding's, tied
  // to the head, through the whole backward, and three blocks' (two being
  // reduce-scattered, one filling).
  EXPECT_DOUBLE_EQ(z3.communication, 4 * (embedding_parameters(kSmallShape) + 3 * block_parameters(kSmallShape)));
  EXPECT_DOUBLE_EQ(z2.communication, 0.0);
}

// Note [Tables apart]: a tied table kept apart adds its rows' buffers on
// each rank: its own, the copy sent and every rank's gathered, or (where the
// ranks' rows outnumber the table's) its own and a dense copy of the table.
TEST(MemoryModel, ATiedTableKeptApartHoldsItsGatheredRows) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const double rows = 32 * (64 * 4 + 8), table = 4 * 128 * 64;  // s·b tokens a row and an id each; V x h
  auto communication = [&](int64_t dp, bool apart) {
    Workload w = fp32_workload(dp);  // one sequence a worker
    w.buckets = {.first_bucket_bytes = 1024, .bucket_bytes = 1024};  // the table is a bucket's size or more
    w.tables_apart = apart;
    const Cluster one_host = test_cluster(64e9, 1, static_cast<int>(dp));
    return predict_memory(model, one_host, Layout{.dp = dp, .micro_batches = 1, .zero = 1}, w).communication;
  };
  EXPECT_DOUBLE_EQ(communication(2, true) - communication(2, false), (2 + 2) * rows);
  EXPECT_DOUBLE_EQ(communication(8, true) - communication(8, false), rows + table);  // 8 x 32 rows > 128
  EXPECT_DOUBLE_EQ(communication(1, true), communication(1, false));
}

TEST(MemoryModel, RecomputationKeepsLessAndSequenceParallelismDividesByTp) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const Workload w = fp32_workload(2);
  const double s = 32, b = 1, h = 64, t = 4;
  auto blocks = [&](Recompute r, bool sp) {
    const Layout l{.dp = 2, .tp = 4, .micro_batches = 1, .recompute = r, .sequence_parallel = sp};
    return stage_work(model, test_cluster(), l, w)[0];
  };
  // Per block at fp32 (×2 the 16-bit bytes): selective keeps s·b·h·(10 + 24/t), with sp 34·s·b·h/t.
  const StageWork none = blocks(Recompute::none, false), sel = blocks(Recompute::selective, false),
                  sel_sp = blocks(Recompute::selective, true), full = blocks(Recompute::full, false);
  const double outside = none.activation_bytes - 4 * s * b * h * (10 + 24 / t + 5 * 4 * s / (h * t)) * 2;
  EXPECT_NEAR(sel.activation_bytes - outside, 4 * s * b * h * (10 + 24 / t) * 2, 1e-6);
  EXPECT_NEAR(full.activation_bytes - outside, 4 * 2 * s * b * h * 2, 1e-6);
  EXPECT_LT(sel_sp.activation_bytes, sel.activation_bytes);
}

TEST(MemoryModel, OneFOneBKeepsAtMostPMinusStageMicroBatchesAndGpipeAll) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const Workload w = fp32_workload(16);
  Layout l{.dp = 2, .pp = 4, .micro_batches = 8, .schedule = Schedule::one_f_one_b};
  const parallel::SimulationResult one = simulate_layout(l, parallel::CostModel{});
  for (int s = 0; s < 4; ++s) EXPECT_EQ(one.peak_live_activations[s], std::min(4 - s, 8));
  l.schedule = Schedule::gpipe;
  const parallel::SimulationResult all = simulate_layout(l, parallel::CostModel{});
  for (int s = 0; s < 4; ++s) EXPECT_EQ(all.peak_live_activations[s], 8);

  // Stage 0's activations: the live micro-batches times one micro-batch's.
  const StageWork st = stage_work(model, test_cluster(), l, w)[0];
  l.schedule = Schedule::one_f_one_b;
  const MemoryPrediction m1 = memory_of({st, st, st, st}, one.peak_live_activations, test_cluster(), l, w);
  EXPECT_DOUBLE_EQ(m1.activations, 4 * st.activation_bytes + st.working_bytes);
}

TEST(MemoryModel, SaysWhenALayoutDoesNotFit) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const Layout l{.dp = 8, .micro_batches = 1};
  EXPECT_TRUE(predict_memory(model, test_cluster(64e9), l, fp32_workload(8)).fits());
  EXPECT_FALSE(predict_memory(model, test_cluster(1e6), l, fp32_workload(8)).fits());
}

}  // namespace
}  // namespace artel::plan
