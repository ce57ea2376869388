#include "artel/kernels/pool.h"

#include <algorithm>

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

}  // namespace

void max_pool2d_forward(const Pool2dDims& d, const float* x, float* y, int32_t* argmax) {
  const int64_t out_plane = d.out_height() * d.out_width(), plane = d.height * d.width;
  parallel_for(d.batch * d.channels, 4, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
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
