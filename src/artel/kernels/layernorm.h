// LayerNorm over the last dimension, forward and backward.
//
// x is (rows, C); y = (x − mean)·rstd·w + b with rstd = 1/√(var + eps), the
// biased variance as in torch.nn.LayerNorm. The forward stores mean and rstd
// per row so the backward needs no second pass over statistics.
//
//   layer_norm_forward(rows, C, x, w, b, 1e-5f, y, mean, rstd);
//   layer_norm_backward(rows, C, x, w, mean, rstd, dy, dx, dw, db);
#pragma once

#include <cstdint>

namespace artel::kernels {

// w and b may be null (scale 1, shift 0).
void layer_norm_forward(int64_t rows, int64_t C, const float* x, const float* w, const float* b, float eps, float* y,
                        float* mean, float* rstd);

// Any of dx, dw, db may be null when that gradient is not needed; dw and db
// are overwritten (not accumulated). w may be null.
void layer_norm_backward(int64_t rows, int64_t C, const float* x, const float* w, const float* mean,
                         const float* rstd, const float* dy, float* dx, float* dw, float* db);

}  // namespace artel::kernels
