// Sums: of everything, of rows, of columns, along one dimension — and the
// broadcast back that is their gradient. A tensor reduced along dimension d is
// viewed as (outer, n, inner) with n = size(d).
//
//   column_sums(rows, cols, dy, db);          // a bias gradient: Σ over rows
//   sum_dim(outer, n, inner, x, y, 1.0f / n); // mean along a dimension
#pragma once

#include <cstdint>

namespace artel::kernels {

// Σ x[i] accumulated in double.
double sum_all(int64_t n, const float* x);
// The same on the calling thread alone, for a caller already split over
// threads: 16 independent lanes, so it vectorises.
double sum_span(int64_t n, const float* x);

// out[c] = Σ_r x[r, c] for an (rows, cols) matrix; overwrites out.
void column_sums(int64_t rows, int64_t cols, const float* x, float* out);

// The gradient a ∘ b of a layer's output, for its bf16 products, in one pass:
// rounded to bf16 into x16 (tight), and its column sums (the bias gradient)
// into out when out is not null. Bit for bit what multiply, round_operand and
// column_sums give in three. Needs AVX512_BF16 (the caller checks).
void product_rounded_with_column_sums(int64_t rows, int64_t cols, const float* a, const float* b, uint16_t* x16,
                                      float* out);

// A layer's output gradient x rounded to bf16 into x16 (tight), and its
// column sums (the bias gradient) into out when out is not null, in one pass:
// bit for bit what round_operand and column_sums give in two. Needs
// AVX512_BF16 (the caller checks).
void rounded_with_column_sums(int64_t rows, int64_t cols, const float* x, uint16_t* x16, float* out);

// The same in fp32: a ∘ b into x, and its column sums into out when not
// null. Bit for bit what multiply and column_sums give in two passes.
void product_with_column_sums(int64_t rows, int64_t cols, const float* a, const float* b, float* x, float* out);

// out[r] = scale · Σ_c x[r, c]; overwrites out.
void row_sums(int64_t rows, int64_t cols, const float* x, float* out, float scale = 1.0f);

// out (outer, inner) = scale · Σ_k x (outer, n, inner)[:, k, :].
void sum_dim(int64_t outer, int64_t n, int64_t inner, const float* x, float* out, float scale);

// out (outer, n, inner)[:, k, :] = scale · g (outer, inner) for every k.
void expand_dim(int64_t outer, int64_t n, int64_t inner, const float* g, float* out, float scale);

}  // namespace artel::kernels
