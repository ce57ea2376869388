// Helpers for the parallel tests: an error's text, random tensors, element-wise comparison with
// a tolerance relative to the reference's scale, ranks as threads, and a place
// where every rank leaves a tensor for the main thread to reassemble.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "artel/comm/thread_group.h"
#include "artel/core/error.h"
#include "artel/core/rng.h"
#include "artel/core/tensor.h"
#include "error_of.h"

namespace artel::parallel::parallel_testing {

using test_support::error_of;

inline Tensor randn(const Shape& s, uint64_t seed, float scale = 1.0f) {
  Tensor t = Tensor::empty(s);
  Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * rng.normal();
  return t;
}

inline Tensor ids_tensor(const std::vector<int64_t>& v, const Shape& s, DType dtype = DType::i64) {
  Tensor t = Tensor::empty(s, dtype);
  for (size_t i = 0; i < v.size(); ++i) set_element(t, static_cast<int64_t>(i), static_cast<double>(v[i]));
  return t;
}

// |got − want| <= rtol·(|want| + max|want|·0.1) per element: relative to the
// element, with a floor at a tenth of the tensor's scale for elements near 0
// (sums in another order differ by rounding of the large terms).
inline void expect_close(const Tensor& got, const Tensor& want, const std::string& what, float rtol = 1e-5f) {
  ASSERT_TRUE(got.defined()) << what << ": undefined";
  ASSERT_EQ(got.shape(), want.shape()) << what;
  auto g = got.to_vector(), w = want.to_vector();
  float scale = 0;
  for (float x : w) scale = std::max(scale, std::abs(x));
  int wrong = 0;
  for (size_t i = 0; i < w.size() && wrong < 5; ++i)
    if (!(std::abs(g[i] - w[i]) <= rtol * (std::abs(w[i]) + 0.1f * scale))) {
      ADD_FAILURE() << what << "[" << i << "]: got " << g[i] << ", want " << w[i];
      ++wrong;
    }
}

// spawn_threads with small per-rank buffers: the default 64 MiB of registered
// memory per rank would cost more to set up than these tests take to run.
inline void spawn(int world, const std::function<void(comm::ProcessGroup&)>& fn) {
  comm::GroupOptions o;
  o.registered_bytes = 1 << 20;
  o.staging_bytes = 1 << 16;
  comm::spawn_threads(world, fn, o);
}

// One slot per rank; rank r writes only slot r, read after spawn_threads returned.
struct PerRank {
  explicit PerRank(int world) : slots(static_cast<size_t>(world)) {}
  void put(int rank, const Tensor& t) { slots[static_cast<size_t>(rank)] = t.clone(); }
  std::vector<Tensor> slots;
};

}  // namespace artel::parallel::parallel_testing
