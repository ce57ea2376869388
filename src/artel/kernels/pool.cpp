#include "artel/kernels/pool.h"

#include <algorithm>
#include <cstdint>

#include "artel/core/threads.h"
#include "artel/kernels/masked_lanes.h"

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

#if defined(ARTEL_MASKED_LANES)
// The common 2×2 window at stride 2, a vector of outputs at a time (16 with
// AVX-512, 8 with AVX2): a row pair's inputs split into the windows' four
// corners (even and odd columns of each row), then max_pool_plane's choice,
// lane by lane, corner by corner in its order, so ties and NaNs go as there.
// The scalar windows took 11% of the CNN's step (1 thread, AVX-512 machine):
// a chain of compares and selects an output.
void max_pool_plane_2x2(const Pool2dDims& d, const float* in, float* y, int32_t* argmax) {
  using namespace masked;
  const int64_t ho = d.out_height(), wo = d.out_width(), w = d.width;
  for (int64_t oh = 0; oh < ho; ++oh) {
    const float* r0 = in + 2 * oh * w;
    for (int64_t ow = 0; ow < wo; ow += kLanes) {
      const int64_t n = std::min(kLanes, wo - ow);
      const Mask lo = first(2 * n), hi = first(2 * n - kLanes);  // the 2n inputs of a row
      auto corners = [&](const float* row, Vec& left, Vec& right) {
        split_even_odd(load(lo, row + 2 * ow), load(hi, row + 2 * ow + kLanes), left, right);
      };
      Vec v00, v01, v10, v11;
      corners(r0, v00, v01);
      corners(r0 + w, v10, v11);
      const Ints at00 = add(ints(static_cast<int32_t>(2 * oh * w + 2 * ow)), even_indices());
      Vec best = v00;
      Ints best_at = at00;
      auto take = [&](Vec v, int32_t offset) {
        const Mask t = beats(v, best);
        best = select(t, v, best);
        best_at = select(t, add(at00, ints(offset)), best_at);
      };
      take(v01, 1);
      take(v10, static_cast<int32_t>(w));
      take(v11, static_cast<int32_t>(w + 1));
      const bool spill = (oh * wo + ow) + kLanes <= ho * wo;  // into the plane's next outputs, stored after these
      store_run(y + oh * wo + ow, first(n), best, spill);
      store_run(argmax + oh * wo + ow, first(n), best_at, spill);
    }
  }
}
#endif

}  // namespace

void max_pool2d_forward(const Pool2dDims& d, const float* x, float* y, int32_t* argmax) {
  const int64_t out_plane = d.out_height() * d.out_width(), plane = d.height * d.width;
  parallel_for(d.batch * d.channels, 4, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
#if defined(ARTEL_MASKED_LANES)
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
