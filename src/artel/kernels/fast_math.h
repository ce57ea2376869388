// Branch-free exp and normal CDF that GCC vectorises (-O3 -march=native).
//
// glibc's expf/erff are scalar calls unless built with -ffast-math, and a GELU
// over a (12, 64, 512) activation would spend milliseconds in them. These are
// plain arithmetic, so loops calling them compile to AVX-512 code.
//
//   for (i...) y[i] = exp_approx(x[i] - max);   // softmax numerator
//
// Accuracy: exp_approx is Cephes' expf (≤ 2 ulp on [-87, 88]; inputs below -87
// give ~1e-38 instead of 0, above 88 are clamped). normal_cdf uses Numerical
// Recipes' erfc Chebyshev fit (relative error < 1.2e-7), so GELU matches erf to
// float precision; tests/kernels compare both with std::exp / std::erf.
#pragma once

#include <bit>
#include <cstdint>

namespace artel::kernels {

[[gnu::always_inline]] inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // n = round(x / ln 2) with the 1.5·2^23 trick: no rounding call, vectorises.
  float n = x * 1.44269504088896341f + 12582912.0f;
  n -= 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 127]
  return y * std::bit_cast<float>(bits);
}

// erfc(z) for z >= 0 given e = exp(-z²)·exp(P(t)) folded into one exp call.
[[gnu::always_inline]] inline float erfc_nonneg(float z) {
  float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * exp_approx(p - z * z);
}

// Φ(x) = P(N(0,1) ≤ x) = ½·erfc(−x/√2).
[[gnu::always_inline]] inline float normal_cdf(float x) {
  float a = (x < 0.0f ? -x : x) * 0.70710678118654752f;
  float half_tail = 0.5f * erfc_nonneg(a);
  return x < 0.0f ? half_tail : 1.0f - half_tail;
}

// φ(x) = exp(−x²/2)/√(2π).
[[gnu::always_inline]] inline float normal_pdf(float x) { return 0.39894228040143268f * exp_approx(-0.5f * x * x); }

// Row reductions over 16 independent lanes: without -ffast-math GCC will not
// reorder a single running sum or max, but it vectorises independent lanes.
[[gnu::always_inline]] inline float row_max(int64_t n, const float* __restrict x) {
  float lanes[16];
  for (float& l : lanes) l = -3.402823466e38f;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];
  float m = -3.402823466e38f;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (float l : lanes) m = l > m ? l : m;
  return m;
}

[[gnu::always_inline]] inline float row_sum(int64_t n, const float* __restrict x) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += x[i + j];
  float s = 0;
  for (; i < n; ++i) s += x[i];
  for (float l : lanes) s += l;
  return s;
}

// Σ exp(x[i] − m), the softmax denominator, without storing the exponentials.
[[gnu::always_inline]] inline float row_sum_exp(int64_t n, const float* __restrict x, float m) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += exp_approx(x[i + j] - m);
  float s = 0;
  for (; i < n; ++i) s += exp_approx(x[i] - m);
  for (float l : lanes) s += l;
  return s;
}

[[gnu::always_inline]] inline float row_dot(int64_t n, const float* __restrict a, const float* __restrict b) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += a[i + j] * b[i + j];
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  for (float l : lanes) s += l;
  return s;
}

}  // namespace artel::kernels
