// Embedding lookup (a row gather) and its gradient (a scatter-add).
//
// Several positions may share an id, so the backward adds rows into dW; a
// weight tied to another use (GPT's lm_head) gets the rows added onto the
// other use's gradient (accumulate), which the autograd engine offers.
//
//   embedding_forward(n, C, ids, 0, V, W, out);        // out[i] = W[ids[i]]
//   embedding_backward(n, V, C, ids, 0, dout, dW);     // dW = 0; dW[ids[i]] += dout[i]
//
// A table may hold only rows [first, first + V) of a larger one (a
// vocabulary-parallel shard): other ids read zeros and add nothing.
#pragma once

#include <cstdint>

namespace artel::kernels {

// Throws artel::Error naming the first id outside [0, V).
template <class Id>
void check_ids(int64_t n, int64_t V, const Id* ids);

template <class Id>
void embedding_forward(int64_t n, int64_t C, const Id* ids, int64_t first, int64_t V, const float* weight, float* out);

// Overwrites dweight (V, C), or adds the rows onto it (accumulate).
template <class Id>
void embedding_backward(int64_t n, int64_t V, int64_t C, const Id* ids, int64_t first, const float* dout,
                        float* dweight, bool accumulate = false);

}  // namespace artel::kernels
