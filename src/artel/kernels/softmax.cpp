#include "artel/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "artel/core/threads.h"
#include "artel/kernels/fast_math.h"

namespace artel::kernels {
namespace {

constexpr int64_t kGrainElems = 1 << 13;

// Calls fn(block, scratch_a, scratch_b) for every outer block; scratch is
// `inner` floats each, only allocated when inner > 1.
template <class Fn>
void for_blocks(int64_t outer, int64_t n, int64_t inner, const Fn& fn) {
  int64_t grain = std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, n * inner));
  parallel_for(outer, grain, [&](int64_t o0, int64_t o1) {
    std::vector<float> scratch(inner > 1 ? static_cast<size_t>(2 * inner) : 0);
    for (int64_t o = o0; o < o1; ++o) fn(o * n * inner, scratch.data(), scratch.data() + inner);
  });
}

// Per column j of a (n, inner) block: m[j] = max_k x, s[j] = Σ_k exp(x − m), y = exp(x − m).
void exp_block(int64_t n, int64_t inner, const float* __restrict x, float* __restrict y, float* __restrict m,
               float* __restrict s) {
  std::fill(m, m + inner, -3.402823466e38f);
  std::fill(s, s + inner, 0.0f);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < inner; ++j) m[j] = std::max(m[j], x[k * inner + j]);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < inner; ++j) {
      y[k * inner + j] = exp_approx(x[k * inner + j] - m[j]);
      s[j] += y[k * inner + j];
    }
}

void softmax_one(int64_t n, int64_t inner, const float* __restrict x, float* __restrict y, float* m, float* s) {
  if (inner == 1) {
    float inv = 1.0f / row_exp(n, x, row_max(n, x), y);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
    return;
  }
  exp_block(n, inner, x, y, m, s);
  for (int64_t j = 0; j < inner; ++j) s[j] = 1.0f / s[j];
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < inner; ++j) y[k * inner + j] *= s[j];
}

void log_softmax_one(int64_t n, int64_t inner, const float* __restrict x, float* __restrict y, float* m,
                     float* s) {
  if (inner == 1) {
    float mx = row_max(n, x);
    float lse = mx + std::log(row_exp(n, x, mx, y));
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] - lse;
    return;
  }
  exp_block(n, inner, x, y, m, s);
  for (int64_t j = 0; j < inner; ++j) s[j] = m[j] + std::log(s[j]);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < inner; ++j) y[k * inner + j] = x[k * inner + j] - s[j];
}

}  // namespace

void softmax_forward(int64_t outer, int64_t n, int64_t inner, const float* x, float* y) {
  for_blocks(outer, n, inner, [&](int64_t off, float* m, float* s) { softmax_one(n, inner, x + off, y + off, m, s); });
}

void log_softmax_forward(int64_t outer, int64_t n, int64_t inner, const float* x, float* y) {
  for_blocks(outer, n, inner,
             [&](int64_t off, float* m, float* s) { log_softmax_one(n, inner, x + off, y + off, m, s); });
}

void softmax_backward(int64_t outer, int64_t n, int64_t inner, const float* y, const float* dy, float* dx) {
  for_blocks(outer, n, inner, [&](int64_t off, float* dot, float*) {
    const float* __restrict py = y + off;
    const float* __restrict g = dy + off;
    float* __restrict d = dx + off;
    if (inner == 1) {
      float s = row_dot(n, g, py);
      for (int64_t i = 0; i < n; ++i) d[i] = py[i] * (g[i] - s);
      return;
    }
    std::fill(dot, dot + inner, 0.0f);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < inner; ++j) dot[j] += g[k * inner + j] * py[k * inner + j];
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < inner; ++j) d[k * inner + j] = py[k * inner + j] * (g[k * inner + j] - dot[j]);
  });
}

void log_softmax_backward(int64_t outer, int64_t n, int64_t inner, const float* y, const float* dy, float* dx) {
  for_blocks(outer, n, inner, [&](int64_t off, float* sum, float*) {
    const float* __restrict py = y + off;
    const float* __restrict g = dy + off;
    float* __restrict d = dx + off;
    if (inner == 1) {
      float s = row_sum(n, g);
      for (int64_t i = 0; i < n; ++i) d[i] = g[i] - exp_approx(py[i]) * s;
      return;
    }
    std::fill(sum, sum + inner, 0.0f);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < inner; ++j) sum[j] += g[k * inner + j];
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < inner; ++j) d[k * inner + j] = g[k * inner + j] - exp_approx(py[k * inner + j]) * sum[j];
  });
}

}  // namespace artel::kernels
