#include "artel/kernels/activation.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "artel/core/threads.h"
#include "artel/kernels/simd.h"

namespace artel::kernels {
namespace {

// Cheap ops are memory-bound: split only large tensors. GELU costs ~30 flops
// per element, so it pays to split sooner.
constexpr int64_t kGrainCheap = 1 << 15;
constexpr int64_t kGrainGelu = 1 << 13;
constexpr int64_t kGrainTanh = 1 << 12;

// GELU works on whole native vectors, four at a time where it can
// (normal_cdf_pdf's interleaved form; the same bits); a tail shorter than a
// vector goes through a padded copy, so every element gets the same
// instructions. fn.template operator()<N>(i, load, store) does N vectors at i.
constexpr int kBlock = 4;

template <class Fn>
void for_vectors(int64_t b, int64_t e, const Fn& fn) {
  auto full_load = [](const float* p) { return load<vnat>(p); };
  auto full_store = [](float* p, vnat v) { store(p, v); };
  int64_t i = b;
  for (; i + kBlock * kNat <= e; i += kBlock * kNat) fn.template operator()<kBlock>(i, full_load, full_store);
  for (; i + kNat <= e; i += kNat) fn.template operator()<1>(i, full_load, full_store);
  if (i == e) return;
  const int64_t rest = e - i;
  auto load_tail = [&](const float* p) {
    float buf[kNat] = {};
    std::memcpy(buf, p, static_cast<size_t>(rest) * sizeof(float));
    return load<vnat>(buf);
  };
  auto store_tail = [&](float* p, vnat v) {
    float buf[kNat];
    store(buf, v);
    std::memcpy(p, buf, static_cast<size_t>(rest) * sizeof(float));
  };
  fn.template operator()<1>(i, load_tail, store_tail);
}

}  // namespace

void relu_forward(int64_t n, const float* x, float* y) {
  parallel_for(n, kGrainCheap, [&](int64_t b, int64_t e) {
    const float* __restrict in = x;
    float* __restrict out = y;
    // NaN stays NaN, as in PyTorch: `x > 0 ? x : 0` made it 0, so a NaN
    // input trained on with a finite loss and the NaN-loss stop never came.
    for (int64_t i = b; i < e; ++i) out[i] = in[i] <= 0.0f ? 0.0f : in[i];
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

// N vectors of x at i and their normal_cdf_pdf.
template <int N, class Load>
void load_with_cdf_pdf(const float* x, int64_t i, const Load& load, vnat (&xv)[N], NormalCdfPdf<vnat> (&np)[N]) {
#pragma GCC unroll 4
  for (int u = 0; u < N; ++u) xv[u] = load(x + i + u * kNat);
  normal_cdf_pdf(xv, np);
}

void gelu_forward(int64_t n, const float* x, float* y) {
  parallel_for(n, kGrainGelu, [&](int64_t b, int64_t e) {
    for_vectors(b, e, [&]<int N>(int64_t i, auto load, auto store) {
      vnat xv[N];
      NormalCdfPdf<vnat> np[N];
      load_with_cdf_pdf(x, i, load, xv, np);
#pragma GCC unroll 4
      for (int u = 0; u < N; ++u) store(y + i + u * kNat, xv[u] * np[u].cdf);
    });
  });
}

void gelu_backward(int64_t n, const float* x, const float* dy, float* dx) {
  parallel_for(n, kGrainGelu, [&](int64_t b, int64_t e) {
    for_vectors(b, e, [&]<int N>(int64_t i, auto load, auto store) {
      vnat xv[N];
      NormalCdfPdf<vnat> np[N];
      load_with_cdf_pdf(x, i, load, xv, np);
#pragma GCC unroll 4
      for (int u = 0; u < N; ++u)
        store(dx + i + u * kNat, load(dy + i + u * kNat) * (np[u].cdf + xv[u] * np[u].pdf));
    });
  });
}

// GELU and its derivative (when dydx is not null) of N vectors at i, each
// input loaded by load.
template <int N, class Load, class Store>
void gelu_with_derivative(const float* x, int64_t i, const Load& load, const Store& store, float* y, float* dydx) {
  vnat xv[N];
  NormalCdfPdf<vnat> np[N];
  load_with_cdf_pdf(x, i, load, xv, np);
#pragma GCC unroll 4
  for (int u = 0; u < N; ++u) {
    store(y + i + u * kNat, xv[u] * np[u].cdf);
    if (dydx) store(dydx + i + u * kNat, np[u].cdf + xv[u] * np[u].pdf);
  }
}

void gelu_forward_with_derivative(int64_t n, const float* x, float* y, float* dydx) {
  if (!dydx) return gelu_forward(n, x, y);
  parallel_for(n, kGrainGelu, [&](int64_t b, int64_t e) {
    for_vectors(b, e, [&]<int N>(int64_t i, auto load, auto store) {
      gelu_with_derivative<N>(x, i, load, store, y, dydx);
    });
  });
}

void bias_gelu_forward_with_derivative(int64_t rows, int64_t cols, const float* x, const float* bias, float* y,
                                       float* dydx) {
  parallel_for(rows, std::max<int64_t>(1, kGrainGelu / std::max<int64_t>(1, cols)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t row = r * cols;
      // Row r's elements as columns [0, cols): the bias loads at the same
      // offsets as x, through the same (whole or tail) load.
      for_vectors(0, cols, [&]<int N>(int64_t i, auto load, auto store) {
        auto biased = [&](const float* p) { return load(p) + load(bias + (p - x - row)); };
        gelu_with_derivative<N>(x + row, i, biased, store, y + row, dydx ? dydx + row : nullptr);
      });
    }
  });
}

void gelu_tanh_forward(int64_t n, const float* x, float* y, float* dydx) {
  constexpr float k = 0.7978845608028654f, c = 0.044715f;  // √(2/π)
  parallel_for(n, kGrainTanh, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = x[i], t = std::tanh(k * (v + c * v * v * v));
      y[i] = 0.5f * v * (1.0f + t);
      if (dydx) dydx[i] = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k * (1.0f + 3.0f * c * v * v);
    }
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

// Explicit native vectors rather than __restrict: out may be a (in place).
void multiply(int64_t n, const float* a, const float* b, float* out) {
  parallel_for(n, kGrainCheap, [&](int64_t s, int64_t e) {
    int64_t i = s;
    for (; i + kNat <= e; i += kNat) store(out + i, load<vnat>(a + i) * load<vnat>(b + i));
    for (; i < e; ++i) out[i] = a[i] * b[i];
  });
}

}  // namespace artel::kernels
