// Branch-free exp and row reductions that GCC vectorises (-O3 -march=native).
//
// glibc's expf is a scalar call unless built with -ffast-math, and a softmax
// over a (768, 65) logit matrix would spend much of its time in it. These are
// plain arithmetic, so loops calling them compile to AVX-512 code. (GELU's
// normal CDF lives in simd.h, written with explicit vectors.)
//
//   for (i...) y[i] = exp_approx(x[i] - max);   // softmax numerator
//
// Accuracy: exp_approx is Cephes' expf (≤ 2 ulp on [-87, 88]; inputs below -87
// give ~1e-38 instead of 0, above 88 are clamped); tests/kernels compare it
// with std::exp.
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

// y = exp(x − m), returning Σ y (row_sum_exp that keeps the terms).
[[gnu::always_inline]] inline float row_exp(int64_t n, const float* __restrict x, float m, float* __restrict y) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += y[i + j] = exp_approx(x[i + j] - m);
  float s = 0;
  for (; i < n; ++i) s += y[i] = exp_approx(x[i] - m);
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
