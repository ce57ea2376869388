// shard_of / unshard: blocks along each dimension, their round trip, and the
// errors for sizes that do not divide.
#include "artel/parallel/shard.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

namespace artel::parallel {
namespace {

Tensor iota(const Shape& s) {
  Tensor t = Tensor::empty(s);
  std::iota(t.data<float>(), t.data<float>() + t.numel(), 0.0f);
  return t;
}

TEST(Shard, RowsOfAMatrix) {
  Tensor t = iota({4, 3});  // rows 0..3 = {0,1,2}, {3,4,5}, ...
  Tensor s = shard_of(t, 0, 1, 2);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.to_vector(), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  EXPECT_FALSE(s.same_storage(t));
}

TEST(Shard, ColumnsOfAMatrix) {
  Tensor t = iota({2, 6});
  Tensor s = shard_of(t, 1, 2, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.to_vector(), (std::vector<float>{4, 5, 10, 11}));
}

TEST(Shard, AVector) {
  EXPECT_EQ(shard_of(iota({6}), 0, 1, 3).to_vector(), (std::vector<float>{2, 3}));
}

TEST(Shard, UnshardInvertsShardOfAlongEachDimension) {
  for (const Shape& shape : {Shape{8}, Shape{8, 6}}) {
    Tensor t = iota(shape);
    for (int64_t dim = 0; dim < t.dim(); ++dim) {
      for (int parts : {1, 2}) {
        std::vector<Tensor> blocks;
        for (int p = 0; p < parts; ++p) blocks.push_back(shard_of(t, dim, p, parts));
        Tensor back = unshard(blocks, dim);
        EXPECT_EQ(back.shape(), t.shape());
        EXPECT_EQ(back.to_vector(), t.to_vector()) << shape_str(shape) << " dim " << dim << " parts " << parts;
      }
    }
  }
}

TEST(Shard, KeepsTheDtype) {
  Tensor ids = Tensor::empty({4}, DType::i64);
  for (int64_t i = 0; i < 4; ++i) ids.data<int64_t>()[i] = 10 + i;
  Tensor s = shard_of(ids, 0, 1, 2);
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.data<int64_t>()[0], 12);
  EXPECT_EQ(unshard({shard_of(ids, 0, 0, 2), s}, 0).data<int64_t>()[3], 13);
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error, expected one with \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Shard, ErrorsNameTheSizes) {
  Tensor t = iota({3, 5});
  expect_error([&] { shard_of(t, 1, 0, 2); }, "(size 5) is not divisible into 2 parts");
  expect_error([&] { shard_of(t, 0, 0, 2); }, "(size 3) is not divisible into 2 parts");
  expect_error([&] { shard_of(t, 2, 0, 1); }, "dimension 2 out of range");
  expect_error([&] { shard_of(t, 0, 3, 3); }, "part 3 of 3");
  expect_error([&] { shard_of(iota({2, 2, 2}), 0, 0, 2); }, "1-D or 2-D");
  expect_error([&] { unshard({iota({2, 3}), iota({2, 4})}, 1); }, "part 1 has shape [2, 4]");
  expect_error([&] { unshard({}, 0); }, "no parts");
}

}  // namespace
}  // namespace artel::parallel
