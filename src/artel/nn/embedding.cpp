#include "artel/nn/embedding.h"

#include "artel/autograd/ops.h"
#include "artel/nn/init.h"

namespace artel::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Rng& rng) {
  ARTEL_CHECK(num_embeddings > 0 && dim > 0, "Embedding: sizes must be positive, got ", num_embeddings, " x ", dim);
  weight_ = register_parameter("weight", Tensor::empty({num_embeddings, dim}));
  init::normal(weight_.value(), 0.0f, 1.0f, rng);
}

Variable Embedding::forward(const Tensor& ids) { return autograd::embedding(weight_, ids); }

}  // namespace artel::nn
