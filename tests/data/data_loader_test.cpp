#include "artel/data/data_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "error_of.h"

namespace artel::data {
namespace {

using ::testing::HasSubstr;
using test_support::error_of;

std::vector<int64_t> ids(const Tensor& t) { return {t.data<int64_t>(), t.data<int64_t>() + t.numel()}; }

CharTextDataset small_text() {
  std::string s;
  for (int i = 0; i < 2000; ++i) s.push_back(static_cast<char>('a' + (i * 7 + i / 26) % 26));
  return CharTextDataset(make_char_text(s), 8);
}

TEST(DataLoader, YieldsTheDatasetsBatchesInOrderFromAnyStart) {
  CharTextDataset ds = small_text();
  SamplerConfig cfg{.order = Order::shuffle, .seed = 3, .rank_batch = 4, .world_size = 2, .rank = 1};
  DistributedSampler s = make_sampler(ds, cfg);
  for (int prefetch : {0, 1, 2}) {
    DataLoader loader(ds, cfg, {.start_step = 5, .prefetch = prefetch});
    for (int64_t k = 5; k < 60; ++k) {
      EXPECT_EQ(loader.step(), k);
      Batch b = loader.next();
      Batch want = ds.train_batch(s, k);
      ASSERT_EQ(ids(b.x), ids(want.x)) << "prefetch " << prefetch << " k " << k;
      ASSERT_EQ(ids(b.y), ids(want.y));
    }
  }
}

// A dataset whose batch 3 fails: the loader must hand the error to the caller.
class FailingAt3 : public CharTextDataset {
 public:
  FailingAt3() : CharTextDataset(small_text()) {}
  Batch train_batch(const DistributedSampler& s, int64_t k) const override {
    if (k == 3) throw Error("batch 3 is broken");
    return CharTextDataset::train_batch(s, k);
  }
};

TEST(DataLoader, ForwardsErrorsFromTheThread) {
  FailingAt3 ds;
  for (int prefetch : {0, 2}) {
    DataLoader loader(ds, {.rank_batch = 2}, {.prefetch = prefetch});
    for (int k = 0; k < 3; ++k) loader.next();
    EXPECT_THAT(error_of([&] { loader.next(); }), HasSubstr("batch 3 is broken"));
  }
  DataLoader loader(ds, {.rank_batch = 2}, {.prefetch = 2});
  for (int k = 0; k < 3; ++k) loader.next();
  EXPECT_THAT(error_of([&] { loader.next(); }), HasSubstr("broken"));
  EXPECT_THAT(error_of([&] { loader.next(); }), HasSubstr("broken"));  // stays failed
}

TEST(DataLoader, ShutsDownCleanlyWithAFullQueueOrUnused) {
  // A hang or a crash in the destructor fails this test (ctest's timeout, ASan).
  CharTextDataset ds = small_text();
  DistributedSampler s = make_sampler(ds, {.rank_batch = 2});
  for (int i = 0; i < 20; ++i) {
    DataLoader loader(ds, {.rank_batch = 2}, {.prefetch = 2});
    if (i % 2) {
      EXPECT_EQ(ids(loader.next().x), ids(ds.train_batch(s, 0).x));
    }
  }
}

TEST(DataLoader, BadConfigIsAnError) {
  CharTextDataset ds = small_text();
  EXPECT_THAT(error_of([&] { DataLoader(ds, {.rank_batch = 2}, {.prefetch = 9}); }), HasSubstr("prefetch"));
  EXPECT_THAT(error_of([&] { DataLoader(ds, {.rank_batch = 2}, {.start_step = -1}); }), HasSubstr("start step"));
  EXPECT_THAT(error_of([&] { DataLoader(ds, {.rank_batch = 10000}); }), HasSubstr("larger than"));
}

}  // namespace
}  // namespace artel::data
