// Cross-entropy of logits against integer targets: log-softmax and NLL fused.
//
// The forward keeps only each row's log-sum-exp (N floats); the backward
// recomputes softmax from the logits: dlogits = scale·(softmax − onehot), with
// scale = dloss / (number of rows whose target is not ignore_index).
//
//   int64_t valid;
//   double total = cross_entropy_forward(N, V, logits, targets, -100, lse, &valid);
//   cross_entropy_backward(N, V, logits, targets, -100, lse, 1.0f / valid, dlogits);
#pragma once

#include <cstdint>

namespace artel::kernels {

// Throws artel::Error for a target outside [0, V) that is not ignore_index.
template <class Id>
void check_targets(int64_t N, int64_t V, const Id* targets, int64_t ignore_index);

// Σ over valid rows of (lse − logit[target]); writes lse (N) and the count of valid rows.
// Targets must have passed check_targets.
template <class Id>
double cross_entropy_forward(int64_t N, int64_t V, const float* logits, const Id* targets, int64_t ignore_index,
                             float* lse, int64_t* valid);

// dlogits = scale·(softmax − onehot), zero rows for ignored targets. With a
// vocabulary split over ranks, `logits` holds columns [vocab_start,
// vocab_start + V) of the whole row, lse is the whole row's, and a target
// outside those columns has no one-hot term here.
template <class Id>
void cross_entropy_backward(int64_t N, int64_t V, const float* logits, const Id* targets, int64_t ignore_index,
                            const float* lse, float scale, float* dlogits, int64_t vocab_start = 0);

}  // namespace artel::kernels
