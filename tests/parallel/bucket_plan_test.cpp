#include "artel/parallel/bucket_plan.h"

#include <gtest/gtest.h>

#include "artel/core/error.h"

namespace artel::parallel {

TEST(BucketPlan, ReverseOrderSmallFirstBucketThenLarger) {
  // 4 bytes per element: sizes in bytes 400, 400, 400, 4000, 400.
  auto plan = plan_buckets({100, 100, 100, 1000, 100}, {.first_bucket_bytes = 800, .bucket_bytes = 4400});
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].params, (std::vector<int>{4}));  // 400 + 4000 > 800
  EXPECT_EQ(plan[1].params, (std::vector<int>{3, 2}));
  EXPECT_EQ(plan[1].offsets, (std::vector<int64_t>{0, 1000}));
  EXPECT_EQ(plan[1].numel, 1100);
  EXPECT_EQ(plan[2].params, (std::vector<int>{1, 0}));
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
    if (b.numel * 4 > 64) {
      EXPECT_EQ(b.params.size(), 1u);
    }
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(BucketPlan, EmptyAndInvalid) {
  EXPECT_TRUE(plan_buckets({}, {}).empty());
  EXPECT_THROW(plan_buckets({1}, {.first_bucket_bytes = 0}), Error);
}

}  // namespace artel::parallel
