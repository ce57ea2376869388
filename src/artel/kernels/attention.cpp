#include "artel/kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include <immintrin.h>

#include "artel/core/dtype.h"
#include "artel/core/threads.h"
#include "artel/kernels/gemm.h"
#include "artel/kernels/layout.h"
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

// ---- register-blocked products
//
// All products of attention have the form
//   out[r][c] = alpha · Σ_{k0 ≤ k < k1} coef[r·cs_r + k·cs_k] · vec[k·ldv + c]
// (scores Sᵀ = K Qᵀ: coef = k rows, vec = Qᵀ; P·v, dS·k: coef = a column block
// of Pᵀ or dSᵀ; Pᵀ·dY, dSᵀ·q: coef = rows of Pᵀ or dSᵀ). One micro-kernel keeps
// R × 16V accumulators in vector registers. OpenBLAS is slower here: at T = 64
// its packing and call overhead outweigh the arithmetic, and it cannot skip
// the masked triangle.
//
// Under bf16 precision (kernels::gemm_precision) the same products run on
// bf16 pairs, as every other matrix product of the step does (and as PyTorch's
// autocast runs attention's): a unit of k is then a pair (k, k+1), a coef
// element a 32-bit word holding the pair, a vec row 16 lanes × 2, and one
// VDPBF16PS adds both terms into fp32 accumulators. Operands are rounded into
// that layout once per (b, h) (Note [Pair layouts]); softmax and its backward
// stay fp32. Only where the pairs are the faster (attention_products_on_pairs,
// attention.h: on AMD; Intel's VDPBF16PS adds no more products a cycle than
// its FMAs, fewer without AMX (gemm.h's bf16_slower_reason), so there the
// products stay fp32).
template <class T>
struct Operand {
  const T* coef;
  int64_t cs_r, cs_k;
  const T* vec;
  int64_t ldv;
};
using Pairs = Operand<uint32_t>;

// The fp32 kernel counts in the machine's own vectors (simd.h's vnat): GCC
// keeps an array of v16 accumulators on AVX2 in memory, moving each through
// general registers. Not inlined: inside a caller's loops GCC allocated the R × V accumulators
// worse (the fp32 forward ran 1.5× slower).
template <int R, int V>
__attribute__((noinline)) void micro(const Operand<float>& o, int64_t k0, int64_t k1, float alpha, float* out, int64_t ldo) {
  constexpr int N = V * 16 / static_cast<int>(kNat);  // native vectors across a row
  vnat acc[R][N];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < N; ++v) acc[r][v] = vnat{};
  const float* coef = o.coef + k0 * o.cs_k;
  const float* vec = o.vec + k0 * o.ldv;
  for (int64_t k = k0; k < k1; ++k, coef += o.cs_k, vec += o.ldv) {
    vnat x[N];
#pragma GCC unroll 4
    for (int v = 0; v < N; ++v) x[v] = load<vnat>(vec + kNat * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      vnat c = broadcast<vnat>(coef[r * o.cs_r]);
#pragma GCC unroll 4
      for (int v = 0; v < N; ++v) acc[r][v] += c * x[v];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < N; ++v) {
      const vnat y = alpha * acc[r][v];
      std::memcpy(out + r * ldo + kNat * v, &y, sizeof y);
    }
}

template <int R, int V>
__attribute__((noinline, target("avx512f,avx512bf16"))) void micro(const Pairs& o, int64_t k0, int64_t k1, float alpha,
                                                          float* out, int64_t ldo) {
  __m512 acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  const uint32_t* coef = o.coef + k0 * o.cs_k;
  const uint32_t* vec = o.vec + k0 * o.ldv;
  for (int64_t k = k0; k < k1; ++k, coef += o.cs_k, vec += o.ldv) {
    __m512bh x[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) x[v] = (__m512bh)_mm512_loadu_si512(vec + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh c = (__m512bh)_mm512_set1_epi32(static_cast<int>(coef[r * o.cs_r]));
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], c, x[v]);
    }
  }
  const __m512 a = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(out + r * ldo + 16 * v, _mm512_mul_ps(a, acc[r][v]));
}

// One term of a product's ragged columns, element by element.
float term(float coef, float vec) { return coef * vec; }
float term(uint32_t coef, uint32_t vec) {
  auto as_float = [](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  return as_float(coef << 16) * as_float(vec << 16) + as_float(coef & 0xffff0000u) * as_float(vec & 0xffff0000u);
}

// The register tile: kRows × 16·kWide outputs. With AVX-512, 8 × 32 keeps 16
// of the 32 zmm registers accumulating; without it, 6 × 16 keeps 12 of the 16
// ymm registers (BLIS's Haswell sgemm tile), with two for a row of vec and one
// for a broadcast. An FMA waits 4 cycles for its accumulator and two issue a
// cycle, so 8 accumulators (4 × 16, the tile until 2026-11-29) left no slack:
// on AMD Zen 3 the products ran at 40% of the FMA units' rate.
#ifdef __AVX512F__
constexpr int kRows = 8, kWide = 2;
#else
constexpr int kRows = 6, kWide = 1;
#endif

// micro<rows, V> for 1 ≤ rows ≤ kRows.
template <int V, class T, int R = kRows>
void micro_rows(int64_t rows, const Operand<T>& o, int64_t k0, int64_t k1, float alpha, float* out, int64_t ldo) {
  if constexpr (R > 1)
    if (rows < R) return micro_rows<V, T, R - 1>(rows, o, k0, k1, alpha, out, ldo);
  micro<R, V>(o, k0, k1, alpha, out, ldo);
}

// Panels of at most kRows rows over [begin, end) (begin a multiple of 16),
// none crossing a multiple of 16: the causal mask, the saved probabilities'
// written region and the bf16 pairs all go by 16-row tiles. fn(first, rows).
template <class Fn>
void panels(int64_t begin, int64_t end, Fn&& fn) {
  for (int64_t j0 = begin; j0 < end;) {
    const int64_t left = std::min(end, (j0 / 16 + 1) * 16) - j0, pieces = (left + kRows - 1) / kRows;
    const int64_t rows = (left + pieces - 1) / pieces;  // 16 rows as 6, 5, 5 rather than 6, 6, 4
    fn(j0, rows);
    j0 += rows;
  }
}

// Columns [0, width) of `rows` ≤ kRows rows of out (width need not be a
// multiple of 16); row r's coefficients start at o.coef + r·cs_r.
template <class T>
void row_block(int64_t rows, Operand<T> o, int64_t width, int64_t k0, int64_t k1, float alpha, float* out, int64_t ldo) {
  int64_t c = 0;
  if constexpr (kWide == 2)
    for (; c + 32 <= width; c += 32, o.vec += 32) micro_rows<2>(rows, o, k0, k1, alpha, out + c, ldo);
  for (; c + 16 <= width; c += 16, o.vec += 16) micro_rows<1>(rows, o, k0, k1, alpha, out + c, ldo);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t cc = 0; c + cc < width; ++cc) {
      float s = 0;
      for (int64_t k = k0; k < k1; ++k) s += term(o.coef[r * o.cs_r + k * o.cs_k], o.vec[k * o.ldv + cc]);
      out[r * ldo + c + cc] = alpha * s;
    }
}

// Units of k that cover n elements: n, or its pairs.
template <class T>
int64_t units(int64_t n) {
  return std::is_same_v<T, float> ? n : (n + 1) / 2;
}

constexpr int64_t kBlock = 32;  // queries per block: two 16-float vectors of lanes

// Note [Odd row strides]
// The products stream an operand's rows (Qᵀ's, dYᵀ's and Pᵀ's lanes, the
// tight copies of V, K, Q and dY) a fixed stride apart. At a stride of an even
// number of 64-byte lines the rows crowd into a fraction of the L1 cache's
// sets: at T = 256, rows 1 KiB apart use 4 of Zen 3's 64 sets, 32 lines for a
// product that streams 64 or more, so each pass missed L1 on every row. A
// stride of an odd number of lines spreads them over every set. GPT-2's
// attention at 4 × 256 tokens, one thread, AMD Zen 3: 270 -> 251-253 ms for
// 12 layers' forward and backward alone (three interleaved runs each); inside
// the training step, 224-239 -> 216-218 ms (sampled by perf over 5 steps,
// two runs each); the price, 6% more memory for the probabilities at T = 256.
int64_t odd_lines(int64_t n) {
  const int64_t lines = (n + 15) / 16;
  return (lines | 1) * 16;
}

// Transposed scores (or dP) of the query block q0 .. q0 + nq − 1 (nq ≤ 32):
// out[j][l] = alpha · Σ_e a[j][e] · bt[e][l] for j < q0 + nq, a rows lda apart,
// bt and out rows ldb and ldo apart, both starting at the block's first lane
// (a, bt and their strides in units of T; hs in elements).
// Rows j ≥ q0 + 16 skip the first 16 lanes: queries before j, all masked.
template <class T>
void block_scores(int64_t q0, int64_t nq, int64_t hs, float alpha, const T* a, int64_t lda, const T* bt,
                  int64_t ldb, float* out, int64_t ldo) {
  const int64_t halves = nq > 16 ? 2 : 1, nj = q0 + nq, ke = units<T>(hs);
  panels(0, nj, [&](int64_t j0, int64_t rows) {
    const int64_t skip = j0 >= q0 + 16 ? 1 : 0;
    Operand<T> o{a + j0 * lda, lda, 1, bt + 16 * skip, ldb};
    float* dst = out + j0 * ldo + 16 * skip;
    if (kWide == 2 && halves - skip == 2) return micro_rows<2>(rows, o, 0, ke, alpha, dst, ldo);
    for (int64_t h = skip; h < halves; ++h, o.vec += 16, dst += 16) micro_rows<1>(rows, o, 0, ke, alpha, dst, ldo);
  });
}

// ---- bf16 lanes for the pair layouts, in plain AVX-512F (so they inline into
// the softmax loops, which also run where the CPU has no bf16): x rounded to
// nearest even, for finite x, in the top half of each 32-bit lane.
typedef uint32_t vu16 __attribute__((vector_size(64)));
typedef uint16_t vh16 __attribute__((vector_size(32)));

vu16 bf16_top(v16 x) {
  vu16 u;
  std::memcpy(&u, &x, sizeof u);
  return (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}
// 16 pair words (lo, hi) at `words`.
void store_pairs(void* words, v16 lo, v16 hi) {
  const vu16 w = bf16_top(lo) >> 16 | bf16_top(hi);
  std::memcpy(words, &w, sizeof w);
}
// 16 bf16 at `bits`.
void store_bf16(void* bits, v16 x) {
  const vh16 h = __builtin_convertvector(bf16_top(x) >> 16, vh16);
  std::memcpy(bits, &h, sizeof h);
}

// Where the bf16 path takes a lane block's results, rounded, as they are
// made: pair words of rows (j, j+1) at pairs + (j/2)·ld_pairs words, and bf16
// rows at rows + j·ld_rows bf16 (and, in backward, P's rows at p_rows).
struct PairOutputs {
  uint32_t* pairs = nullptr;
  int64_t ld_pairs = 0;
  uint16_t* rows = nullptr;
  uint16_t* p_rows = nullptr;
  int64_t ld_rows = 0;
};

// The 16 lanes of one query block's softmax (below), as N vectors V: leaves
// exp(s − m) in s, zero for j > i, and sets inv to 1 / Σ_j (zero for lanes
// past T). Lanes are independent, so a v16 and two v8 halves give the same
// bits; fp32 runs on the machine's own vectors (on AVX2 GCC lowers a v16's
// selects lane by lane), all N in one pass down the rows, so each row's 64
// bytes are read once a pass (with one half a pass, GPT-2's attention forward
// and backward took 295 ms for 12 layers against 264-271, AMD Zen 3).
template <class V, int N>
[[gnu::always_inline]] inline void causal_exp_lanes(float* s, int64_t ld, int64_t i0, int64_t nj, int64_t t,
                                                    V (&inv)[N]) {
  using VI = decltype(V{} < V{});
  constexpr int kW = static_cast<int>(sizeof(V) / sizeof(float));
  VI lane[N];
  V m[N];
#pragma GCC unroll 4
  for (int n = 0; n < N; ++n) {
    for (int k = 0; k < kW; ++k) lane[n][k] = n * kW + k;
    m[n] = broadcast<V>(-INFINITY);
  }
  for (int64_t j = 0; j < i0; ++j)
#pragma GCC unroll 4
    for (int n = 0; n < N; ++n) {
      const V x = load<V>(s + j * ld + n * kW);
      m[n] = x > m[n] ? x : m[n];
    }
  for (int64_t j = i0; j < nj; ++j)  // the diagonal 16 × 16 block: lane l keeps j ≤ i0 + l
#pragma GCC unroll 4
    for (int n = 0; n < N; ++n) {
      V x = load<V>(s + j * ld + n * kW);
      x = lane[n] >= static_cast<int32_t>(j - i0) ? x : broadcast<V>(-INFINITY);
      m[n] = x > m[n] ? x : m[n];
    }
  V sum[N] = {};  // the masked entries add ~1e-38 each to a sum ≥ 1: nothing
  for (int64_t j = 0; j < nj; ++j)
#pragma GCC unroll 4
    for (int n = 0; n < N; ++n) {
      V e = exp_nonpositive(load<V>(s + j * ld + n * kW) - m[n]);
      e = j < i0 || lane[n] >= static_cast<int32_t>(j - i0) ? e : V{};
      sum[n] += e;
      store(s + j * ld + n * kW, e);
    }
#pragma GCC unroll 4
  for (int n = 0; n < N; ++n) inv[n] = lane[n] < static_cast<int32_t>(t - i0) ? 1.0f / sum[n] : V{};
}

// Softmax down the columns of one query block's scores s (nj rows ld apart,
// lanes = queries i0 + l): over j ≤ i, zeros for j > i and for lanes past T.
// With kPairs, also P's pair words at `out`.
template <bool kPairs = false>
void causal_softmax_block(float* s, int64_t ld, int64_t i0, int64_t nj, int64_t t,
                          const PairOutputs* out = nullptr) {
  if constexpr (!kPairs) {
    constexpr int N = kLanes / kNat;
    vnat inv[N];
    causal_exp_lanes(s, ld, i0, nj, t, inv);
    for (int64_t j = 0; j < nj; ++j)
#pragma GCC unroll 4
      for (int n = 0; n < N; ++n) store(s + j * ld + n * kNat, load<vnat>(s + j * ld + n * kNat) * inv[n]);
    return;
  }
  v16 inv[1];
  causal_exp_lanes(s, ld, i0, nj, t, inv);
  for (int64_t j = 0; j < nj; j += 2) {  // a zero partner after an odd last row
    const v16 lo = load<v16>(s + j * ld) * inv[0], hi = j + 1 < nj ? load<v16>(s + (j + 1) * ld) * inv[0] : v16{};
    store(s + j * ld, lo);
    if (j + 1 < nj) store(s + (j + 1) * ld, hi);
    store_pairs(out->pairs + j / 2 * out->ld_pairs, lo, hi);
  }
}

// dP of one query block (nj rows ld apart) -> dS = scale · P ∘ (dP − Σ_j dP ∘ P)
// in place. p is zero where j > i, so dS is too. With kPairs, dS goes to its
// pair words and bf16 rows at `out` instead, and P to its bf16 rows.
template <bool kPairs = false>
void softmax_backward_block(float* ds, const float* p, int64_t ld, int64_t nj, float scale,
                            const PairOutputs* out = nullptr) {
  if constexpr (!kPairs) {  // on the machine's own vectors (GCC keeps a v16 in memory on AVX2), all 16 lanes a pass
    constexpr int N = kLanes / kNat;
    vnat dot[N] = {};
    for (int64_t j = 0; j < nj; ++j)
#pragma GCC unroll 4
      for (int n = 0; n < N; ++n) dot[n] += load<vnat>(ds + j * ld + n * kNat) * load<vnat>(p + j * ld + n * kNat);
    for (int64_t j = 0; j < nj; ++j)
#pragma GCC unroll 4
      for (int n = 0; n < N; ++n) {
        const int64_t o = j * ld + n * kNat;
        store(ds + o, scale * load<vnat>(p + o) * (load<vnat>(ds + o) - dot[n]));
      }
    return;
  }
  v16 dot{};
  for (int64_t j = 0; j < nj; ++j) dot += load<v16>(ds + j * ld) * load<v16>(p + j * ld);
  v16 lo{};
  for (int64_t j = 0; j < nj; ++j) {
    const v16 pj = load<v16>(p + j * ld), dsj = scale * pj * (load<v16>(ds + j * ld) - dot);
    store_bf16(out->rows + j * out->ld_rows, dsj);
    store_bf16(out->p_rows + j * out->ld_rows, pj);
    if (j % 2 == 0) lo = dsj;
    else store_pairs(out->pairs + j / 2 * out->ld_pairs, lo, dsj);
  }
  if (nj % 2 == 1) store_pairs(out->pairs + nj / 2 * out->ld_pairs, lo, v16{});
}

// out rows q0 .. q0+31 (< t) = L rows, L = P or dS given transposed (lt, rows
// ld apart, this block's lanes at lt), times r (T, hs): row i sums j ≤ i.
// (lt, r and their strides in units of T: for pairs, lt's rows and r's rows
// are pair-interleaved.)
template <class T>
void block_times(int64_t q0, int64_t t, int64_t hs, const T* lt, int64_t ld, const T* r, int64_t ldr, float* out,
                 int64_t ldo) {
  panels(0, std::min(kBlock, t - q0), [&](int64_t s, int64_t rows) {
    row_block(rows, Operand<T>{lt + s, 1, ld, r, ldr}, hs, 0, units<T>(q0 + s + rows), 1.0f, out + s * ldo, ldo);
  });
}

// out (T, hs) = L(T, T)ᵀ · r for lower-triangular L given transposed (lt, rows
// ld apart): row j sums i ≥ j. (For pairs: lt's rows hold pairs of i, r's rows
// are pair-interleaved.)
template <class T>
void lower_t_times(int64_t t, int64_t hs, const T* lt, int64_t ld, const T* r, int64_t ldr, float* out,
                   int64_t ldo) {
  panels(0, t, [&](int64_t j0, int64_t rows) {  // j0 is even: a pair never straddles it
    row_block(rows, Operand<T>{lt + j0 * ld, ld, 1, r, ldr}, hs, units<T>(j0), units<T>(t), 1.0f, out + j0 * ldo, ldo);
  });
}

// dst (hs, tp) = srcᵀ for src (T, hs) with rows ld apart; columns T..tp zero.
// Whole 16 × 16 tiles go through registers; ragged edges element by element.
void transpose_padded(int64_t t, int64_t tp, int64_t hs, const float* src, int64_t ld, float* dst) {
  for (int64_t e0 = 0; e0 < hs; e0 += kNat) {
    int64_t j0 = 0;
    for (; e0 + kNat <= hs && j0 + kNat <= t; j0 += kNat) {
      vnat tile[kNat];
      for (int64_t r = 0; r < kNat; ++r) tile[r] = load<vnat>(src + (j0 + r) * ld + e0);
      transpose(tile);
      for (int64_t r = 0; r < kNat; ++r) store(dst + (e0 + r) * tp + j0, tile[r]);
    }
    for (int64_t e = e0; e < std::min(hs, e0 + kNat); ++e) {
      for (int64_t j = j0; j < t; ++j) std::memcpy(dst + e * tp + j, src + j * ld + e, sizeof(float));  // bits as they are
      std::fill(dst + e * tp + t, dst + (e + 1) * tp, 0.0f);
    }
  }
}

// Note [Pair layouts]
// The bf16 products read k in pairs. qkv (and, in backward, dY) is rounded to
// bf16 once, whole. A coef operand whose k runs along its rows (K, V rows for
// scores; Pᵀ, dSᵀ rows for dK, dV) is then read as it is: a row of bf16 is a
// row of pair words. A vec operand, and a coef operand whose k runs down its
// columns (Pᵀ, dSᵀ lanes for P·V and dS·K), has its rows interleaved in pairs:
// word [k/2][c] = (x[k][c], x[k+1][c]), a zero row after an odd last one. Qᵀ
// and dYᵀ, whose k (the channel) runs along the rows of Q and dY, are the
// rounded rows transposed as 32-bit words: word [e/2][l] = (x[l][e], x[l][e+1]),
// the fp32 transpose applied to the words.

// A (rows, cols) tensor rounded to bf16 whole, held as the pair words the
// products read (cols even), or the caller's rounding of it (`given`).
struct Rounded {
  std::unique_ptr<uint32_t[]> owned;
  const uint32_t* words;
  Rounded(const float* x, int64_t rows, int64_t cols, const uint16_t* given = nullptr)
      : words(reinterpret_cast<const uint32_t*>(given)) {
    if (given) return;
    owned = std::make_unique_for_overwrite<uint32_t[]>(rows * cols / 2);
    round_operand(x, rows, cols, cols, reinterpret_cast<uint16_t*>(owned.get()));
    words = owned.get();
  }
};

// dst ((rows+1)/2, cols) words = bf16 rows of src (ld bf16 apart, src and ld
// even) interleaved in pairs: integer moves only, the rounding was done.
void interleave_rows(int64_t rows, int64_t cols, const uint32_t* src, int64_t ld, uint32_t* dst) {
  const char* base = reinterpret_cast<const char*>(src);
  for (int64_t r = 0; r < rows; r += 2) {
    const char* lo = base + r * ld * 2;
    const char* hi = r + 1 < rows ? lo + ld * 2 : nullptr;
    uint32_t* out = dst + r / 2 * cols;
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16) {
      vh16 l, h{};
      std::memcpy(&l, lo + c * 2, sizeof l);
      if (hi) std::memcpy(&h, hi + c * 2, sizeof h);
      const vu16 w = __builtin_convertvector(l, vu16) | __builtin_convertvector(h, vu16) << 16;
      std::memcpy(out + c, &w, sizeof w);
    }
    for (; c < cols; ++c) {
      uint16_t l, h = 0;
      std::memcpy(&l, lo + c * 2, 2);
      if (hi) std::memcpy(&h, hi + c * 2, 2);
      out[c] = static_cast<uint32_t>(l) | static_cast<uint32_t>(h) << 16;
    }
  }
}

// The bf16 products need an even head size (pairs of channels); an odd one
// multiplies in fp32.
bool pairs_for(const AttentionDims& d) {
  return gemm_precision() == GemmPrecision::bf16 && attention_on_pairs_at(d.head_size());
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

// Word pointers to one (b, h) item of the rounded qkv: rows `ld` = 3C/2 words apart.
struct HeadPairs {
  const uint32_t* q;
  const uint32_t* k;
  const uint32_t* v;
  int64_t ld;
};

HeadPairs head_of(const AttentionDims& d, const Rounded& qkv, int64_t b, int64_t h) {
  const int64_t c = d.channels;  // even, as hs is
  const uint32_t* base = qkv.words + (b * d.time * 3 * c + h * d.head_size()) / 2;
  return {base, base + c / 2, base + c, 3 * c / 2};
}

// One (b, h) of the forward, fp32 (qt: Qᵀ's buffer) or bf16 (ForwardPairs:
// the pair layouts' buffers). Under bf16 the scores of every query block and
// their softmax come first (the softmax writing Pᵀ's pair words), then y = P v.
struct ForwardPairs {
  std::vector<uint32_t> qt, pt, v;
  ForwardPairs(int64_t t, int64_t tp, int64_t tq, int64_t hs) : qt(hs / 2 * tq), pt((t + 1) / 2 * tp), v((t + 1) / 2 * hs) {}
};

// A product's vec operand streams its rows, and rows 3C floats apart each sit
// on a page of their own: the fp32 items copy them tight first (strided_copy).
void forward_item(const AttentionDims& d, const Head& x, float scale, float* pt, float* yb, std::vector<float>& qt,
                  std::vector<float>& v) {
  const int64_t t = d.time, tp = d.padded_time(), c = d.channels, hs = d.head_size(), tq = qt.size() / hs;
  const int64_t lv = v.size() / t;
  transpose_padded(t, tq, hs, x.q, x.ld, qt.data());
  strided_copy(t, hs, x.v, x.ld, v.data(), lv);
  for (int64_t q0 = 0; q0 < t; q0 += kBlock) {
    const int64_t nq = std::min(kBlock, t - q0);
    block_scores(q0, nq, hs, scale, x.k, x.ld, qt.data() + q0, tq, pt + q0, tp);
    for (int64_t l0 = 0; l0 < nq; l0 += 16)
      causal_softmax_block(pt + q0 + l0, tp, q0 + l0, std::min(t, q0 + l0 + 16), t);
    block_times(q0, t, hs, pt + q0, tp, v.data(), lv, yb + q0 * c, c);
  }
}

// A word is 4 bytes, as a float: transpose_padded moves the words untouched.
void transpose_words(int64_t t, int64_t tq, int64_t words, const uint32_t* src, int64_t ld, uint32_t* dst) {
  transpose_padded(t, tq, words, reinterpret_cast<const float*>(src), ld, reinterpret_cast<float*>(dst));
}

void forward_item(const AttentionDims& d, const HeadPairs& x, float scale, float* pt, float* yb, ForwardPairs& w) {
  const int64_t t = d.time, tp = d.padded_time(), c = d.channels, hs = d.head_size(), tq = w.qt.size() * 2 / hs;
  transpose_words(t, tq, hs / 2, x.q, x.ld, w.qt.data());
  for (int64_t q0 = 0; q0 < t; q0 += kBlock) {
    const int64_t nq = std::min(kBlock, t - q0);
    block_scores(q0, nq, hs, scale, x.k, x.ld, w.qt.data() + q0, tq, pt + q0, tp);
    for (int64_t l0 = 0; l0 < nq; l0 += 16) {
      const PairOutputs out{.pairs = w.pt.data() + q0 + l0, .ld_pairs = tp};
      causal_softmax_block<true>(pt + q0 + l0, tp, q0 + l0, std::min(t, q0 + l0 + 16), t, &out);
    }
  }
  interleave_rows(t, hs, x.v, 2 * x.ld, w.v.data());
  for (int64_t q0 = 0; q0 < t; q0 += kBlock) block_times(q0, t, hs, w.pt.data() + q0, tp, w.v.data(), hs, yb + q0 * c, c);
}

// One (b, h) of the backward, fp32 or bf16 (BackwardPairs; g16: dY rounded,
// rows C/2 words apart). Under bf16, dPᵀ and dSᵀ of every query block come
// first (the softmax backward writing dS's and P's bf16 layouts), then dQ, dK
// and dV.
struct BackwardPairs {
  std::vector<uint32_t> gt, ds_rows, ds_pairs, p_rows, k, q, g;
  BackwardPairs(int64_t t, int64_t tp, int64_t tq, int64_t hs)
      : gt(hs / 2 * tq), ds_rows(t * tp / 2), ds_pairs((t + 1) / 2 * tp), p_rows(t * tp / 2), k((t + 1) / 2 * hs),
        q((t + 1) / 2 * hs), g((t + 1) / 2 * hs) {}
};

void backward_item(const AttentionDims& d, const Head& x, float scale, const float* pt, const float* g, float* dq,
                   std::vector<float>& gt, std::vector<float>& ds, std::vector<float>& rows) {
  const int64_t t = d.time, tp = d.padded_time(), c = d.channels, hs = d.head_size(), tq = gt.size() / hs;
  const int64_t lr = rows.size() / t;
  transpose_padded(t, tq, hs, g, c, gt.data());
  strided_copy(t, hs, x.k, x.ld, rows.data(), lr);
  for (int64_t q0 = 0; q0 < t; q0 += kBlock) {
    const int64_t nq = std::min(kBlock, t - q0);
    block_scores(q0, nq, hs, 1.0f, x.v, x.ld, gt.data() + q0, tq, ds.data() + q0, tp);  // dPᵀ = V dYᵀ
    for (int64_t l0 = 0; l0 < nq; l0 += 16)
      softmax_backward_block(ds.data() + q0 + l0, pt + q0 + l0, tp, std::min(t, q0 + l0 + 16), scale);
    block_times(q0, t, hs, ds.data() + q0, tp, rows.data(), lr, dq + q0 * x.ld, x.ld);  // dQ = dS K
  }
  strided_copy(t, hs, x.q, x.ld, rows.data(), lr);
  lower_t_times(t, hs, ds.data(), tp, rows.data(), lr, dq + c, x.ld);  // dK = dSᵀ Q
  strided_copy(t, hs, g, c, rows.data(), lr);
  lower_t_times(t, hs, pt, tp, rows.data(), lr, dq + 2 * c, x.ld);  // dV = Pᵀ dY
}

void backward_item(const AttentionDims& d, const HeadPairs& x, float scale, const float* pt, const uint32_t* g16,
                   float* dq, BackwardPairs& w, std::vector<float>& ds) {
  const int64_t t = d.time, tp = d.padded_time(), c = d.channels, hs = d.head_size(), tq = w.gt.size() * 2 / hs;
  const int64_t ldq = 3 * c;  // dq, dk, dv rows, floats
  transpose_words(t, tq, hs / 2, g16, c / 2, w.gt.data());
  for (int64_t q0 = 0; q0 < t; q0 += kBlock) {
    const int64_t nq = std::min(kBlock, t - q0);
    block_scores(q0, nq, hs, 1.0f, x.v, x.ld, w.gt.data() + q0, tq, ds.data() + q0, tp);  // dPᵀ = V dYᵀ
    for (int64_t l0 = 0; l0 < nq; l0 += 16) {
      const PairOutputs out{.pairs = w.ds_pairs.data() + q0 + l0, .ld_pairs = tp,
                            .rows = reinterpret_cast<uint16_t*>(w.ds_rows.data()) + q0 + l0,
                            .p_rows = reinterpret_cast<uint16_t*>(w.p_rows.data()) + q0 + l0, .ld_rows = tp};
      softmax_backward_block<true>(ds.data() + q0 + l0, pt + q0 + l0, tp, std::min(t, q0 + l0 + 16), scale, &out);
    }
  }
  interleave_rows(t, hs, x.k, 2 * x.ld, w.k.data());
  for (int64_t q0 = 0; q0 < t; q0 += kBlock)  // dQ = dS K
    block_times(q0, t, hs, w.ds_pairs.data() + q0, tp, w.k.data(), hs, dq + q0 * ldq, ldq);
  interleave_rows(t, hs, x.q, 2 * x.ld, w.q.data());
  lower_t_times(t, hs, w.ds_rows.data(), tp / 2, w.q.data(), hs, dq + c, ldq);  // dK = dSᵀ Q
  interleave_rows(t, hs, g16, c, w.g.data());
  lower_t_times(t, hs, w.p_rows.data(), tp / 2, w.g.data(), hs, dq + 2 * c, ldq);  // dV = Pᵀ dY
}

// q·kᵀ and p·v over every (b, h), as whole products: 2 · 2·T·T·hs · B·n_head.
double whole_products_flops(const AttentionDims& d) {
  return 4.0 * static_cast<double>(d.batch) * static_cast<double>(d.time) * static_cast<double>(d.time) *
         static_cast<double>(d.channels);
}

}  // namespace

void attention_forward(const AttentionDims& d, const float* qkv, float* y, float* probs, const uint16_t* qkv_rounded) {
  const ProductFlops::Product product(whole_products_flops(d));
  const int64_t t = d.time, tp = d.padded_time(), c = d.channels, hs = d.head_size();
  const int64_t tq = odd_lines((t + kBlock - 1) / kBlock * kBlock);  // columns of Qᵀ, dYᵀ: whole blocks
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const bool pairs = pairs_for(d);
  const std::optional<Rounded> qkv16 = pairs ? std::optional<Rounded>(std::in_place, qkv, d.batch * t, 3 * c, qkv_rounded) : std::nullopt;
  parallel_for(d.batch * d.n_head, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> qt(pairs ? 0 : static_cast<size_t>(hs * tq)), v(pairs ? 0 : static_cast<size_t>(t * odd_lines(hs)));
    std::optional<ForwardPairs> w;
    if (pairs) w.emplace(t, tp, tq, hs);
    for (int64_t item = i0; item < i1; ++item) {
      int64_t b = item / d.n_head, h = item % d.n_head;
      float* pt = probs + item * t * tp;  // Pᵀ of (b, h): (B, n_head, T, Tp), item-major
      float* yb = y + b * t * c + h * hs;
      if (pairs) forward_item(d, head_of(d, *qkv16, b, h), scale, pt, yb, *w);
      else forward_item(d, head_of(d, qkv, b, h), scale, pt, yb, qt, v);
    }
  });
}

void attention_backward(const AttentionDims& d, const float* qkv, const float* probs, const float* dy, float* dqkv,
                        const uint16_t* qkv_rounded) {
  const ProductFlops::Product product(2 * whole_products_flops(d));
  const int64_t t = d.time, tp = d.padded_time(), c = d.channels, hs = d.head_size();
  const int64_t tq = odd_lines((t + kBlock - 1) / kBlock * kBlock);  // columns of Qᵀ, dYᵀ: whole blocks
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const bool pairs = qkv_rounded || pairs_for(d);  // given the rounding, qkv itself may be gone
  std::optional<Rounded> qkv16, dy16;
  if (pairs) qkv16.emplace(qkv, d.batch * t, 3 * c, qkv_rounded), dy16.emplace(dy, d.batch * t, c);
  parallel_for(d.batch * d.n_head, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> gt(pairs ? 0 : static_cast<size_t>(hs * tq)), ds(static_cast<size_t>(t * tp)),  // dPᵀ, then dSᵀ in place
        rows(pairs ? 0 : static_cast<size_t>(t * odd_lines(hs)));  // K, then Q, then dY, packed
    std::optional<BackwardPairs> w;
    if (pairs) w.emplace(t, tp, tq, hs);
    for (int64_t item = i0; item < i1; ++item) {
      int64_t b = item / d.n_head, h = item % d.n_head;
      const float* pt = probs + item * t * tp;
      const float* g = dy + b * t * c + h * hs;   // dY rows, C apart
      float* dq = dqkv + b * t * 3 * c + h * hs;  // dq, dk, dv rows, 3C apart
      if (pairs)
        backward_item(d, head_of(d, *qkv16, b, h), scale, pt, dy16->words + (b * t * c + h * hs) / 2, dq, *w, ds);
      else backward_item(d, head_of(d, qkv, b, h), scale, pt, g, dq, gt, ds, rows);
    }
  });
}

namespace {
std::atomic<AttentionProducts> g_attention_products{AttentionProducts::automatic};
}  // namespace

void set_attention_products(AttentionProducts p) { g_attention_products.store(p); }

bool attention_rounds_qkv(const AttentionDims& d) { return pairs_for(d); }

bool attention_on_pairs_at(int64_t head_size) { return attention_products_on_pairs() && head_size % 2 == 0; }

bool attention_products_on_pairs() {
  switch (g_attention_products.load(std::memory_order_relaxed)) {
    case AttentionProducts::fp32: return false;
    case AttentionProducts::bf16_pairs: return true;
    case AttentionProducts::automatic: break;
  }
  static const bool amd = __builtin_cpu_is("amd");
  return amd;
}

}  // namespace artel::kernels
