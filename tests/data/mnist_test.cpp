#include "artel/data/mnist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "artel/core/error.h"
#include "artel/data/gz_file.h"
#include "error_of.h"
#include "data/temp_files.h"

namespace artel::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace artel::data::testing;
using test_support::error_of;

const std::string kMnistDir = std::string(ARTEL_SOURCE_DIR) + "/data/mnist-t10k";

TEST(Mnist, ReadsTheBundledTestSet) {
  MnistData d = load_mnist(kMnistDir);
  EXPECT_EQ(d.train_x.shape(), (Shape{8000, 784}));
  EXPECT_EQ(d.val_x.shape(), (Shape{2000, 784}));
  EXPECT_EQ(d.train_y.shape(), (Shape{8000}));
  EXPECT_EQ(d.val_y.shape(), (Shape{2000}));
  ASSERT_EQ(d.train_y.dtype(), DType::i64);
  // The t10k labels start 7 2 1 0 4; sample 8000 (first validation) is a 4, the last a 6.
  const int64_t* y = d.train_y.data<int64_t>();
  EXPECT_EQ(y[0], 7);
  EXPECT_EQ(y[1], 2);
  EXPECT_EQ(y[4], 4);
  EXPECT_EQ(d.val_y.data<int64_t>()[0], 4);
  EXPECT_EQ(d.val_y.data<int64_t>()[1999], 6);
  // Image 0: pixel 202 is 84, pixel 0 is 0; image 9999: pixel 75 is 254.
  const float* x = d.train_x.data<float>();
  EXPECT_FLOAT_EQ(x[202], (84.0f / 255.0f - 0.1307f) / 0.3081f);
  EXPECT_FLOAT_EQ(x[0], -0.1307f / 0.3081f);
  EXPECT_FLOAT_EQ(d.val_x.data<float>()[1999 * 784 + 75], (254.0f / 255.0f - 0.1307f) / 0.3081f);
}

TEST(Mnist, ReadsUncompressedFilesAndSplits80To20) {
  TempDir dir;
  write_raw(dir.file("train-images-idx3-ubyte"), idx_images(10));
  write_raw(dir.file("train-labels-idx1-ubyte"), idx_labels(10));
  MnistData d = load_mnist(dir.str());
  EXPECT_EQ(d.train_x.size(0), 8);
  EXPECT_EQ(d.val_x.size(0), 2);
  EXPECT_EQ(d.val_y.data<int64_t>()[1], 9);
  EXPECT_FLOAT_EQ(d.val_x.data<float>()[784 + 5], mnist_normalize((9 + 5) % 256));  // image 9, pixel 5
}

TEST(Mnist, WrongMagicNamesFileAndNumber) {
  TempDir dir;
  write_gz(dir.file("a-images-idx3-ubyte.gz"), idx_images(4, 2049));
  std::string msg = error_of([&] { read_idx_images(dir.file("a-images-idx3-ubyte.gz")); });
  EXPECT_THAT(msg, AllOf(HasSubstr("a-images-idx3-ubyte.gz"), HasSubstr("magic number 2049"),
                         HasSubstr("expected 2051"), HasSubstr("hint:")));
  write_gz(dir.file("l-labels-idx1-ubyte.gz"), idx_labels(4, 2051));
  EXPECT_THAT(error_of([&] { read_idx_labels(dir.file("l-labels-idx1-ubyte.gz")); }),
              HasSubstr("expected 2049"));
}

TEST(Mnist, BadDimensionsAreRejected) {
  TempDir dir;
  write_gz(dir.file("i.gz"), idx_images(2, 2051, 14, 14));
  EXPECT_THAT(error_of([&] { read_idx_images(dir.file("i.gz")); }), HasSubstr("14x14, expected 28x28"));
  write_gz(dir.file("z.gz"), idx_images(0));
  EXPECT_THAT(error_of([&] { read_idx_images(dir.file("z.gz")); }), HasSubstr("0 images"));
}

TEST(Mnist, LengthMustMatchHeader) {
  TempDir dir;
  auto img = idx_images(3);
  img.erase(img.end() - 100, img.end());  // a truncated payload inside an intact gzip stream
  write_gz(dir.file("short.gz"), img);
  EXPECT_THAT(error_of([&] { read_idx_images(dir.file("short.gz")); }),
              AllOf(HasSubstr("short.gz"), HasSubstr("truncated file")));
  auto lab = idx_labels(5);
  lab.push_back(1);
  write_gz(dir.file("long.gz"), lab);
  EXPECT_THAT(error_of([&] { read_idx_labels(dir.file("long.gz")); }), HasSubstr("1 bytes after"));
  write_gz(dir.file("tiny.gz"), {0, 0, 8});
  EXPECT_THAT(error_of([&] { read_idx_labels(dir.file("tiny.gz")); }), HasSubstr("shorter than the 8-byte IDX header"));
}

TEST(Mnist, TruncatedGzipStreamIsAnError) {
  TempDir dir;
  write_gz(dir.file("full.gz"), idx_images(20));
  auto size = std::filesystem::file_size(dir.file("full.gz"));
  std::filesystem::copy_file(dir.file("full.gz"), dir.file("cut.gz"));
  std::filesystem::resize_file(dir.file("cut.gz"), size / 2);
  EXPECT_THAT(error_of([&] { read_idx_images(dir.file("cut.gz")); }),
              AllOf(HasSubstr("cut.gz"), HasSubstr("unexpected end of file"), HasSubstr("gzip")));
}

TEST(Mnist, LabelOutOfRangeIsAnError) {
  TempDir dir;
  auto lab = idx_labels(3);
  lab.back() = 12;
  write_gz(dir.file("l.gz"), lab);
  EXPECT_THAT(error_of([&] { read_idx_labels(dir.file("l.gz")); }), HasSubstr("label 12 at index 2"));
}

TEST(Mnist, MismatchedCountsNameBothFiles) {
  TempDir dir;
  write_gz(dir.file("x-images-idx3-ubyte.gz"), idx_images(10));
  write_gz(dir.file("x-labels-idx1-ubyte.gz"), idx_labels(9));
  EXPECT_THAT(error_of([&] { load_mnist(dir.str()); }),
              AllOf(HasSubstr("9 labels"), HasSubstr("10 images"), HasSubstr("x-images-idx3-ubyte.gz")));
}

TEST(Mnist, MissingFilesAreNamed) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { read_idx_images(dir.file("nope.gz")); }),
              AllOf(HasSubstr("nope.gz"), HasSubstr("does not exist")));
  EXPECT_THAT(error_of([&] { read_gz_file(dir.str()); }), HasSubstr("is a directory, not a file"));
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"), idx_images(10));
  EXPECT_THAT(error_of([&] { load_mnist(dir.str()); }), HasSubstr("lacks its labels file"));
  EXPECT_THAT(error_of([&] { load_mnist(dir.file("missing")); }), HasSubstr("is not a directory"));
  write_gz(dir.file("train-images-idx3-ubyte.gz"), idx_images(10));
  EXPECT_THAT(error_of([&] { find_mnist_files(dir.str()); }), HasSubstr("more than one"));
}

}  // namespace
}  // namespace artel::data
