// 2-D max pooling (NCHW, no padding), forward and backward.
//
// The forward saves, for every output, the index (ih·W + iw) of the input it
// took, so backward routes each gradient to exactly that input. Ties go to the
// first maximum in row-major window order; a NaN in a window wins, as in PyTorch.
//
//   Pool2dDims d{N, C, H, W, /*kernel=*/2, /*stride=*/2};
//   max_pool2d_forward(d, x, y, argmax);        // y, argmax (N, C, Hout, Wout)
//   max_pool2d_backward(d, dy, argmax, dx);     // dx (N, C, H, W), overwritten
#pragma once

#include <cstdint>

namespace artel::kernels {

struct Pool2dDims {
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t kernel = 1, stride = 1;

  int64_t out_height() const { return (height - kernel) / stride + 1; }
  int64_t out_width() const { return (width - kernel) / stride + 1; }
};

void max_pool2d_forward(const Pool2dDims& d, const float* x, float* y, int32_t* argmax);
void max_pool2d_backward(const Pool2dDims& d, const float* dy, const int32_t* argmax, float* dx);

}  // namespace artel::kernels
