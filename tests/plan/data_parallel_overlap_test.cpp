// The data-parallel reduction overlaps backward bucket by bucket (DDP's
// buckets, parallel/bucket_plan.h): a bucket starts once backward has
// produced its gradients, so the last one, which holds a GPT's embedding,
// is exposed even when the whole reduction is shorter than backward.
#include <gtest/gtest.h>

#include <algorithm>

#include "artel/models/model.h"
#include "artel/parallel/model_shard.h"
#include "artel/plan/collective_cost.h"
#include "artel/plan/stage_work.h"
#include "artel/plan/step_model.h"
#include "artel/plan/transformer_shape.h"
#include "test_cluster.h"

namespace artel::plan {
namespace {

using testing::test_cluster;

// 2 layers of 1024 and a 50,304-token vocabulary: the embedding is two
// thirds of the parameters. 2 hosts of one worker: the pair crosses hosts.
const TransformerShape kWideVocabulary{2, 8, 1024, 64, 50304};  // L, a, h, s, V

Workload overlap_workload(bool overlap) {
  Workload w;
  w.global_batch = 64;
  w.precision = Precision::fp32;
  w.overlap_grad_reduce = overlap;
  return w;
}

double embedding_all_reduce_seconds(const Cluster& c) {
  const double params = 50304.0 * 1024 + 64.0 * 1024;  // wte and wpe, in the last bucket
  return all_reduce_seconds(c, place_group(c, 2, 1, Route::hierarchical), params * 4);
}

// The planner buckets a stage's tensors as DDP buckets the worker's
// parameters: its tensors are artel's GPT's, in the same order, on one stage
// and on each of two (the last holding the tied wte's copy first).
TEST(DataParallelOverlap, AStagesTensorsAreItsWorkersParametersInOrder) {
  models::ModelConfig c;  // W2's shape
  const ModelDescription model = transformer_model("w2", {c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size});
  const Cluster cluster = test_cluster(64e9, 1, 2);
  Workload w = overlap_workload(true);
  w.global_batch = 4;
  for (int64_t pp : {1, 2}) {
    const std::vector<StageWork> stages = stage_work(model, cluster, Layout{.pp = pp}, w);
    const auto gpt = models::declare_model(c);
    const int64_t pieces = static_cast<int64_t>(gpt->plan().pieces.size());  // embed, 4 blocks, head
    std::vector<parallel::PieceRange> ranges;
    if (pp == 2) ranges = {{0, pieces / 2}, {pieces / 2, pieces}};
    for (int s = 0; s < pp; ++s) {
      parallel::ModelShard shard(*gpt, {.stages = ranges, .stage = s});
      shard.materialize(1);
      std::vector<double> held, planned;
      for (const auto& [name, p] : shard.parameters()) held.push_back(static_cast<double>(p.value().numel()));
      for (const ParameterTensor& t : stages[static_cast<size_t>(s)].tensors) planned.push_back(t.elements);
      EXPECT_EQ(planned, held) << "pp " << pp << ", stage " << s;
    }
  }
  // So W2's DDP buckets: the first closes at the third block's mlp.c_proj weight, the rest is one.
  const std::vector<UnitBucket> buckets = unit_buckets(stage_work(model, cluster, Layout{}, w)[0], w.buckets);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].parameters, 264192);
  EXPECT_EQ(buckets[0].completed_by, 3u);  // units: embedding 0, blocks 1-4, head 5
  EXPECT_EQ(buckets[1].parameters, 545664);
  EXPECT_EQ(buckets[1].completed_by, 0u);
}

TEST(DataParallelOverlap, TheEmbeddingsBucketIsExposedThoughBackwardOutlastsTheWholeReduction) {
  const ModelDescription model = transformer_model("wide vocabulary", kWideVocabulary);
  const Cluster c = test_cluster(64e9, 2, 1);
  const Layout l{.dp = 2, .zero = 0};
  const Prediction p = predict(model, c, l, overlap_workload(true));
  const Prediction after = predict(model, c, l, overlap_workload(false));
  // Backward is longer than the reduction of every gradient at once...
  ASSERT_LT(after.time.data_parallel, p.time.compute * 2 / 3);
  // ...yet the embedding's gradients are ready only when it ends.
  EXPECT_GE(p.time.data_parallel, 0.99 * embedding_all_reduce_seconds(c));
  EXPECT_LT(p.time.data_parallel, after.time.data_parallel);
}

// artel's DDP keeps the tied table apart (Note [Tables apart]): its bucket
// is complete once the head's backward is done and starts first, so what is
// left after backward is the last planned buckets (wpe and the first
// block's tensors, queued behind the table's) and the gather of the
// lookup's rows, at ZeRO 0 to 2. With PowerSGD the table stays in the last
// bucket, as PyTorch's DDP (tables_apart false) keeps it.
TEST(DataParallelOverlap, ATiedTableKeptApartIsReducedWhileBackwardRuns) {
  const ModelDescription model = transformer_model("wide vocabulary", kWideVocabulary);
  const Cluster c = test_cluster(64e9, 2, 1);
  Workload w = overlap_workload(true);
  const double together = predict(model, c, Layout{.dp = 2, .zero = 0}, w).time.data_parallel;
  w.tables_apart = true;
  const double apart = predict(model, c, Layout{.dp = 2, .zero = 0}, w).time.data_parallel;
  const GroupPlacement pair = place_group(c, 2, 1, Route::hierarchical);
  const double tokens = 64.0 / 2 * 64;  // a worker's half of the global batch
  const double rows = all_gather_seconds(c, pair, 2 * tokens * (1024 * 4 + 8));
  EXPECT_GE(apart, rows);
  EXPECT_LT(apart, 0.5 * together);  // 0.098 s against 0.256 s
  const double zero2 = predict(model, c, Layout{.dp = 2, .zero = 2}, w).time.data_parallel;
  EXPECT_EQ(zero2, predict(model, c, Layout{.dp = 2, .zero = 1}, w).time.data_parallel);  // the same buckets as ZeRO 1
  EXPECT_LT(zero2, 0.7 * predict(model, c, Layout{.dp = 2, .zero = 2}, overlap_workload(true)).time.data_parallel);  // 0.187 s against 0.281 s
  Layout compressed{.dp = 2, .zero = 0};
  compressed.compression = {.kind = Compression::Kind::powersgd, .rank = 4};
  EXPECT_EQ(predict(model, c, compressed, w).time.data_parallel,
            predict(model, c, compressed, overlap_workload(true)).time.data_parallel);

  const StageWork st = stage_work(model, c, Layout{.dp = 2}, w)[0];
  const std::vector<UnitBucket> buckets = unit_buckets(st, w.buckets, true);
  EXPECT_TRUE(buckets.back().table);
  EXPECT_EQ(buckets.back().parameters, 50304.0 * 1024);
  EXPECT_EQ(buckets.back().completed_by, st.unit_backward.size() - 1);  // the head's
}

TEST(DataParallelOverlap, WithoutOverlapTheWholeReductionFollowsBackward) {
  const ModelDescription model = transformer_model("wide vocabulary", kWideVocabulary);
  const Cluster c = test_cluster(64e9, 2, 1);
  const Prediction p = predict(model, c, Layout{.dp = 2, .zero = 0}, overlap_workload(false));
  const double params = total_parameters(kWideVocabulary);
  EXPECT_NEAR(p.time.data_parallel, all_reduce_seconds(c, place_group(c, 2, 1, Route::hierarchical), params * 4),
              1e-9);
}

TEST(DataParallelOverlap, LargerBucketsStartLater) {
  const ModelDescription model = transformer_model("wide vocabulary", TransformerShape{8, 8, 1024, 64, 256});
  const Cluster c = test_cluster(64e9, 2, 1);
  Workload w = overlap_workload(true);
  w.global_batch = 2;  // a short backward: the reduction outlasts it
  const double small = predict(model, c, Layout{.dp = 2, .zero = 0}, w).time.data_parallel;
  w.buckets.first_bucket_bytes = w.buckets.bucket_bytes = int64_t{1} << 40;  // one bucket: starts when backward ends
  const double one = predict(model, c, Layout{.dp = 2, .zero = 0}, w).time.data_parallel;
  EXPECT_GT(one, small);
}

TEST(DataParallelOverlap, ZeroOneWithPowerSgdStillGathersTheWholeWeights) {
  const ModelDescription model = transformer_model("wide vocabulary", kWideVocabulary);
  const Cluster c = test_cluster(64e9, 2, 1);
  Layout l{.dp = 2, .zero = 1};
  l.compression = parse_compression("powersgd", 4);
  const Prediction p = predict(model, c, l, overlap_workload(true));
  const double weights = total_parameters(kWideVocabulary) * overlap_workload(true).state.weight;
  EXPECT_GE(p.time.data_parallel, all_gather_seconds(c, place_group(c, 2, 1, Route::hierarchical), weights));
}

// ZeRO-1 gathers each bucket's updated weights as the update finishes it.
// On a CPU host with a core to spare for the progress thread the gathers run
// beside the update, so only what outlasts it is exposed; on one whose
// workers fill every core they follow it. 2 workers of 1 thread run at the
// same speed on 2 cores as on 16, so the two differ by that overlap alone.
TEST(DataParallelOverlap, ZeroOneGathersOverlapTheUpdateOnlyWithACoreToSpare) {
  const ModelDescription model = transformer_model("wide vocabulary", kWideVocabulary);
  Workload w = overlap_workload(false);
  w.threads = 1;
  const Layout l{.dp = 2, .zero = 1};
  auto on_cores = [&](double cores) {
    Cluster c = test_cluster(64e9, 1, 2);
    c.cores_per_host = {cores, "test"};
    return c;
  };
  const Cluster full = on_cores(2), spare = on_cores(16);
  EXPECT_FALSE(spare_core(full, 1));
  EXPECT_TRUE(spare_core(spare, 1));
  EXPECT_FALSE(spare_core(spare, 0));  // --nproc's threads take every core
  const Prediction after = predict(model, full, l, w), beside = predict(model, spare, l, w);
  ASSERT_EQ(after.time.optimizer, beside.time.optimizer);
  const double gathers = all_gather_seconds(full, place_group(full, 2, 1, Route::hierarchical),
                                            total_parameters(kWideVocabulary) * w.state.weight);
  const double hidden = std::min(gathers, after.time.optimizer);
  EXPECT_GT(hidden, 0);
  EXPECT_NEAR(after.time.data_parallel - beside.time.data_parallel, hidden, 1e-9 + 1e-6 * hidden);
}

// A bf16 wire halves the bytes but converts on the cores backward computes
// on: the bucket narrowed (read 4 bytes, write 2 a parameter) and this
// rank's averaged block widened back. On shared memory that is the whole
// difference between the two: `--search` ranked bf16 first on one host
// when only the bytes counted (AMD Zen 3, W2 on 2 workers).
TEST(DataParallelOverlap, ABf16WireConvertsOnTheComputeCores) {
  const ModelDescription model = transformer_model("wide vocabulary", kWideVocabulary);
  const Cluster c = test_cluster(64e9, 1, 2);
  Layout l{.dp = 2, .zero = 1};
  l.compression = parse_compression("bf16", 4);
  const double p = total_parameters(kWideVocabulary);
  const GroupPlacement g = place_group(c, 2, 1, Route::hierarchical);
  const double converted = (4 + 2) * (p + p / 2) / c.device.memory_bandwidth.value;
  const double expected = reduce_scatter_seconds(c, g, p * 2) + all_gather_seconds(c, g, p * 4) + converted;
  EXPECT_NEAR(predict(model, c, l, overlap_workload(false)).time.data_parallel, expected, 1e-6 * expected);
  // ZeRO-0 widens the whole average.
  l.zero = 0;
  const double whole = all_reduce_seconds(c, g, p * 2) + (4 + 2) * 2 * p / c.device.memory_bandwidth.value;
  EXPECT_NEAR(predict(model, c, l, overlap_workload(false)).time.data_parallel, whole, 1e-6 * whole);
}

// Pipeline stages end backward one micro-batch apart, so the data-parallel
// pairs of a host's two stages cross its link one after the other: when the
// first pair is done before the second starts, each has the link alone,
// as a pair on hosts of one worker does.
TEST(DataParallelOverlap, StagesOnOneHostReduceOneAfterTheOther) {
  ModelDescription model;  // a user's layers: no tied embedding to sum between the stages
  model.name = "four layers";
  for (int i = 0; i < 4; ++i) model.layers.push_back({"layer", 1e9, 1e6, 1e4, 1e4});
  Workload w = overlap_workload(true);
  w.global_batch = 64;  // a long backward against a short reduction
  const Layout l{.dp = 2, .pp = 2, .micro_batches = 2, .zero = 0};
  const Cluster two_a_host = test_cluster(64e9, 2, 2);  // a worker's share of its host's link: 1 GB/s
  Cluster one_a_host = test_cluster(64e9, 4, 1);
  one_a_host.inter_host.beta.value = 2e9;  // the same host link, one worker on it
  const double shared = predict(model, two_a_host, l, w).time.data_parallel;
  const double alone = predict(model, one_a_host, l, w).time.data_parallel;
  EXPECT_GT(alone, 0);
  EXPECT_NEAR(shared, alone, 1e-3 * alone);
}

}  // namespace
}  // namespace artel::plan
