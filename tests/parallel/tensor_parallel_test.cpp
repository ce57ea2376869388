// The tensor-parallel ops over ranks-as-threads, against the non-parallel ops
// on the same full tensors: forward values, and every gradient reassembled
// from the ranks' shards (nn::join_parts). The layers split by a model's plan
// (a whole GPT) are in model_shard_test.cpp.
#include "artel/parallel/tensor_parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "artel/autograd/ops.h"
#include "artel/nn/embedding.h"
#include "artel/nn/split.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using namespace parallel_testing;  // NOLINT: the helpers of parallel_testing.h

// Runs fn on every rank and expects each to throw an Error whose message holds `needle`.
void expect_error_on_every_rank(int world, const std::string& needle,
                                const std::function<void(comm::ProcessGroup&)>& fn) {
  spawn(world, [&](comm::ProcessGroup& pg) {
    try {
      fn(pg);
      ADD_FAILURE() << "rank " << pg.rank() << ": no error, expected one with \"" << needle << "\"";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "rank " << pg.rank() << ": " << e.what();
    }
  });
}

TEST(TensorParallel, CopyToIsIdentityForwardAndSumsGradientsBackward) {
  for (int world : {2, 4}) {
    spawn(world, [&](comm::ProcessGroup& pg) {
      float r = static_cast<float>(pg.rank());
      Variable x(Tensor::full({5}, 3.0f), true);
      TensorParallelTraffic traffic;
      Variable y = copy_to_tensor_parallel(x, pg);
      EXPECT_TRUE(y.value().same_storage(x.value()));
      EXPECT_EQ(traffic.collectives(), 0) << "its forward sends nothing";
      y.backward(Tensor::full({5}, r + 1));  // a different output gradient on each rank
      EXPECT_EQ(traffic.collectives(), 1);
      EXPECT_EQ(traffic.bytes(), 5 * 4);
      float want = static_cast<float>(world * (world + 1) / 2);
      for (float g : x.grad().to_vector()) EXPECT_EQ(g, want) << "world " << world;
    });
  }
}

TEST(TensorParallel, ReduceFromSumsForwardAndPassesGradientsBackward) {
  for (int world : {2, 4}) {
    spawn(world, [&](comm::ProcessGroup& pg) {
      float r = static_cast<float>(pg.rank());
      Variable x(Tensor::full({2, 3}, r + 1), true);
      TensorParallelTraffic traffic;  // what the planner measures a layer sending (plan/measured_costs.h)
      Variable y = reduce_from_tensor_parallel(x, pg);
      EXPECT_EQ(traffic.collectives(), 1);
      EXPECT_EQ(traffic.bytes(), 6 * 4);
      for (float v : x.value().to_vector()) EXPECT_EQ(v, r + 1) << "x must be untouched";
      for (float v : y.value().to_vector()) EXPECT_EQ(v, static_cast<float>(world * (world + 1) / 2));
      y.backward(Tensor::full({2, 3}, 0.25f));
      EXPECT_EQ(traffic.collectives(), 1) << "its backward sends nothing";
      for (float g : x.grad().to_vector()) EXPECT_EQ(g, 0.25f);
    });
  }
}

// ---- once over the group

TEST(TensorParallel, OnceOverIsTheInputOnRankZeroAndZerosElsewhere) {
  spawn(4, [&](comm::ProcessGroup& pg) {
    Variable x(Tensor::full({3}, 2.0f), true);
    Variable y = once_over_tensor_parallel(x, pg);
    EXPECT_EQ(y.impl() == x.impl(), pg.rank() == 0);
    EXPECT_EQ(reduce_from_tensor_parallel(y, pg).value().to_vector(), std::vector<float>(3, 2.0f));  // once in the sum
    y.backward(Tensor::full({3}, 0.5f));
    EXPECT_EQ(x.grad().to_vector(), std::vector<float>(3, 0.5f)) << "rank " << pg.rank();
  });
}

// ---- vocabulary-parallel embedding: nn::Embedding given its rows of the table and the collectives

// ids (2, 6) hitting every shard of a 15-row table (padded to 16 over 2 and 4 ranks), some repeated.
const std::vector<int64_t> kIds = {0, 14, 3, 3, 8, 12, 7, 4, 14, 11, 3, 9};
const nn::Split kVocab{.dim = 0, .pad = true};

// This rank's part of a (V, C) table, as the plan's vocab style sets it up.
std::shared_ptr<nn::Embedding> vocab_shard(const Tensor& whole, comm::ProcessGroup& pg) {
  auto emb = std::make_shared<nn::Embedding>(whole.size(0), whole.size(1));
  Variable w = emb->weight();
  w.value() = nn::take_part(whole, kVocab, pg.rank(), pg.size());
  emb->set_parallel({.first_row = nn::part_geometry(whole.shape(), kVocab, pg.rank(), pg.size()).begin,
                     .enter = [&pg](const Variable& x) { return copy_to_tensor_parallel(x, pg); },
                     .reduce = [&pg](const Variable& x) { return reduce_from_tensor_parallel(x, pg); }});
  return emb;
}

void check_embedding(int world, DType id_dtype) {
  const int64_t V = 15, C = 5;
  Tensor w = randn({V, C}, 1);
  Tensor ids = ids_tensor(kIds, {2, 6}, id_dtype);
  Tensor seed = randn({2, 6, C}, 2);  // the output gradient: sum(E · seed)
  Variable wf(w.clone(), true);
  Variable ef = autograd::embedding(wf, ids);
  autograd::sum(autograd::mul(ef, Variable(seed))).backward();

  PerRank grads(world);
  spawn(world, [&](comm::ProcessGroup& pg) {
    auto emb = vocab_shard(w, pg);
    Variable e = emb->forward(ids);
    expect_close(e.value(), ef.value(), "embedding rank " + std::to_string(pg.rank()));
    autograd::sum(autograd::mul(e, Variable(seed))).backward();
    grads.put(pg.rank(), emb->weight().grad());
  });
  const Tensor& last = grads.slots.back();  // the padding rows of the last rank get nothing
  for (int64_t i = (V - (world - 1) * last.size(0)) * C; i < last.numel(); ++i) EXPECT_EQ(last.data<float>()[i], 0.0f);
  expect_close(nn::join_parts(grads.slots, kVocab, {V, C}), wf.grad(), "d weight, world " + std::to_string(world));
}

TEST(TensorParallel, VocabParallelEmbeddingMatchesEmbedding) {
  for (int world : {2, 4}) {
    check_embedding(world, DType::i64);
    check_embedding(world, DType::i32);
  }
}

// attend: this rank's columns of the logits, the input's gradient summed over the group.
TEST(TensorParallel, VocabParallelAttendGivesThisRanksLogits) {
  const int64_t V = 15, C = 5;
  Tensor w = randn({V, C}, 3), x = randn({4, C}, 4);
  Variable wf(w.clone(), true), xf(x.clone(), true);
  Variable lf = autograd::linear(xf, wf, Variable());
  autograd::sum(autograd::mul(lf, Variable(randn({4, V}, 5)))).backward();
  for (int world : {2, 4}) {
    PerRank logits(world);
    spawn(world, [&](comm::ProcessGroup& pg) {
      auto emb = vocab_shard(w, pg);
      Variable xr(x.clone(), true);
      Variable l = emb->attend(xr);
      logits.put(pg.rank(), l.value());
      Tensor seed = nn::take_part(randn({4, V}, 5), {.dim = 1, .pad = true}, pg.rank(), world);
      autograd::sum(autograd::mul(l, Variable(seed))).backward();
      expect_close(xr.grad(), xf.grad(), "dx rank " + std::to_string(pg.rank()));
    });
    expect_close(nn::join_parts(logits.slots, {.dim = 1, .pad = true}, {4, V}), lf.value(), "logits");
  }
}

TEST(TensorParallel, VocabParallelEmbeddingRejectsIdsOutsideTheTable) {
  Tensor ids = ids_tensor({1, 16, 2}, {3});
  expect_error_on_every_rank(2, "id 16 at position 1 is outside the table's [0, 16)", [&](comm::ProcessGroup& pg) {
    vocab_shard(Tensor::zeros({16, 3}), pg)->forward(ids);
  });
  expect_error_on_every_rank(2, "id -1 at position 0", [&](comm::ProcessGroup& pg) {
    vocab_shard(Tensor::zeros({15, 3}), pg)->forward(ids_tensor({-1}, {1}));
  });
  expect_error_on_every_rank(2, "ids must be int64 or int32", [&](comm::ProcessGroup& pg) {
    vocab_shard(Tensor::zeros({16, 3}), pg)->forward(Tensor::zeros({3}));
  });
}

// ---- cross-entropy

const int64_t kCeBatch = 2, kCeTime = 4, kCeVocab = 16;

// (B, T, V) logits; targets (B, T) with two ignored. Rows 0-2 hold logits of
// size ~1e3 spread over the shards: exp of them would overflow without the max.
Tensor make_logits(float spread) {
  Tensor x = randn({kCeBatch, kCeTime, kCeVocab}, 3, 3.0f);
  float* p = x.data<float>();
  if (spread > 0) {
    for (int64_t v = 0; v < kCeVocab; ++v) p[v] += spread;             // row 0: all large
    p[kCeVocab + 13] = spread;                                           // row 1: one large column, in the last shard
    for (int64_t v = 0; v < kCeVocab; ++v) p[2 * kCeVocab + v] -= spread * (1 + (v % 3));  // row 2: large negative
  }
  return x;
}

Tensor make_targets(DType dtype) { return ids_tensor({2, 1, 15, -100, 8, 0, -100, 12}, {kCeBatch, kCeTime}, dtype); }

void check_cross_entropy(int world, float spread, DType target_dtype, float rtol) {
  Tensor logits = make_logits(spread);
  Tensor targets = make_targets(target_dtype);
  Variable full(logits.clone(), true);
  Variable lf = autograd::cross_entropy(full, targets);
  lf.backward(Tensor::full({}, 0.5f));
  ASSERT_TRUE(std::isfinite(lf.item()));

  PerRank grads(world);
  spawn(world, [&](comm::ProcessGroup& pg) {
    int64_t Vl = kCeVocab / world;
    Tensor mine = nn::take_part(logits.view({kCeBatch * kCeTime, kCeVocab}), {.dim = 1}, pg.rank(), world).view({kCeBatch, kCeTime, Vl});
    Variable local(mine, true);
    Variable loss = vocab_parallel_cross_entropy(local, targets, pg.rank() * Vl, pg);
    ASSERT_EQ(loss.shape(), Shape{});
    EXPECT_NEAR(loss.item(), lf.item(), rtol * std::abs(lf.item())) << "rank " << pg.rank() << " world " << world;
    loss.backward(Tensor::full({}, 0.5f));
    grads.put(pg.rank(), local.grad().view({kCeBatch * kCeTime, Vl}));
  });
  Tensor got = nn::join_parts(grads.slots, {.dim = 1}, {kCeBatch * kCeTime, kCeVocab});
  for (float g : got.to_vector()) ASSERT_TRUE(std::isfinite(g));
  expect_close(got, full.grad().view({kCeBatch * kCeTime, kCeVocab}), "d logits, world " + std::to_string(world), rtol);
}

TEST(TensorParallel, VocabParallelCrossEntropyMatchesCrossEntropy) {
  for (int world : {2, 4}) {
    check_cross_entropy(world, 0.0f, DType::i64, 1e-5f);
    check_cross_entropy(world, 0.0f, DType::i32, 1e-5f);
  }
}

TEST(TensorParallel, VocabParallelCrossEntropyIsStableForLargeLogits) {
  for (int world : {2, 4}) check_cross_entropy(world, 1000.0f, DType::i64, 1e-5f);
}

// A vocabulary padded to divide over the group: the padding columns (garbage
// here) never enter the softmax and get no gradient.
TEST(TensorParallel, VocabParallelCrossEntropySkipsPaddingColumns) {
  const int64_t N = 6, V = 13;  // padded to 14 over 2 ranks, to 16 over 4
  const nn::Split cols{.dim = 1, .pad = true};
  Tensor logits = randn({N, V}, 21, 2.0f);
  Tensor targets = ids_tensor({0, 12, 5, 7, -100, 12}, {N});
  Variable full(logits.clone(), true);
  Variable lf = autograd::cross_entropy(full, targets);
  lf.backward();
  for (int world : {2, 4}) {
    PerRank grads(world);
    spawn(world, [&](comm::ProcessGroup& pg) {
      const nn::PartGeometry g = nn::part_geometry({N, V}, cols, pg.rank(), world);
      Tensor mine = nn::take_part(logits, cols, pg.rank(), world);
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = g.valid(); c < g.count; ++c) mine.data<float>()[r * g.count + c] = 50.0f;
      Variable local(mine, true);
      Variable loss = vocab_parallel_cross_entropy(local, targets, g.begin, pg, V);
      EXPECT_NEAR(loss.item(), lf.item(), 1e-5f * std::abs(lf.item())) << "rank " << pg.rank() << " world " << world;
      loss.backward();
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = g.valid(); c < g.count; ++c) EXPECT_EQ(local.grad().data<float>()[r * g.count + c], 0.0f);
      grads.put(pg.rank(), local.grad());
    });
    expect_close(nn::join_parts(grads.slots, cols, {N, V}), full.grad(), "d logits, world " + std::to_string(world));
  }
}

TEST(TensorParallel, VocabParallelCrossEntropyWithEveryTargetIgnoredIsZero) {
  spawn(2, [&](comm::ProcessGroup& pg) {
    Variable local(randn({3, 4}, 9), true);
    Variable loss = vocab_parallel_cross_entropy(local, ids_tensor({-1, -1, -1}, {3}), pg.rank() * 4, pg, /*vocab=*/-1, /*ignore_index=*/-1);
    EXPECT_EQ(loss.item(), 0.0f);
    loss.backward();
    for (float g : local.grad().to_vector()) EXPECT_EQ(g, 0.0f);
  });
}

TEST(TensorParallel, EmptyInputsNeedNoCommunication) {
  spawn(2, [&](comm::ProcessGroup& pg) {
    Variable e = vocab_shard(Tensor::zeros({8, 3}), pg)->forward(Tensor::empty({2, 0}, DType::i64));
    EXPECT_EQ(e.shape(), (Shape{2, 0, 3}));
    Variable loss = vocab_parallel_cross_entropy(Variable(Tensor::zeros({0, 4}), true), Tensor::empty({0}, DType::i64),
                                                 pg.rank() * 4, pg);
    EXPECT_EQ(loss.item(), 0.0f);
  });
}

TEST(TensorParallel, VocabParallelCrossEntropyRejectsTargetsNoShardHolds) {
  expect_error_on_every_rank(2, "target 8 at position 2 is held by 0 of the 2", [&](comm::ProcessGroup& pg) {
    vocab_parallel_cross_entropy(Variable(randn({3, 4}, 1)), ids_tensor({0, -100, 8}, {3}), pg.rank() * 4, pg);
  });
  expect_error_on_every_rank(2, "or ignore_index (-100)", [&](comm::ProcessGroup& pg) {
    vocab_parallel_cross_entropy(Variable(randn({1, 4}, 1)), ids_tensor({-3}, {1}), pg.rank() * 4, pg);
  });
}

TEST(TensorParallel, VocabParallelCrossEntropyRejectsWrongTargetCount) {
  spawn(2, [&](comm::ProcessGroup& pg) {
    EXPECT_THROW(vocab_parallel_cross_entropy(Variable(randn({3, 4}, 1)), ids_tensor({0, 1}, {2}), 0, pg), Error);
  });
}

}  // namespace
}  // namespace artel::parallel
