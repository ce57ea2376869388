// Data movement for shape ops: swapping two dimensions, and copying runs of
// rows between tensors (slice, concat and their gradients).
//
//   // x (outer, a, mid, b, inner) -> y (outer, b, mid, a, inner)
//   transpose(outer, a, mid, b, inner, x, y);
//   // a slice [s, e) of dim 1 of x (outer, n, inner):
//   strided_copy(outer, (e - s) * inner, x + s * inner, n * inner, y, (e - s) * inner);
#pragma once

#include <cstdint>

namespace artel::kernels {

void transpose(int64_t outer, int64_t a, int64_t mid, int64_t b, int64_t inner, const float* x, float* y);

// For o in [0, outer): dst[o·dst_stride, +len) = src[o·src_stride, +len).
void strided_copy(int64_t outer, int64_t len, const float* src, int64_t src_stride, float* dst, int64_t dst_stride);

}  // namespace artel::kernels
