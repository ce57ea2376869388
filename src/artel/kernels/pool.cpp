#include "artel/kernels/pool.h"

#include <algorithm>
#include <cmath>

#include "artel/core/threads.h"

namespace artel::kernels {

void max_pool2d_forward(const Pool2dDims& d, const float* x, float* y, int32_t* argmax) {
  const int64_t ho = d.out_height(), wo = d.out_width(), plane = d.height * d.width;
  parallel_for(d.batch * d.channels, 4, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* in = x + p * plane;
      for (int64_t oh = 0; oh < ho; ++oh)
        for (int64_t ow = 0; ow < wo; ++ow) {
          int64_t best_at = oh * d.stride * d.width + ow * d.stride;
          float best = in[best_at];
          for (int64_t ki = 0; ki < d.kernel; ++ki)
            for (int64_t kj = 0; kj < d.kernel; ++kj) {
              int64_t at = (oh * d.stride + ki) * d.width + ow * d.stride + kj;
              float v = in[at];
              if (v > best || (std::isnan(v) && !std::isnan(best))) best = v, best_at = at;
            }
          int64_t o = p * ho * wo + oh * wo + ow;
          y[o] = best;
          argmax[o] = static_cast<int32_t>(best_at);
        }
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
