// The pipeline part of the planner is parallel::simulate: GPipe's bubble is
// (p − 1)/(m + p − 1) of the step, the interleaved schedule's is V times
// smaller, and a prediction's bubble is the simulator's, each stage at its
// own cost.
#include "artel/plan/pipeline_timeline.h"

#include <gtest/gtest.h>

#include "artel/parallel/interleaved_schedule.h"
#include "artel/plan/stage_work.h"
#include "artel/plan/step_model.h"
#include "test_cluster.h"

namespace artel::plan {
namespace {

using testing::test_cluster;

TEST(PipelineTimeline, GpipeBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (int p : {2, 4}) {
    for (int m : {1, 4, 8}) {
      const Layout l{.pp = p, .micro_batches = m, .schedule = Schedule::gpipe};
      const parallel::SimulationResult sim = simulate_layout(l, parallel::CostModel{.forward = 1, .backward = 2});
      for (int s = 0; s < p; ++s) {
        EXPECT_NEAR(sim.bubble_share[s], (p - 1.0) / (m + p - 1.0), 1e-12) << "p=" << p << " m=" << m;
      }
    }
  }
}

TEST(PipelineTimeline, InterleavingShrinksTheBubbleByTheChunks) {
  const int p = 4, m = 8, v = 2;
  // Each chunk is half a stage: forward 0.5, backward 1.
  const parallel::SimulationResult sim =
      parallel::simulate(parallel::interleaved_all_stages(m, p, v), parallel::CostModel{.forward = 0.5, .backward = 1.0});
  const double ideal = m * 3.0;
  // Megatron's bubble for the interleaved schedule: (p − 1)/v of a micro-batch's time.
  EXPECT_NEAR(sim.total_time, ideal + (p - 1) * 3.0 / v, 1e-9);
  // Warm-up keeps more chunks alive on early stages: 2(p − s − 1) + (v − 1)p + 1 at most.
  EXPECT_EQ(sim.peak_live_activations[0], 2 * (p - 1) + (v - 1) * p + 1);
}

TEST(PipelineTimeline, PredictionsBubbleIsTheSimulatorsGpipeBubble) {
  // A model of 4 equal layers with nothing to send or synchronise.
  ModelDescription model;
  model.name = "four";
  for (const char* name : {"l0", "l1", "l2", "l3"}) model.layers.push_back({name, 1e9, 10, 0, 0});
  const Cluster c = test_cluster(64e9, 1, 4);
  Workload w;
  w.global_batch = 8;
  const Layout l{.dp = 1, .pp = 4, .micro_batches = 8, .schedule = Schedule::gpipe};
  const Prediction pr = predict(model, c, l, w);
  EXPECT_NEAR(pr.time.bubble / (pr.time.bubble + pr.time.compute), 3.0 / 11.0, 1e-9);
  EXPECT_DOUBLE_EQ(pr.time.pipeline_sends, 0.0);
}

// A light first stage and a heavy last one (a GPT's head): under 1F1B with 2
// stages the heavy one runs without a gap once its first input arrives, so
// the bubble is the light stage's forward before it and backward after it,
// not the heavy stage's.
TEST(PipelineTimeline, TheBubbleIsTheOtherStagesTimeNotTheCriticalOnes) {
  ModelDescription model;
  model.name = "light-heavy";
  model.layers.push_back({"light", 1e9, 10, 0, 0});
  model.layers.push_back({"heavy", 3e9, 10, 0, 0});
  const Cluster c = test_cluster(64e9, 1, 2);
  Workload w;
  w.global_batch = 4;
  const Layout l{.dp = 1, .pp = 2, .micro_batches = 4, .schedule = Schedule::one_f_one_b};
  const std::vector<StageWork> stages = stage_work(model, c, l, w);
  ASSERT_EQ(stages.size(), 2u);
  const double light = stages[0].forward_compute + stages[0].backward_compute;
  const double heavy = stages[1].forward_compute + stages[1].backward_compute;
  ASSERT_NEAR(heavy, 3 * light, 1e-9 * heavy);
  const Prediction pr = predict(model, c, l, w);
  EXPECT_EQ(pr.time.critical_stage, 1);
  EXPECT_NEAR(pr.time.compute, 4 * heavy, 1e-9 * heavy);
  EXPECT_NEAR(pr.time.bubble, light, 1e-9 * heavy);
}

}  // namespace
}  // namespace artel::plan
