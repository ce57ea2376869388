#include "artel/kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "artel/core/error.h"
#include "artel/core/threads.h"
#include "artel/kernels/chunks.h"
#include "artel/kernels/fast_math.h"

namespace artel::kernels {
namespace {

constexpr int64_t kGrainElems = 1 << 13;

int64_t grain_rows(int64_t V) { return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, V)); }

// A row's gradient, with d = exp(x − m) already in place: d·scale/s − scale·onehot.
void finish_gradient_row(int64_t V, float* __restrict d, float s, float scale, int64_t target) {
  const float f = scale / s;
  for (int64_t i = 0; i < V; ++i) d[i] *= f;
  if (target >= 0 && target < V) d[target] -= scale;
}

}  // namespace

template <class Id>
void check_targets(int64_t N, int64_t V, const Id* targets, int64_t ignore_index) {
  for (int64_t i = 0; i < N; ++i) {
    int64_t t = static_cast<int64_t>(targets[i]);
    if (t != ignore_index && (t < 0 || t >= V))
      throw Error("cross_entropy: target " + std::to_string(t) + " at position " + std::to_string(i) +
                      " is outside [0, " + std::to_string(V) + ")",
                  "targets are class indices; use ignore_index (" + std::to_string(ignore_index) +
                      ") for positions without a target");
  }
}

template <class Id>
double cross_entropy_forward(int64_t N, int64_t V, const float* logits, const Id* targets, int64_t ignore_index,
                             float* lse, int64_t* valid) {
  int64_t chunks = num_chunks(N, grain_rows(V));
  std::vector<double> loss(static_cast<size_t>(chunks), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(chunks), 0);
  for_chunks(N, chunks, [&](int64_t c, int64_t r0, int64_t r1) {
    double l = 0;
    int64_t k = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = logits + r * V;
      float m = row_max(V, x);
      lse[r] = m + std::log(row_sum_exp(V, x, m));
      int64_t t = static_cast<int64_t>(targets[r]);
      if (t == ignore_index) continue;
      l += static_cast<double>(lse[r]) - x[t];
      ++k;
    }
    loss[static_cast<size_t>(c)] = l;
    count[static_cast<size_t>(c)] = k;
  });
  double total = 0;
  *valid = 0;
  for (int64_t c = 0; c < chunks; ++c) total += loss[static_cast<size_t>(c)], *valid += count[static_cast<size_t>(c)];
  return total;
}

template <class Id>
double cross_entropy_with_gradient(int64_t N, int64_t V, const float* logits, const Id* targets,
                                   int64_t ignore_index, float* lse, int64_t* valid, float* dlogits) {
  *valid = 0;
  for (int64_t r = 0; r < N; ++r) *valid += static_cast<int64_t>(targets[r]) != ignore_index;
  const float scale = *valid ? 1.0f / static_cast<float>(*valid) : 0.0f;
  int64_t chunks = num_chunks(N, grain_rows(V));
  std::vector<double> loss(static_cast<size_t>(chunks), 0.0);
  for_chunks(N, chunks, [&](int64_t c, int64_t r0, int64_t r1) {
    double l = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = logits + r * V;
      float* d = dlogits + r * V;
      // The max reads the row from memory; the rest finds it in cache (a
      // vocabulary of 50,304 is 201 KB).
      const float m = row_max(V, x);
      const float s = row_exp(V, x, m, d);
      lse[r] = m + std::log(s);
      int64_t t = static_cast<int64_t>(targets[r]);
      if (t == ignore_index) {
        std::memset(d, 0, static_cast<size_t>(V) * sizeof(float));
        continue;
      }
      l += static_cast<double>(lse[r]) - x[t];
      finish_gradient_row(V, d, s, scale, t);
    }
    loss[static_cast<size_t>(c)] = l;
  });
  double total = 0;
  for (double l : loss) total += l;
  return total;
}

template <class Id>
void cross_entropy_backward(int64_t N, int64_t V, const float* logits, const Id* targets, int64_t ignore_index,
                            const float* row_max, const float* row_sum_exp, float scale, float* dlogits,
                            int64_t vocab_start) {
  parallel_for(N, grain_rows(V), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* d = dlogits + r * V;
      int64_t t = static_cast<int64_t>(targets[r]);
      if (t == ignore_index) {
        std::memset(d, 0, static_cast<size_t>(V) * sizeof(float));
        continue;
      }
      row_exp(V, logits + r * V, row_max[r], d);
      finish_gradient_row(V, d, row_sum_exp[r], scale, t - vocab_start);
    }
  });
}

template void check_targets(int64_t, int64_t, const int32_t*, int64_t);
template void check_targets(int64_t, int64_t, const int64_t*, int64_t);
template double cross_entropy_forward(int64_t, int64_t, const float*, const int32_t*, int64_t, float*, int64_t*);
template double cross_entropy_forward(int64_t, int64_t, const float*, const int64_t*, int64_t, float*, int64_t*);
template double cross_entropy_with_gradient(int64_t, int64_t, const float*, const int32_t*, int64_t, float*,
                                            int64_t*, float*);
template double cross_entropy_with_gradient(int64_t, int64_t, const float*, const int64_t*, int64_t, float*,
                                            int64_t*, float*);
template void cross_entropy_backward(int64_t, int64_t, const float*, const int32_t*, int64_t, const float*,
                                     const float*, float, float*, int64_t);
template void cross_entropy_backward(int64_t, int64_t, const float*, const int64_t*, int64_t, const float*,
                                     const float*, float, float*, int64_t);

}  // namespace artel::kernels
