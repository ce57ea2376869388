#include "artel/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "artel/core/threads.h"
#include "artel/kernels/simd.h"

namespace artel::kernels {
namespace {

// Layout: the probabilities of one (b, h) are kept transposed, Pᵀ (T, Tp):
// row j holds P[i][j] with the queries i along its 16-float lanes. Scores are
// computed that way (Sᵀ = K Qᵀ, 32 queries per "query block", two vectors of
// lanes), so the softmax over j and its backward run down columns of vectors:
// lane-wise max, exp, sums and products, no horizontal reductions, and masks
// only on the 16 × 16 diagonal tiles. The row orientation did the same work
// with a horizontal max and sum per row; this one measured ~10% faster for
// forward + backward at T = 64, hs = 32.

const vi16 kLane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// ---- register-blocked products
//
// All products of attention have the form
//   out[r][c] = alpha · Σ_{k0 ≤ k < k1} coef[r·cs_r + k·cs_k] · vec[k·ldv + c]
// (scores Sᵀ = K Qᵀ: coef = k rows, vec = Qᵀ; P·v, dS·k: coef = a column block
// of Pᵀ or dSᵀ; Pᵀ·dY, dSᵀ·q: coef = rows of Pᵀ or dSᵀ). One micro-kernel keeps
// R × 16V accumulators in vector registers. OpenBLAS is slower here: at T = 64
// its packing and call overhead outweigh the arithmetic, and it cannot skip
// the masked triangle.
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

constexpr int64_t kBlock = 32;  // queries per block: two 16-float vectors of lanes

// Transposed scores (or dP) of the query block q0 .. q0 + nq − 1 (nq ≤ 32):
// out[j][l] = alpha · Σ_e a[j][e] · bt[e][l] for j < q0 + nq, a rows lda apart,
// bt and out rows ldb and ldo apart, both starting at the block's first lane.
// Rows j ≥ q0 + 16 skip the first 16 lanes: queries before j, all masked.
void block_scores(int64_t q0, int64_t nq, int64_t hs, float alpha, const float* a, int64_t lda, const float* bt,
                  int64_t ldb, float* out, int64_t ldo) {
  const int64_t halves = nq > 16 ? 2 : 1, nj = q0 + nq;
  for (int64_t j0 = 0; j0 < nj; j0 += kRows) {
    const int64_t skip = j0 >= q0 + 16 ? 1 : 0, rows = std::min<int64_t>(kRows, nj - j0);
    Operand o{a + j0 * lda, lda, 1, bt + 16 * skip, ldb};
    float* dst = out + j0 * ldo + 16 * skip;
    if (rows == kRows) {
      if (halves - skip == 2) micro<kRows, 2>(o, 0, hs, alpha, dst, ldo);
      else micro<kRows, 1>(o, 0, hs, alpha, dst, ldo);
      continue;
    }
    for (int64_t r = 0; r < rows; ++r, o.coef += lda, dst += ldo) {
      if (halves - skip == 2) micro<1, 2>(o, 0, hs, alpha, dst, ldo);
      else micro<1, 1>(o, 0, hs, alpha, dst, ldo);
    }
  }
}

// Softmax down the columns of one query block's scores s (nj rows ld apart,
// lanes = queries i0 + l): over j ≤ i, zeros for j > i and for lanes past T.
void causal_softmax_block(float* s, int64_t ld, int64_t i0, int64_t nj, int64_t t) {
  v16 m = splat(-INFINITY);
  for (int64_t j = 0; j < i0; ++j) {
    v16 x = load16(s + j * ld);
    m = x > m ? x : m;
  }
  for (int64_t j = i0; j < nj; ++j) {  // the diagonal 16 × 16 block: lane l keeps j ≤ i0 + l
    v16 x = load16(s + j * ld);
    x = kLane >= static_cast<int32_t>(j - i0) ? x : splat(-INFINITY);
    m = x > m ? x : m;
  }
  v16 sum{};  // the masked entries add ~1e-38 each to a sum ≥ 1: nothing
  for (int64_t j = 0; j < nj; ++j) {
    v16 e = exp_nonpositive(load16(s + j * ld) - m);
    e = j < i0 || kLane >= static_cast<int32_t>(j - i0) ? e : v16{};
    sum += e;
    store16(s + j * ld, e);
  }
  const v16 inv = kLane < static_cast<int32_t>(t - i0) ? 1.0f / sum : v16{};
  for (int64_t j = 0; j < nj; ++j) store16(s + j * ld, load16(s + j * ld) * inv);
}

// dP of one query block (nj rows ld apart) -> dS = scale · P ∘ (dP − Σ_j dP ∘ P)
// in place. p is zero where j > i, so dS is too.
void softmax_backward_block(float* ds, const float* p, int64_t ld, int64_t nj, float scale) {
  v16 dot{};
  for (int64_t j = 0; j < nj; ++j) dot += load16(ds + j * ld) * load16(p + j * ld);
  for (int64_t j = 0; j < nj; ++j) store16(ds + j * ld, scale * load16(p + j * ld) * (load16(ds + j * ld) - dot));
}

// out rows q0 .. q0+31 (< t) = L rows, L = P or dS given transposed (lt, rows
// ld apart, this block's lanes at lt), times r (T, hs): row i sums j ≤ i.
void block_times(int64_t q0, int64_t t, int64_t hs, const float* lt, int64_t ld, const float* r, int64_t ldr,
                 float* out, int64_t ldo) {
  for (int64_t s = 0; s < kBlock && q0 + s < t; s += kRows) {
    int64_t rows = std::min<int64_t>(kRows, t - q0 - s);
    rows_panel({lt + s, 1, ld, r, ldr}, rows, hs, 0, q0 + s + rows, 1.0f, out + s * ldo, ldo);
  }
}

// out (T, hs) = L(T, T)ᵀ · r for lower-triangular L given transposed (lt, rows
// ld apart): row j sums i ≥ j.
void lower_t_times(int64_t t, int64_t hs, const float* lt, int64_t ld, const float* r, int64_t ldr, float* out,
                   int64_t ldo) {
  for (int64_t j0 = 0; j0 < t; j0 += kRows) {
    int64_t rows = std::min<int64_t>(kRows, t - j0);
    rows_panel({lt + j0 * ld, ld, 1, r, ldr}, rows, hs, j0, t, 1.0f, out + j0 * ldo, ldo);
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
  const int64_t tq = (t + kBlock - 1) / kBlock * kBlock;  // columns of Qᵀ, dYᵀ: whole blocks
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  parallel_for(d.batch * d.n_head, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> qt(static_cast<size_t>(hs * tq));
    for (int64_t item = i0; item < i1; ++item) {
      int64_t b = item / d.n_head, h = item % d.n_head;
      Head x = head_of(d, qkv, b, h);
      float* pt = probs + item * t * tp;  // Pᵀ of (b, h): (B, n_head, T, Tp), item-major
      float* yb = y + b * t * c + h * hs;
      transpose_padded(t, tq, hs, x.q, x.ld, qt.data());
      for (int64_t q0 = 0; q0 < t; q0 += kBlock) {
        const int64_t nq = std::min(kBlock, t - q0);
        block_scores(q0, nq, hs, scale, x.k, x.ld, qt.data() + q0, tq, pt + q0, tp);
        for (int64_t l0 = 0; l0 < nq; l0 += 16)
          causal_softmax_block(pt + q0 + l0, tp, q0 + l0, std::min(t, q0 + l0 + 16), t);
        block_times(q0, t, hs, pt + q0, tp, x.v, x.ld, yb + q0 * c, c);
      }
    }
  });
}

void attention_backward(const AttentionDims& d, const float* qkv, const float* probs, const float* dy, float* dqkv) {
  const int64_t t = d.time, tp = d.padded_time(), c = d.channels, hs = d.head_size();
  const int64_t tq = (t + kBlock - 1) / kBlock * kBlock;  // columns of Qᵀ, dYᵀ: whole blocks
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  parallel_for(d.batch * d.n_head, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> gt(static_cast<size_t>(hs * tq)), ds(static_cast<size_t>(t * tp));  // dPᵀ, then dSᵀ in place
    for (int64_t item = i0; item < i1; ++item) {
      int64_t b = item / d.n_head, h = item % d.n_head;
      Head x = head_of(d, qkv, b, h);
      const float* pt = probs + item * t * tp;
      const float* g = dy + b * t * c + h * hs;   // dY rows, C apart
      float* dq = dqkv + b * t * 3 * c + h * hs;  // dq, dk, dv rows, 3C apart
      transpose_padded(t, tq, hs, g, c, gt.data());
      for (int64_t q0 = 0; q0 < t; q0 += kBlock) {
        const int64_t nq = std::min(kBlock, t - q0);
        block_scores(q0, nq, hs, 1.0f, x.v, x.ld, gt.data() + q0, tq, ds.data() + q0, tp);  // dPᵀ = V dYᵀ
        for (int64_t l0 = 0; l0 < nq; l0 += 16)
          softmax_backward_block(ds.data() + q0 + l0, pt + q0 + l0, tp, std::min(t, q0 + l0 + 16), scale);
        block_times(q0, t, hs, ds.data() + q0, tp, x.k, x.ld, dq + q0 * x.ld, x.ld);  // dQ = dS K
      }
      lower_t_times(t, hs, ds.data(), tp, x.q, x.ld, dq + c, x.ld);  // dK = dSᵀ Q
      lower_t_times(t, hs, pt, tp, g, c, dq + 2 * c, x.ld);           // dV = Pᵀ dY
    }
  });
}

}  // namespace artel::kernels
