#include "artel/kernels/embedding.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "artel/core/error.h"
#include "artel/core/threads.h"

namespace artel::kernels {

template <class Id>
void check_ids(int64_t n, int64_t V, const Id* ids) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = static_cast<int64_t>(ids[i]);
    if (id < 0 || id >= V)
      throw Error("embedding: id " + std::to_string(id) + " at position " + std::to_string(i) +
                      " is outside the table's [0, " + std::to_string(V) + ")",
                  "check the vocabulary size the model was built with against the data");
  }
}

template <class Id>
void embedding_forward(int64_t n, int64_t C, const Id* ids, int64_t first, int64_t V, const float* weight, float* out) {
  parallel_for(n, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, C)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t row = static_cast<int64_t>(ids[i]) - first;
      if (row >= 0 && row < V)
        std::memcpy(out + i * C, weight + row * C, static_cast<size_t>(C) * sizeof(float));
      else
        std::memset(out + i * C, 0, static_cast<size_t>(C) * sizeof(float));
    }
  });
}

template <class Id>
void embedding_backward(int64_t n, int64_t V, int64_t C, const Id* ids, int64_t first, const float* dout,
                        float* dweight, bool accumulate) {
  if (!accumulate) std::memset(dweight, 0, static_cast<size_t>(V * C) * sizeof(float));
  // Threads take disjoint column ranges, so rows sharing an id never race.
  int64_t col_grain = std::max<int64_t>(16, (1 << 15) / std::max<int64_t>(1, n));
  parallel_for(C, col_grain, [&](int64_t c0, int64_t c1) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = static_cast<int64_t>(ids[i]) - first;
      if (row < 0 || row >= V) continue;
      const float* __restrict src = dout + i * C;
      float* __restrict dst = dweight + row * C;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
}

template void check_ids(int64_t, int64_t, const int32_t*);
template void check_ids(int64_t, int64_t, const int64_t*);
template void embedding_forward(int64_t, int64_t, const int32_t*, int64_t, int64_t, const float*, float*);
template void embedding_forward(int64_t, int64_t, const int64_t*, int64_t, int64_t, const float*, float*);
template void embedding_backward(int64_t, int64_t, int64_t, const int32_t*, int64_t, const float*, float*, bool);
template void embedding_backward(int64_t, int64_t, int64_t, const int64_t*, int64_t, const float*, float*, bool);

}  // namespace artel::kernels
