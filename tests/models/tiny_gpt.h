// What the models' tests share: a GPT small enough to check by hand, and
// token ids in its shape.
#pragma once

#include <algorithm>
#include <vector>

#include "artel/core/tensor.h"
#include "artel/models/model.h"

namespace artel::models {

inline ModelConfig tiny_gpt() {
  ModelConfig c;
  c.vocab_size = 11, c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.block_size = 8, c.seed = 7;
  return c;
}

// (B, T) int64 ids from `v` in row-major order.
inline Tensor ids_of(const std::vector<int64_t>& v, int64_t B, int64_t T) {
  Tensor t = Tensor::empty({B, T}, DType::i64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

}  // namespace artel::models
