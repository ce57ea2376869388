#include "artel/nn/embedding.h"

#include "artel/autograd/ops.h"

namespace artel::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Init init) : rows_(num_embeddings), dim_(dim) {
  ARTEL_CHECK(num_embeddings > 0 && dim > 0, "Embedding: sizes must be positive, got ", num_embeddings, " x ", dim);
  weight_ = declare_parameter("weight", {num_embeddings, dim}, init);
}

Variable Embedding::forward(const Tensor& ids) {
  ARTEL_CHECK(weight_.value().defined(), "Embedding(", rows_, " x ", dim_,
              "): its weight was declared but never materialised (hint: nn::materialize(model, seed))");
  if (before_lookup_) before_lookup_(ids);
  Variable y = autograd::embedding(weight_, ids, {.first_row = parallel_.first_row, .vocab = rows_});
  return parallel_.reduce ? parallel_.reduce(y) : y;
}

Variable Embedding::attend(const Variable& x) {
  return autograd::linear(parallel_.enter ? parallel_.enter(x) : x, weight_, Variable());
}

}  // namespace artel::nn
