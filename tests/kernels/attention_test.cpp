// The fused attention kernel against a plain double-precision transcription of
// the math, with the causal mask written as explicit loops; shapes include a T
// and a head size that are not multiples of the 16-float vectors.
#include "artel/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "artel/core/rng.h"
#include "artel/core/threads.h"
#include "kernels/random_values.h"
#include "artel/kernels/gemm.h"

namespace artel::kernels {
namespace {

using artel_test::random_values;
constexpr uint64_t kAttentionStream = 7;  // this file's inputs: random_values(n, seed, kAttentionStream)

struct Reference {
  std::vector<double> y, dqkv;
};

// y_h = softmax(q kᵀ/√hs, j ≤ i) v and its gradients for upstream dy, per (b, h).
Reference reference(const AttentionDims& d, const std::vector<float>& qkv, const std::vector<float>& dy) {
  const int64_t t = d.time, c = d.channels, hs = d.head_size();
  Reference r{std::vector<double>(dy.size()), std::vector<double>(qkv.size())};
  auto at = [&](int64_t b, int64_t i, int64_t part, int64_t h, int64_t e) {
    return ((b * t + i) * 3 + part) * c + h * hs + e;  // part 0 q, 1 k, 2 v
  };
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.n_head; ++h) {
      std::vector<double> p(t * t, 0.0), dp(t * t, 0.0);
      for (int64_t i = 0; i < t; ++i) {
        double m = -1e300, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t e = 0; e < hs; ++e) s += double(qkv[at(b, i, 0, h, e)]) * qkv[at(b, j, 1, h, e)];
          p[i * t + j] = s / std::sqrt(double(hs));
          m = std::max(m, p[i * t + j]);
        }
        for (int64_t j = 0; j <= i; ++j) z += (p[i * t + j] = std::exp(p[i * t + j] - m));
        for (int64_t j = 0; j <= i; ++j) p[i * t + j] /= z;
        for (int64_t e = 0; e < hs; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += p[i * t + j] * qkv[at(b, j, 2, h, e)];
          r.y[(b * t + i) * c + h * hs + e] = o;
        }
      }
      for (int64_t i = 0; i < t; ++i) {
        double rowsum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double g = 0;
          for (int64_t e = 0; e < hs; ++e) {
            double dye = dy[(b * t + i) * c + h * hs + e];
            g += dye * qkv[at(b, j, 2, h, e)];
            r.dqkv[at(b, j, 2, h, e)] += p[i * t + j] * dye;  // dV = Pᵀ dY
          }
          dp[i * t + j] = g;
          rowsum += g * p[i * t + j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          double ds = p[i * t + j] * (dp[i * t + j] - rowsum) / std::sqrt(double(hs));
          for (int64_t e = 0; e < hs; ++e) {
            r.dqkv[at(b, i, 0, h, e)] += ds * qkv[at(b, j, 1, h, e)];
            r.dqkv[at(b, j, 1, h, e)] += ds * qkv[at(b, i, 0, h, e)];
          }
        }
      }
    }
  return r;
}

struct Outputs {
  std::vector<float> y, dqkv;
};

// Forward and backward on seeded inputs; probs starts as NaN, so reading
// anything the forward did not write shows.
Outputs run(const AttentionDims& d, int threads) {
  set_num_threads(threads);
  const int64_t n_qkv = d.batch * d.time * 3 * d.channels, n_y = d.batch * d.time * d.channels;
  std::vector<float> qkv = random_values(n_qkv, 1, kAttentionStream), dy = random_values(n_y, 2, kAttentionStream);
  Outputs out{std::vector<float>(n_y), std::vector<float>(n_qkv, NAN)};
  std::vector<float> probs(d.probs_numel(), NAN);
  attention_forward(d, qkv.data(), out.y.data(), probs.data());
  attention_backward(d, qkv.data(), probs.data(), dy.data(), out.dqkv.data());
  set_num_threads(1);
  return out;
}

Reference reference_of(const AttentionDims& d) {
  const int64_t n_qkv = d.batch * d.time * 3 * d.channels, n_y = d.batch * d.time * d.channels;
  return reference(d, random_values(n_qkv, 1, kAttentionStream), random_values(n_y, 2, kAttentionStream));
}

void expect_matches(const AttentionDims& d, int threads) {
  Outputs out = run(d, threads);
  Reference ref = reference_of(d);
  for (size_t i = 0; i < out.y.size(); ++i) ASSERT_NEAR(out.y[i], ref.y[i], 1e-5) << "y element " << i;
  for (size_t i = 0; i < out.dqkv.size(); ++i) ASSERT_NEAR(out.dqkv[i], ref.dqkv[i], 2e-5) << "dqkv element " << i;
}

// The largest |a − ref| over the largest |ref|.
double relative_error(const std::vector<float>& a, const std::vector<double>& ref) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(a[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return err / scale;
}

// Under bf16 precision the products take bf16 operands (rounded q, k, v, dY,
// P and dS: each off by up to 2^-9), so the results move off the fp32 ones by
// ~1e-3 of their scale, and stay within 1e-2 of the exact math.
void expect_bf16_matches(const AttentionDims& d, int threads) {
  if (bf16_instructions().empty()) GTEST_SKIP() << "this CPU has no native bf16";
  const Outputs fp32 = run(d, threads);
  set_gemm_precision(GemmPrecision::bf16);
  set_attention_products(AttentionProducts::bf16_pairs);  // on every CPU with bf16, not only where they are the faster
  const Outputs bf16 = run(d, threads);
  set_attention_products(AttentionProducts::automatic);
  set_gemm_precision(GemmPrecision::fp32);
  const Reference ref = reference_of(d);
  EXPECT_LT(relative_error(bf16.y, ref.y), 1e-2);
  EXPECT_LT(relative_error(bf16.dqkv, ref.dqkv), 1e-2);
  std::vector<double> y32(fp32.y.begin(), fp32.y.end()), dqkv32(fp32.dqkv.begin(), fp32.dqkv.end());
  EXPECT_GT(relative_error(bf16.y, y32), 1e-4) << "bf16 products: results equal to fp32's";
  EXPECT_GT(relative_error(bf16.dqkv, dqkv32), 1e-4) << "bf16 products: results equal to fp32's";
}

TEST(Attention, MatchesReferenceAtNanoGptShape) { expect_matches({2, 64, 128, 4}, 1); }
TEST(Attention, MatchesReferenceWithRaggedTimeAndHeadSize) { expect_matches({3, 37, 60, 3}, 1); }  // hs = 20
TEST(Attention, MatchesReferenceWithTinyHeadsAndOneStep) {
  expect_matches({2, 1, 8, 4}, 1);
  expect_matches({1, 17, 6, 2}, 1);  // hs = 3: all scalar columns
}
// T around the 16-lane vectors and the 32-query blocks (one, two or three
// blocks, a last block of one or of 17 queries), head sizes of one, two and
// three vectors.
TEST(Attention, MatchesReferenceAcrossBlockEdges) {
  for (int64_t t : {7, 16, 17, 32, 33, 49, 64, 65})
    for (int64_t hs : {16, 32, 48}) {
      SCOPED_TRACE(testing::Message() << "T " << t << ", head size " << hs);
      expect_matches({1, t, 2 * hs, 2}, 1);
    }
}
TEST(Attention, MatchesReferenceOnTwoThreads) { expect_matches({3, 40, 64, 2}, 2); }
TEST(Attention, Bf16ProductsMatchReferenceToBf16Accuracy) {
  expect_bf16_matches({2, 64, 128, 4}, 1);  // W2's heads
  expect_bf16_matches({3, 40, 64, 2}, 2);
}
// Odd T (a zero partner for the last pair), ragged blocks, a head size of 10
// (scalar columns on pairs), and 2 (a single pair).
TEST(Attention, Bf16ProductsMatchReferenceAcrossBlockEdges) {
  for (int64_t t : {1, 7, 17, 33, 49, 65})
    for (int64_t hs : {2, 10, 32, 48}) {
      SCOPED_TRACE(testing::Message() << "T " << t << ", head size " << hs);
      expect_bf16_matches({1, t, 2 * hs, 2}, 1);
    }
}
// An odd head size has no channel pairs: its products stay fp32.
TEST(Attention, OddHeadSizeMultipliesInFp32UnderBf16) {
  if (bf16_instructions().empty()) GTEST_SKIP() << "this CPU has no native bf16";
  set_gemm_precision(GemmPrecision::bf16);
  expect_matches({1, 17, 6, 2}, 1);
  set_gemm_precision(GemmPrecision::fp32);
}
// Where attention multiplies in fp32 under bf16 (automatic on Intel), its
// results are fp32's bit for bit.
TEST(Attention, Fp32ProductsUnderBf16AreFp32sBitForBit) {
  if (bf16_instructions().empty()) GTEST_SKIP() << "this CPU has no native bf16";
  const AttentionDims d{2, 33, 64, 2};
  const Outputs fp32 = run(d, 1);
  set_gemm_precision(GemmPrecision::bf16);
  set_attention_products(AttentionProducts::fp32);
  const Outputs under_bf16 = run(d, 1);
  set_attention_products(AttentionProducts::automatic);
  set_gemm_precision(GemmPrecision::fp32);
  EXPECT_EQ(under_bf16.y, fp32.y);
  EXPECT_EQ(under_bf16.dqkv, fp32.dqkv);
}
TEST(Attention, ResultsDoNotDependOnTheThreadSplit) {
  const AttentionDims d{3, 33, 96, 3};  // 9 (b, h) items: uneven halves
  const int64_t n_qkv = d.batch * d.time * 3 * d.channels, n_y = d.batch * d.time * d.channels;
  std::vector<float> qkv = random_values(n_qkv, 4, kAttentionStream), dy = random_values(n_y, 5, kAttentionStream);
  std::vector<float> y[2], dqkv[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<float> probs(d.probs_numel());
    y[threads - 1].resize(n_y);
    dqkv[threads - 1].resize(n_qkv);
    attention_forward(d, qkv.data(), y[threads - 1].data(), probs.data());
    attention_backward(d, qkv.data(), probs.data(), dy.data(), dqkv[threads - 1].data());
  }
  set_num_threads(1);
  EXPECT_EQ(y[0], y[1]);
  EXPECT_EQ(dqkv[0], dqkv[1]);
}

// probs holds Pᵀ per (b, h): element [j][i] = P[i][j], written for i ≥ 16·⌊j/16⌋.
TEST(Attention, SavedProbabilitiesAreCausalColumnsThatSumToOne) {
  AttentionDims d{1, 37, 16, 2};
  std::vector<float> qkv = random_values(d.batch * d.time * 3 * d.channels, 3, kAttentionStream);
  std::vector<float> y(d.batch * d.time * d.channels), probs(d.probs_numel(), NAN);
  attention_forward(d, qkv.data(), y.data(), probs.data());
  const int64_t t = d.time, tp = d.padded_time();
  for (int64_t h = 0; h < d.n_head; ++h) {
    std::vector<double> sum(tp, 0.0);
    for (int64_t j = 0; j < t; ++j)
      for (int64_t i = j / 16 * 16; i < tp; ++i) {
        float p = probs[(h * t + j) * tp + i];
        if (i < j || i >= t) {
          EXPECT_EQ(p, 0.0f) << "head " << h << " key " << j << " query " << i;
        } else {
          EXPECT_GT(p, 0.0f) << "head " << h << " key " << j << " query " << i;
        }
        sum[i] += p;
      }
    for (int64_t i = 0; i < t; ++i) EXPECT_NEAR(sum[i], 1.0, 1e-6) << "head " << h << " query " << i;
  }
}

}  // namespace
}  // namespace artel::kernels
