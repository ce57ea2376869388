// Sharding helpers for tensor parallelism: cut a full weight into the equal
// blocks the ranks of a tensor-parallel group hold, and put blocks back
// together (to compare with a non-parallel model, or to write one checkpoint).
//
//   Tensor w = full_linear.weight().value();            // (out, in)
//   Tensor w_r = shard_of(w, /*dim=*/0, rank, T);       // (out/T, in): rank's rows
//   Tensor back = unshard({w_0, w_1, ..., w_T-1}, 0);   // (out, in) again
//
// Column-parallel layers split dimension 0 of the weight (and the bias),
// row-parallel ones dimension 1, a vocabulary-parallel embedding dimension 0.
#pragma once

#include <vector>

#include "artel/core/tensor.h"

namespace artel::parallel {

// Block `part` of `parts` equal blocks of `full` along dimension `dim` (0 or 1
// of a 1-D or 2-D tensor), as a new contiguous tensor. Throws Error naming the
// sizes when the dimension is not divisible by `parts`, or `part` is out of range.
Tensor shard_of(const Tensor& full, int64_t dim, int part, int parts);

// The inverse: concatenates equal blocks (same shape and dtype) along `dim`.
Tensor unshard(const std::vector<Tensor>& parts, int64_t dim);

}  // namespace artel::parallel
