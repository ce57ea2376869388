// Sums against naive loops, including the chunked paths taken on 2 threads.
#include "artel/kernels/reduce.h"

#include <gtest/gtest.h>

#include <vector>

#include "artel/core/threads.h"
#include "artel/kernels/activation.h"
#include "artel/kernels/gemm.h"
#include "random_values.h"

namespace artel::kernels {
namespace {

std::vector<float> ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i * 13) % 17) - 8.0f;
  return v;
}

TEST(Reduce, SumsMatchNaive) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [outer, n, inner] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {3, 5, 7}, {1, 700, 300},
                                                                       {600, 300, 1}, {40, 30, 50}}) {
      auto x = ramp(outer * n * inner);
      std::vector<float> y(static_cast<size_t>(outer * inner));
      sum_dim(outer, n, inner, x.data(), y.data(), 0.5f);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) {
          double s = 0;
          for (int64_t k = 0; k < n; ++k) s += x[static_cast<size_t>((o * n + k) * inner + j)];
          ASSERT_NEAR(y[static_cast<size_t>(o * inner + j)], 0.5 * s, 1e-3) << outer << "," << n << "," << inner;
        }
      std::vector<float> back(x.size());
      expand_dim(outer, n, inner, y.data(), back.data(), 2.0f);
      EXPECT_FLOAT_EQ(back.back(), 2.0f * y.back());
      double total = 0;
      for (float v : x) total += v;
      EXPECT_NEAR(sum_all(static_cast<int64_t>(x.size()), x.data()), total, 1e-6);
    }
  }
  set_num_threads(1);
}

TEST(Reduce, ColumnSumsOverwrite) {
  set_num_threads(2);
  auto x = ramp(1000 * 65);
  std::vector<float> out(65, 123.0f);
  column_sums(1000, 65, x.data(), out.data());
  for (int64_t c = 0; c < 65; ++c) {
    double s = 0;
    for (int64_t r = 0; r < 1000; ++r) s += x[static_cast<size_t>(r * 65 + c)];
    ASSERT_NEAR(out[static_cast<size_t>(c)], s, 1e-3);
  }
  set_num_threads(1);
}

// The fused pass must give the bits of the two it replaces (a GELU layer's
// backward switched from them), on the chunked 2-thread path too.
TEST(Reduce, ProductWithColumnSumsIsMultiplyThenColumnSums) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [rows, cols] : std::vector<std::array<int64_t, 2>>{{1, 1}, {7, 13}, {300, 3072}, {1000, 65}}) {
      const auto a = artel_test::random_values(rows * cols, 11, 1), b = artel_test::random_values(rows * cols, 11, 2);
      std::vector<float> x(a.size()), sums(static_cast<size_t>(cols), 5.0f), want_x(a.size()),
          want_sums(static_cast<size_t>(cols));
      multiply(rows * cols, a.data(), b.data(), want_x.data());
      column_sums(rows, cols, want_x.data(), want_sums.data());
      product_with_column_sums(rows, cols, a.data(), b.data(), x.data(), sums.data());
      EXPECT_EQ(x, want_x) << rows << " x " << cols;
      EXPECT_EQ(sums, want_sums) << rows << " x " << cols;
      std::vector<float> x_only(a.size());
      product_with_column_sums(rows, cols, a.data(), b.data(), x_only.data(), nullptr);
      EXPECT_EQ(x_only, want_x);
    }
  }
  set_num_threads(1);
}

// A linear layer's backward under bf16 products rounds dY and sums its
// columns in one pass: the bits of round_operand and column_sums, on the
// chunked 2-thread path too.
TEST(Reduce, RoundedWithColumnSumsIsRoundOperandThenColumnSums) {
  if (bf16_instructions().empty()) GTEST_SKIP() << "this CPU has no native bf16";
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [rows, cols] : std::vector<std::array<int64_t, 2>>{{1, 1}, {7, 13}, {768, 384}, {1000, 65}}) {
      const auto x = artel_test::random_values(rows * cols, 11, 3);
      std::vector<uint16_t> x16(x.size()), want_x16(x.size());
      std::vector<float> sums(static_cast<size_t>(cols), 5.0f), want_sums(static_cast<size_t>(cols));
      round_operand(x.data(), rows, cols, cols, want_x16.data());
      column_sums(rows, cols, x.data(), want_sums.data());
      rounded_with_column_sums(rows, cols, x.data(), x16.data(), sums.data());
      EXPECT_EQ(x16, want_x16) << rows << " x " << cols;
      EXPECT_EQ(sums, want_sums) << rows << " x " << cols;
      std::vector<uint16_t> x16_only(x.size());
      rounded_with_column_sums(rows, cols, x.data(), x16_only.data(), nullptr);
      EXPECT_EQ(x16_only, want_x16);
    }
  }
  set_num_threads(1);
}

}  // namespace
}  // namespace artel::kernels
