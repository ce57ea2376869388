#include "artel/kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "artel/core/threads.h"
#include "artel/kernels/chunks.h"
#include "artel/kernels/fast_math.h"
#include "artel/kernels/simd.h"

namespace artel::kernels {
namespace {

constexpr int64_t kGrainElems = 1 << 13;

int64_t grain_rows(int64_t C) { return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, C)); }

// Σ (x − mu)² over 16 lanes.
float sq_dev(int64_t n, const float* __restrict x, float mu) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += (x[i + j] - mu) * (x[i + j] - mu);
  float s = 0;
  for (; i < n; ++i) s += (x[i] - mu) * (x[i] - mu);
  for (float l : lanes) s += l;
  return s;
}

// One row's dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)) with ĝ = dy·w, x̂ = (x − mu)·rstd.
void row_dx(int64_t C, const float* __restrict x, const float* __restrict w, float mu, float rs,
            const float* __restrict dy, float* __restrict dx) {
  float lanes_g[16] = {}, lanes_gx[16] = {};
  int64_t i = 0;
  for (; i + 16 <= C; i += 16)
    for (int j = 0; j < 16; ++j) {
      float g = dy[i + j] * (w ? w[i + j] : 1.0f);
      lanes_g[j] += g;
      lanes_gx[j] += g * (x[i + j] - mu);
    }
  float sg = 0, sgx = 0;
  for (; i < C; ++i) {
    float g = dy[i] * (w ? w[i] : 1.0f);
    sg += g;
    sgx += g * (x[i] - mu);
  }
  for (int j = 0; j < 16; ++j) sg += lanes_g[j], sgx += lanes_gx[j];
  float a = sg / static_cast<float>(C), b = sgx * rs / static_cast<float>(C);
  for (i = 0; i < C; ++i) {
    float g = dy[i] * (w ? w[i] : 1.0f);
    dx[i] = rs * (g - a - (x[i] - mu) * rs * b);
  }
}

// dw += dy·x̂ and db += dy over rows [r0, r1).
void add_param_grads(int64_t r0, int64_t r1, int64_t C, const float* x, const float* mean, const float* rstd,
                     const float* dy, float* __restrict dw, float* __restrict db) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* __restrict xr = x + r * C;
    const float* __restrict g = dy + r * C;
    float mu = mean[r], rs = rstd[r];
    if (dw)
      for (int64_t i = 0; i < C; ++i) dw[i] += g[i] * (xr[i] - mu) * rs;
    if (db)
      for (int64_t i = 0; i < C; ++i) db[i] += g[i];
  }
}

// Rows whose length is a whole number of 16-float groups (C = 768 in GPT-2)
// take these paths: native vectors, and the parameter gradients accumulated
// in the same pass as dx while the row is in L1. Sums go over 16 lanes
// (detail::Lanes) and end in hsum's tree order. On AVX2 these loops were
// written on v16 at first, which GCC kept in memory between iterations: GPT-2's
// layer norms took 72 ms a step (AMD Zen 3, 1 thread) instead of 14.
bool vector_rows(int64_t C, const float* w) { return C % kLanes == 0 && w != nullptr; }

void row_forward_vec(int64_t C, const float* x, const float* w, const float* b, float eps, float* y, float& mean,
                     float& rstd) {
  detail::Lanes s(0.0f);
  for (int64_t i = 0; i < C; i += kLanes) s.each([&](vnat& l, int64_t o) { l += load<vnat>(x + i + o); });
  const float mu = s.tree_sum() / static_cast<float>(C);
  detail::Lanes q(0.0f);
  for (int64_t i = 0; i < C; i += kLanes)
    q.each([&](vnat& l, int64_t o) {
      vnat d = load<vnat>(x + i + o) - mu;
      l += d * d;
    });
  const float rs = 1.0f / std::sqrt(q.tree_sum() / static_cast<float>(C) + eps);
  for (int64_t i = 0; i < C; i += kNat) {
    vnat xh = (load<vnat>(x + i) - mu) * rs;
    store(y + i, b ? xh * load<vnat>(w + i) + load<vnat>(b + i) : xh * load<vnat>(w + i));
  }
  mean = mu;
  rstd = rs;
}

void row_backward_vec(int64_t C, const float* x, const float* w, float mu, float rs, const float* dy, float* dx,
                      float* dw, float* db) {
  if (dx) {
    detail::Lanes sg(0.0f), sgx(0.0f);
    for (int64_t i = 0; i < C; i += kLanes)
      for (int p = 0; p < detail::kParts; ++p) {
        const int64_t o = i + p * kNat;
        vnat g = load<vnat>(dy + o) * load<vnat>(w + o);
        sg.part[p] += g;
        sgx.part[p] += g * (load<vnat>(x + o) - mu);
      }
    const float a = sg.tree_sum() / static_cast<float>(C), bb = sgx.tree_sum() * rs / static_cast<float>(C);
    for (int64_t i = 0; i < C; i += kNat) {
      vnat g = load<vnat>(dy + i) * load<vnat>(w + i);
      store(dx + i, rs * (g - a - (load<vnat>(x + i) - mu) * rs * bb));
    }
  }
  if (dw)
    for (int64_t i = 0; i < C; i += kNat)
      store(dw + i, load<vnat>(dw + i) + load<vnat>(dy + i) * ((load<vnat>(x + i) - mu) * rs));
  if (db)
    for (int64_t i = 0; i < C; i += kNat) store(db + i, load<vnat>(db + i) + load<vnat>(dy + i));
}

}  // namespace

void layer_norm_forward(int64_t rows, int64_t C, const float* x, const float* w, const float* b, float eps, float* y,
                        float* mean, float* rstd) {
  parallel_for(rows, grain_rows(C), [&](int64_t r0, int64_t r1) {
    if (vector_rows(C, w)) {
      for (int64_t r = r0; r < r1; ++r) row_forward_vec(C, x + r * C, w, b, eps, y + r * C, mean[r], rstd[r]);
      return;
    }
    for (int64_t r = r0; r < r1; ++r) {
      const float* __restrict xr = x + r * C;
      float* __restrict yr = y + r * C;
      float mu = row_sum(C, xr) / static_cast<float>(C);
      float rs = 1.0f / std::sqrt(sq_dev(C, xr, mu) / static_cast<float>(C) + eps);
      mean[r] = mu;
      rstd[r] = rs;
      if (w && b) {
        for (int64_t i = 0; i < C; ++i) yr[i] = (xr[i] - mu) * rs * w[i] + b[i];
      } else {
        for (int64_t i = 0; i < C; ++i) yr[i] = (xr[i] - mu) * rs * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
      }
    }
  });
}

void layer_norm_backward(int64_t rows, int64_t C, const float* x, const float* w, const float* mean,
                         const float* rstd, const float* dy, float* dx, float* dw, float* db) {
  int64_t chunks = num_chunks(rows, grain_rows(C));
  // Chunk 0 accumulates into dw/db; the others into partials summed at the end.
  std::vector<float> part(dw || db ? static_cast<size_t>(2 * C * (chunks - 1)) : 0, 0.0f);
  if (dw) std::memset(dw, 0, static_cast<size_t>(C) * sizeof(float));
  if (db) std::memset(db, 0, static_cast<size_t>(C) * sizeof(float));
  for_chunks(rows, chunks, [&](int64_t c, int64_t r0, int64_t r1) {
    if (vector_rows(C, w)) {
      float* pw = c == 0 ? dw : (dw ? part.data() + 2 * C * (c - 1) : nullptr);
      float* pb = c == 0 ? db : (db ? part.data() + 2 * C * (c - 1) + C : nullptr);
      for (int64_t r = r0; r < r1; ++r)
        row_backward_vec(C, x + r * C, w, mean[r], rstd[r], dy + r * C, dx ? dx + r * C : nullptr, pw, pb);
      return;
    }
    if (dx)
      for (int64_t r = r0; r < r1; ++r) row_dx(C, x + r * C, w, mean[r], rstd[r], dy + r * C, dx + r * C);
    if (!dw && !db) return;
    float* pw = c == 0 ? dw : (dw ? part.data() + 2 * C * (c - 1) : nullptr);
    float* pb = c == 0 ? db : (db ? part.data() + 2 * C * (c - 1) + C : nullptr);
    add_param_grads(r0, r1, C, x, mean, rstd, dy, pw, pb);
  });
  for (int64_t c = 1; c < chunks && (dw || db); ++c)
    for (int64_t i = 0; i < C; ++i) {
      if (dw) dw[i] += part[static_cast<size_t>(2 * C * (c - 1) + i)];
      if (db) db[i] += part[static_cast<size_t>(2 * C * (c - 1) + C + i)];
    }
}

}  // namespace artel::kernels
