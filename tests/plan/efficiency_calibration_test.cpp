// Calibration solves the planner for the GEMM efficiency of one measured
// step: it recovers the efficiency a prediction was made at, and refuses a
// step no efficiency reaches.
#include "artel/plan/efficiency_calibration.h"

#include <gtest/gtest.h>

#include "artel/core/error.h"
#include "artel/plan/step_model.h"
#include "test_cluster.h"

namespace artel::plan {
namespace {

using testing::test_cluster;

TEST(EfficiencyCalibration, RecoversTheEfficiencyAStepWasPredictedAt) {
  const ModelDescription model = transformer_model("small", {4, 4, 256, 128, 512});
  const Workload w{.global_batch = 16, .precision = Precision::bf16};
  const Layout l{.dp = 2, .tp = 2, .pp = 2, .micro_batches = 4};
  const Cluster cluster = test_cluster();
  const double measured = predict(model, with_gemm_efficiency(cluster, 0.6, "test"), l, w).time.step;
  EXPECT_NEAR(calibrate_gemm_efficiency(model, cluster, l, w, measured), 0.6, 1e-5);
}

TEST(EfficiencyCalibration, RefusesAStepNoEfficiencyReaches) {
  const ModelDescription model = transformer_model("small", {4, 4, 256, 128, 512});
  const Workload w{.global_batch = 16, .precision = Precision::bf16};
  const Layout l{.dp = 8, .micro_batches = 1};
  const Cluster cluster = test_cluster();
  const double at_peak = predict(model, cluster, l, w).time.step;  // the test cluster runs at efficiency 1
  EXPECT_THROW(calibrate_gemm_efficiency(model, cluster, l, w, at_peak / 2), Error);
  EXPECT_THROW(calibrate_gemm_efficiency(model, cluster, l, w, at_peak * 1e6), Error);
}

}  // namespace
}  // namespace artel::plan
