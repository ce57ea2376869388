#include "artel/kernels/accumulate.h"

#include "artel/core/threads.h"

namespace artel::kernels {

void add_into(float* __restrict dst, const float* __restrict src, int64_t n) {
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] += src[i];
  });
}

void add_to(float* __restrict out, const float* __restrict a, const float* __restrict b, int64_t n) {
  parallel_for(n, 1 << 16, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) out[i] = a[i] + b[i];
  });
}

}  // namespace artel::kernels
