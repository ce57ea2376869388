// Tensor (model) parallelism after Megatron-LM: the collectives that split one
// layer's matrices over the ranks of a tensor-parallel group, as autograd ops.
//
// A Megatron MLP runs a column-parallel Linear (each rank computes a slice of
// the hidden features), the activation on that slice, then a row-parallel
// Linear whose partial products are summed over the group. Two conjugate ops
// mark the edges of such a region: f = copy_to_tensor_parallel (identity
// forward, all-reduce backward) where a replicated activation enters it, and
// g = reduce_from_tensor_parallel (all-reduce forward, identity backward) where
// the partial sums leave it. The vocabulary-parallel embedding and
// cross-entropy split the (V, C) table and the (.., V) logits over the group,
// so no rank ever holds the whole vocabulary.
//
//   Variable h = linear(copy_to_tensor_parallel(x, tp), w1_r, b1_r);   // (B, T, 4C/P)
//   Variable y = reduce_from_tensor_parallel(linear(gelu(h), w2_r, {}), tp) + b2;  // (B, T, C)
//   Variable loss = vocab_parallel_cross_entropy(logits_r, targets, rank * V / P, tp);
//   loss.backward();   // the backward all-reduces run here, on this thread
//
// Shapes: B batch, T time, C channels, V vocabulary, P the group's size.
//
// Note [Tensor-parallel contract]: every rank of `group` runs the same ops in
// the same order on replicated inputs (x, ids, targets identical on all ranks)
// and calls backward on the same loss; each op communicates in its forward or
// backward, so a rank that skips one leaves the others waiting until the
// group's timeout (a TimeoutError naming the op). The group is held by
// reference in the recorded graph: it must outlive every graph built with these
// ops (keep it alive until backward has run or the graph is dropped). Checks
// that depend on data (ids, targets) are made after the collective, on the
// reduced result, so all ranks agree and throw together instead of some of them
// waiting for the rest.
#pragma once

#include <cstdint>

#include "artel/autograd/variable.h"
#include "artel/comm/process_group.h"

namespace artel::parallel {

using autograd::Variable;

// Megatron's f: identity forward (the result shares x's storage); backward
// all-reduces (sum) the gradient over `group`.
Variable copy_to_tensor_parallel(const Variable& x, comm::ProcessGroup& group);

// Megatron's g: forward all-reduces (sum) x over `group` into a new tensor (x
// untouched); backward identity.
Variable reduce_from_tensor_parallel(const Variable& x, comm::ProcessGroup& group);

// A replicated addend that must enter a sum over `group` once (a row-parallel
// layer's bias, or the residual laid into its GEMM): x itself on rank 0,
// zeros elsewhere; backward passes the gradient through on every rank, as
// each rank's x is the same tensor and gets the whole gradient.
Variable once_over_tensor_parallel(const Variable& x, comm::ProcessGroup& group);

// Cross-entropy over a vocabulary split across the group: local_logits
// (..., V/P) holds columns [vocab_start, vocab_start + V/P) of the full logits;
// targets: int64 or int32, numel = local_logits.numel() / (V/P), values in
// [0, V) or ignore_index (skipped, as autograd::cross_entropy does). Returns the
// mean over non-ignored targets as a scalar, the same on every rank, equal (up
// to float rounding) to autograd::cross_entropy(full logits, targets); 0 with a
// zero gradient when every target is ignored.
// Numerically stable: the global row max by an all-reduce(max), then one
// all-reduce(sum) of [Σ exp(x − max), target logit, shard hit] per row.
// Backward: (softmax − onehot)·dloss / count on the local columns only, with no
// communication.
// `vocab` (-1: every column) is the vocabulary without padding: columns from
// it on never enter the softmax and get no gradient.
Variable vocab_parallel_cross_entropy(const Variable& local_logits, const Tensor& targets, int64_t vocab_start,
                                      comm::ProcessGroup& group, int64_t vocab = -1, int64_t ignore_index = -100);

// Counts, while it lives, the all-reduces the ops above issue on this
// thread over a group of more than one rank, and their bytes (nested
// counters all count): what a layer's tensor parallelism sends, as
// kernels::ProductFlops counts what it computes (plan/measured_costs.h).
class TensorParallelTraffic {
 public:
  TensorParallelTraffic();
  ~TensorParallelTraffic();
  TensorParallelTraffic(const TensorParallelTraffic&) = delete;
  TensorParallelTraffic& operator=(const TensorParallelTraffic&) = delete;
  double bytes() const { return bytes_; }
  int64_t collectives() const { return collectives_; }
  // Adds one all-reduce of `bytes` to every live counter of this thread (the ops above call it).
  static void count(double bytes);

 private:
  double bytes_ = 0;
  int64_t collectives_ = 0;
  TensorParallelTraffic* outer_;
};

}  // namespace artel::parallel
