#include "artel/parallel/bucket_plan.h"

#include <gtest/gtest.h>

#include "artel/core/error.h"

namespace artel::parallel {

TEST(BucketPlan, ReverseOrderSmallFirstBucketThenLarger) {
  // 4 bytes per element: sizes in bytes 400, 400, 400, 4000, 400.
  auto plan = plan_buckets({100, 100, 100, 1000, 100}, {.first_bucket_bytes = 800, .bucket_bytes = 4400});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].params, (std::vector<int>{4, 3}));  // 400 < 800, then 4400 >= 800: closed
  EXPECT_EQ(plan[0].offsets, (std::vector<int64_t>{0, 100}));
  EXPECT_EQ(plan[0].numel, 1100);
  EXPECT_EQ(plan[1].params, (std::vector<int>{2, 1, 0}));  // 1200 < 4400: the rest
}

// c10d's buckets for W1's MLP (784-512-512-10, PyTorch's layout: weight then
// bias per layer) under DDP's defaults: the output layer and the 1 MiB middle
// weight together, whose reduction then overlaps the first layer's backward.
TEST(BucketPlan, AParameterThatCrossesTheLimitClosesItsBucket) {
  auto plan = plan_buckets({784 * 512, 512, 512 * 512, 512, 512 * 10, 10}, {});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].params, (std::vector<int>{5, 4, 3, 2}));
  EXPECT_EQ(plan[1].params, (std::vector<int>{1, 0}));
}

TEST(BucketPlan, EveryParameterExactlyOnceAndOversizedAlone) {
  std::vector<int64_t> sizes = {5, 7000, 3, 3, 9};
  auto plan = plan_buckets(sizes, {.first_bucket_bytes = 16, .bucket_bytes = 64});
  std::vector<int> seen(sizes.size(), 0);
  for (const auto& b : plan) {
    int64_t total = 0;
    for (size_t j = 0; j < b.params.size(); ++j) {
      ++seen[static_cast<size_t>(b.params[j])];
      EXPECT_EQ(b.offsets[j], total);
      total += sizes[static_cast<size_t>(b.params[j])];
    }
    EXPECT_EQ(total, b.numel);
    // Over the limit by no more than its last parameter.
    EXPECT_LT((b.numel - sizes[static_cast<size_t>(b.params.back())]) * 4, &b == &plan.front() ? 16 : 64);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(BucketPlan, EmptyAndInvalid) {
  EXPECT_TRUE(plan_buckets({}, {}).empty());
  EXPECT_THROW(plan_buckets({1}, {.first_bucket_bytes = 0}), Error);
}

}  // namespace artel::parallel
