// Embedding: a (num_embeddings, dim) table looked up by integer ids.
// Initialised N(0, 1), as PyTorch does (GPT re-initialises with std 0.02).
//
//   Embedding wte(vocab, C, rng);
//   Variable x = wte.forward(ids);   // ids (B, T) int64 -> (B, T, C)
#pragma once

#include "artel/core/rng.h"
#include "artel/nn/module.h"

namespace artel::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, Rng& rng);
  Variable forward(const Tensor& ids);
  const Variable& weight() const { return weight_; }

 private:
  Variable weight_;
};

}  // namespace artel::nn
