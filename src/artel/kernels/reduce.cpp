#include "artel/kernels/reduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include "artel/core/dtype.h"
#include "artel/core/threads.h"
#include "artel/kernels/activation.h"
#include "artel/kernels/chunks.h"

namespace artel::kernels {
namespace {

// Enough elements per chunk that a thread's start-up cost is well hidden.
constexpr int64_t kGrainElems = 1 << 15;

void add_rows(int64_t r0, int64_t r1, int64_t cols, const float* __restrict x, float* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) acc[c] += row[c];
  }
}

// Rows [r0, r1) of a ∘ b (of a alone when b is null) rounded into x16, each
// value also added into acc (when not null) in add_rows's order. The product
// is rounded to fp32 before it is added (a separate multiply, as multiply()
// stores it): it feeds the rounding too, so GCC does not contract it into a
// fused multiply-add.
__attribute__((target("avx512f,avx512bf16"))) void round_product_rows(int64_t r0, int64_t r1, int64_t cols,
                                                                      const float* a, const float* b,
                                                                      uint16_t* x16, float* acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* ar = a + r * cols;
    const float* br = b ? b + r * cols : nullptr;
    uint16_t* out = x16 + r * cols;
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16) {
      const __m512 x = _mm512_loadu_ps(ar + c);
      const __m512 p = br ? _mm512_mul_ps(x, _mm512_loadu_ps(br + c)) : x;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c), (__m256i)_mm512_cvtneps_pbh(p));
      if (acc) _mm512_storeu_ps(acc + c, _mm512_add_ps(_mm512_loadu_ps(acc + c), p));
    }
    for (; c < cols; ++c) {
      const float p = br ? ar[c] * br[c] : ar[c];
      out[c] = bf16(p).bits;
      if (acc) acc[c] += p;
    }
  }
}

// Rows [r0, r1) of a ∘ b into x, each product also added into acc in
// add_rows's order: multiply's and column_sums's bits in one pass.
void product_rows(int64_t r0, int64_t r1, int64_t cols, const float* __restrict a, const float* __restrict b,
                  float* __restrict x, float* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* ar = a + r * cols;
    const float* br = b + r * cols;
    float* out = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float p = ar[c] * br[c];
      out[c] = p;
      acc[c] += p;
    }
  }
}

// Runs rows_fn(r0, r1, acc) over column_sums's chunks of rows, so the sums
// into out (when not null) are column_sums's sums.
template <class RowsFn>
void with_column_sums(int64_t rows, int64_t cols, float* out, const RowsFn& rows_fn) {
  if (out) std::memset(out, 0, static_cast<size_t>(cols) * sizeof(float));
  if (cols == 0) return;
  int64_t chunks = num_chunks(rows, std::max<int64_t>(1, kGrainElems / cols));
  std::vector<float> part(out ? static_cast<size_t>((chunks - 1) * cols) : 0, 0.0f);
  for_chunks(rows, chunks, [&](int64_t c, int64_t r0, int64_t r1) {
    rows_fn(r0, r1, !out ? nullptr : c == 0 ? out : part.data() + (c - 1) * cols);
  });
  if (out)
    for (int64_t c = 1; c < chunks; ++c) add_rows(0, 1, cols, part.data() + (c - 1) * cols, out);
}

}  // namespace

// 16 independent double lanes: vectorises without reassociating a single sum.
double sum_span(int64_t n, const float* __restrict x) {
  double lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += x[i + j];
  double s = 0;
  for (; i < n; ++i) s += x[i];
  for (double l : lanes) s += l;
  return s;
}

double sum_all(int64_t n, const float* x) {
  int64_t chunks = num_chunks(n, kGrainElems);
  std::vector<double> part(static_cast<size_t>(chunks));
  for_chunks(n, chunks, [&](int64_t c, int64_t b, int64_t e) { part[static_cast<size_t>(c)] = sum_span(e - b, x + b); });
  double s = 0;
  for (double p : part) s += p;
  return s;
}

void column_sums(int64_t rows, int64_t cols, const float* x, float* out) {
  std::memset(out, 0, static_cast<size_t>(cols) * sizeof(float));
  if (cols == 0) return;
  int64_t chunks = num_chunks(rows, std::max<int64_t>(1, kGrainElems / cols));
  if (chunks == 1) return add_rows(0, rows, cols, x, out);
  // Chunk 0 sums into out; the others into partials added at the end.
  std::vector<float> part(static_cast<size_t>((chunks - 1) * cols), 0.0f);
  for_chunks(rows, chunks, [&](int64_t c, int64_t r0, int64_t r1) {
    add_rows(r0, r1, cols, x, c == 0 ? out : part.data() + (c - 1) * cols);
  });
  for (int64_t c = 1; c < chunks; ++c) add_rows(0, 1, cols, part.data() + (c - 1) * cols, out);
}

void product_rounded_with_column_sums(int64_t rows, int64_t cols, const float* a, const float* b, uint16_t* x16,
                                      float* out) {
  with_column_sums(rows, cols, out, [&](int64_t r0, int64_t r1, float* acc) {
    round_product_rows(r0, r1, cols, a, b, x16, acc);
  });
}

void rounded_with_column_sums(int64_t rows, int64_t cols, const float* x, uint16_t* x16, float* out) {
  with_column_sums(rows, cols, out, [&](int64_t r0, int64_t r1, float* acc) {
    round_product_rows(r0, r1, cols, x, nullptr, x16, acc);
  });
}

void product_with_column_sums(int64_t rows, int64_t cols, const float* a, const float* b, float* x, float* out) {
  if (!out) return multiply(rows * cols, a, b, x);
  with_column_sums(rows, cols, out, [&](int64_t r0, int64_t r1, float* acc) { product_rows(r0, r1, cols, a, b, x, acc); });
}

void row_sums(int64_t rows, int64_t cols, const float* x, float* out, float scale) {
  parallel_for(rows, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, cols)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) out[r] = static_cast<float>(scale * sum_span(cols, x + r * cols));
  });
}

void sum_dim(int64_t outer, int64_t n, int64_t inner, const float* x, float* out, float scale) {
  if (inner == 1) return row_sums(outer, n, x, out, scale);
  if (outer == 1) {
    column_sums(n, inner, x, out);
    if (scale != 1.0f)
      for (int64_t j = 0; j < inner; ++j) out[j] *= scale;
    return;
  }
  parallel_for(outer, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, n * inner)), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      float* __restrict y = out + o * inner;
      std::memset(y, 0, static_cast<size_t>(inner) * sizeof(float));
      add_rows(0, n, inner, x + o * n * inner, y);
      for (int64_t j = 0; j < inner; ++j) y[j] *= scale;
    }
  });
}

void expand_dim(int64_t outer, int64_t n, int64_t inner, const float* g, float* out, float scale) {
  int64_t rows = outer * n;
  parallel_for(rows, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, inner)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* __restrict src = g + (r / n) * inner;
      float* __restrict dst = out + r * inner;
      for (int64_t j = 0; j < inner; ++j) dst[j] = scale * src[j];
    }
  });
}

}  // namespace artel::kernels
