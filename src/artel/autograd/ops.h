// Differentiable ops on Variables. Each op's forward calls a kernel (kernels/)
// and records its backward next to it (derivatives in one place, as in
// tinygrad's gradient table);
// every backward is checked against finite differences in tests/autograd.
//
// Shapes use fixed letters: B batch, T time, C channels, V vocabulary.
//
//   Variable h = gelu(linear(x, w, b));          // (B, T, 4C)
//   Variable loss = cross_entropy(logits, targets);
#pragma once

#include <vector>

#include "artel/autograd/variable.h"
#include "artel/core/rng.h"

namespace artel::autograd {

// ---- linear algebra (GEMM through kernels::gemm)
// (..., K) x (K, N) -> (..., N); leading dims of `a` are flattened.
Variable matmul(const Variable& a, const Variable& b);
// x (..., in), weight (out, in), bias (out) or undefined -> (..., out).
Variable linear(const Variable& x, const Variable& weight, const Variable& bias);
// residual + linear(x, weight, bias) as one op (a transformer block's residual
// connection): the residual is laid into the GEMM's output with the bias, so
// the sum costs no pass of its own. residual has the output's shape.
Variable linear_add(const Variable& x, const Variable& weight, const Variable& bias, const Variable& residual);
// gelu(linear(x, weight, bias)) (gelu_tanh's with tanh_approximation) as one
// op, values and gradients equal to the two ops' bit for bit (Megatron's
// bias-GELU fusion). Under bf16 products its backward writes the gradient of
// the product's output rounded, with the bias gradient, in one pass, where
// the two ops write it in fp32 and read it twice more (to round it, to sum it).
Variable linear_gelu(const Variable& x, const Variable& weight, const Variable& bias, bool tanh_approximation = false);

// ---- elementwise, numpy broadcasting (trailing dimensions aligned)
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable add(const Variable& a, float s);
Variable mul(const Variable& a, float s);
inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }

// ---- reductions
Variable sum(const Variable& x);                              // all elements -> scalar (shape {})
Variable sum(const Variable& x, int64_t dim, bool keepdim = false);
Variable mean(const Variable& x);
Variable mean(const Variable& x, int64_t dim, bool keepdim = false);

// ---- shape (results are new contiguous tensors unless stated)
Variable reshape(const Variable& x, const Shape& shape);      // a view; one -1 allowed
Variable flatten(const Variable& x, int64_t start_dim = 1);   // (N, ...) -> (N, prod)
Variable transpose(const Variable& x, int64_t dim0, int64_t dim1);
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end);
Variable concat(const std::vector<Variable>& xs, int64_t dim);

// ---- activations
Variable relu(const Variable& x);
Variable gelu(const Variable& x);  // exact: x·Φ(x), as torch.nn.GELU()
Variable gelu_tanh(const Variable& x);  // the tanh approximation, as GELU(approximate="tanh") and GPT-2
Variable tanh(const Variable& x);
Variable softmax(const Variable& x, int64_t dim = -1);
Variable log_softmax(const Variable& x, int64_t dim = -1);

// ---- losses and normalisation
// logits (N, V) (or (..., V), flattened), targets int64 or int32 (N) -> mean over
// targets != ignore_index. All targets ignored -> 0 with zero gradient.
Variable cross_entropy(const Variable& logits, const Tensor& targets, int64_t ignore_index = -100);
// Normalises over the last dimension; weight and bias (C).
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, float eps = 1e-5f);

// ---- embedding and regularisation
// Which rows of a table `weight` holds: [first_row, first_row + rows) of a
// table of `vocab` rows (-1: the rows it has). Ids of the table outside that
// range look up zeros (vocabulary-parallel: another rank holds them).
struct EmbeddingRows {
  int64_t first_row = 0;
  int64_t vocab = -1;
};
// weight (rows, C), ids int64 or int32 of any shape (...) -> (..., C). Ids
// outside [0, vocab) are an Error.
Variable embedding(const Variable& weight, const Tensor& ids, EmbeddingRows rows = {});
// Inverted dropout: zeroes with probability p, scales the rest by 1/(1-p). Identity when !training or p == 0.
Variable dropout(const Variable& x, float p, bool training, Rng& rng);
// x ∘ mask for a mask already drawn (each element 0 or 1/(1−p)); backward
// keeps only the mask. For masks drawn otherwise (a slice of a larger one).
Variable dropout_with_mask(const Variable& x, const Tensor& mask);

// ---- attention: fused multi-head causal self-attention
// qkv (B, T, 3C) = [q | k | v] along the last dim (nanoGPT's c_attn output),
// n_head divides C -> (B, T, C): softmax(q·kᵀ/√(C/n_head) + causal mask)·v per head.
Variable causal_self_attention(const Variable& qkv, int64_t n_head);

// ---- convolution and pooling (NCHW)
// x (N, Cin, H, W), weight (Cout, Cin, KH, KW), bias (Cout) or undefined.
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, int64_t stride = 1,
                int64_t padding = 0);
Variable max_pool2d(const Variable& x, int64_t kernel, int64_t stride);

}  // namespace artel::autograd
