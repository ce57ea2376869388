#include "artel/data/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "error_of.h"
#include "data/temp_files.h"

namespace artel::data {
namespace {

using ::testing::HasSubstr;
using namespace artel::data::testing;
using test_support::error_of;

// n bytes cycling through 200 distinct values: id == position mod 200.
std::string cycling_text(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(1 + i % 200));
  return s;
}

std::vector<int64_t> row_of(const Tensor& t, int64_t i) {
  const int64_t* p = t.data<int64_t>() + i * t.size(1);
  return {p, p + t.size(1)};
}

std::vector<int64_t> tokens_at(const std::vector<uint8_t>& split, int64_t start, int64_t len) {
  return {split.begin() + start, split.begin() + start + len};
}

TEST(CharTextDataset, SequentialRowsFollowTheFormula) {
  CharTextDataset ds(make_char_text(cycling_text(1000)), 7);  // n_train 900
  const int64_t n_train = 900, T = 7, B = 5, W = 2, G = 10;
  for (int64_t r = 0; r < W; ++r) {
    DistributedSampler s = make_sampler(ds, {.order = Order::sequential, .rank_batch = B, .world_size = W, .rank = r});
    for (int64_t k : {0, 3, 12, 200}) {
      Batch b = ds.train_batch(s, k);
      ASSERT_EQ(b.x.shape(), (Shape{B, T}));
      ASSERT_EQ(b.y.dtype(), DType::i64);
      for (int64_t i = 0; i < B; ++i) {
        int64_t j = k * G + r * B + i, start = (j * T) % (n_train - T);
        EXPECT_EQ(row_of(b.x, i), tokens_at(ds.text().train, start, T)) << "k " << k << " j " << j;
        EXPECT_EQ(row_of(b.y, i), tokens_at(ds.text().train, start + 1, T));
      }
    }
  }
}

TEST(CharTextDataset, ShuffleRowsFollowTheFormula) {
  CharTextDataset ds(make_char_text(cycling_text(1000)), 7);
  const int64_t T = 7, R = (900 - 1) / T, B = 4, W = 3, G = 12, E = R / G;  // R 128, E 10
  ASSERT_EQ(ds.num_train_items(), R);
  for (int64_t r = 0; r < W; ++r) {
    DistributedSampler s = make_sampler(ds, {.order = Order::shuffle, .seed = 8, .rank_batch = B, .world_size = W, .rank = r});
    for (int64_t k : {0, 9, 10, 31}) {
      auto perm = epoch_permutation(R, 8, static_cast<uint64_t>(k / E));
      Batch b = ds.train_batch(s, k);
      for (int64_t i = 0; i < B; ++i) {
        int64_t start = perm[(k % E) * G + r * B + i] * T;
        EXPECT_EQ(row_of(b.x, i), tokens_at(ds.text().train, start, T));
        EXPECT_EQ(row_of(b.y, i), tokens_at(ds.text().train, start + 1, T));
      }
    }
  }
}

TEST(CharTextDataset, BatchesArePureInK) {
  CharTextDataset ds(make_char_text(cycling_text(600)), 5);
  DistributedSampler s = make_sampler(ds, {.seed = 1, .rank_batch = 3});
  Batch later = ds.train_batch(s, 40);
  ds.train_batch(s, 3);
  DistributedSampler fresh = make_sampler(ds, {.seed = 1, .rank_batch = 3});
  EXPECT_EQ(row_of(ds.train_batch(fresh, 40).x, 2), row_of(later.x, 2));
}

TEST(CharTextDataset, ValidationRowsAreNonOverlappingBlocks) {
  CharTextDataset ds(make_char_text(cycling_text(1000)), 7);  // n_val 100: 14 rows
  EXPECT_EQ(ds.num_val_batches(4), 4);
  Batch last = ds.val_batch(4, 3);
  ASSERT_EQ(last.x.shape(), (Shape{2, 7}));
  EXPECT_EQ(row_of(last.x, 1), tokens_at(ds.text().val, 13 * 7, 7));
  EXPECT_EQ(row_of(last.y, 1), tokens_at(ds.text().val, 13 * 7 + 1, 7));
  EXPECT_EQ(row_of(ds.val_batch(4, 0).x, 0), tokens_at(ds.text().val, 0, 7));
  EXPECT_THAT(error_of([&] { ds.val_batch(4, 4); }), HasSubstr("outside [0, 4)"));
}

TEST(CharTextDataset, TooShortTextIsAnError) {
  EXPECT_THAT(error_of([] { CharTextDataset(make_char_text(std::string(50, 'a'), "s.txt"), 8); }),
              HasSubstr("s.txt is too short: its validation split has 5 characters, one block needs 9"));
  EXPECT_THAT(error_of([] { CharTextDataset(make_char_text(std::string(50, 'a'), "s.txt"), 45); }),
              HasSubstr("train split has 45 characters, one block needs 46"));
}

TEST(CharTextDataset, TinyShakespeare) {
  auto ds = open_dataset(std::string(ARTEL_SOURCE_DIR) + "/data/tinyshakespeare.txt", {.block_size = 64});
  ASSERT_EQ(ds->kind(), DatasetKind::text);
  EXPECT_EQ(ds->num_classes(), 65);
  EXPECT_EQ(ds->num_train_items(), (1003854 - 1) / 64);
  auto& text = static_cast<CharTextDataset&>(*ds);
  DistributedSampler s = make_sampler(*ds, {.order = Order::sequential, .rank_batch = 2});
  Batch b = ds->train_batch(s, 0);
  EXPECT_EQ(text.vocab().decode(row_of(b.x, 0)).substr(0, 14), "First Citizen:");
}

TEST(MnistDataset, BatchesFollowTheFormulaForEitherOrder) {
  auto ds = open_dataset(std::string(ARTEL_SOURCE_DIR) + "/data/mnist-t10k");
  ASSERT_EQ(ds->kind(), DatasetKind::mnist);
  const auto& data = static_cast<MnistDataset&>(*ds).data();
  const int64_t n = 8000, B = 64, W = 2, G = 128, E = 62;
  for (Order order : {Order::sequential, Order::shuffle}) {
    DistributedSampler s = make_sampler(*ds, {.order = order, .seed = 4, .rank_batch = B, .world_size = W, .rank = 1});
    EXPECT_EQ(s.steps_per_epoch(), E);
    for (int64_t k : {0, 61, 62, 130}) {
      Batch b = ds->train_batch(s, k);
      ASSERT_EQ(b.x.shape(), (Shape{B, 784}));
      ASSERT_EQ(b.y.shape(), (Shape{B}));
      auto perm = epoch_permutation(n, 4, static_cast<uint64_t>(k / E));
      for (int64_t i = 0; i < B; i += 9) {
        int64_t j = k * G + B + i;
        int64_t sample = order == Order::sequential ? j % n : perm[(k % E) * G + B + i];
        EXPECT_EQ(b.y.data<int64_t>()[i], data.train_y.data<int64_t>()[sample]);
        EXPECT_EQ(std::memcmp(b.x.data<float>() + i * 784, data.train_x.data<float>() + sample * 784, 784 * 4), 0);
      }
    }
  }
}

TEST(MnistDataset, ValidationCoversAllSamplesInOrder) {
  auto ds = open_dataset(std::string(ARTEL_SOURCE_DIR) + "/data/mnist-t10k");
  const auto& data = static_cast<MnistDataset&>(*ds).data();
  ASSERT_EQ(ds->num_val_batches(300), 7);
  Batch last = ds->val_batch(300, 6);
  ASSERT_EQ(last.x.shape(), (Shape{200, 784}));
  EXPECT_EQ(last.y.data<int64_t>()[199], 6);
  EXPECT_EQ(last.y.data<int64_t>()[5], data.val_y.data<int64_t>()[1805]);
  EXPECT_EQ(ds->val_batch(300, 0).y.data<int64_t>()[0], 4);
}

TEST(OpenDataset, DecidesByPathAndExplainsFailures) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { open_dataset(dir.file("none")); }), HasSubstr("does not exist"));
  EXPECT_THAT(error_of([&] { open_dataset(dir.str()); }), HasSubstr("directory without MNIST files"));
  write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), idx_labels(10));
  EXPECT_THAT(error_of([&] { open_dataset(dir.file("t10k-labels-idx1-ubyte.gz")); }), HasSubstr("one MNIST IDX file"));
  EXPECT_THAT(error_of([&] { open_dataset(dir.str()); }), HasSubstr("lacks its images file"));
  write_raw(dir.file("blob.dat"), {1, 0, 2, 3});
  EXPECT_THAT(error_of([&] { open_dataset(dir.file("blob.dat"), {.block_size = 1}); }), HasSubstr("not a text file"));
  write_raw(dir.file("a.txt"), std::vector<uint8_t>(100, 'x'));
  EXPECT_THAT(error_of([&] { open_dataset(dir.file("a.txt")); }), HasSubstr("needs a block size"));
  EXPECT_EQ(open_dataset(dir.file("a.txt"), {.block_size = 4})->kind(), DatasetKind::text);
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"), idx_images(10));
  auto ds = open_dataset(dir.str());
  EXPECT_EQ(ds->kind(), DatasetKind::mnist);
  EXPECT_EQ(ds->num_train_items(), 8);
  EXPECT_THAT(ds->describe(), HasSubstr("8 train / 2 validation"));
}

}  // namespace
}  // namespace artel::data
