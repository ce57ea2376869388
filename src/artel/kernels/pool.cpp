#include "artel/kernels/pool.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "artel/core/threads.h"

namespace artel::kernels {

namespace {

// One plane's windows. `K` > 0 fixes the kernel size at compile time (the
// common 2×2), so the window unrolls and best stays in registers; 0 reads d.kernel.
template <int K>
void max_pool_plane(const Pool2dDims& d, const float* in, float* y, int32_t* argmax) {
  const int64_t ho = d.out_height(), wo = d.out_width(), k = K > 0 ? K : d.kernel;
  for (int64_t oh = 0; oh < ho; ++oh)
    for (int64_t ow = 0; ow < wo; ++ow) {
      const int64_t corner = oh * d.stride * d.width + ow * d.stride;
      int32_t best_at = static_cast<int32_t>(corner);
      float best = in[corner];
      for (int64_t ki = 0; ki < k; ++ki)
        for (int64_t kj = 0; kj < k; ++kj) {
          const auto at = static_cast<int32_t>(corner + ki * d.width + kj);
          const float v = in[at];
          // v > best, or v the window's first NaN: NaN propagates, as in
          // PyTorch (!(v <= best) is either; best == best keeps the first
          // NaN). Selected without a branch: which element wins is data, and
          // a mispredicted branch an element cost more than the compares.
          const bool take = !(v <= best) && best == best;
          best = take ? v : best;
          best_at = take ? at : best_at;
        }
      y[oh * wo + ow] = best;
      argmax[oh * wo + ow] = best_at;
    }
}

#if defined(__AVX512F__)
// The common 2×2 window at stride 2, 16 outputs at a time: a row pair's 32
// inputs split into the windows' four corners (even and odd columns of each
// row), then max_pool_plane's choice, lane by lane, corner by corner in its
// order, so ties and NaNs go as there. The scalar windows took 11% of the
// CNN's step (1 thread, AVX-512 machine): a chain of compares and selects
// an output.
void max_pool_plane_2x2(const Pool2dDims& d, const float* in, float* y, int32_t* argmax) {
  const int64_t ho = d.out_height(), wo = d.out_width(), w = d.width;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  auto lanes = [](int64_t n) { return static_cast<__mmask16>((uint32_t{1} << std::clamp<int64_t>(n, 0, 16)) - 1); };
  for (int64_t oh = 0; oh < ho; ++oh) {
    const float* r0 = in + 2 * oh * w;
    for (int64_t ow = 0; ow < wo; ow += 16) {
      const int64_t n = std::min<int64_t>(16, wo - ow);
      const __mmask16 lo = lanes(2 * n), hi = lanes(2 * n - 16);  // the 2n inputs of a row
      auto corners = [&](const float* row, __m512& left, __m512& right) {
        const __m512 a = _mm512_maskz_loadu_ps(lo, row + 2 * ow), b = _mm512_maskz_loadu_ps(hi, row + 2 * ow + 16);
        left = _mm512_permutex2var_ps(a, even, b), right = _mm512_permutex2var_ps(a, odd, b);
      };
      __m512 v00, v01, v10, v11;
      corners(r0, v00, v01);
      corners(r0 + w, v10, v11);
      const __m512i at00 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(2 * oh * w + 2 * ow)), even);
      __m512 best = v00;
      __m512i best_at = at00;
      auto take = [&](__m512 v, int32_t offset) {  // v > best, or v the window's first NaN
        const __mmask16 t = _mm512_cmp_ps_mask(v, best, _CMP_NLE_UQ) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q);
        best = _mm512_mask_mov_ps(best, t, v);
        best_at = _mm512_mask_mov_epi32(best_at, t, _mm512_add_epi32(at00, _mm512_set1_epi32(offset)));
      };
      take(v01, 1);
      take(v10, static_cast<int32_t>(w));
      take(v11, static_cast<int32_t>(w + 1));
      _mm512_mask_storeu_ps(y + oh * wo + ow, lanes(n), best);
      _mm512_mask_storeu_epi32(argmax + oh * wo + ow, lanes(n), best_at);
    }
  }
}
#endif

}  // namespace

void max_pool2d_forward(const Pool2dDims& d, const float* x, float* y, int32_t* argmax) {
  const int64_t out_plane = d.out_height() * d.out_width(), plane = d.height * d.width;
  parallel_for(d.batch * d.channels, 4, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
#if defined(__AVX512F__)
      if (d.kernel == 2 && d.stride == 2) {
        max_pool_plane_2x2(d, x + p * plane, y + p * out_plane, argmax + p * out_plane);
        continue;
      }
#endif
      if (d.kernel == 2)
        max_pool_plane<2>(d, x + p * plane, y + p * out_plane, argmax + p * out_plane);
      else
        max_pool_plane<0>(d, x + p * plane, y + p * out_plane, argmax + p * out_plane);
    }
  });
}

void max_pool2d_backward(const Pool2dDims& d, const float* dy, const int32_t* argmax, float* dx) {
  const int64_t out_plane = d.out_height() * d.out_width(), plane = d.height * d.width;
  parallel_for(d.batch * d.channels, 4, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* g = dx + p * plane;
      std::fill(g, g + plane, 0.0f);
      for (int64_t o = p * out_plane; o < (p + 1) * out_plane; ++o) g[argmax[o]] += dy[o];  // windows may overlap
    }
  });
}

}  // namespace artel::kernels
