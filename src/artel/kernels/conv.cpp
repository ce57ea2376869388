#include "artel/kernels/conv.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "artel/core/threads.h"
#include "artel/kernels/gemm.h"
#include "artel/kernels/masked_lanes.h"
#include "artel/kernels/reduce.h"

namespace artel::kernels {
namespace {

// Outputs o in [lo, hi) whose input index o·s − p + k lies in [0, n_in).
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t n_in, int64_t n_out, int64_t s, int64_t p, int64_t k) {
  int64_t lo = p - k > 0 ? (p - k + s - 1) / s : 0;
  int64_t last = n_in - 1 + p - k;  // o·s ≤ last
  int64_t hi = last < 0 ? 0 : last / s + 1;
  lo = std::min(lo, n_out);
  hi = std::clamp(hi, lo, n_out);
  return {lo, hi};
}

// Visits every (patch row, output row) pair of one sample: fn(out row of col,
// input row or null when it falls in the padding, the kernel column kj).
template <class Fn>
void for_each_patch_row(const Conv2dDims& d, Fn&& fn) {
  const int64_t ho = d.out_height(), wo = d.out_width();
  for (int64_t c = 0; c < d.c_in; ++c)
    for (int64_t ki = 0; ki < d.kernel_h; ++ki)
      for (int64_t kj = 0; kj < d.kernel_w; ++kj) {
        int64_t row = (c * d.kernel_h + ki) * d.kernel_w + kj;
        Range cols = valid_outputs(d.width, wo, d.stride, d.padding, kj);
        for (int64_t oh = 0; oh < ho; ++oh) {
          int64_t ih = oh * d.stride - d.padding + ki;
          bool inside = ih >= 0 && ih < d.height;
          fn(row * ho * wo + oh * wo, inside ? (c * d.height + ih) * d.width : -1, kj, cols);
        }
      }
}

#if defined(ARTEL_MASKED_LANES)
// Note [Unit-stride patch rows]
// At stride 1 a patch row is a run of the input row shifted by the kernel
// column, with zeros where it falls in the padding: LeNet's are 10 to 28
// floats. Calls of memmove and fill for each took im2col and col2im to 40%
// of the CNN's step (AVX-512 machine, 1 thread). Here a vector of outputs at
// a time (16 with AVX-512, 8 with AVX2) is one load and one store under a
// mask of the lanes inside [cols.lo, cols.hi), the masks made once for all
// output rows of a kernel column (made for each row, they cost more than the
// copies). The address of lane 0 may lie before the input where a row starts
// in the padding; those lanes are masked off, so nothing is read there.
struct VectorMasks {
  masked::Mask inside, row;  // the lanes in [cols.lo, cols.hi); those below wo
};
struct RowMasks {
  std::vector<VectorMasks> vectors;  // one per vector of outputs
  RowMasks(int64_t wo, Range cols) {
    for (int64_t ow = 0; ow < wo; ow += masked::kLanes)
      vectors.push_back({masked::and_not(masked::first(cols.hi - ow), masked::first(cols.lo - ow)),
                         masked::first(wo - ow)});
  }
};

template <class T>
T* shifted(T* p, int64_t by) {  // p + by, which may point outside the array (the note)
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(by * int64_t{sizeof(T)}));
}

// Visits a sample's patch rows at stride 1: fn(col row, floats from it to
// its patch row's end, inside the input (not the padding), input offset of
// output column 0, the kernel column's masks). A patch row's output rows go
// in turn, or, with `row_step` s, as rows 0, s, 2s, ..., then 1, 1 + s, ...
template <class Fn>
void for_each_unit_stride_row(const Conv2dDims& d, Fn&& fn, int64_t row_step = 1) {
  const int64_t ho = d.out_height(), wo = d.out_width();
  for (int64_t kj = 0; kj < d.kernel_w; ++kj) {
    const RowMasks masks(wo, valid_outputs(d.width, wo, 1, d.padding, kj));
    for (int64_t c = 0; c < d.c_in; ++c)
      for (int64_t ki = 0; ki < d.kernel_h; ++ki) {
        const int64_t row = (c * d.kernel_h + ki) * d.kernel_w + kj;
        for (int64_t first_oh = 0; first_oh < row_step; ++first_oh)
          for (int64_t oh = first_oh; oh < ho; oh += row_step) {
            const int64_t ih = oh - d.padding + ki;
            fn(row * ho * wo + oh * wo, (ho - oh) * wo, ih >= 0 && ih < d.height,
               (c * d.height + ih) * d.width - d.padding + kj, masks);
          }
      }
  }
}

void im2col_unit_stride(const Conv2dDims& d, const float* x, float* col) {
  // A patch row's output rows lie one after another in col, each stored
  // right after the one before: a store may spill into the rest of them.
  for_each_unit_stride_row(d, [&](int64_t out, int64_t left, bool inside, int64_t first, const RowMasks& m) {
    float* o = col + out;
    int64_t ow = 0;
    for (const VectorMasks& v : m.vectors) {
      const masked::Vec in = inside ? masked::load(v.inside, shifted(x, first + ow)) : masked::zero();
      masked::store_run(o + ow, v.row, in, ow + masked::kLanes <= left);
      ow += masked::kLanes;
    }
  });
}

// Note [Rows apart for read-modify-write]
// Each output row adds its vectors onto an input row, which it loads right
// after the last row's stores. Where input rows are narrower than a row's
// vectors (LeNet's second layer: 14 floats apart, one 16-lane vector each),
// the load's vector overlaps the last store's, and the CPU holds it until
// that masked store is written: on AMD Zen 4 a row took 7.4 ns so, 1.7 ns
// with rows two apart (col2im of that layer, 128 samples: 1.5 ms a step).
// So rows go apart by as many as it takes for their vectors not to overlap.
void col2im_add_unit_stride(const Conv2dDims& d, const float* col, float* dx) {
  const int64_t vectors = (d.out_width() + masked::kLanes - 1) / masked::kLanes;
  const int64_t row_step = std::max<int64_t>(1, (vectors * masked::kLanes + d.width - 1) / d.width);
  for_each_unit_stride_row(d, [&](int64_t out, int64_t, bool inside, int64_t first, const RowMasks& m) {
    if (!inside) return;
    const float* o = col + out;
    int64_t ow = 0;
    for (const VectorMasks& v : m.vectors) {
      float* at = shifted(dx, first + ow);
      masked::store(at, v.inside, masked::add(masked::load(v.inside, at), masked::load(v.inside, o + ow)));
      ow += masked::kLanes;
    }
  }, row_step);
}
#endif

// A 1×1 convolution with stride 1 and no padding needs no col: it is x itself.
bool is_pointwise(const Conv2dDims& d) {
  return d.kernel_h == 1 && d.kernel_w == 1 && d.stride == 1 && d.padding == 0;
}

}  // namespace

void im2col(const Conv2dDims& d, const float* x, float* col) {
#if defined(ARTEL_MASKED_LANES)
  if (d.stride == 1) return im2col_unit_stride(d, x, col);
#endif
  const int64_t wo = d.out_width(), s = d.stride, shift = d.padding;
  for_each_patch_row(d, [&](int64_t out, int64_t in, int64_t kj, Range cols) {
    float* o = col + out;
    if (in < 0) return std::fill(o, o + wo, 0.0f);
    const int64_t first = in - shift + kj;  // input index of output column 0 (may be in the padding)
    std::fill(o, o + cols.lo, 0.0f);
    if (s == 1) {  // a contiguous run, copied as one (measured faster than an inlined loop on LeNet's 10-30 floats)
      std::copy(x + first + cols.lo, x + first + cols.hi, o + cols.lo);
    } else {
      for (int64_t ow = cols.lo; ow < cols.hi; ++ow) o[ow] = x[first + ow * s];
    }
    std::fill(o + cols.hi, o + wo, 0.0f);
  });
}

void col2im_add(const Conv2dDims& d, const float* col, float* dx) {
#if defined(ARTEL_MASKED_LANES)
  if (masked::kMaskedStoresAreCheap && d.stride == 1) return col2im_add_unit_stride(d, col, dx);
#endif
  const int64_t s = d.stride, shift = d.padding;
  for_each_patch_row(d, [&](int64_t out, int64_t in, int64_t kj, Range cols) {
    if (in < 0) return;
    const float* o = col + out;
    const int64_t first = in - shift + kj;
    if (s == 1) {  // unit stride, so the loop vectorises
      float* d = dx + first;
      for (int64_t ow = cols.lo; ow < cols.hi; ++ow) d[ow] += o[ow];
    } else {
      for (int64_t ow = cols.lo; ow < cols.hi; ++ow) dx[first + ow * s] += o[ow];
    }
  });
}

void conv2d_forward(const Conv2dDims& d, const float* x, const float* weight, const float* bias, float* y) {
  const int64_t hw = d.out_height() * d.out_width(), k = d.patch_size(), in_size = d.c_in * d.height * d.width;
  const bool pointwise = is_pointwise(d);
  parallel_for(d.batch, 1, [&](int64_t n0, int64_t n1) {
    std::vector<float> col(pointwise ? 0 : static_cast<size_t>(k * hw));
    for (int64_t n = n0; n < n1; ++n) {
      const float* xn = x + n * in_size;
      if (!pointwise) im2col(d, xn, col.data());
      float* yn = y + n * d.c_out * hw;
      if (bias)
        for (int64_t co = 0; co < d.c_out; ++co) std::fill(yn + co * hw, yn + (co + 1) * hw, bias[co]);
      // y_n (Cout, HW) = weight (Cout, K) · col (K, HW) [+ bias already there]
      gemm(GemmArgs{false, false, d.c_out, hw, k, 1.0f, weight, k, pointwise ? xn : col.data(), hw,
                    bias ? 1.0f : 0.0f, yn, hw});
    }
  });
}

void conv2d_backward(const Conv2dDims& d, const float* x, const float* weight, const float* dy, float* dx,
                     float* dweight, float* dbias) {
  const int64_t hw = d.out_height() * d.out_width(), k = d.patch_size(), in_size = d.c_in * d.height * d.width;
  const int64_t w_size = d.c_out * k;
  const bool pointwise = is_pointwise(d);
  // Samples go in `chunks` groups, one per thread; each group sums its own
  // dweight/dbias (group 0 straight into the outputs), added up at the end.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(num_threads(), d.batch));
  std::vector<float> partial(static_cast<size_t>((chunks - 1) * (w_size + d.c_out)));
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<float> col(pointwise ? 0 : static_cast<size_t>(k * hw));
    for (int64_t c = c0; c < c1; ++c) {
      float* part = c == 0 ? nullptr : partial.data() + (c - 1) * (w_size + d.c_out);
      float* dw = !dweight ? nullptr : c == 0 ? dweight : part;
      float* db = !dbias ? nullptr : c == 0 ? dbias : part + w_size;
      if (dw) std::fill(dw, dw + w_size, 0.0f);
      if (db) std::fill(db, db + d.c_out, 0.0f);
      for (int64_t n = d.batch * c / chunks; n < d.batch * (c + 1) / chunks; ++n) {
        const float* dyn = dy + n * d.c_out * hw;
        const float* xn = x + n * in_size;
        if (db)  // one chain of float adds an output channel took 6% of the CNN's step
          for (int64_t co = 0; co < d.c_out; ++co) db[co] += static_cast<float>(sum_span(hw, dyn + co * hw));
        if (dw) {  // dweight (Cout, K) += dy_n (Cout, HW) · col (K, HW)ᵀ
          if (!pointwise) im2col(d, xn, col.data());
          gemm(GemmArgs{false, true, d.c_out, k, hw, 1.0f, dyn, hw, pointwise ? xn : col.data(), hw, 1.0f, dw, k});
        }
        if (dx) {  // dcol (K, HW) = weightᵀ · dy_n, scattered back by col2im
          float* dxn = dx + n * in_size;
          float* dcol = pointwise ? dxn : col.data();
          gemm(GemmArgs{true, false, k, hw, d.c_out, 1.0f, weight, k, dyn, hw, 0.0f, dcol, hw});
          if (!pointwise) {
            std::fill(dxn, dxn + in_size, 0.0f);
            col2im_add(d, dcol, dxn);
          }
        }
      }
    }
  });
  for (int64_t c = 1; c < chunks; ++c) {
    const float* part = partial.data() + (c - 1) * (w_size + d.c_out);
    if (dweight)
      for (int64_t i = 0; i < w_size; ++i) dweight[i] += part[i];
    if (dbias)
      for (int64_t i = 0; i < d.c_out; ++i) dbias[i] += part[w_size + i];
  }
}

}  // namespace artel::kernels
