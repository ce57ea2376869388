// The executor runs real schedules over ranks-as-threads: a three-stage
// pipeline of tanh layers gives the gradients of the same layers run whole
// on one thread, for every schedule (the interleaved one over a ring of
// stages holding two chunks each) and several micro-batch counts, and holds
// at most as many micro-batches as the schedule promises.
#include "artel/parallel/pipeline_executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "artel/autograd/ops.h"
#include "artel/comm/thread_group.h"
#include "artel/parallel/interleaved_schedule.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using autograd::Variable;

using parallel_testing::randn;

constexpr int kStages = 3, kBatchRows = 8, kWidth = 4;

Variable layer(const Variable& x, const Variable& w) { return autograd::tanh(autograd::linear(x, w, Variable())); }
Variable loss_of(const Variable& y) { return autograd::mean(autograd::mul(y, y)); }

// Layer l's weight gradient on the whole batch, computed on one thread
// (layer l is stage l, or virtual stage l of an interleaved pipeline).
std::vector<std::vector<float>> whole_batch_gradients(const Tensor& x, int layers = kStages) {
  std::vector<Variable> w;
  Variable h(x);
  for (int s = 0; s < layers; ++s) {
    w.emplace_back(randn({kWidth, kWidth}, 10 + s), true);
    h = layer(h, w.back());
  }
  loss_of(h).backward();
  std::vector<std::vector<float>> g;
  for (auto& v : w) g.push_back(v.grad().to_vector());
  return g;
}

// Two groups per neighbouring pair, built in the same order on every rank;
// a ring links the last stage on to the first.
PipelineLinks links_of(comm::ProcessGroup& world, bool ring = false) {
  PipelineLinks l;
  for (int s = 0; s < (ring ? kStages : kStages - 1); ++s) {
    const int next = (s + 1) % kStages;
    auto act = world.new_group({s, next});
    auto grad = world.new_group({s, next});
    if (world.rank() == s) l.activations_to_next = act, l.grads_from_next = grad;
    if (world.rank() == next) l.activations_from_prev = act, l.grads_to_prev = grad;
  }
  return l;
}

TEST(PipelineExecutor, MicroBatchedPipelineGivesTheWholeBatchGradients) {
  Tensor x = randn({kBatchRows, kWidth}, 1);
  const auto want = whole_batch_gradients(x);
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
    for (int m : {1, 2, 4, 8}) {
      comm::spawn_threads(kStages, [&](comm::ProcessGroup& world) {
        const int s = world.rank(), rows = kBatchRows / m;
        Variable w(randn({kWidth, kWidth}, 10 + s), true);
        PipelineExecutor ex(s, kStages, links_of(world));
        StageFunctions fns;
        fns.forward = [&](int mb, int, const Activations& in) {
          EXPECT_EQ(in.size(), s == 0 ? 0u : 1u);
          Variable h = layer(s == 0 ? Variable(x.slice0(mb * rows, (mb + 1) * rows)) : in.at(0), w);
          // The mean over the batch is the mean of micro-batch means / M.
          return Activations{s == kStages - 1 ? autograd::mul(loss_of(h), 1.0f / static_cast<float>(m)) : h};
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

// Megatron's interleaved schedule over 3 stages of 2 chunks each: chunk c of
// stage s is layer c·3 + s of a 6-layer chain, so every micro-batch goes
// round the ring twice. Each layer's gradient equals the whole chain's on
// the whole batch, and evaluation through the chunks gives its loss.
TEST(PipelineExecutor, InterleavedChunksGiveTheWholeChainsGradients) {
  constexpr int kChunks = 2, kRows = 12, kLayers = kStages * kChunks;
  Tensor x = randn({kRows, kWidth}, 3);
  const auto want = whole_batch_gradients(x, kLayers);
  Variable h(x);
  for (int l = 0; l < kLayers; ++l) h = layer(h, Variable(randn({kWidth, kWidth}, 10 + l)));
  const float whole_loss = loss_of(h).item();
  for (int m : {3, 6, 12})
    comm::spawn_threads(kStages, [&](comm::ProcessGroup& world) {
      const int s = world.rank(), rows = kRows / m;
      std::vector<Variable> w;  // chunk c's layer
      for (int c = 0; c < kChunks; ++c) w.emplace_back(randn({kWidth, kWidth}, 10 + c * kStages + s), true);
      PipelineExecutor ex(s, kStages, links_of(world, /*ring=*/true), kChunks);
      StageFunctions fns;
      fns.forward = [&](int mb, int chunk, const Activations& in) {
        const bool first = s == 0 && chunk == 0, last = s == kStages - 1 && chunk == kChunks - 1;
        EXPECT_EQ(in.size(), first ? 0u : 1u);
        Variable out = layer(first ? Variable(x.slice0(mb * rows, (mb + 1) * rows)) : in.at(0), w[chunk]);
        return Activations{last ? autograd::mul(loss_of(out), 1.0f / static_cast<float>(m)) : out};
      };
      PipelineRunStats stats = ex.run(make_schedule(ScheduleKind::interleaved, m, kStages, s, kChunks), fns);
      for (int c = 0; c < kChunks; ++c) {
        std::vector<float> got = w[c].grad().to_vector();
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_NEAR(got[i], want[static_cast<size_t>(c * kStages + s)][i], 1e-6)
              << "M=" << m << " stage " << s << " chunk " << c;
      }
      // Megatron's warm-up bound: 2(P - s - 1) + (V - 1)·P forwards ahead, plus the one in flight.
      EXPECT_EQ(stats.peak_live_micro_batches, std::min(m * kChunks, 2 * (kStages - s - 1) + (kChunks - 1) * kStages + 1))
          << "M=" << m << " stage " << s;

      autograd::NoGradGuard no_grad;  // evaluation: each micro-batch round the ring, nothing kept
      float loss = 0;
      fns.forward = [&](int mb, int chunk, const Activations& in) {
        const bool first = s == 0 && chunk == 0, last = s == kStages - 1 && chunk == kChunks - 1;
        Variable out = layer(first ? Variable(x.slice0(mb * rows, (mb + 1) * rows)) : in.at(0), w[chunk]);
        if (last) loss += loss_of(out).item() / static_cast<float>(m);
        return Activations{out};
      };
      ex.run(interleaved_forward_only(m, kStages, kChunks, s), fns);
      if (s == kStages - 1) {
        EXPECT_NEAR(loss, whole_loss, 1e-6) << "M=" << m;
      }
    });
}

TEST(PipelineExecutor, EvaluationRunsForwardOnlyAndKeepsNothing) {
  Tensor x = randn({kBatchRows, kWidth}, 2);
  comm::spawn_threads(kStages, [&](comm::ProcessGroup& world) {
    const int s = world.rank();
    Variable w(randn({kWidth, kWidth}, 10 + s), true);
    PipelineExecutor ex(s, kStages, links_of(world));
    autograd::NoGradGuard no_grad;
    float total = 0;
    StageFunctions fns;
    fns.forward = [&](int mb, int, const Activations& in) {
      Variable h = layer(s == 0 ? Variable(x.slice0(mb * 2, mb * 2 + 2)) : in.at(0), w);
      if (s == kStages - 1) total += loss_of(h).item();
      return Activations{h};
    };
    ex.run(forward_only(4, kStages, s), fns);
    if (s == kStages - 1) {
      EXPECT_GT(total, 0.0f);
    }
    EXPECT_FALSE(w.grad().defined());
  });
}

// A stage hands over three tensors: int64 ids (B), a float activation (B, 3)
// that needs a gradient and a float tensor (B, 2) that does not. Each arrives
// with its dtype, shape and values, only the activation is a gradient-taking
// leaf, and its gradient comes back to the first stage's weight.
TEST(PipelineExecutor, CarriesSeveralTensorsOfAnyDtypeAndReturnsTheGradientsOfThoseThatNeedThem) {
  constexpr int kM = 2, kB = 4;
  Tensor x = randn({kM * kB, 3}, 5), scale = randn({kM * kB, 2}, 6);
  auto ids_of = [](int mb) {
    Tensor ids = Tensor::empty({kB}, DType::i64);
    for (int64_t i = 0; i < kB; ++i) ids.data<int64_t>()[i] = (mb * kB + i) % 3;
    return ids;
  };
  // Stage 1's loss of micro-batch mb from its three inputs.
  auto tail = [&](const Variable& h, const Tensor& ids, const Variable& s2) {
    Tensor pick = Tensor::zeros({kB, 3});  // one-hot rows of the ids
    for (int64_t i = 0; i < kB; ++i) pick.data<float>()[i * 3 + ids.data<int64_t>()[i]] = 1.0f;
    Variable picked = autograd::sum(autograd::mul(autograd::mul(h, h), Variable(pick)));
    return autograd::mul(picked, autograd::sum(s2).item() / kM);
  };
  Variable w_whole(randn({3, 3}, 7), true);
  for (int mb = 0; mb < kM; ++mb) {
    Variable h = layer(Variable(x.slice0(mb * kB, (mb + 1) * kB)), w_whole);
    tail(h, ids_of(mb), Variable(scale.slice0(mb * kB, (mb + 1) * kB))).backward();
  }
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
    comm::spawn_threads(2, [&](comm::ProcessGroup& world) {
      const int s = world.rank();
      PipelineLinks l;
      auto act = world.new_group({0, 1});
      auto grad = world.new_group({0, 1});
      if (s == 0) l.activations_to_next = act, l.grads_from_next = grad;
      else l.activations_from_prev = act, l.grads_to_prev = grad;
      Variable w(randn({3, 3}, 7), true);
      PipelineExecutor ex(s, 2, l);
      StageFunctions fns;
      fns.forward = [&](int mb, int, const Activations& in) -> Activations {
        if (s == 0) {
          Variable h = layer(Variable(x.slice0(mb * kB, (mb + 1) * kB)), w);
          return {Variable(ids_of(mb)), h, Variable(scale.slice0(mb * kB, (mb + 1) * kB).clone())};
        }
        EXPECT_EQ(in.size(), 3u);
        EXPECT_EQ(in[0].value().dtype(), DType::i64);
        EXPECT_EQ(in[0].shape(), (Shape{kB}));
        const Tensor want_ids = ids_of(mb);
        for (int64_t i = 0; i < kB; ++i) EXPECT_EQ(in[0].value().data<int64_t>()[i], want_ids.data<int64_t>()[i]);
        EXPECT_FALSE(in[0].requires_grad());
        EXPECT_EQ(in[1].shape(), (Shape{kB, 3}));
        EXPECT_TRUE(in[1].requires_grad());
        EXPECT_EQ(in[2].shape(), (Shape{kB, 2}));
        EXPECT_FALSE(in[2].requires_grad());
        EXPECT_EQ(in[2].value().to_vector(), scale.slice0(mb * kB, (mb + 1) * kB).to_vector());
        return {tail(in[1], in[0].value(), in[2])};
      };
      ex.run(make_schedule(kind, kM, 2, s), fns);
      if (s == 0) {
        std::vector<float> got = w.grad().to_vector(), want = w_whole.grad().to_vector();
        for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << schedule_kind_name(kind) << " " << i;
      }
    });
}

TEST(PipelineExecutor, RefusesAStageWithoutItsLinks) {
  comm::spawn_threads(1, [&](comm::ProcessGroup&) {
    EXPECT_THROW(PipelineExecutor(1, 2, PipelineLinks{}), Error);
    EXPECT_THROW(PipelineExecutor(0, 1, PipelineLinks{}, /*chunks=*/2), Error);  // interleaving one stage
  });
}

}  // namespace
}  // namespace artel::parallel
