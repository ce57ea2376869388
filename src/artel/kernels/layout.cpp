#include "artel/kernels/layout.h"

#include <algorithm>
#include <cstring>

#include "artel/core/threads.h"

namespace artel::kernels {

void transpose(int64_t outer, int64_t a, int64_t mid, int64_t b, int64_t inner, const float* x, float* y) {
  // One task per (o, j) output block of (mid, a, inner) elements.
  int64_t block = mid * a * inner;
  parallel_for(outer * b, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, block)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t o = t / b, j = t % b;
      for (int64_t m = 0; m < mid; ++m)
        for (int64_t i = 0; i < a; ++i) {
          const float* src = x + (((o * a + i) * mid + m) * b + j) * inner;
          float* dst = y + (((o * b + j) * mid + m) * a + i) * inner;
          if (inner == 1) *dst = *src;
          else std::memcpy(dst, src, static_cast<size_t>(inner) * sizeof(float));
        }
    }
  });
}

void strided_copy(int64_t outer, int64_t len, const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
  if (len == 0) return;
  // Short rows far apart (an attention head's 64 floats, rows 9 KB apart in
  // GPT-2's qkv) each start a cache miss that the hardware prefetcher does
  // not foresee: fetching rows kAhead ahead took a (256, 64) head's copy
  // from 4.0 to 2.9 us (AMD Zen 3). A prefetch past the rows' end is a hint:
  // it never faults.
  constexpr int64_t kAhead = 16, kLine = 64 / sizeof(float);
  const bool short_rows = len <= 4 * kLine && src_stride > len;
  parallel_for(outer, std::max<int64_t>(1, (1 << 16) / len), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      if (short_rows)
        for (int64_t i = 0; i < len; i += kLine) __builtin_prefetch(src + (o + kAhead) * src_stride + i);
      std::memcpy(dst + o * dst_stride, src + o * src_stride, static_cast<size_t>(len) * sizeof(float));
    }
  });
}

}  // namespace artel::kernels
