// The executor runs real schedules over ranks-as-threads: a three-stage
// pipeline of tanh layers gives the gradients of the same layers run whole
// on one thread, for both schedules and several micro-batch counts, and
// holds at most as many micro-batches as the schedule promises.
#include "artel/parallel/pipeline_executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "artel/autograd/ops.h"
#include "artel/comm/thread_group.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using autograd::Variable;

using parallel_testing::randn;

constexpr int kStages = 3, kRows = 8, kWidth = 4;

Variable layer(const Variable& x, const Variable& w) { return autograd::tanh(autograd::linear(x, w, Variable())); }
Variable loss_of(const Variable& y) { return autograd::mean(autograd::mul(y, y)); }

// Stage s's weight gradient on the whole batch, computed on one thread.
std::vector<std::vector<float>> whole_batch_gradients(const Tensor& x) {
  std::vector<Variable> w;
  Variable h(x);
  for (int s = 0; s < kStages; ++s) {
    w.emplace_back(randn({kWidth, kWidth}, 10 + s), true);
    h = layer(h, w.back());
  }
  loss_of(h).backward();
  std::vector<std::vector<float>> g;
  for (auto& v : w) g.push_back(v.grad().to_vector());
  return g;
}

// Two groups per neighbouring pair, built in the same order on every rank.
PipelineLinks links_of(comm::ProcessGroup& world) {
  PipelineLinks l;
  for (int s = 0; s + 1 < kStages; ++s) {
    auto act = world.new_group({s, s + 1});
    auto grad = world.new_group({s, s + 1});
    if (world.rank() == s) l.activations_to_next = act, l.grads_from_next = grad;
    if (world.rank() == s + 1) l.activations_from_prev = act, l.grads_to_prev = grad;
  }
  return l;
}

TEST(PipelineExecutor, MicroBatchedPipelineGivesTheWholeBatchGradients) {
  Tensor x = randn({kRows, kWidth}, 1);
  const auto want = whole_batch_gradients(x);
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
    for (int m : {1, 2, 4, 8}) {
      comm::spawn_threads(kStages, [&](comm::ProcessGroup& world) {
        const int s = world.rank(), rows = kRows / m;
        Variable w(randn({kWidth, kWidth}, 10 + s), true);
        PipelineExecutor ex(s, kStages, links_of(world), {rows, kWidth});
        StageFunctions fns;
        fns.forward = [&](int mb, const Variable& in) {
          Variable h = layer(s == 0 ? Variable(x.slice0(mb * rows, (mb + 1) * rows)) : in, w);
          // The mean over the batch is the mean of micro-batch means / M.
          return s == kStages - 1 ? autograd::mul(loss_of(h), 1.0f / static_cast<float>(m)) : h;
        };
        PipelineRunStats stats = ex.run(make_schedule(kind, m, kStages, s), fns);
        std::vector<float> got = w.grad().to_vector();
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_NEAR(got[i], want[static_cast<size_t>(s)][i], 1e-6)
              << schedule_kind_name(kind) << " M=" << m << " stage " << s;
        const int bound = kind == ScheduleKind::gpipe ? m : std::min(m, kStages - s);
        EXPECT_EQ(stats.peak_live_micro_batches, bound) << schedule_kind_name(kind) << " M=" << m << " stage " << s;
      });
    }
}

TEST(PipelineExecutor, EvaluationRunsForwardOnlyAndKeepsNothing) {
  Tensor x = randn({kRows, kWidth}, 2);
  comm::spawn_threads(kStages, [&](comm::ProcessGroup& world) {
    const int s = world.rank();
    Variable w(randn({kWidth, kWidth}, 10 + s), true);
    PipelineExecutor ex(s, kStages, links_of(world), {2, kWidth});
    autograd::NoGradGuard no_grad;
    float total = 0;
    StageFunctions fns;
    fns.forward = [&](int mb, const Variable& in) {
      Variable h = layer(s == 0 ? Variable(x.slice0(mb * 2, mb * 2 + 2)) : in, w);
      if (s == kStages - 1) total += loss_of(h).item();
      return h;
    };
    ex.run(forward_only(4, kStages, s), fns);
    if (s == kStages - 1) {
      EXPECT_GT(total, 0.0f);
    }
    EXPECT_FALSE(w.grad().defined());
  });
}

TEST(PipelineExecutor, RefusesAStageWithoutItsLinks) {
  comm::spawn_threads(1, [&](comm::ProcessGroup&) {
    EXPECT_THROW(PipelineExecutor(1, 2, PipelineLinks{}, {1}), Error);
  });
}

}  // namespace
}  // namespace artel::parallel
