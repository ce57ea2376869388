// Split: how one parameter is divided among the T ranks of a tensor-parallel
// group, as a model's plan declares it (nn/parallel_plan.h), and the pure
// geometry that follows from it. Initialising a shard, cutting a shard out of
// a whole tensor (--init, resuming) and joining shards back into the whole
// (final.safetensors, checkpoints) all go through part_geometry, so a split
// is written once.
//
// The whole tensor is seen as (outer, mid, inner) around the divided
// dimension; rank r holds mid indices [r·M/T, (r+1)·M/T) of every outer and
// inner index. `groups` cuts the dimension into equal sections first, each
// divided on its own (attention's q | k | v rows: each rank gets its heads'
// rows of all three). `pad` rounds the dimension up to a multiple of T
// (Megatron's vocabulary padding): the extra entries exist only in shards,
// hold zeros, and never appear in a whole tensor.
//
//   Split rows{.dim = 0};                          // column-parallel weight (out, in)
//   Tensor mine = take_part(whole, rows, 1, 2);    // rows [out/2, out)
//   Tensor back = join_parts({p0, p1}, rows, whole.shape());
#pragma once

#include <cstdint>
#include <vector>

#include "artel/core/tensor.h"

namespace artel::nn {

struct Split {
  int dim = -1;         // the divided dimension; -1: replicated, every rank holds it whole
  int64_t groups = 1;   // equal sections of the dimension, each divided on its own
  bool pad = false;     // round the dimension up to a multiple of the ranks (padding entries are zeros)
  int64_t unit = 1;     // a part holds whole units (an attention head's width): its count divides by it
  bool replicated() const { return dim < 0; }
  bool operator==(const Split&) const = default;
};

// Where part `part` of `parts` lies in the whole tensor.
struct PartGeometry {
  int64_t outer = 1;   // product of the dimensions before the divided one, times groups
  int64_t mid = 1;     // entries of the divided dimension per group in the whole tensor
  int64_t inner = 1;   // product of the dimensions after it
  int64_t begin = 0;   // this part's first mid index
  int64_t count = 1;   // mid indices per part (padding included)
  Shape shape;         // the part's shape
  // Mid indices of this part that exist in the whole tensor (the rest is padding).
  int64_t valid() const { return std::max<int64_t>(0, std::min(count, mid - begin)); }
};

// Throws Error naming the tensor's shape when the split does not fit it (a
// dimension out of range, not divisible by groups, or — without pad — by parts,
// or a part that would cut a unit).
PartGeometry part_geometry(const Shape& whole, const Split& split, int part, int parts);

// Part `part` of `parts` of `whole`, as a new tensor (padding zeroed).
Tensor take_part(const Tensor& whole, const Split& split, int part, int parts);
// The whole tensor from its parts in rank order (padding dropped); a
// replicated split takes the first part.
Tensor join_parts(const std::vector<Tensor>& parts, const Split& split, const Shape& whole);

}  // namespace artel::nn
