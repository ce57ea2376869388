#include "artel/core/memory_stats.h"

#include <gtest/gtest.h>

#include "artel/core/tensor.h"

namespace artel {
namespace {

TEST(MemoryStats, LiveBytesFollowAllocationsAndFrees) {
  const int64_t base = live_tensor_bytes();
  {
    Tensor a = Tensor::zeros({10, 100});  // 4000 bytes
    EXPECT_EQ(live_tensor_bytes(), base + 4000);
    Tensor view = a.slice0(2, 5);  // a view allocates nothing
    Tensor b = Tensor::empty({3}, DType::i64);
    EXPECT_EQ(live_tensor_bytes(), base + 4024);
    Tensor c = b.clone();
    EXPECT_EQ(live_tensor_bytes(), base + 4048);
  }
  EXPECT_EQ(live_tensor_bytes(), base);
}

TEST(MemoryStats, PeakKeepsTheMaximumUntilReset) {
  reset_peak_tensor_bytes();
  const int64_t base = live_tensor_bytes();
  EXPECT_EQ(peak_tensor_bytes(), base);
  { Tensor big = Tensor::empty({1000}); }
  EXPECT_EQ(live_tensor_bytes(), base);
  EXPECT_EQ(peak_tensor_bytes(), base + 4000);
  Tensor small = Tensor::empty({100});
  EXPECT_EQ(peak_tensor_bytes(), base + 4000);
  reset_peak_tensor_bytes();
  EXPECT_EQ(peak_tensor_bytes(), base + 400);
}

TEST(MemoryStats, WrappedMemoryIsNotCounted) {
  alignas(64) static float buf[256];
  const int64_t base = live_tensor_bytes();
  reset_peak_tensor_bytes();
  bool released = false;
  {
    Tensor t = Tensor::wrap(Storage::wrap(buf, sizeof buf, [&] { released = true; }), {256}, DType::f32);
    t.fill(1);
    EXPECT_EQ(live_tensor_bytes(), base);
  }
  EXPECT_TRUE(released);
  EXPECT_EQ(live_tensor_bytes(), base);
  EXPECT_EQ(peak_tensor_bytes(), base);
}

}  // namespace
TEST(MemoryStats, AllocationPurposeNamesTheInnermostScope) {
  EXPECT_STREQ(allocation_purpose(), "a tensor");
  {
    AllocationPurpose outer("the optimizer state");
    {
      AllocationPurpose inner("activations");
      EXPECT_STREQ(allocation_purpose(), "activations");
    }
    EXPECT_STREQ(allocation_purpose(), "the optimizer state");
  }
  EXPECT_STREQ(allocation_purpose(), "a tensor");
}

}  // namespace artel
