// Small helpers shared by the op files (autograd/*_ops.cpp): dimension
// arithmetic and integer-index dispatch. Not part of the public API.
#pragma once

#include <string>

#include "artel/core/error.h"
#include "artel/core/tensor.h"

namespace artel::autograd::detail {

// A negative dim counts from the end; throws naming `op` when out of range.
inline int64_t wrap_dim(int64_t dim, const Shape& shape, const char* op) {
  int64_t n = static_cast<int64_t>(shape.size());
  if (dim < -n || dim >= n)
    throw Error(std::string(op) + ": dimension " + std::to_string(dim) + " out of range for shape " + shape_str(shape),
                "use a dimension in [" + std::to_string(-n) + ", " + std::to_string(n - 1) + "]");
  return dim < 0 ? dim + n : dim;
}

// The shape seen as (outer, n, inner) around dimension `dim` (already wrapped).
struct DimSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline DimSplit split_at(const Shape& shape, int64_t dim) {
  DimSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    int64_t d = shape[static_cast<size_t>(i)];
    if (i < dim) s.outer *= d;
    else if (i == dim) s.n = d;
    else s.inner *= d;
  }
  return s;
}

// Calls fn(const Id*) with the tensor's int32 or int64 data; throws for other dtypes.
template <class Fn>
decltype(auto) with_ids(const Tensor& ids, const char* op, const char* what, Fn&& fn) {
  if (ids.dtype() == DType::i64) return fn(ids.data<int64_t>());
  if (ids.dtype() == DType::i32) return fn(ids.data<int32_t>());
  throw Error(std::string(op) + ": " + what + " must be int64 or int32, got " + dtype_name(ids.dtype()),
              "store class indices / token ids as integers");
}

}  // namespace artel::autograd::detail
