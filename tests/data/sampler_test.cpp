#include "artel/data/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include <algorithm>
#include <numeric>
#include <set>
#include <thread>

#include "artel/core/rng.h"
#include "error_of.h"

namespace artel::data {
namespace {

using ::testing::HasSubstr;
using test_support::error_of;

bool is_permutation_of_range(std::vector<int64_t> p) {
  std::sort(p.begin(), p.end());
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

TEST(Sampler, PermutationIsAPermutationReproducibleAndPerEpoch) {
  auto p0 = epoch_permutation(1000, 42, 0);
  auto p1 = epoch_permutation(1000, 42, 1);
  EXPECT_TRUE(is_permutation_of_range(p0));
  EXPECT_TRUE(is_permutation_of_range(p1));
  EXPECT_NE(p0, p1);
  EXPECT_EQ(p0, epoch_permutation(1000, 42, 0));
  EXPECT_NE(p0, epoch_permutation(1000, 43, 0));
  EXPECT_TRUE(epoch_permutation(0, 1, 0).empty());
  EXPECT_EQ(epoch_permutation(1, 1, 0), std::vector<int64_t>{0});
}

TEST(Sampler, PermutationFollowsTheWrittenFisherYates) {
  // Recomputed here from the definition in sampler.h, straight from the Rng.
  const int64_t n = 37;
  Rng rng(9, 3);
  std::vector<int64_t> want(n);
  std::iota(want.begin(), want.end(), 0);
  for (int64_t i = n - 1; i >= 1; --i) {
    int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(want[i], want[j]);
  }
  EXPECT_EQ(epoch_permutation(n, 9, 3), want);
}

TEST(Sampler, ShuffleDrawsFollowTheFormula) {
  const int64_t n = 103, B = 4, W = 3, G = 12, E = n / G;  // 8 batches per epoch, 7 items dropped
  for (int64_t r = 0; r < W; ++r) {
    DistributedSampler s(n, {.order = Order::shuffle, .seed = 5, .rank_batch = B, .world_size = W, .rank = r});
    EXPECT_EQ(s.steps_per_epoch(), E);
    for (int64_t k : {0, 1, 7, 8, 9, 25}) {
      auto perm = epoch_permutation(n, 5, static_cast<uint64_t>(k / E));
      std::vector<int64_t> want;
      for (int64_t i = 0; i < B; ++i) want.push_back(perm[(k % E) * G + r * B + i]);
      EXPECT_EQ(s.draws(k), want) << "rank " << r << " batch " << k;
    }
  }
}

TEST(Sampler, SequentialDrawsAreGlobalRows) {
  DistributedSampler s(50, {.order = Order::sequential, .rank_batch = 3, .world_size = 2, .rank = 1});
  EXPECT_EQ(s.draws(0), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(s.draws(10), (std::vector<int64_t>{63, 64, 65}));  // j = k·G + r·B + i
}

TEST(Sampler, EveryWorldSizeSeesTheSameGlobalBatch) {
  const int64_t n = 200, G = 16;
  for (Order order : {Order::shuffle, Order::sequential}) {
    DistributedSampler one(n, {.order = order, .seed = 3, .rank_batch = G});
    for (int64_t W : {1, 2, 4, 8}) {
      for (int64_t k : {0, 5, 12, 13, 40}) {
        std::vector<int64_t> joined;
        for (int64_t r = 0; r < W; ++r) {
          DistributedSampler s(n, {.order = order, .seed = 3, .rank_batch = G / W, .world_size = W, .rank = r});
          auto mine = s.draws(k);
          joined.insert(joined.end(), mine.begin(), mine.end());
        }
        EXPECT_EQ(joined, one.draws(k)) << order_name(order) << " W=" << W << " k=" << k;
        EXPECT_EQ(joined, one.global_draws(k));
      }
    }
  }
}

// A run that goes on with another global batch G' after C rows (row offset
// O = C − s·G' from step s) reads the rows the first run would have read next.
TEST(Sampler, RowOffsetGoesOnFromTheRowsConsumed) {
  const int64_t n = 100, G = 8, steps = 3, C = steps * G;  // 3 steps of 8 rows done
  for (Order order : {Order::shuffle, Order::sequential}) {
    DistributedSampler before(n, {.order = order, .seed = 5, .rank_batch = G});
    std::vector<int64_t> rows;  // the global order from row C on, as the first run defines it
    for (int64_t k = steps; k < steps + 4; ++k) {
      auto b = before.draws(k);
      rows.insert(rows.end(), b.begin(), b.end());
    }
    for (int64_t Gp : {4, 2}) {  // a smaller global batch over 2 ranks, from step 3 on
      std::vector<int64_t> after;
      for (int64_t k = steps; k < steps + 2 * G / Gp; ++k)
        for (int64_t r = 0; r < 2; ++r) {
          DistributedSampler s(n, {.order = order, .seed = 5, .rank_batch = Gp / 2, .world_size = 2, .rank = r,
                                   .row_offset = C - steps * Gp});
          auto mine = s.draws(k);
          after.insert(after.end(), mine.begin(), mine.end());
        }
      EXPECT_EQ(after, std::vector<int64_t>(rows.begin(), rows.begin() + 2 * G)) << order_name(order) << " G'=" << Gp;
    }
  }
  // Crossing an epoch (E·G = 96 rows of shuffle): the next permutation takes over mid-batch.
  DistributedSampler s(n, {.order = Order::shuffle, .seed = 5, .rank_batch = 8, .row_offset = 92});
  const std::vector<int64_t> p0 = epoch_permutation(n, 5, 0), p1 = epoch_permutation(n, 5, 1);
  EXPECT_EQ(s.draws(0), (std::vector<int64_t>{p0[92], p0[93], p0[94], p0[95], p1[0], p1[1], p1[2], p1[3]}));
  DistributedSampler early(n, {.order = Order::sequential, .rank_batch = 8, .row_offset = -16});
  EXPECT_THAT(error_of([&] { early.draws(1); }), HasSubstr("starts before row 0"));
  EXPECT_EQ(early.draws(2)[0], 0);
}

TEST(Sampler, RanksAreDisjointAndAnEpochDrawsEachItemAtMostOnce) {
  const int64_t n = 100, B = 6, W = 4, E = n / (B * W);  // 4 batches of 24: 96 items per epoch
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> seen;
    for (int64_t k = epoch * E; k < (epoch + 1) * E; ++k)
      for (int64_t r = 0; r < W; ++r) {
        DistributedSampler s(n, {.order = Order::shuffle, .seed = 11, .rank_batch = B, .world_size = W, .rank = r});
        for (int64_t item : s.draws(k)) {
          EXPECT_TRUE(item >= 0 && item < n);
          EXPECT_TRUE(seen.insert(item).second) << "item " << item << " drawn twice in epoch " << epoch;
        }
      }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), E * B * W);
  }
}

TEST(Sampler, RandomAccessMatchesInOrderAccessFromManyThreads) {
  DistributedSampler s(500, {.order = Order::shuffle, .seed = 2, .rank_batch = 10});
  std::vector<std::vector<int64_t>> want;
  for (int64_t k = 0; k < 200; ++k) want.push_back(epoch_permutation(500, 2, k / 50));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t k = t; k < 200; k += 3) {
        auto d = s.draws(k);
        for (int64_t i = 0; i < 10; ++i)
          if (d[i] != want[k][(k % 50) * 10 + i]) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Sampler, BadConfigsAreErrors) {
  EXPECT_THAT(error_of([] { DistributedSampler(10, {.rank_batch = 4, .world_size = 3}); }),
              HasSubstr("global batch of 12 rows (3 ranks x 4) is larger than the 10 items"));
  EXPECT_THAT(error_of([] { DistributedSampler(10, {.rank_batch = 1, .world_size = 2, .rank = 2}); }),
              HasSubstr("rank 2 is outside a world of size 2"));
  EXPECT_THAT(error_of([] { DistributedSampler(10, {.rank_batch = 0}); }), HasSubstr("must be >= 1"));
  // Counts whose products pass int64: said, not std::length_error or "before row 0".
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_THAT(error_of([] { DistributedSampler(100, {.rank_batch = kHuge, .world_size = 4}); }),
              HasSubstr("global batch of more than 2^63 rows (4 ranks x 4611686018427387903) is larger than the 100"));
  DistributedSampler small(100, {.order = Order::sequential, .rank_batch = 4});
  EXPECT_THAT(error_of([&] { small.draws(kHuge); }), HasSubstr("lies beyond any run's rows (past 2^63)"));
  DistributedSampler late(100, {.order = Order::sequential, .rank_batch = 4,
                                .row_offset = std::numeric_limits<int64_t>::max() - 3});
  EXPECT_THAT(error_of([&] { late.draws(1); }), HasSubstr("lies beyond any run's rows (past 2^63)"));
  EXPECT_THAT(error_of([] { parse_order("random"); }), HasSubstr("unknown batch order 'random'"));
  EXPECT_EQ(parse_order("sequential"), Order::sequential);
  DistributedSampler s(10, {.rank_batch = 2});
  EXPECT_THAT(error_of([&] { s.draws(-1); }), HasSubstr(">= 0"));
}

}  // namespace
}  // namespace artel::data
