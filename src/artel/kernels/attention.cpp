#include "artel/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "artel/core/threads.h"
#include "artel/kernels/simd.h"
#ifndef PFON
#define PFON 1
#endif
#ifndef PFL
#define PFL 1
#endif

namespace artel::kernels {
namespace {

// Layout: the probabilities of one (b, h) are kept transposed, Pᵀ (T, Tp):
// row j holds P[i][j] for the queries i in its 16-float lanes. Scores are
// computed that way, 16 queries per vector (a "query block"), so the softmax
// over j (and its backward) runs down columns of vectors: lane-wise max, exp,
// sums and products, no horizontal reductions, no per-row masks but on the
// block's diagonal.

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

// Which corner of the R × (k1 − k0) coefficient block is known to be zero (a
// triangle of a causal matrix): kTail, the last R k's with k > k1 − R + r
// (row r of P·v stops at its diagonal); kHead, the first R k's with k < k0 + r
// (row r of Pᵀ·dY starts at its diagonal). Skipping them is exact.
enum Triangle { kNone, kTail, kHead };

// acc[r][·] += coef[r] · vec[0 .. 16V) for the rows r in [r0, r1).
template <int R, int V>
inline void fma_rows(v16 (&acc)[R][V], const float* coef, int64_t cs_r, const float* vec, int r0, int r1) {
  v16 x[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) x[v] = load16(vec + 16 * v);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    if (r < r0 || r >= r1) continue;
    v16 c = splat(coef[r * cs_r]);
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] += c * x[v];
  }
}

template <int R, int V, Triangle Tri = kNone>
void micro(const Operand& o, int64_t k0, int64_t k1, float alpha, float* out, int64_t ldo) {
  v16 acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = v16{};
  const float* coef = o.coef + k0 * o.cs_k;
  const float* vec = o.vec + k0 * o.ldv;
  if constexpr (Tri == kHead) {
#pragma GCC unroll 16
    for (int m = 0; m < R; ++m) fma_rows<R, V>(acc, coef + m * o.cs_k, o.cs_r, vec + m * o.ldv, 0, m + 1);
    coef += R * o.cs_k, vec += R * o.ldv, k0 += R;
  }
  const int64_t kmain = Tri == kTail ? k1 - R : k1;
  for (int64_t k = k0; k < kmain; ++k, coef += o.cs_k, vec += o.ldv) fma_rows<R, V>(acc, coef, o.cs_r, vec, 0, R);
  if constexpr (Tri == kTail) {
#pragma GCC unroll 16
    for (int m = 0; m < R; ++m) fma_rows<R, V>(acc, coef + m * o.cs_k, o.cs_r, vec + m * o.ldv, m, R);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) store16(out + r * ldo + 16 * v, alpha * acc[r][v]);
}

// Columns [0, width) of R rows (width need not be a multiple of 16); needs
// k1 − k0 ≥ R unless Tri is kNone.
template <int R, Triangle Tri = kNone>
void row_block(Operand o, int64_t width, int64_t k0, int64_t k1, float alpha, float* out, int64_t ldo) {
  int64_t c = 0;
  for (; c + 32 <= width; c += 32, o.vec += 32) micro<R, 2, Tri>(o, k0, k1, alpha, out + c, ldo);
  for (; c + 16 <= width; c += 16, o.vec += 16) micro<R, 1, Tri>(o, k0, k1, alpha, out + c, ldo);
  for (int r = 0; r < R; ++r)
    for (int64_t cc = 0; c + cc < width; ++cc) {
      float s = 0;
      for (int64_t k = k0; k < k1; ++k) s += o.coef[r * o.cs_r + k * o.cs_k] * o.vec[k * o.ldv + cc];
      out[r * ldo + c + cc] = alpha * s;
    }
}

constexpr int kRows = 8;  // 8 × 32 outputs: 16 of the 32 vector registers accumulate

// `rows` ≤ kRows rows of out; row r's coefficients start at o.coef + r·cs_r.
template <Triangle Tri = kNone>
void rows_panel(Operand o, int64_t rows, int64_t width, int64_t k0, int64_t k1, float alpha, float* out,
                int64_t ldo) {
  if (rows == kRows) return row_block<kRows, Tri>(o, width, k0, k1, alpha, out, ldo);
  for (int64_t r = 0; r < rows; ++r, o.coef += o.cs_r) row_block<1>(o, width, k0, k1, alpha, out + r * ldo, ldo);
}

constexpr int64_t kBlock = 32;  // queries per block: two 16-float vectors of lanes

// Transposed scores (or dP) of one query block: out[j][l] = alpha · Σ_e a[j][e] ·
// bt[e][l] for j < nj and the nq ≤ 32 lanes l, a rows lda apart, bt and out rows
// ldb and ldo apart. Rows j ≥ q0 + 16 skip the first 16 lanes: all masked.
void block_scores(int64_t q0, int64_t nq, int64_t nj, int64_t hs, float alpha, const float* a, int64_t lda,
                  const float* bt, int64_t ldb, float* out, int64_t ldo) {
  const int64_t halves = nq > 16 ? 2 : 1;
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
    rows_panel<kTail>({lt + s, 1, ld, r, ldr}, rows, hs, 0, q0 + s + rows, 1.0f, out + s * ldo, ldo);
  }
}

// out (T, hs) = L(T, T)ᵀ · r for lower-triangular L given transposed (lt, rows
// ld apart): row j sums i ≥ j.
void lower_t_times(int64_t t, int64_t hs, const float* lt, int64_t ld, const float* r, int64_t ldr, float* out,
                   int64_t ldo) {
  for (int64_t j0 = 0; j0 < t; j0 += kRows) {
    int64_t rows = std::min<int64_t>(kRows, t - j0);
    rows_panel<kHead>({lt + j0 * ld, ld, 1, r, ldr}, rows, hs, j0, t, 1.0f, out + j0 * ldo, ldo);
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

// Software prefetch of the next (b, h) item, a slice of its rows at a time so
// that the lines arrive while this item computes without pushing its own
// working set out of L1. Operand rows are 3C floats apart, a stride the
// hardware prefetchers pick up late on 64-row streams.
void prefetch_rows(const float* p, int64_t r0, int64_t r1, int64_t width, int64_t ld, bool write = false) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t e = 0; e < width; e += 16) {
      if (write) __builtin_prefetch(p + r * ld + e, 1, PFL);
      else __builtin_prefetch(p + r * ld + e, 0, PFL);
    }
}

// Rows [r0, r1) of a transposed probability block: row j's written lanes
// start at 16·⌊j/16⌋.
void prefetch_probs(const float* pt, int64_t r0, int64_t r1, int64_t tp) {
  for (int64_t j = r0; j < r1; ++j)
    for (int64_t e = j / 16 * 16; e < tp; e += 16) __builtin_prefetch(pt + j * tp + e, 0, PFL);
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
      const int64_t next = item + 1 < i1 ? item + 1 : -1;
      auto ahead = [&](int64_t part, int64_t parts) {  // rows [part, part + 1) · T / parts of item `next`
        if (next < 0 || !PFON) return;
        const int64_t r0 = t * part / parts, r1 = t * (part + 1) / parts, nb = next / d.n_head, nh = next % d.n_head;
        Head n = head_of(d, qkv, nb, nh);
        prefetch_rows(n.q, r0, r1, hs, n.ld);
        prefetch_rows(n.k, r0, r1, hs, n.ld);
        prefetch_rows(n.v, r0, r1, hs, n.ld);
        prefetch_rows(y + nb * t * c + nh * hs, r0, r1, hs, c, true);
      };
      transpose_padded(t, tq, hs, x.q, x.ld, qt.data());
      for (int64_t q0 = 0; q0 < t; q0 += kBlock) {
        const int64_t nq = std::min(kBlock, t - q0);
        ahead(q0 / kBlock, tq / kBlock);
        block_scores(q0, nq, q0 + nq, hs, scale, x.k, x.ld, qt.data() + q0, tq, pt + q0, tp);
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
    std::vector<float> gt(static_cast<size_t>(hs * tq)), ds(static_cast<size_t>(t * tp), 0.0f);  // dSᵀ
    for (int64_t item = i0; item < i1; ++item) {
      int64_t b = item / d.n_head, h = item % d.n_head;
      Head x = head_of(d, qkv, b, h);
      const float* pt = probs + item * t * tp;
      const float* g = dy + b * t * c + h * hs;   // dY rows, C apart
      float* dq = dqkv + b * t * 3 * c + h * hs;  // dq, dk, dv rows, 3C apart
      const int64_t next = item + 1 < i1 ? item + 1 : -1, parts = tq / kBlock + 2;
      auto ahead = [&](int64_t part) {  // rows [part, part + 1) · T / parts of item `next`
        if (next < 0 || !PFON) return;
        const int64_t r0 = t * part / parts, r1 = t * (part + 1) / parts, nb = next / d.n_head, nh = next % d.n_head;
        Head n = head_of(d, qkv, nb, nh);
        prefetch_rows(n.q, r0, r1, hs, n.ld);
        prefetch_rows(n.k, r0, r1, hs, n.ld);
        prefetch_rows(n.v, r0, r1, hs, n.ld);
        prefetch_rows(dy + nb * t * c + nh * hs, r0, r1, hs, c);
        prefetch_probs(probs + next * t * tp, r0, r1, tp);
        float* ndq = dqkv + nb * t * 3 * c + nh * hs;
        for (int64_t part3 = 0; part3 < 3; ++part3) prefetch_rows(ndq + part3 * c, r0, r1, hs, 3 * c, true);
      };
      transpose_padded(t, tq, hs, g, c, gt.data());
      for (int64_t q0 = 0; q0 < t; q0 += kBlock) {
        const int64_t nq = std::min(kBlock, t - q0);
        ahead(q0 / kBlock);
        block_scores(q0, nq, q0 + nq, hs, 1.0f, x.v, x.ld, gt.data() + q0, tq, ds.data() + q0, tp);  // dPᵀ = V dYᵀ
        for (int64_t l0 = 0; l0 < nq; l0 += 16)
          softmax_backward_block(ds.data() + q0 + l0, pt + q0 + l0, tp, std::min(t, q0 + l0 + 16), scale);
        block_times(q0, t, hs, ds.data() + q0, tp, x.k, x.ld, dq + q0 * x.ld, x.ld);  // dQ = dS K
      }
      ahead(parts - 2);
      lower_t_times(t, hs, ds.data(), tp, x.q, x.ld, dq + c, x.ld);  // dK = dSᵀ Q
      ahead(parts - 1);
      lower_t_times(t, hs, pt, tp, g, c, dq + 2 * c, x.ld);  // dV = Pᵀ dY
    }
  });
}

}  // namespace artel::kernels
