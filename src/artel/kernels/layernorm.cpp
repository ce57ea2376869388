#include "artel/kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "artel/core/threads.h"
#include "artel/kernels/chunks.h"
#include "artel/kernels/fast_math.h"

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

}  // namespace

void layer_norm_forward(int64_t rows, int64_t C, const float* x, const float* w, const float* b, float eps, float* y,
                        float* mean, float* rstd) {
  parallel_for(rows, grain_rows(C), [&](int64_t r0, int64_t r1) {
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
