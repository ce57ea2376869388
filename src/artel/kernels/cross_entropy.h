// Cross-entropy of logits against integer targets: log-softmax and NLL fused.
//
// The gradient is dlogits = scale·(softmax − onehot), with scale = dloss /
// (number of rows whose target is not ignore_index).
//
//   int64_t valid;
//   double total = cross_entropy_forward(N, V, logits, targets, -100, lse, &valid);   // evaluation
//   double total = cross_entropy_with_gradient(N, V, logits, targets, -100, lse, &valid, dlogits);
//
// When the gradient will be taken, cross_entropy_with_gradient does both in one
// pass over each row (llm.c's fused classifier does the same): the row is read
// from memory once instead of twice and exp is taken once per element, not twice.
// GPT-2's logits are 206 MB a step on 4 x 256 tokens.
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

// The forward's loss, lse and valid, and at once the gradient for dloss = 1:
// dlogits = (softmax − onehot) / valid, zero rows for ignored targets.
// Targets must have passed check_targets.
template <class Id>
double cross_entropy_with_gradient(int64_t N, int64_t V, const float* logits, const Id* targets,
                                   int64_t ignore_index, float* lse, int64_t* valid, float* dlogits);

// dlogits = scale·(softmax − onehot), zero rows for ignored targets, from
// each row's max and Σ exp(x − max) (not their log-sum-exp: at logits of
// 1000 a float lse is off by up to 3e-5, which exp would carry into every
// element). With a vocabulary split over ranks, `logits` holds columns
// [vocab_start, vocab_start + V) of the whole row, max and sum are the whole
// row's, and a target outside those columns has no one-hot term here.
template <class Id>
void cross_entropy_backward(int64_t N, int64_t V, const float* logits, const Id* targets, int64_t ignore_index,
                            const float* row_max, const float* row_sum_exp, float scale, float* dlogits,
                            int64_t vocab_start = 0);

}  // namespace artel::kernels
