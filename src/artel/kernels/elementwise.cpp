#include "artel/kernels/elementwise.h"

#include <algorithm>
#include <cstring>

#include "artel/core/threads.h"
#include "artel/kernels/reduce.h"

namespace artel::kernels {
namespace {

constexpr int64_t kGrainElems = 1 << 15;

template <BinaryOp Op>
inline float apply(float x, float y) {
  if constexpr (Op == BinaryOp::add) return x + y;
  if constexpr (Op == BinaryOp::sub) return x - y;
  if constexpr (Op == BinaryOp::mul) return x * y;
  if constexpr (Op == BinaryOp::div) return x / y;
}

// One contiguous run of the output; SA/SB are the operands' strides (0 or 1).
template <BinaryOp Op, int SA, int SB>
void run(int64_t n, const float* __restrict a, const float* __restrict b, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = apply<Op>(a[i * SA], b[i * SB]);
}

using RunFn = void (*)(int64_t, const float*, const float*, float*);

template <BinaryOp Op>
RunFn pick(int64_t sa, int64_t sb) {
  if (sa && sb) return run<Op, 1, 1>;
  if (sa) return run<Op, 1, 0>;
  if (sb) return run<Op, 0, 1>;
  return run<Op, 0, 0>;
}

RunFn pick(BinaryOp op, int64_t sa, int64_t sb) {
  switch (op) {
    case BinaryOp::add: return pick<BinaryOp::add>(sa, sb);
    case BinaryOp::sub: return pick<BinaryOp::sub>(sa, sb);
    case BinaryOp::mul: return pick<BinaryOp::mul>(sa, sb);
    case BinaryOp::div: return pick<BinaryOp::div>(sa, sb);
  }
  return nullptr;
}

// Offsets of row r (an index over all dimensions but the last) into a and b.
void row_offsets(const BroadcastPlan& p, int64_t r, int64_t& oa, int64_t& ob) {
  oa = ob = 0;
  for (int d = p.ndim - 2; d >= 0; --d) {
    int64_t i = r % p.shape[d];
    r /= p.shape[d];
    oa += i * p.stride_a[d];
    ob += i * p.stride_b[d];
  }
}

}  // namespace

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast",
                  "trailing dimensions must be equal or 1");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

BroadcastPlan plan_broadcast(const Shape& out, const Shape& a, const Shape& b) {
  ARTEL_CHECK(out.size() <= static_cast<size_t>(kMaxDims), "broadcast: at most ", kMaxDims, " dimensions, got ",
              shape_str(out));
  int n = static_cast<int>(out.size());
  int64_t sa[kMaxDims], sb[kMaxDims];
  int64_t ra = 1, rb = 1;  // running contiguous strides of a and b
  for (int i = n - 1; i >= 0; --i) {
    int j = i - (n - static_cast<int>(a.size())), k = i - (n - static_cast<int>(b.size()));
    int64_t da = j >= 0 ? a[static_cast<size_t>(j)] : 1, db = k >= 0 ? b[static_cast<size_t>(k)] : 1;
    sa[i] = da == 1 ? 0 : ra;
    sb[i] = db == 1 ? 0 : rb;
    ra *= da;
    rb *= db;
  }
  BroadcastPlan p;
  p.numel = shape_numel(out);
  for (int i = 0; i < n; ++i) {
    if (out[static_cast<size_t>(i)] == 1) continue;  // size-1 dims carry nothing
    int d = p.ndim - 1;
    bool merge = d >= 0 && p.stride_a[d] == sa[i] * out[static_cast<size_t>(i)] &&
                 p.stride_b[d] == sb[i] * out[static_cast<size_t>(i)];
    if (merge) {
      p.shape[d] *= out[static_cast<size_t>(i)];
      p.stride_a[d] = sa[i];
      p.stride_b[d] = sb[i];
    } else {
      p.shape[p.ndim] = out[static_cast<size_t>(i)];
      p.stride_a[p.ndim] = sa[i];
      p.stride_b[p.ndim] = sb[i];
      ++p.ndim;
    }
  }
  if (p.ndim == 0) p = BroadcastPlan{1, {1}, {1}, {1}, 1};  // a single element
  return p;
}

void binary(BinaryOp op, const BroadcastPlan& p, const float* a, const float* b, float* out) {
  int64_t len = p.shape[p.ndim - 1];
  RunFn fn = pick(op, p.stride_a[p.ndim - 1], p.stride_b[p.ndim - 1]);
  if (p.ndim == 1) {  // one flat run: split it
    int64_t sa = p.stride_a[0], sb = p.stride_b[0];
    parallel_for(len, kGrainElems, [&](int64_t i0, int64_t i1) { fn(i1 - i0, a + i0 * sa, b + i0 * sb, out + i0); });
    return;
  }
  int64_t rows = p.numel / std::max<int64_t>(1, len);
  parallel_for(rows, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, len)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t oa, ob;
      row_offsets(p, r, oa, ob);
      fn(len, a + oa, b + ob, out + r * len);
    }
  });
}

void affine(int64_t n, const float* x, float scale, float shift, float* out) {
  parallel_for(n, kGrainElems, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = x[i] * scale + shift;
  });
}

void sum_to(const BroadcastPlan& p, const float* g, float* dst) {
  int64_t len = p.shape[p.ndim - 1];
  // The common cases: a bias (rows, C) -> (C), and a keepdim-like (R, L) -> (R).
  if (p.ndim == 1) {
    if (p.stride_a[0]) std::memcpy(dst, g, static_cast<size_t>(len) * sizeof(float));
    else dst[0] = static_cast<float>(sum_all(len, g));
    return;
  }
  if (p.ndim == 2 && p.stride_a[0] == 0 && p.stride_a[1] == 1) return column_sums(p.shape[0], len, g, dst);
  if (p.ndim == 2 && p.stride_a[1] == 0) return row_sums(p.shape[0], len, g, dst);
  // General: accumulate row by row (serial: rows may land on the same dst).
  int64_t dst_numel = 1;
  for (int d = 0; d < p.ndim; ++d)
    if (p.stride_a[d]) dst_numel = std::max(dst_numel, p.stride_a[d] * p.shape[d]);
  std::memset(dst, 0, static_cast<size_t>(dst_numel) * sizeof(float));
  int64_t rows = p.numel / len;
  bool inner = p.stride_a[p.ndim - 1] != 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t od, og;
    row_offsets(p, r, od, og);
    const float* __restrict src = g + r * len;
    float* __restrict d = dst + od;
    if (inner) {
      for (int64_t i = 0; i < len; ++i) d[i] += src[i];
    } else {
      float s = 0;
      for (int64_t i = 0; i < len; ++i) s += src[i];
      d[0] += s;
    }
  }
}

}  // namespace artel::kernels
