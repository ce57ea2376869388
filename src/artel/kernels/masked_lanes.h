// A vector of floats loaded and stored under a mask of its lanes, one
// interface over AVX-512 (16 lanes, a mask register) and AVX2 (8 lanes, a
// mask vector), for the kernels whose rows end inside a vector: the
// unit-stride im2col and col2im (LeNet's rows are 10 to 28 floats) and the
// 2×2 max-pool. Masked-off lanes are neither read nor written, so a load may
// start before its array where its first lanes are off.
//
//   const Mask m = and_not(first(hi - at), first(lo - at));  // lanes in [lo, hi)
//   store(out, first(n), load(m, in));                       // zeros outside
//
// Defined where the CPU has one of the two (ARTEL_MASKED_LANES); callers
// keep their scalar loops for the rest.
//
// Note [Masked stores on AVX2]
// AVX2's masked store (vmaskmovps) is slow on AMD: on Zen 3 a masked load and
// store of 8 floats took 5.8-6.2 ns, a masked load and a plain store 1.5 ns.
// So a run whose lanes past its end will be written again later (the next
// output row, stored right after) ends in a plain store of the whole vector,
// and only a run's last vector pays for the mask (`store_run`); a masked
// read-modify-write (col2im's) is used only where masked stores are cheap.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#if defined(__AVX512F__) || defined(__AVX2__)
#define ARTEL_MASKED_LANES 1

namespace artel::kernels::masked {

#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
using Vec = __m512;
using Ints = __m512i;
using Mask = __mmask16;

inline Mask first(int64_t n) { return static_cast<Mask>((uint32_t{1} << std::clamp<int64_t>(n, 0, kLanes)) - 1); }
inline Mask and_not(Mask a, Mask b) { return static_cast<Mask>(a & ~b); }
inline Vec load(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline void store(float* p, Mask m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
inline void store(int32_t* p, Mask m, Ints v) { _mm512_mask_storeu_epi32(p, m, v); }
inline void store_all(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline void store_all(int32_t* p, Ints v) { _mm512_storeu_si512(p, v); }
constexpr bool kMaskedStoresAreCheap = true;
inline Vec zero() { return _mm512_setzero_ps(); }
inline Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Ints ints(int32_t x) { return _mm512_set1_epi32(x); }
inline Ints add(Ints a, Ints b) { return _mm512_add_epi32(a, b); }
inline Ints even_indices() { return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30); }
// The even and the odd lanes of the 2·kLanes floats a then b.
inline void split_even_odd(Vec a, Vec b, Vec& even, Vec& odd) {
  const Ints e = even_indices();
  even = _mm512_permutex2var_ps(a, e, b);
  odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(e, _mm512_set1_epi32(1)), b);
}
// The lanes where v > best, or v is NaN and best is not: a max-pool's choice.
inline Mask beats(Vec v, Vec best) {
  return static_cast<Mask>(_mm512_cmp_ps_mask(v, best, _CMP_NLE_UQ) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
}
inline Vec select(Mask m, Vec a, Vec b) { return _mm512_mask_mov_ps(b, m, a); }
inline Ints select(Mask m, Ints a, Ints b) { return _mm512_mask_mov_epi32(b, m, a); }

#else  // AVX2 (AMD Zen 3): masks are vectors of all-ones or zero lanes
constexpr int64_t kLanes = 8;
using Vec = __m256;
using Ints = __m256i;
using Mask = __m256i;

inline Mask first(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(std::clamp<int64_t>(n, 0, kLanes))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline Mask and_not(Mask a, Mask b) { return _mm256_andnot_si256(b, a); }
inline Vec load(Mask m, const float* p) { return _mm256_maskload_ps(p, m); }
inline void store(float* p, Mask m, Vec v) { _mm256_maskstore_ps(p, m, v); }
inline void store(int32_t* p, Mask m, Ints v) { _mm256_maskstore_epi32(reinterpret_cast<int*>(p), m, v); }
inline void store_all(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline void store_all(int32_t* p, Ints v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
constexpr bool kMaskedStoresAreCheap = false;  // the note
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Ints ints(int32_t x) { return _mm256_set1_epi32(x); }
inline Ints add(Ints a, Ints b) { return _mm256_add_epi32(a, b); }
inline Ints even_indices() { return _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14); }
inline void split_even_odd(Vec a, Vec b, Vec& even, Vec& odd) {
  // Within each 128-bit half: a0 a2 b0 b2 | a4 a6 b4 b6; then the 64-bit
  // pairs reordered to a0 a2 a4 a6 b0 b2 b4 b6 (odd lanes alike).
  auto pairs_in_order = [](__m256 v) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), _MM_SHUFFLE(3, 1, 2, 0)));
  };
  even = pairs_in_order(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
  odd = pairs_in_order(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}
inline Mask beats(Vec v, Vec best) {
  return _mm256_castps_si256(_mm256_and_ps(_mm256_cmp_ps(v, best, _CMP_NLE_UQ), _mm256_cmp_ps(best, best, _CMP_ORD_Q)));
}
inline Vec select(Mask m, Vec a, Vec b) { return _mm256_blendv_ps(b, a, _mm256_castsi256_ps(m)); }
inline Ints select(Mask m, Ints a, Ints b) {
  return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(b), _mm256_castsi256_ps(a), _mm256_castsi256_ps(m)));
}
#endif

// Stores the lanes of v that `m` keeps; all of v where `spill` allows writing
// past them (lanes that a later store overwrites): Note [Masked stores on AVX2].
template <class T, class V>
inline void store_run(T* p, Mask m, V v, bool spill) {
  if (spill) store_all(p, v);
  else store(p, m, v);
}

}  // namespace artel::kernels::masked

#endif
