// Sequence parallelism after Megatron-LM (Korthikanti et al., 2022): between
// its tensor-parallel layers, a transformer layer's stream is split along
// its tokens over the tensor-parallel group instead of replicated. Layer
// norms, dropouts and residual adds then run on 1/P of the tokens and keep
// 1/P of their activations. Megatron's f and g (tensor_parallel.h) become an
// all-gather of the tokens before a column-parallel layer and a
// reduce-scatter of the partial sums after a row-parallel one: the same
// bytes as the all-reduces they replace.
//
// Note [Which tokens a rank holds]: the ops between the collectives (layer
// norms, dropouts, residual and bias adds) treat every token alike and alone,
// so any split of the tokens serves, as long as every op splits alike. Rank
// r holds the r-th contiguous 1/P of the activation's tokens in memory
// order: of (B, T, C), the tokens [r·B·T/P, (r+1)·B·T/P) of the flattened
// B·T, which makes every collective a plain all-gather or reduce-scatter
// with no reordering. Its part is shaped (B, T/P, C), dim −2 divided by P
// (Megatron splits its [s, b, h] activations along s, which is the same
// memory order); for a 2-D activation (N, C), (N/P, C). P must divide dim −2.
// An op that depends on where a token sits in its sequence (a position
// embedding) must run outside the split, as a GPT's do.
//
//   Variable local = scatter_to_sequence_parallel(x, tp);               // (B, T/P, C): entering the layers
//   Variable h = linear(gather_from_sequence_parallel(ln(local), tp, SequenceGrad::partial), w1_r, b1_r);
//   Variable y = reduce_scatter_to_sequence_parallel(linear(gelu(h), w2_r, {}), tp);   // (B, T/P, C)
//   Variable whole = gather_from_sequence_parallel(y, tp, SequenceGrad::replicated);  // leaving them
//
// The ops follow Note [Tensor-parallel contract] in tensor_parallel.h.
#pragma once

#include "artel/autograd/variable.h"
#include "artel/comm/process_group.h"

namespace artel::parallel {

using autograd::Variable;

// Forward: this rank's tokens of a replicated x. Backward: the ranks' token
// gradients all-gathered.
Variable scatter_to_sequence_parallel(const Variable& x, comm::ProcessGroup& group);

// What the gradient of a gathered activation is on each rank, which decides
// the gather's backward.
enum class SequenceGrad {
  partial,     // a part of the sum over the group (a column-parallel layer's input): reduce-scattered
  replicated,  // the same on every rank (replicated layers follow): this rank's tokens of it are taken
};
// Forward: every rank's tokens all-gathered into the whole activation.
Variable gather_from_sequence_parallel(const Variable& x, comm::ProcessGroup& group, SequenceGrad grad);

// Forward: the ranks' partial sums (a row-parallel layer's output) summed
// and scattered by tokens. Backward: the token gradients all-gathered.
Variable reduce_scatter_to_sequence_parallel(const Variable& x, comm::ProcessGroup& group);

// `whole` with its dim −2 divided by `ranks` (checked to divide): a rank's part.
Shape sequence_part_shape(const Shape& whole, int ranks, const char* op);
// A rank's `part` with its dim −2 multiplied by `ranks`: the whole.
Shape sequence_whole_shape(const Shape& part, int ranks, const char* op);
// Rank `rank`'s tokens of `whole`, a copy (a dropout's mask, drawn whole).
Tensor tokens_of(const Tensor& whole, int rank, int ranks);

}  // namespace artel::parallel
