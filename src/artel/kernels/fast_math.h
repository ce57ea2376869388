// Branch-free exp and row reductions for softmax and cross-entropy.
//
// glibc's expf is a scalar call unless built with -ffast-math, and a softmax
// over a (1024, 50304) logit matrix would spend most of its time in it. The
// scalar exp_approx is plain arithmetic, so loops calling it compile to
// vector code where GCC can vectorise them; the row reductions are written
// with explicit native vectors (simd.h), because GCC did not vectorise the
// clamps of exp_approx for AVX2 ("control flow in loop") and left them
// scalar on CPUs without AVX-512. (GELU's normal CDF lives in simd.h too.)
//
//   float s = row_exp(n, x, row_max(n, x), y);   // softmax numerators, Σ
//
// Accuracy: exp_approx is Cephes' expf (≤ 2 ulp on [-87, 88]; inputs below -87
// give ~1e-38 instead of 0, above 88 are clamped); tests/kernels compare it
// with std::exp. The vector form computes the same bits, lane by lane.
#pragma once

#include <bit>
#include <cstdint>

#include "artel/kernels/simd.h"

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

// exp_approx on a vector: simd.h's exp_nonpositive is the same polynomial
// with the same rounding steps, and it holds up to 88 (2^n stays finite).
template <class V>
[[gnu::always_inline]] inline V exp_approx(V x) {
  const V highest = broadcast<V>(88.0f);
  return exp_nonpositive(x > highest ? highest : x);
}

// Row reductions over 16 independent lanes (kParts native vectors), whose
// partial results are then added in lane order: without -ffast-math GCC will
// not reorder a single running sum or max. A row's result is the same on
// every vector width.
namespace detail {
constexpr int kParts = static_cast<int>(kLanes / kNat);

struct Lanes {
  vnat part[kParts];
  explicit Lanes(float init) {
    for (vnat& p : part) p = broadcast<vnat>(init);
  }
  // Calls fn(part, offset) for each native vector of a 16-float group.
  template <class Fn>
  [[gnu::always_inline]] void each(const Fn& fn) {
#pragma GCC unroll 4
    for (int p = 0; p < kParts; ++p) fn(part[p], p * kNat);
  }
  float add_to(float s) const {
    for (const vnat& p : part)
      for (int64_t j = 0; j < kNat; ++j) s += p[j];
    return s;
  }
  // The 16 lanes' sum in hsum(v16)'s tree order (halves first): the bits of a
  // v16 accumulator's sum, on every vector width.
  float tree_sum() const {
    vnat s = part[0];
    for (int p = 1; p < kParts; ++p) s += part[p];
    return hsum(s);
  }
};
}  // namespace detail

[[gnu::always_inline]] inline float row_max(int64_t n, const float* __restrict x) {
  detail::Lanes lanes(-3.402823466e38f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    lanes.each([&](vnat& l, int64_t o) {
      const vnat v = load<vnat>(x + i + o);
      l = v > l ? v : l;
    });
  float m = -3.402823466e38f;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (const vnat& p : lanes.part)
    for (int64_t j = 0; j < kNat; ++j) m = p[j] > m ? p[j] : m;
  return m;
}

[[gnu::always_inline]] inline float row_sum(int64_t n, const float* __restrict x) {
  detail::Lanes lanes(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) lanes.each([&](vnat& l, int64_t o) { l += load<vnat>(x + i + o); });
  float s = 0;
  for (; i < n; ++i) s += x[i];
  return lanes.add_to(s);
}

// Σ exp(x[i] − m), the softmax denominator, without storing the exponentials.
[[gnu::always_inline]] inline float row_sum_exp(int64_t n, const float* __restrict x, float m) {
  detail::Lanes lanes(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    lanes.each([&](vnat& l, int64_t o) { l += exp_approx(load<vnat>(x + i + o) - m); });
  float s = 0;
  for (; i < n; ++i) s += exp_approx(x[i] - m);
  return lanes.add_to(s);
}

// y = exp(x − m), returning Σ y (row_sum_exp that keeps the terms; the sum
// equals row_sum(n, y)).
[[gnu::always_inline]] inline float row_exp(int64_t n, const float* __restrict x, float m, float* __restrict y) {
  detail::Lanes lanes(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    lanes.each([&](vnat& l, int64_t o) {
      const vnat e = exp_approx(load<vnat>(x + i + o) - m);
      store(y + i + o, e);
      l += e;
    });
  float s = 0;
  for (; i < n; ++i) s += y[i] = exp_approx(x[i] - m);
  return lanes.add_to(s);
}

[[gnu::always_inline]] inline float row_dot(int64_t n, const float* __restrict a, const float* __restrict b) {
  detail::Lanes lanes(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    lanes.each([&](vnat& l, int64_t o) { l += load<vnat>(a + i + o) * load<vnat>(b + i + o); });
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  return lanes.add_to(s);
}

}  // namespace artel::kernels
