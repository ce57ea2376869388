// Pointwise activations, forward and backward, and dropout's mask.
//
// Each backward takes what its forward's caller kept: ReLU and tanh their
// output, GELU its input (exact GELU, x·Φ(x), as torch.nn.GELU()).
//
//   gelu_forward(n, x, y);
//   gelu_backward(n, x, dy, dx);   // dx = dy · (Φ(x) + x·φ(x))
//   gelu_forward_with_derivative(n, x, y, d);  multiply(n, dy, d, dx);   // the same, cheaper
#pragma once

#include <cstdint>

#include "artel/core/rng.h"

namespace artel::kernels {

void relu_forward(int64_t n, const float* x, float* y);
void relu_backward(int64_t n, const float* y, const float* dy, float* dx);

void gelu_forward(int64_t n, const float* x, float* y);
void gelu_backward(int64_t n, const float* x, const float* dy, float* dx);
// Forward for training: also writes the derivative dydx = Φ(x) + x·φ(x), so the
// backward is one multiply, dx = dy · dydx (multiply() below), instead of
// evaluating Φ and φ again. With dydx null, gelu_forward (gelu_tanh_forward's
// signature, so the two GELUs are interchangeable).
void gelu_forward_with_derivative(int64_t n, const float* x, float* y, float* dydx);
// The same on x plus a bias row, for a linear layer's (rows, cols) product:
// y = GELU(x + bias), dydx its derivative (when not null), bit for bit as
// adding the bias first; x + bias is never written (one pass over x fewer).
void bias_gelu_forward_with_derivative(int64_t rows, int64_t cols, const float* x, const float* bias, float* y,
                                       float* dydx);

// GELU's tanh approximation, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) —
// GPT-2's ("gelu_new"), PyTorch's GELU(approximate="tanh") — with its
// derivative when dydx is not null.
void gelu_tanh_forward(int64_t n, const float* x, float* y, float* dydx = nullptr);

void tanh_forward(int64_t n, const float* x, float* y);
void tanh_backward(int64_t n, const float* y, const float* dy, float* dx);

// mask[i] = 0 with probability p, else 1/(1-p); draws n uniforms from rng in order.
void dropout_mask(int64_t n, float p, Rng& rng, float* mask);

// out[i] = a[i] · b[i] (dropout forward and backward: x · mask, dy · mask); out may be a.
void multiply(int64_t n, const float* a, const float* b, float* out);

}  // namespace artel::kernels
