// Whether two tensors hold the same shape, dtype and bytes: the test of a
// result that must not change at all (a shard of a whole, a replayed draw).
#pragma once

#include <cstring>

#include "artel/core/tensor.h"

namespace artel_test {

inline bool same_bits(const artel::Tensor& a, const artel::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace artel_test
