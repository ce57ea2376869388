// Tensor-parallel layers after Megatron-LM: a Linear split by output features
// (column-parallel), one split by input features (row-parallel), and an
// embedding split by vocabulary rows, each holding this rank's shard of the
// full layer's tensors. A column layer followed by a row layer (an MLP, or
// attention's c_attn ... c_proj) needs one all-reduce forward and one backward.
//
// Parameters are named "weight" and "bias" as in nn::Linear / nn::Embedding, so
// a model built from these has the same parameter names as the one built from
// nn layers (each rank's tensors being its shard of them). Weights start at
// zero: the caller fills them with its shard of a full layer's tensors (shard.h),
// so a tensor-parallel model starts exactly where a non-parallel one does.
//
//   ColumnParallelLinear fc(C, 4 * C, /*bias=*/true, tp);     // weight (4C/P, C)
//   RowParallelLinear proj(4 * C, C, /*bias=*/true, tp);      // weight (C, 4C/P), bias (C)
//   int r = tp.rank(), P = tp.size();
//   fc.load_state_dict({{"weight", shard_of(full_fc.weight().value(), 0, r, P)},
//                       {"bias", shard_of(full_fc.bias().value(), 0, r, P)}});
//   proj.load_state_dict({{"weight", shard_of(full_proj.weight().value(), 1, r, P)},
//                         {"bias", full_proj.bias().value()}});
//   Variable y = proj.forward(gelu(fc.forward(x)));          // (B, T, C) on every rank
//
// The group is held by reference and must outlive the layer and every graph
// built with it (Note [Tensor-parallel contract] in tensor_parallel.h).
#pragma once

#include <cstdint>

#include "artel/comm/process_group.h"
#include "artel/nn/layer.h"
#include "artel/parallel/tensor_parallel.h"

namespace artel::parallel {

// The full layer is y = x·Wᵀ + b with W (out, in); this rank holds rows
// [r·out/P, (r+1)·out/P) of W and b: weight (out/P, in), bias (out/P).
// forward(x) = linear(copy_to_tensor_parallel(x), W_r, b_r): x is replicated,
// the output is this rank's slice of the features (not gathered).
// out % P != 0 is an Error naming the sizes.
class ColumnParallelLinear : public nn::Layer {
 public:
  ColumnParallelLinear(int64_t in_features, int64_t out_features, bool bias, comm::ProcessGroup& group);
  Variable forward(const Variable& x) override;

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined without bias
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }  // of the full layer; this rank has out/P
  int64_t out_start() const;                      // this rank's first output feature, r·out/P

 private:
  comm::ProcessGroup& group_;
  int64_t in_, out_;
  Variable weight_, bias_;
};

// This rank holds columns [r·in/P, (r+1)·in/P) of W (weight (out, in/P)) and
// the whole bias (out), replicated. forward(x_r) = reduce_from_tensor_parallel(
// linear(x_r, W_r)) + b: x_r is this rank's slice of the input features (what a
// ColumnParallelLinear produced); the output is whole on every rank. The bias
// gradient is the full one on every rank (no reduction needed).
// in % P != 0 is an Error naming the sizes.
class RowParallelLinear : public nn::Layer {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, bool bias, comm::ProcessGroup& group);
  Variable forward(const Variable& x) override;

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined without bias
  int64_t in_features() const { return in_; }     // of the full layer; this rank takes in/P
  int64_t out_features() const { return out_; }
  int64_t in_start() const;                       // this rank's first input feature, r·in/P

 private:
  comm::ProcessGroup& group_;
  int64_t in_, out_;
  Variable weight_, bias_;
};

// A (V, C) embedding split by rows: this rank holds weight (V/P, C) = rows
// [r·V/P, (r+1)·V/P); forward(ids) = vocab_parallel_embedding, whole on every
// rank. V % P != 0 is an Error naming the sizes.
class VocabParallelEmbedding : public nn::Module {
 public:
  VocabParallelEmbedding(int64_t num_embeddings, int64_t dim, comm::ProcessGroup& group);
  Variable forward(const Tensor& ids);

  const Variable& weight() const { return weight_; }
  int64_t num_embeddings() const { return vocab_; }  // V, of the full table
  int64_t vocab_start() const { return vocab_start_; }

 private:
  comm::ProcessGroup& group_;
  int64_t vocab_, vocab_start_;
  Variable weight_;
};

}  // namespace artel::parallel
