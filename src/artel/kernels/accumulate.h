// Gradient accumulation, the autograd engine's kernels.
//
//   add_into(dst, src, n);      // dst[i] += src[i]
//   add_to(out, a, b, n);       // out[i] = a[i] + b[i]: the first sum of two
//                               // borrowed gradients, one pass instead of a copy and an add
#pragma once

#include <cstdint>

namespace artel::kernels {

void add_into(float* dst, const float* src, int64_t n);
void add_to(float* out, const float* a, const float* b, int64_t n);

}  // namespace artel::kernels
