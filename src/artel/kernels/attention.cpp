#include "artel/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "artel/core/threads.h"
#include "artel/kernels/simd.h"

namespace artel::kernels {
namespace {

// Every loop below works on whole 16-float vectors (simd.h): rows of scores
// and probabilities are padded to Tp = round_up(T, 16) columns, zero past the
// diagonal.

const vi16 kLane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// Row i of the scaled scores s (Tp entries, the first round_up(i + 1, 16)
// finite) -> its probabilities over j ≤ i, zeros after. The vector holding the
// diagonal starts at `last`; its lanes past the diagonal are masked to -inf.
void causal_softmax_row(float* s, int64_t i, int64_t tp) {
  const int64_t last = i / kLanes * kLanes;
  const vi16 keep = kLane <= static_cast<int32_t>(i - last);
  store16(s + last, keep ? load16(s + last) : splat(-INFINITY));
  v16 mv = load16(s);
  for (int64_t j = kLanes; j <= last; j += kLanes) {
    v16 x = load16(s + j);
    mv = x > mv ? x : mv;
  }
  const float m = hmax(mv);
  v16 sum{};  // the masked lanes add ~1e-38 each to a sum ≥ 1: nothing
  for (int64_t j = 0; j <= last; j += kLanes) {
    v16 e = exp_nonpositive(load16(s + j) - m);
    sum += e;
    store16(s + j, e);
  }
  const float inv = 1.0f / hsum(sum);
  for (int64_t j = 0; j < last; j += kLanes) store16(s + j, load16(s + j) * inv);
  store16(s + last, keep ? load16(s + last) * inv : v16{});
  for (int64_t j = last + kLanes; j < tp; j += kLanes) store16(s + j, v16{});
}

// dP row (from dY Vᵀ) -> dS = scale · P ∘ (dP − Σ dP ∘ P), in place. p is zero
// past the diagonal, so whole vectors are exact and dS is zero there too.
void softmax_backward_row(float* ds, const float* p, int64_t i, int64_t tp, float scale) {
  const int64_t nv = (i + kLanes) / kLanes * kLanes;
  v16 acc{};
  for (int64_t j = 0; j < nv; j += kLanes) acc += load16(ds + j) * load16(p + j);
  const float dot = hsum(acc);
  for (int64_t j = 0; j < nv; j += kLanes) store16(ds + j, scale * load16(p + j) * (load16(ds + j) - dot));
  for (int64_t j = nv; j < tp; j += kLanes) store16(ds + j, v16{});
}

// ---- register-blocked products over the causal triangle
//
// All three products of attention have the form
//   out[r][c] = alpha · Σ_{k0 ≤ k < k1} coef[r·cs_r + k·cs_k] · vec[k·ldv + c]
// (scores: coef = q rows, vec = kᵀ; P·v and dS·k: coef = a lower-triangular
// row block, vec = v or k; Pᵀ·dY and dSᵀ·q: coef = a lower-triangular column
// block read down its rows). One micro-kernel keeps R × 16V accumulators in
// vector registers. OpenBLAS is slower here: at T = 64 its packing and call
// overhead outweigh the arithmetic, and it cannot skip the masked triangle.
struct Operand {
  const float* coef;
  int64_t cs_r, cs_k;
  const float* vec;
  int64_t ldv;
};

template <int R, int V>
void micro(const Operand& o, int64_t k0, int64_t k1, float alpha, float* out, int64_t ldo) {
  v16 acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = v16{};
  const float* coef = o.coef + k0 * o.cs_k;
  const float* vec = o.vec + k0 * o.ldv;
  for (int64_t k = k0; k < k1; ++k, coef += o.cs_k, vec += o.ldv) {
    v16 x[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) x[v] = load16(vec + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      v16 c = splat(coef[r * o.cs_r]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] += c * x[v];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) store16(out + r * ldo + 16 * v, alpha * acc[r][v]);
}

// Columns [0, width) of R rows (width need not be a multiple of 16).
template <int R>
void row_block(Operand o, int64_t width, int64_t k0, int64_t k1, float alpha, float* out, int64_t ldo) {
  int64_t c = 0;
  for (; c + 32 <= width; c += 32, o.vec += 32) micro<R, 2>(o, k0, k1, alpha, out + c, ldo);
  for (; c + 16 <= width; c += 16, o.vec += 16) micro<R, 1>(o, k0, k1, alpha, out + c, ldo);
  for (int r = 0; r < R; ++r)
    for (int64_t cc = 0; c + cc < width; ++cc) {
      float s = 0;
      for (int64_t k = k0; k < k1; ++k) s += o.coef[r * o.cs_r + k * o.cs_k] * o.vec[k * o.ldv + cc];
      out[r * ldo + c + cc] = alpha * s;
    }
}

constexpr int kRows = 8;  // 8 × 32 outputs: 16 of the 32 vector registers accumulate

// `rows` ≤ kRows rows of out; row r's coefficients start at o.coef + r·cs_r.
void rows_panel(Operand o, int64_t rows, int64_t width, int64_t k0, int64_t k1, float alpha, float* out,
                int64_t ldo) {
  if (rows == kRows) return row_block<kRows>(o, width, k0, k1, alpha, out, ldo);
  for (int64_t r = 0; r < rows; ++r, o.coef += o.cs_r) row_block<1>(o, width, k0, k1, alpha, out + r * ldo, ldo);
}

// s (T, tp) = alpha · a bᵀ where bt = bᵀ (hs, tp), a rows lda apart. Row block
// [i0, i0 + kRows) is computed up to column round_up(i0 + kRows, 16) only: entries
// j ≤ i are what softmax reads; the ones past the diagonal are ignored.
void causal_scores(int64_t t, int64_t tp, int64_t hs, float alpha, const float* a, int64_t lda, const float* bt,
                   float* s) {
  for (int64_t i0 = 0; i0 < t; i0 += kRows) {
    int64_t rows = std::min<int64_t>(kRows, t - i0);
    int64_t width = std::min(tp, (i0 + rows + 15) / 16 * 16);
    rows_panel({a + i0 * lda, lda, 1, bt, tp}, rows, width, 0, hs, alpha, s + i0 * tp, tp);
  }
}

// out (T, hs) = l · r, l (T, T) lower-triangular with rows ldl apart.
void lower_times(int64_t t, int64_t hs, const float* l, int64_t ldl, const float* r, int64_t ldr, float* out,
                 int64_t ldo) {
  for (int64_t i0 = 0; i0 < t; i0 += kRows) {
    int64_t rows = std::min<int64_t>(kRows, t - i0);
    rows_panel({l + i0 * ldl, ldl, 1, r, ldr}, rows, hs, 0, i0 + rows, 1.0f, out + i0 * ldo, ldo);
  }
}

// out (T, hs) = lᵀ · r, l (T, T) lower-triangular with rows ldl apart.
void lower_t_times(int64_t t, int64_t hs, const float* l, int64_t ldl, const float* r, int64_t ldr, float* out,
                   int64_t ldo) {
  for (int64_t j0 = 0; j0 < t; j0 += kRows) {
    int64_t rows = std::min<int64_t>(kRows, t - j0);
    rows_panel({l + j0, 1, ldl, r, ldr}, rows, hs, j0, t, 1.0f, out + j0 * ldo, ldo);
  }
}

// dst (hs, tp) = srcᵀ for src (T, hs) with rows ld apart; columns T..tp zero.
// Whole 16 × 16 tiles go through registers; ragged edges element by element.
void transpose_padded(int64_t t, int64_t tp, int64_t hs, const float* src, int64_t ld, float* dst) {
  for (int64_t e0 = 0; e0 < hs; e0 += kLanes) {
    int64_t j0 = 0;
    for (; e0 + kLanes <= hs && j0 + kLanes <= t; j0 += kLanes) {
      v16 tile[kLanes];
      for (int64_t r = 0; r < kLanes; ++r) tile[r] = load16(src + (j0 + r) * ld + e0);
      transpose16(tile);
      for (int64_t r = 0; r < kLanes; ++r) store16(dst + (e0 + r) * tp + j0, tile[r]);
    }
    for (int64_t e = e0; e < std::min(hs, e0 + kLanes); ++e) {
      for (int64_t j = j0; j < t; ++j) dst[e * tp + j] = src[j * ld + e];
      std::fill(dst + e * tp + t, dst + (e + 1) * tp, 0.0f);
    }
  }
}

// Pointers to one (b, h) item: q, k, v rows are `ld` = 3C apart.
struct Head {
  const float* q;
  const float* k;
  const float* v;
  int64_t ld;
};

Head head_of(const AttentionDims& d, const float* qkv, int64_t b, int64_t h) {
  int64_t c = d.channels;
  const float* base = qkv + b * d.time * 3 * c + h * d.head_size();
  return {base, base + c, base + 2 * c, 3 * c};
}

}  // namespace

void attention_forward(const AttentionDims& d, const float* qkv, float* y, float* probs) {
  const int64_t t = d.time, tp = d.padded_time(), c = d.channels, hs = d.head_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  parallel_for(d.batch * d.n_head, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> kt(static_cast<size_t>(hs * tp));
    for (int64_t item = i0; item < i1; ++item) {
      int64_t b = item / d.n_head, h = item % d.n_head;
      Head x = head_of(d, qkv, b, h);
      float* p = probs + item * t * tp;  // (b, h) is item-major: (B, n_head, T, Tp)
      transpose_padded(t, tp, hs, x.k, x.ld, kt.data());
      causal_scores(t, tp, hs, scale, x.q, x.ld, kt.data(), p);
      for (int64_t i = 0; i < t; ++i) causal_softmax_row(p + i * tp, i, tp);
      lower_times(t, hs, p, tp, x.v, x.ld, y + b * t * c + h * hs, c);
    }
  });
}

void attention_backward(const AttentionDims& d, const float* qkv, const float* probs, const float* dy, float* dqkv) {
  const int64_t t = d.time, tp = d.padded_time(), c = d.channels, hs = d.head_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  parallel_for(d.batch * d.n_head, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> vt(static_cast<size_t>(hs * tp)), ds(static_cast<size_t>(t * tp));  // dP, then dS in place
    for (int64_t item = i0; item < i1; ++item) {
      int64_t b = item / d.n_head, h = item % d.n_head;
      Head x = head_of(d, qkv, b, h);
      const float* p = probs + item * t * tp;
      const float* g = dy + b * t * c + h * hs;   // dY rows, C apart
      float* dq = dqkv + b * t * 3 * c + h * hs;  // dq, dk, dv rows, 3C apart
      transpose_padded(t, tp, hs, x.v, x.ld, vt.data());
      causal_scores(t, tp, hs, 1.0f, g, c, vt.data(), ds.data());  // dP = dY Vᵀ
      for (int64_t i = 0; i < t; ++i) softmax_backward_row(ds.data() + i * tp, p + i * tp, i, tp, scale);
      lower_times(t, hs, ds.data(), tp, x.k, x.ld, dq, x.ld);        // dQ = dS K (scale folded into dS)
      lower_t_times(t, hs, ds.data(), tp, x.q, x.ld, dq + c, x.ld);  // dK = dSᵀ Q
      lower_t_times(t, hs, p, tp, g, c, dq + 2 * c, x.ld);           // dV = Pᵀ dY
    }
  });
}

}  // namespace artel::kernels
