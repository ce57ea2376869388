// The sequence-parallel ops over ranks-as-threads, against the whole
// tensors they stand for: each forward's value and each input's gradient,
// for activations of three dimensions (B, T, C) and of two (N, C), at 2 and
// 3 ranks.
// The layers that use them (a whole GPT, the MLP) are in model_shard_test.cpp.
#include "artel/parallel/sequence_parallel.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "artel/parallel/tensor_parallel.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using namespace parallel_testing;  // NOLINT: the helpers of parallel_testing.h

// (sequences, tokens, features) and (rows, features); tokens divide by 2 and 3.
const std::vector<Shape> kShapes = {{2, 6, 4}, {6, 5}};

// Rank r's tokens of `whole`, by index: the r-th contiguous 1/P of its
// elements (Note [Which tokens a rank holds]), shaped with dim -2 divided.
Tensor expected_tokens(const Tensor& whole, int r, int ranks) {
  Shape part = whole.shape();
  part[part.size() - 2] /= ranks;
  Tensor out = Tensor::empty(part);
  for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = whole.data<float>()[r * out.numel() + i];
  return out;
}

Tensor summed(const std::vector<Tensor>& ts) {
  Tensor s = ts.front().clone();
  for (size_t i = 1; i < ts.size(); ++i)
    for (int64_t j = 0; j < s.numel(); ++j) s.data<float>()[j] += ts[i].data<float>()[j];
  return s;
}

std::string where(const Shape& s, int world, int rank) {
  return shape_str(s) + " over " + std::to_string(world) + ", rank " + std::to_string(rank);
}

TEST(SequenceParallel, TokensOfTakesEachRanksContiguousShareOfTheTokens) {
  for (const Shape& s : kShapes)
    for (int ranks : {2, 3}) {
      const Tensor whole = randn(s, 1);
      for (int r = 0; r < ranks; ++r)
        expect_close(tokens_of(whole, r, ranks), expected_tokens(whole, r, ranks), where(s, ranks, r), 0.0f);
    }
}

TEST(SequenceParallel, ScatterKeepsThisRanksTokensAndGathersTheirGradients) {
  for (const Shape& s : kShapes)
    for (int world : {2, 3}) {
      const Tensor x = randn(s, 2), seed = randn(s, 3);  // the output gradient, whole
      spawn(world, [&](comm::ProcessGroup& pg) {
        const int r = pg.rank();
        Variable xv(x.clone(), true);
        TensorParallelTraffic traffic;
        Variable y = scatter_to_sequence_parallel(xv, pg);
        EXPECT_EQ(traffic.collectives(), 0) << "its forward sends nothing";
        expect_close(y.value(), expected_tokens(x, r, world), where(s, world, r), 0.0f);
        y.backward(expected_tokens(seed, r, world));
        EXPECT_EQ(traffic.collectives(), 1);
        expect_close(xv.grad(), seed, "d x " + where(s, world, r), 0.0f);
      });
    }
}

TEST(SequenceParallel, GatherJoinsTheTokensAndSendsBackTheirGradients) {
  for (const Shape& s : kShapes)
    for (int world : {2, 3})
      for (SequenceGrad grad : {SequenceGrad::partial, SequenceGrad::replicated}) {
        const Tensor x = randn(s, 4);
        std::vector<Tensor> seeds;  // the output gradient: a part of a sum on each rank, or one for all
        for (int r = 0; r < world; ++r) seeds.push_back(randn(s, grad == SequenceGrad::partial ? 10 + r : 10));
        spawn(world, [&](comm::ProcessGroup& pg) {
          const int r = pg.rank();
          Variable mine(expected_tokens(x, r, world), true);
          TensorParallelTraffic traffic;
          Variable y = gather_from_sequence_parallel(mine, pg, grad);
          expect_close(y.value(), x, where(s, world, r), 0.0f);
          EXPECT_EQ(traffic.bytes(), static_cast<double>(x.nbytes()) / 2) << "half an all-reduce of the whole";
          // Megatron's: a column-parallel product keeps this rank's tokens and gathers them again.
          ASSERT_EQ(static_cast<bool>(y.remake()), grad == SequenceGrad::partial);
          if (y.remake()) expect_close(y.remake()(), x, "made again " + where(s, world, r), 0.0f);
          y.backward(seeds[static_cast<size_t>(r)]);
          EXPECT_EQ(traffic.collectives(), grad == SequenceGrad::partial ? 3 : 1);
          const Tensor want = grad == SequenceGrad::partial ? summed(seeds) : seeds.front();
          expect_close(mine.grad(), expected_tokens(want, r, world), "d x " + where(s, world, r));
        });
      }
}

TEST(SequenceParallel, ReduceScatterSumsThePartsAndGathersTheGradients) {
  for (const Shape& s : kShapes)
    for (int world : {2, 3}) {
      std::vector<Tensor> parts;
      for (int r = 0; r < world; ++r) parts.push_back(randn(s, 20 + r));
      const Tensor sum = summed(parts), seed = randn(s, 30);
      spawn(world, [&](comm::ProcessGroup& pg) {
        const int r = pg.rank();
        Variable x(parts[static_cast<size_t>(r)].clone(), true);
        Variable y = reduce_scatter_to_sequence_parallel(x, pg);
        expect_close(y.value(), expected_tokens(sum, r, world), where(s, world, r));
        expect_close(x.value(), parts[static_cast<size_t>(r)], "x " + where(s, world, r), 0.0f);
        y.backward(expected_tokens(seed, r, world));
        expect_close(x.grad(), seed, "d x " + where(s, world, r), 0.0f);
      });
    }
}

// Every rank has the same shapes, so every rank refuses alike: none waits.
TEST(SequenceParallel, TokensThatDoNotSplitAreRefusedOnEveryRank) {
  spawn(2, [&](comm::ProcessGroup& pg) {
    Variable x(randn({2, 5, 4}, 5), true);
    EXPECT_NE(error_of([&] { reduce_scatter_to_sequence_parallel(x, pg); }).find("5 tokens (dim -2 of [2, 5, 4]) do "
                                                                                  "not split over 2 ranks"),
              std::string::npos);
    EXPECT_NE(error_of([&] { scatter_to_sequence_parallel(x, pg); }).find("do not split over 2 ranks"),
              std::string::npos);
    Variable flat(randn({8}, 6), true);
    EXPECT_NE(error_of([&] { scatter_to_sequence_parallel(flat, pg); }).find("has no token dimension"),
              std::string::npos);
    Variable ids(Tensor::zeros({2, 4}, DType::i64));
    EXPECT_NE(error_of([&] { scatter_to_sequence_parallel(ids, pg); }).find("splits float32 activations"),
              std::string::npos);
  });
}

}  // namespace
}  // namespace artel::parallel
