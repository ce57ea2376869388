#include "artel/core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>

namespace artel {

TEST(Tensor, StorageIsAlignedAndZeroed) {
  Tensor t = Tensor::zeros({3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  EXPECT_EQ(t.numel(), 15);
  for (float v : t.to_vector()) EXPECT_EQ(v, 0.0f);
}

TEST(Tensor, Slice0IsAViewOfTheRows) {
  Tensor t = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor mid = t.slice0(1, 3);
  EXPECT_EQ(mid.shape(), (Shape{2, 2}));
  EXPECT_EQ(mid.to_vector(), (std::vector<float>{2, 3, 4, 5}));
  mid.data<float>()[0] = 42;
  EXPECT_EQ(t.data<float>()[2], 42);
  EXPECT_TRUE(mid.same_storage(t));
  EXPECT_THROW(t.slice0(2, 4), Error);
}

TEST(Tensor, ViewInfersOneDimension) {
  Tensor t = Tensor::zeros({4, 6});
  EXPECT_EQ(t.view({-1, 3}).shape(), (Shape{8, 3}));
  EXPECT_THROW(t.view({5, -1}), Error);
  EXPECT_THROW(t.view({-1, -1}), Error);
}

TEST(Tensor, DtypeIsChecked) {
  Tensor t = Tensor::zeros({2}, DType::i64);
  EXPECT_EQ(t.nbytes(), 16u);
  EXPECT_THROW(t.data<float>(), Error);
  EXPECT_NO_THROW(t.data<int64_t>());
}

TEST(Tensor, WrapUsesExternalMemoryAndReleasesIt) {
  alignas(64) static float buf[8];
  bool released = false;
  {
    Tensor t = Tensor::wrap(Storage::wrap(buf, sizeof buf, [&] { released = true; }), {2, 4}, DType::f32);
    t.fill(3);
    EXPECT_EQ(buf[7], 3);
  }
  EXPECT_TRUE(released);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(bf16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(bf16(-2.5f)), -2.5f);
  EXPECT_NEAR(static_cast<float>(bf16(3.14159f)), 3.14159f, 0.01f);
}

TEST(Tensor, ReleasableStorageKeepsItsViewsAcrossRelease) {
  auto bytes = Storage::releasable(4 * sizeof(float));
  bytes->reacquire();
  Tensor view = Tensor::wrap(bytes, {4}, DType::f32);
  view.fill(2.0f);
  bytes->release();
  EXPECT_EQ(bytes->data(), nullptr);
  bytes->reacquire();  // fresh bytes: the same view sees them
  view.fill(3.0f);
  EXPECT_EQ(view.to_vector(), (std::vector<float>{3, 3, 3, 3}));
}

TEST(BufferCache, HandsBackAKeptBufferOfTheSameSizeAndFreesBeyondItsRoom) {
  auto cache = std::make_shared<BufferCache>(2 << 20);
  auto a = Storage::releasable(1 << 20, cache), b = Storage::releasable(1 << 20, cache),
       c = Storage::releasable(1 << 20, cache);
  a->reacquire(), b->reacquire(), c->reacquire();
  std::byte* first = a->data();
  a->release(), b->release(), c->release();  // the third does not fit: unmapped
  auto other = Storage::releasable(4096, cache);
  other->reacquire();  // another size: a fresh mapping
  EXPECT_NE(other->data(), first);
  a->reacquire(), b->reacquire();
  EXPECT_TRUE(a->data() == first || b->data() == first);  // reused, not mapped anew
  a->data()[(1 << 20) - 1] = std::byte{7};             // the whole size is there
}

TEST(LargeBuffers, AFreedOneServesTheNextRequestOfTheSameSize) {
  const int64_t n = 8 << 20;  // 32 MiB: over kLargeBuffer
  std::byte* first = nullptr;
  {
    Tensor a = Tensor::empty({n});
    first = static_cast<std::byte*>(a.raw());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  EXPECT_GE(kept_large_buffer_bytes(), size_t{32} << 20);
  Tensor b = Tensor::zeros({n});
  EXPECT_EQ(static_cast<std::byte*>(b.raw()), first);
  for (int64_t i = 0; i < n; i += 1 << 16) EXPECT_EQ(b.data<float>()[i], 0.0f);
}

TEST(LargeBuffers, KeepNoMoreThanWasEverInUseAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: nothing kept or in use before
  EXPECT_EXIT(
      [] {
        { Tensor::empty({8 << 20}); }  // 32 MiB in use at most, then kept
        const bool kept = kept_large_buffer_bytes() == size_t{32} << 20;
        Tensor b = Tensor::empty({12 << 20});  // 48 MiB: with the 32 kept, 80 would pass the peak in use (48)
        const bool given_back = kept_large_buffer_bytes() == 0;
        Tensor c = Tensor::empty({8 << 20});
        { Tensor d = Tensor::empty({8 << 20}); }  // b, c and d in use at once: a peak of 112 MiB
        c = Tensor();
        b = Tensor();  // all three kept: no more than the peak
        const bool all_kept = kept_large_buffer_bytes() == size_t{112} << 20;
        std::_Exit(kept && given_back && all_kept ? 0 : 1);
      }(),
      ::testing::ExitedWithCode(0), "");
}

}  // namespace artel
