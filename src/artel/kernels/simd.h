// 16-float vectors (GCC vector extensions: one AVX-512 register, or two AVX2
// ones), the machine's own vector `vnat`, and the vector math the kernels
// share: exp for softmax arguments and the normal CDF and PDF together for
// GELU.
//
// Written with explicit vectors because GCC, without -ffast-math, turns the
// clamps and selects of the scalar forms into masked code that runs several
// times slower; here every lane runs the same straight-line instructions, so
// results do not depend on how a tensor is split over threads.
//
// The math is written for any vector type V and used on `vnat`: GCC 12 splits
// a v16's arithmetic into two AVX2 instructions, but not its selects (a ? b : c)
// and shuffles, which it lowers lane by lane through memory. Lanes are
// independent, so v16 and two v8 give the same bits.
//
//   vnat x = load<vnat>(p);
//   NormalCdfPdf<vnat> n = normal_cdf_pdf(x);
//   store(y, x * n.cdf);          // GELU
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

// The vector types never cross a library interface (every function here is
// inline), so GCC's note that passing them changes the ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace artel::kernels {

typedef float v16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

// The machine's own vector: a v16 is one zmm register with AVX-512, but two
// ymm without it.
typedef float v8 __attribute__((vector_size(32)));
#ifdef __AVX512F__
using vnat = v16;
#else
using vnat = v8;
#endif
constexpr int64_t kNat = sizeof(vnat) / sizeof(float);

template <class V>
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
template <class V>
inline V broadcast(float x) {
  return x - V{};  // x − (+0) is x, −0 included
}

// Tree reductions by halves, in registers (a running scalar sum would be a
// 16-add dependency chain through memory).
typedef float v4 __attribute__((vector_size(16)));
inline float hsum(v8 a) {
  v4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (b[0] + b[2]) + (b[1] + b[3]);
}
inline float hsum(v16 v) {
  return hsum(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
              __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
}
inline float hmax(v16 v) {
  v8 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  v8 hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  v8 a = lo > hi ? lo : hi;
  v4 l4 = __builtin_shufflevector(a, a, 0, 1, 2, 3), h4 = __builtin_shufflevector(a, a, 4, 5, 6, 7);
  v4 b = l4 > h4 ? l4 : h4;
  return std::max(std::max(b[0], b[2]), std::max(b[1], b[3]));
}

namespace detail {
// One stage of transpose: swaps bit M of the row index with bit M of the
// lane index (rows a and a + M trade the lanes where their bits differ).
template <int M, class V, size_t... I>
inline void swap_index_bit(V (&rows)[sizeof...(I)], std::index_sequence<I...>) {
  constexpr int W = sizeof...(I);
  for (int a = 0; a < W; ++a) {
    if (a & M) continue;
    V lo = __builtin_shufflevector(rows[a], rows[a + M], ((I & M) ? W + I - M : I)...);
    V hi = __builtin_shufflevector(rows[a], rows[a + M], ((I & M) ? W + I : I + M)...);
    rows[a] = lo;
    rows[a + M] = hi;
  }
}
}  // namespace detail

// Transposes a W × W block held as W row vectors of W lanes (v16 or v8), in
// registers: log2(W) stages of W/2 two-source permutes each, instead of W²
// scalar moves.
template <class V, size_t W>
inline void transpose(V (&rows)[W]) {
  static_assert(sizeof(V) == W * sizeof(float) && (W == 8 || W == 16));
  constexpr auto lanes = std::make_index_sequence<W>{};
  detail::swap_index_bit<1>(rows, lanes);
  detail::swap_index_bit<2>(rows, lanes);
  detail::swap_index_bit<4>(rows, lanes);
  if constexpr (W == 16) detail::swap_index_bit<8>(rows, lanes);
}

// exp(x) for x ≤ 0 (softmax arguments after subtracting the row max, −x² of
// the normal density): 2^n · e^r with r = x − n·ln2, |r| ≤ ln2/2, and Cephes'
// degree-6 polynomial for e^r (relative error ~1e-7, like expf). Inputs below
// −87 give ~1e-38 instead of 0 (2^n stays a normal float); -inf likewise.
template <class V>
inline V exp_nonpositive(V x) {
  using VI = decltype(x < x);  // the same lanes as 32-bit integers
  const V lowest = broadcast<V>(-87.0f);
  x = x < lowest ? lowest : x;
  const V round = broadcast<V>(12582912.0f);  // 1.5·2^23: adding it rounds to an integer
  V n = (x * 1.44269504088896341f + round) - round;
  V r = x - n * 0.693359375f + n * 2.12194440e-4f;  // ln2 in two parts, for precision
  V p = broadcast<V>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  V e = p * r * r + r + 1.0f;
  VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
  V two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return e * two_n;
}

template <class V>
struct NormalCdfPdf {
  V cdf;  // Φ(x) = P(N(0,1) ≤ x)
  V pdf;  // φ(x) = exp(−x²/2)/√(2π)
};

// Φ through erfc, so the left tail (where GELU's output is tiny) keeps its
// relative accuracy: with a = |x|/√2 and t = 1/(1 + a/2),
//   erfc(a) = t · R(t) · exp(−a²),
// R a degree-8 polynomial fitted (relative least squares, a in [0, 9]) to
// erfc(a)·exp(a²)/t; relative error ~2e-7. φ(x) reuses exp(−a²), so GELU's
// backward needs a single exp per element.
//
// N vectors go through it step by step together, so their dependency chains
// interleave: one vector's chain alone (about 45 operations, each waiting on
// the last) filled the CPU's schedulers while its units idled, and GELU over
// 4 vectors at a time ran 0.155 -> 0.126 ms for 393K floats (AMD Zen 5),
// with the same bits.
template <class V, int N>
inline void normal_cdf_pdf(const V (&x)[N], NormalCdfPdf<V> (&out)[N]) {
  constexpr float kR[9] = {-0.05968604192742946f, 0.28741980792595445f, -0.492714029612569f,
                           0.283904979134906f,    -0.030294901963922732f, 0.204078746509533f,
                           0.24279513699933816f,  0.2824115446238489f,   0.2820847103280625f};
  const V t_min = broadcast<V>(1.0f / 5.5f);  // a = 9: beyond, erfc < 1e-36 and R is not fitted
  V a[N], t[N], tc[N], r[N];
#pragma GCC unroll 4
  for (int u = 0; u < N; ++u) {
    a[u] = (x[u] < 0.0f ? -x[u] : x[u]) * 0.70710678118654752f;
    t[u] = 1.0f / (1.0f + 0.5f * a[u]);
    tc[u] = t[u] < t_min ? t_min : t[u];
    r[u] = broadcast<V>(kR[0]);
  }
#pragma GCC unroll 8
  for (int k = 1; k < 9; ++k)
#pragma GCC unroll 4
    for (int u = 0; u < N; ++u) r[u] = r[u] * tc[u] + kR[k];
#pragma GCC unroll 4
  for (int u = 0; u < N; ++u) {
    const V e = exp_nonpositive(-(a[u] * a[u]));
    const V half_tail = 0.5f * t[u] * r[u] * e;  // Φ(−|x|)
    out[u] = {x[u] < 0.0f ? half_tail : 1.0f - half_tail, 0.39894228040143268f * e};
  }
}

template <class V>
inline NormalCdfPdf<V> normal_cdf_pdf(V x) {
  const V xs[1] = {x};
  NormalCdfPdf<V> out[1];
  normal_cdf_pdf(xs, out);
  return out[0];
}

}  // namespace artel::kernels
