#include "artel/kernels/activation.h"

#include <cmath>

#include "artel/core/threads.h"
#include "artel/kernels/fast_math.h"

namespace artel::kernels {
namespace {

// Cheap ops are memory-bound: split only large tensors. GELU costs ~20 flops
// per element, so it pays to split sooner.
constexpr int64_t kGrainCheap = 1 << 15;
constexpr int64_t kGrainGelu = 1 << 13;
constexpr int64_t kGrainTanh = 1 << 12;

}  // namespace

void relu_forward(int64_t n, const float* x, float* y) {
  parallel_for(n, kGrainCheap, [&](int64_t b, int64_t e) {
    const float* __restrict in = x;
    float* __restrict out = y;
    for (int64_t i = b; i < e; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
  });
}

void relu_backward(int64_t n, const float* y, const float* dy, float* dx) {
  parallel_for(n, kGrainCheap, [&](int64_t b, int64_t e) {
    const float* __restrict out = y;
    const float* __restrict g = dy;
    float* __restrict d = dx;
    for (int64_t i = b; i < e; ++i) d[i] = out[i] > 0.0f ? g[i] : 0.0f;
  });
}

void gelu_forward(int64_t n, const float* x, float* y) {
  parallel_for(n, kGrainGelu, [&](int64_t b, int64_t e) {
    const float* __restrict in = x;
    float* __restrict out = y;
    for (int64_t i = b; i < e; ++i) out[i] = in[i] * normal_cdf(in[i]);
  });
}

void gelu_backward(int64_t n, const float* x, const float* dy, float* dx) {
  parallel_for(n, kGrainGelu, [&](int64_t b, int64_t e) {
    const float* __restrict in = x;
    const float* __restrict g = dy;
    float* __restrict d = dx;
    for (int64_t i = b; i < e; ++i) d[i] = g[i] * (normal_cdf(in[i]) + in[i] * normal_pdf(in[i]));
  });
}

void tanh_forward(int64_t n, const float* x, float* y) {
  parallel_for(n, kGrainTanh, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = std::tanh(x[i]);
  });
}

void tanh_backward(int64_t n, const float* y, const float* dy, float* dx) {
  parallel_for(n, kGrainCheap, [&](int64_t b, int64_t e) {
    const float* __restrict out = y;
    const float* __restrict g = dy;
    float* __restrict d = dx;
    for (int64_t i = b; i < e; ++i) d[i] = g[i] * (1.0f - out[i] * out[i]);
  });
}

void dropout_mask(int64_t n, float p, Rng& rng, float* mask) {
  float keep = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) mask[i] = rng.uniform() < p ? 0.0f : keep;
}

void multiply(int64_t n, const float* a, const float* b, float* out) {
  parallel_for(n, kGrainCheap, [&](int64_t s, int64_t e) {
    const float* __restrict x = a;
    const float* __restrict y = b;
    float* __restrict o = out;
    for (int64_t i = s; i < e; ++i) o[i] = x[i] * y[i];
  });
}

}  // namespace artel::kernels
