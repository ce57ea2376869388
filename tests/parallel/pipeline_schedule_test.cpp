#include "artel/parallel/pipeline_schedule.h"

#include "artel/parallel/interleaved_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "artel/core/error.h"
#include "artel/parallel/interleaved_schedule.h"

namespace artel::parallel {

using ::testing::HasSubstr;

namespace {

template <class T>
std::vector<int> micro_batches_of(const Schedule& s) {
  std::vector<int> out;
  for (const Instruction& ins : s) {
    if (auto* i = std::get_if<T>(&ins)) out.push_back(i->micro_batch);
  }
  return out;
}

template <class T>
size_t count_of(const Schedule& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](const Instruction& i) { return std::holds_alternative<T>(i); }));
}

// Forwards not yet backwarded, at their peak, counted from the list itself.
int peak_live(const Schedule& s) {
  int live = 0, peak = 0;
  for (const Instruction& ins : s) {
    if (std::holds_alternative<Forward>(ins)) peak = std::max(peak, ++live);
    if (std::holds_alternative<Backward>(ins)) --live;
  }
  return peak;
}

size_t position(const Schedule& s, const Instruction& ins) {
  return static_cast<size_t>(std::find(s.begin(), s.end(), ins) - s.begin());
}

// Per-stage properties every schedule must have.
void check_stage(const Schedule& s, int M, int P, int stage) {
  std::vector<int> all(static_cast<size_t>(M));
  for (int i = 0; i < M; ++i) all[static_cast<size_t>(i)] = i;
  auto fwd = micro_batches_of<Forward>(s), bwd = micro_batches_of<Backward>(s);
  std::sort(fwd.begin(), fwd.end());
  std::sort(bwd.begin(), bwd.end());
  EXPECT_EQ(fwd, all);  // every micro-batch exactly once each way
  EXPECT_EQ(bwd, all);
  for (int mb = 0; mb < M; ++mb) EXPECT_LT(position(s, Forward{mb}), position(s, Backward{mb}));
  if (stage == 0) {
    EXPECT_EQ(count_of<RecvActivation>(s), 0u);
    EXPECT_EQ(count_of<SendGrad>(s), 0u);
  }
  if (stage == P - 1) {
    EXPECT_EQ(count_of<SendActivation>(s), 0u);
    EXPECT_EQ(count_of<RecvGrad>(s), 0u);
  }
  for (const Instruction& ins : s) {
    if (auto* i = std::get_if<SendActivation>(&ins)) {
      EXPECT_EQ(i->to, stage + 1);
    } else if (auto* r = std::get_if<RecvActivation>(&ins)) {
      EXPECT_EQ(r->from, stage - 1);
    } else if (auto* g = std::get_if<SendGrad>(&ins)) {
      EXPECT_EQ(g->to, stage - 1);
    } else if (auto* h = std::get_if<RecvGrad>(&ins)) {
      EXPECT_EQ(h->from, stage + 1);
    }
  }
  EXPECT_EQ(count_of<OptimizerStep>(s), 1u);
  ASSERT_FALSE(s.empty());
  EXPECT_TRUE(std::holds_alternative<OptimizerStep>(s.back()));
}

}  // namespace

TEST(PipelineSchedule, EverySmallShapeIsConsistentAndRunsWithoutDeadlock) {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    for (int P = 1; P <= 4; ++P) {
      for (int M = 1; M <= 8; ++M) {
        SCOPED_TRACE(std::string(schedule_kind_name(kind)) + " P=" + std::to_string(P) + " M=" + std::to_string(M));
        auto stages = all_stages(kind, M, P);
        ASSERT_EQ(static_cast<int>(stages.size()), P);
        for (int s = 0; s < P; ++s) check_stage(stages[static_cast<size_t>(s)], M, P, s);
        for (int s = 0; s + 1 < P; ++s) {  // sends pair with receives, same micro-batches, same order
          const Schedule& up = stages[static_cast<size_t>(s)];
          const Schedule& down = stages[static_cast<size_t>(s + 1)];
          EXPECT_EQ(micro_batches_of<SendActivation>(up), micro_batches_of<RecvActivation>(down));
          EXPECT_EQ(micro_batches_of<SendGrad>(down), micro_batches_of<RecvGrad>(up));
          EXPECT_EQ(micro_batches_of<SendActivation>(up).size(), static_cast<size_t>(M));
        }
        SimulationResult sim;
        ASSERT_NO_THROW(sim = simulate(stages, CostModel{.forward = 1, .backward = 2}));
        const double bubble = static_cast<double>(P - 1) / (M + P - 1);
        for (int s = 0; s < P; ++s) {
          const size_t i = static_cast<size_t>(s);
          EXPECT_EQ(sim.timelines[i].size(), stages[i].size());
          EXPECT_EQ(sim.peak_live_activations[i], peak_live(stages[i]));
          if (kind == ScheduleKind::gpipe) {
            EXPECT_EQ(sim.peak_live_activations[i], M);
            EXPECT_NEAR(sim.bubble_share[i], bubble, 1e-9);
          } else {
            EXPECT_LE(sim.peak_live_activations[i], std::min(M, P - s));
            EXPECT_EQ(sim.peak_live_activations[i], std::min(M, P - s));
            EXPECT_LE(sim.bubble_share[i], bubble + 1e-9);  // 1F1B saves memory, not time
          }
          EXPECT_DOUBLE_EQ(sim.busy_time[i], 3.0 * M);
        }
        EXPECT_NEAR(sim.total_time, 3.0 * (M + P - 1), 1e-9);
        // Without timelines (the planner's way): the same totals, bit for bit.
        const SimulationResult totals = simulate(stages, CostModel{.forward = 1, .backward = 2}, Timelines::left_out);
        EXPECT_EQ(totals.total_time, sim.total_time);
        EXPECT_EQ(totals.busy_time, sim.busy_time);
        EXPECT_EQ(totals.bubble_share, sim.bubble_share);
        EXPECT_EQ(totals.peak_live_activations, sim.peak_live_activations);
        for (const auto& timeline : totals.timelines) EXPECT_TRUE(timeline.empty());
      }
    }
  }
}

TEST(PipelineSchedule, OneFOneBOrderMatchesMegatron) {
  // P = 3, M = 4, stage 0: two warm-up forwards, then 1F1B, then two cool-down backwards.
  Schedule expected = {Forward{0}, SendActivation{0, 1}, Forward{1}, SendActivation{1, 1},
                       Forward{2}, SendActivation{2, 1}, RecvGrad{0, 1},      Backward{0},
                       Forward{3}, SendActivation{3, 1}, RecvGrad{1, 1},      Backward{1},
                       RecvGrad{2, 1}, Backward{2},      RecvGrad{3, 1},      Backward{3},
                       OptimizerStep{}};
  EXPECT_EQ(one_f_one_b(4, 3, 0), expected);
  // The last stage has no warm-up: forward, backward, alternating.
  Schedule last = {RecvActivation{0, 1}, Forward{0}, Backward{0}, SendGrad{0, 1},
                   RecvActivation{1, 1}, Forward{1}, Backward{1}, SendGrad{1, 1}, OptimizerStep{}};
  EXPECT_EQ(one_f_one_b(2, 3, 2), last);
}

TEST(PipelineSchedule, GpipeTimelineWithTransferCost) {
  auto sim = simulate(all_stages(ScheduleKind::gpipe, 2, 2), CostModel{.forward = 1, .backward = 2, .transfer = 0.5});
  // Stage 1 gets activation 0 at 1.5, runs F0 [1.5, 2.5], F1 [2.5, 3.5], B0, B1 -> 7.5;
  // gradient 1 reaches stage 0 at 8.0, its B1 ends at 10.
  const auto& t1 = sim.timelines[1];
  EXPECT_EQ(t1[0].instruction, Instruction(RecvActivation{0, 0}));
  EXPECT_DOUBLE_EQ(t1[0].start, 0.0);
  EXPECT_DOUBLE_EQ(t1[0].end, 1.5);
  EXPECT_DOUBLE_EQ(t1[1].end, 2.5);
  EXPECT_DOUBLE_EQ(sim.total_time, 10.0);
  EXPECT_DOUBLE_EQ(sim.bubble_share[0], 0.4);
  EXPECT_DOUBLE_EQ(sim.bubble_share[1], 0.4);
}

// Stages of their own cost (the one with the head is slower): GPipe's step is
// sum(c) + (M - 1)·max(c), and the faster stage idles the difference.
TEST(PipelineSchedule, StagesOfUnequalCostWaitForTheSlowest) {
  CostModel cost{.stage_forward = {1, 2}, .stage_backward = {2, 4}};
  auto sim = simulate(all_stages(ScheduleKind::gpipe, 2, 2), cost);
  EXPECT_DOUBLE_EQ(sim.total_time, (3 + 6) + 6);
  EXPECT_DOUBLE_EQ(sim.busy_time[0], 6);
  EXPECT_DOUBLE_EQ(sim.bubble_share[0], 0.6);
  EXPECT_DOUBLE_EQ(sim.bubble_share[1], 0.2);
  EXPECT_THROW(simulate(all_stages(ScheduleKind::gpipe, 2, 3), cost), Error);  // two costs for three stages
}

TEST(PipelineSchedule, SwappedReceivesAreReportedAsDeadlock) {
  auto stages = all_stages(ScheduleKind::one_f_one_b, 3, 2);
  Schedule& s0 = stages[0];
  auto first = std::find(s0.begin(), s0.end(), Instruction(RecvGrad{0, 1}));
  auto last = std::find(s0.begin(), s0.end(), Instruction(RecvGrad{2, 1}));
  ASSERT_TRUE(first != s0.end() && last != s0.end());
  std::iter_swap(first, last);  // stage 0 now waits for gradient 2 before sending activation 2
  try {
    simulate(stages, CostModel{});
    FAIL() << "expected a deadlock";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("deadlocks"));
    EXPECT_THAT(e.what(), HasSubstr("stage 0 at #4 RecvGrad(mb=2, from=1) waits for stage 1"));
    EXPECT_THAT(e.what(), HasSubstr("stage 1 at #8 RecvActivation(mb=2, from=0) waits for stage 0"));
  }
}

TEST(PipelineSchedule, BrokenPairingIsReported) {
  auto stages = all_stages(ScheduleKind::gpipe, 2, 2);
  Schedule missing_send = stages[0];
  missing_send.erase(std::find(missing_send.begin(), missing_send.end(), Instruction(SendActivation{1, 1})));
  EXPECT_THAT([&] { simulate({missing_send, stages[1]}, CostModel{}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("stage 1 at #2 RecvActivation(mb=1, from=0) waits for a send "
                                                        "that stage 0 never makes")));
  Schedule missing_recv = stages[1];
  missing_recv.erase(std::find(missing_recv.begin(), missing_recv.end(), Instruction(RecvActivation{1, 0})));
  EXPECT_THAT([&] { simulate({stages[0], missing_recv}, CostModel{}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("never receives it")));
  Schedule backward_first = {Backward{0}, Forward{0}, OptimizerStep{}};
  EXPECT_THAT([&] { simulate({backward_first}, CostModel{}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("Backward(mb=0) has no forward before it")));
  Schedule early_step = {Forward{0}, OptimizerStep{}, Backward{0}};
  EXPECT_THROW(simulate({early_step}, CostModel{}), Error);
  Schedule off_the_end = {Forward{0}, SendActivation{0, 1}, Backward{0}, OptimizerStep{}};
  EXPECT_THAT([&] { simulate({off_the_end}, CostModel{}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("outside the pipeline")));
  Schedule negative = {Forward{-1}, Backward{-1}, OptimizerStep{}};
  EXPECT_THAT([&] { simulate({negative}, CostModel{}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("stage 0 at #0 Forward(mb=-1) names a negative micro-batch")));
}

// The interleaved schedule's evaluation order (groups of P micro-batches,
// chunk by chunk) runs without deadlock for any M, every micro-batch passes
// every virtual stage once, and the pipeline stays full: the P·V virtual
// stages fill once, then a unit completes every time step.
TEST(PipelineSchedule, InterleavedEvaluationPassesEveryChunkOnce) {
  for (int m : {1, 2, 4, 5, 6})
    for (int p : {2, 3}) {
      std::vector<Schedule> stages;
      for (int s = 0; s < p; ++s) stages.push_back(interleaved_forward_only(m, p, 2, s));
      SimulationResult sim = simulate(stages, CostModel{});
      for (int s = 0; s < p; ++s) {
        int forwards = 0;
        for (const Instruction& ins : stages[static_cast<size_t>(s)]) forwards += std::holds_alternative<Forward>(ins);
        EXPECT_EQ(forwards, 2 * m) << "M=" << m << " P=" << p << " stage " << s;
      }
      if (m % p == 0) {
        EXPECT_DOUBLE_EQ(sim.total_time, 2.0 * m + p - 1) << "M=" << m << " P=" << p;
      }
    }
}

TEST(PipelineSchedule, BadArgumentsAndNames) {
  EXPECT_THROW(gpipe(0, 2, 0), Error);
  EXPECT_THROW(one_f_one_b(4, 2, 2), Error);
  EXPECT_THROW(one_f_one_b(4, 0, 0), Error);
  EXPECT_EQ(parse_schedule_kind("gpipe"), ScheduleKind::gpipe);
  EXPECT_EQ(parse_schedule_kind("1f1b"), ScheduleKind::one_f_one_b);
  EXPECT_EQ(parse_schedule_kind("interleaved"), ScheduleKind::interleaved);
  EXPECT_EQ(schedule_kind_name(ScheduleKind::interleaved), "interleaved");
  EXPECT_THAT([] { make_schedule(ScheduleKind::one_f_one_b, 4, 2, 0, /*chunks=*/2); },
              ::testing::ThrowsMessage<Error>(HasSubstr("only the interleaved schedule")));
  EXPECT_THROW(make_schedule(ScheduleKind::interleaved, 3, 2, 0, 2), Error);  // M not a multiple of P
  EXPECT_THAT([] { parse_schedule_kind("zb"); }, ::testing::ThrowsMessage<Error>(HasSubstr("--schedule")));
  EXPECT_EQ(to_string(Instruction(SendGrad{3, 0})), "SendGrad(mb=3, to=0)");
  EXPECT_EQ(to_string(gpipe(1, 1, 0)), "Forward(mb=0)\nBackward(mb=0)\nOptimizerStep\n");
}

}  // namespace artel::parallel
