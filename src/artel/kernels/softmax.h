// Softmax and log-softmax along one dimension, forward and backward.
//
// The tensor is viewed as (outer, n, inner) with n the size of the softmax
// dimension; inner == 1 (the last dimension) is the fast, contiguous case.
//
//   softmax_forward(rows, V, 1, logits, probs);
//   softmax_backward(rows, V, 1, probs, dprobs, dlogits);   // dx = y·(dy − Σ dy·y)
#pragma once

#include <cstdint>

namespace artel::kernels {

void softmax_forward(int64_t outer, int64_t n, int64_t inner, const float* x, float* y);
void softmax_backward(int64_t outer, int64_t n, int64_t inner, const float* y, const float* dy, float* dx);

// y = x − max − log Σ exp(x − max); backward: dx = dy − exp(y)·Σ dy.
void log_softmax_forward(int64_t outer, int64_t n, int64_t inner, const float* x, float* y);
void log_softmax_backward(int64_t outer, int64_t n, int64_t inner, const float* y, const float* dy, float* dx);

}  // namespace artel::kernels
