// 2-D convolution (NCHW, zero padding) as im2col + GEMM, forward and backward.
//
// One sample's input patches are unrolled into col (Cin·KH·KW, Hout·Wout), so
// the convolution is weight (Cout, Cin·KH·KW) · col; backward is two more GEMMs
// and col2im, the adjoint of im2col. Samples are split over artel's threads.
//
//   Conv2dDims d{N, Cin, H, W, Cout, KH, KW, /*stride=*/1, /*padding=*/2};
//   conv2d_forward(d, x, weight, bias, y);                 // y (N, Cout, Hout, Wout)
//   conv2d_backward(d, x, weight, dy, dx, dweight, dbias); // any output may be null
#pragma once

#include <cstdint>

namespace artel::kernels {

struct Conv2dDims {
  int64_t batch = 0, c_in = 0, height = 0, width = 0;
  int64_t c_out = 0, kernel_h = 0, kernel_w = 0;
  int64_t stride = 1, padding = 0;

  int64_t out_height() const { return (height + 2 * padding - kernel_h) / stride + 1; }
  int64_t out_width() const { return (width + 2 * padding - kernel_w) / stride + 1; }
  int64_t patch_size() const { return c_in * kernel_h * kernel_w; }  // rows of col
};

// One sample x (Cin, H, W) -> col (Cin·KH·KW, Hout·Wout); padding reads as 0.
void im2col(const Conv2dDims& d, const float* x, float* col);
// The adjoint: dx (Cin, H, W) += col scattered back to the positions it came from.
void col2im_add(const Conv2dDims& d, const float* col, float* dx);

// x (N, Cin, H, W), weight (Cout, Cin, KH, KW), bias (Cout) or null -> y (N, Cout, Hout, Wout).
void conv2d_forward(const Conv2dDims& d, const float* x, const float* weight, const float* bias, float* y);

// Gradients from dy (N, Cout, Hout, Wout); each of dx, dweight, dbias may be
// null (not wanted) and is overwritten, not accumulated into.
void conv2d_backward(const Conv2dDims& d, const float* x, const float* weight, const float* dy, float* dx,
                     float* dweight, float* dbias);

}  // namespace artel::kernels
