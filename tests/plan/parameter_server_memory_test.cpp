// A parameter-server job's memory against hand computation (Note [A
// parameter server's memory]): a worker is a one-worker replica without
// optimizer state plus the servers' copy; a server its shard's weights,
// gradient and state plus two buffers of the shard per worker.
#include "artel/plan/parameter_server_memory.h"

#include <gtest/gtest.h>

#include "artel/plan/memory_model.h"
#include "test_cluster.h"

namespace artel::plan {
namespace {

using testing::test_cluster;

const TransformerShape kSmallShape{4, 4, 64, 32, 128};  // L, a, h, s, V

Workload fp32_batch(int64_t batch) {
  Workload w;
  w.global_batch = batch;
  w.precision = Precision::fp32;
  w.state = StateBytes::artel_adamw();
  return w;
}

TEST(ParameterServerMemory, AWorkerHoldsAReplicaAndTheServersCopyButNoOptimizerState) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const ParameterServerMemory m =
      predict_ps_memory(model, test_cluster(), fp32_batch(4), Recompute::none, /*workers=*/3, /*largest_shard=*/1000);
  // The same replica trained alone, at its batch.
  const MemoryPrediction alone = predict_memory(model, test_cluster(64e9, 1, 1), Layout{}, fp32_batch(4));
  const double P = total_parameters(kSmallShape);
  EXPECT_DOUBLE_EQ(m.worker.parameters, 4 * P);
  EXPECT_DOUBLE_EQ(m.worker.gradients, 4 * P);
  EXPECT_DOUBLE_EQ(m.worker.optimizer_state, 0);
  EXPECT_DOUBLE_EQ(m.worker.activations, alone.activations);
  EXPECT_DOUBLE_EQ(m.worker.communication, 4 * P);
}

TEST(ParameterServerMemory, AServerHoldsItsShardItsStateAndTwoBuffersPerWorker) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const double n = 1000;
  const ParameterServerMemory adamw = predict_ps_memory(model, test_cluster(), fp32_batch(4), Recompute::none, 3, 1000);
  EXPECT_DOUBLE_EQ(adamw.server.parameters, 4 * n);
  EXPECT_DOUBLE_EQ(adamw.server.gradients, 4 * n);
  EXPECT_DOUBLE_EQ(adamw.server.optimizer_state, 8 * n);
  EXPECT_DOUBLE_EQ(adamw.server.activations, 0);
  EXPECT_DOUBLE_EQ(adamw.server.communication, 2 * 3 * 4 * n);  // a push pending and a pull's snapshot, each worker
  Workload sgd = fp32_batch(4);
  sgd.state = StateBytes::artel_sgd(/*momentum=*/false);
  EXPECT_DOUBLE_EQ(predict_ps_memory(model, test_cluster(), sgd, Recompute::none, 3, 1000).server.optimizer_state, 0);
}

TEST(ParameterServerMemory, FitsComparesEachProcessWithTheWorkersMemory) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  // A shard of 1 G elements needs 4·(1+1+2+2·2) = 32 GB on a server, against 16 GB.
  const ParameterServerMemory m =
      predict_ps_memory(model, test_cluster(16e9), fp32_batch(4), Recompute::none, 2, 1'000'000'000);
  EXPECT_TRUE(m.worker.fits());
  EXPECT_FALSE(m.server.fits());
  EXPECT_DOUBLE_EQ(m.server.total(), 32e9);
}

TEST(ParameterServerMemory, RecomputationShrinksAWorkersActivations) {
  const ModelDescription model = transformer_model("small", kSmallShape);
  const double kept = predict_ps_memory(model, test_cluster(), fp32_batch(4), Recompute::none, 2, 10).worker.activations;
  const double full = predict_ps_memory(model, test_cluster(), fp32_batch(4), Recompute::full, 2, 10).worker.activations;
  EXPECT_LT(full, kept);
}

}  // namespace
}  // namespace artel::plan
