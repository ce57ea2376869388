// Split geometry: which entries of a whole tensor each part holds (rows,
// columns, q | k | v sections, padded vocabularies, replicated), cutting a
// part out and joining the parts back, and the errors for splits that do not fit.
#include "artel/nn/split.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "artel/core/error.h"
#include "core/same_bits.h"

namespace artel::nn {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// 1, 2, 3, ...: no entry is zero, so padding shows.
Tensor iota(const Shape& s) {
  Tensor t = Tensor::empty(s);
  std::iota(t.data<float>(), t.data<float>() + t.numel(), 1.0f);
  return t;
}

using artel_test::same_bits;

std::vector<Tensor> all_parts(const Tensor& whole, const Split& s, int parts) {
  std::vector<Tensor> out;
  for (int p = 0; p < parts; ++p) out.push_back(take_part(whole, s, p, parts));
  return out;
}

TEST(Split, RowsOfAMatrix) {
  const Split rows{.dim = 0};
  PartGeometry g = part_geometry({4, 3}, rows, 1, 2);
  EXPECT_EQ(g.outer, 1);
  EXPECT_EQ(g.mid, 4);
  EXPECT_EQ(g.inner, 3);
  EXPECT_EQ(g.begin, 2);
  EXPECT_EQ(g.count, 2);
  EXPECT_EQ(g.valid(), 2);
  EXPECT_EQ(g.shape, (Shape{2, 3}));
  Tensor whole = iota({4, 3});
  Tensor part = take_part(whole, rows, 1, 2);
  EXPECT_EQ(part.to_vector(), (std::vector<float>{7, 8, 9, 10, 11, 12}));
  EXPECT_FALSE(part.same_storage(whole));
}

TEST(Split, ColumnsOfAMatrix) {
  const Split cols{.dim = 1};
  PartGeometry g = part_geometry({2, 6}, cols, 2, 3);
  EXPECT_EQ(g.outer, 2);
  EXPECT_EQ(g.mid, 6);
  EXPECT_EQ(g.inner, 1);
  EXPECT_EQ(g.begin, 4);
  EXPECT_EQ(g.shape, (Shape{2, 2}));
  EXPECT_EQ(take_part(iota({2, 6}), cols, 2, 3).to_vector(), (std::vector<float>{5, 6, 11, 12}));
  // The middle dimension of three.
  EXPECT_EQ(take_part(iota({2, 4, 2}), cols, 1, 2).to_vector(), (std::vector<float>{5, 6, 7, 8, 13, 14, 15, 16}));
}

// Attention's c_attn: rows [q; k; v], each rank the same heads of all three.
TEST(Split, GroupsAreDividedEachOnTheirOwn) {
  const Split qkv{.dim = 0, .groups = 3};
  PartGeometry g = part_geometry({12, 2}, qkv, 1, 2);
  EXPECT_EQ(g.outer, 3);
  EXPECT_EQ(g.mid, 4);
  EXPECT_EQ(g.begin, 2);
  EXPECT_EQ(g.count, 2);
  EXPECT_EQ(g.shape, (Shape{6, 2}));
  // q rows 2-3, k rows 6-7, v rows 10-11.
  EXPECT_EQ(take_part(iota({12, 2}), qkv, 1, 2).to_vector(),
            (std::vector<float>{5, 6, 7, 8, 13, 14, 15, 16, 21, 22, 23, 24}));
  EXPECT_EQ(take_part(iota({12}), qkv, 0, 4).to_vector(), (std::vector<float>{1, 5, 9}));  // the bias
  Tensor whole = iota({12, 2});
  EXPECT_TRUE(same_bits(join_parts(all_parts(whole, qkv, 4), qkv, whole.shape()), whole));
}

// A 65-row vocabulary over 2 and 4 ranks: padded to 66 and 68 rows.
TEST(Split, PaddingRoundsUpWithZerosAndJoinCropsBack) {
  const Split vocab{.dim = 0, .pad = true};
  Tensor whole = iota({65, 3});
  for (int parts : {2, 4}) {
    const int64_t count = parts == 2 ? 33 : 17;
    std::vector<Tensor> ps = all_parts(whole, vocab, parts);
    for (int p = 0; p < parts; ++p) {
      PartGeometry g = part_geometry(whole.shape(), vocab, p, parts);
      EXPECT_EQ(g.begin, p * count);
      EXPECT_EQ(g.count, count);
      ASSERT_EQ(ps[p].shape(), (Shape{count, 3}));
      const int64_t valid = std::min<int64_t>(count, 65 - p * count);
      EXPECT_EQ(g.valid(), valid) << parts << " part " << p;
      std::vector<float> v = ps[p].to_vector();
      for (int64_t i = 0; i < count * 3; ++i) {
        const float want = i < valid * 3 ? static_cast<float>(p * count * 3 + i + 1) : 0.0f;
        ASSERT_EQ(v[i], want) << parts << " ranks, part " << p << " element " << i;
      }
    }
    Tensor back = join_parts(ps, vocab, whole.shape());
    EXPECT_TRUE(same_bits(back, whole)) << parts;
  }
  // A divisible size gets no padding; a rank may hold padding only.
  EXPECT_EQ(part_geometry({64, 3}, vocab, 3, 4).count, 16);
  PartGeometry only_padding = part_geometry({5, 2}, vocab, 3, 4);
  EXPECT_EQ(only_padding.begin, 6);
  EXPECT_EQ(only_padding.valid(), 0);
  Tensor small = iota({5, 2});
  EXPECT_EQ(take_part(small, vocab, 3, 4).to_vector(), std::vector<float>(4, 0.0f));
  EXPECT_TRUE(same_bits(join_parts(all_parts(small, vocab, 4), vocab, small.shape()), small));
  // Padding with sections: 2 rows per section over 4 ranks.
  const Split padded_qkv{.dim = 0, .groups = 3, .pad = true};
  Tensor six = iota({6, 2});
  EXPECT_EQ(take_part(six, padded_qkv, 1, 4).to_vector(), (std::vector<float>{3, 4, 7, 8, 11, 12}));
  EXPECT_EQ(take_part(six, padded_qkv, 2, 4).to_vector(), std::vector<float>(6, 0.0f));
  EXPECT_TRUE(same_bits(join_parts(all_parts(six, padded_qkv, 4), padded_qkv, six.shape()), six));
}

TEST(Split, ReplicatedPartsAreTheWholeTensor) {
  const Split rep{};
  EXPECT_TRUE(rep.replicated());
  EXPECT_EQ(part_geometry({3, 5}, rep, 1, 4).shape, (Shape{3, 5}));
  Tensor whole = iota({3, 5});
  Tensor p = take_part(whole, rep, 3, 4);
  EXPECT_TRUE(same_bits(p, whole));
  EXPECT_FALSE(p.same_storage(whole));
  EXPECT_TRUE(same_bits(join_parts({p, iota({3, 5})}, rep, whole.shape()), whole));
}

TEST(Split, EverySplitRoundTripsAndKeepsTheDtype) {
  Tensor whole = iota({12, 8});
  for (const Split& s : {Split{.dim = 0}, Split{.dim = 1}, Split{.dim = 0, .groups = 3}, Split{.dim = 1, .pad = true},
                         Split{}})
    for (int parts : {1, 2, 4})
      EXPECT_TRUE(same_bits(join_parts(all_parts(whole, s, parts), s, whole.shape()), whole))
          << "dim " << s.dim << " groups " << s.groups << " parts " << parts;
  Tensor ids = Tensor::empty({6}, DType::i64);
  for (int64_t i = 0; i < 6; ++i) ids.data<int64_t>()[i] = 10 + i;
  Tensor second = take_part(ids, {.dim = 0, .pad = true}, 1, 4);
  ASSERT_EQ(second.dtype(), DType::i64);
  EXPECT_EQ(second.data<int64_t>()[0], 12);
  EXPECT_EQ(second.data<int64_t>()[1], 13);
  EXPECT_TRUE(same_bits(join_parts(all_parts(ids, {.dim = 0, .pad = true}, 4), {.dim = 0, .pad = true}, {6}), ids));
}

TEST(Split, ErrorsNameTheShape) {
  auto fails = [](auto&& fn, auto matcher) { EXPECT_THAT(fn, ThrowsMessage<Error>(matcher)); };
  fails([] { part_geometry({3, 5}, {.dim = 1}, 0, 2); },
        AllOf(HasSubstr("dimension 1 of [3, 5] (5) does not divide over 2 ranks"), HasSubstr("hint")));
  fails([] { part_geometry({3, 5}, {.dim = 0}, 0, 2); }, HasSubstr("dimension 0 of [3, 5] (3) does not divide over 2"));
  fails([] { part_geometry({12, 2}, {.dim = 0, .groups = 3}, 0, 8); },
        HasSubstr("dimension 0 of [12, 2] (4 per section) does not divide over 8 ranks"));
  fails([] { part_geometry({10, 2}, {.dim = 0, .groups = 3}, 0, 1); },
        HasSubstr("dimension 0 of [10, 2] does not hold 3 equal sections"));
  fails([] { part_geometry({3, 5}, {.dim = 2}, 0, 1); }, HasSubstr("dimension 2 of a tensor of shape [3, 5]"));
  fails([] { part_geometry({4}, {.dim = 0}, 3, 3); }, HasSubstr("part 3 of 3"));
  fails([] { take_part(iota({3, 5}), {.dim = 1}, 0, 2); }, HasSubstr("[3, 5]"));
  fails([] { join_parts({iota({2, 3}), iota({2, 4})}, {.dim = 1}, {2, 6}); },
        HasSubstr("join_parts: part 1 is [2, 4], expected [2, 3] of [2, 6]"));
  fails([] { join_parts({}, {.dim = 0}, {2}); }, HasSubstr("no parts"));
  // 2 heads of 8 in each of q | k | v over 4 ranks: 4 rows each, half a head.
  fails([] { part_geometry({48, 16}, {.dim = 0, .groups = 3, .unit = 8}, 0, 4); },
        HasSubstr("gives each of 4 ranks 4 entries per section, which cuts a unit of 8"));
  EXPECT_EQ(part_geometry({48, 16}, {.dim = 0, .groups = 3, .unit = 8}, 1, 2).begin, 8);
}

}  // namespace
}  // namespace artel::nn
