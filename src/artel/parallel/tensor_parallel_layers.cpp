#include "artel/parallel/tensor_parallel_layers.h"

#include <string>

#include "artel/autograd/ops.h"

namespace artel::parallel {
namespace {

// The per-rank share of `n` (what the group splits); throws naming the sizes.
int64_t share_of(const char* layer, const char* what, int64_t n, const comm::ProcessGroup& group) {
  ARTEL_CHECK(n > 0, layer, ": ", what, " must be positive, got ", n);
  if (n % group.size() != 0)
    throw Error(std::string(layer) + ": " + what + " " + std::to_string(n) + " is not divisible by the " +
                    std::to_string(group.size()) + " ranks of tensor-parallel group '" + group.name() + "'",
                "choose a size that is a multiple of the tensor-parallel degree, or a smaller degree");
  return n / group.size();
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, int64_t out_features, bool bias,
                                           comm::ProcessGroup& group)
    : group_(group), in_(in_features), out_(out_features) {
  ARTEL_CHECK(in_features > 0, "ColumnParallelLinear: in_features must be positive, got ", in_features);
  int64_t local = share_of("ColumnParallelLinear", "out_features", out_features, group);
  weight_ = register_parameter("weight", Tensor::zeros({local, in_features}));
  if (bias) bias_ = register_parameter("bias", Tensor::zeros({local}));
}

int64_t ColumnParallelLinear::out_start() const { return group_.rank() * (out_ / group_.size()); }

Variable ColumnParallelLinear::forward(const Variable& x) {
  ARTEL_CHECK(x.value().dim() >= 1 && x.size(-1) == in_, "ColumnParallelLinear(", in_, " -> ", out_,
              "): input of shape ", shape_str(x.shape()), " does not end in ", in_);
  return autograd::linear(copy_to_tensor_parallel(x, group_), weight_, bias_);
}

RowParallelLinear::RowParallelLinear(int64_t in_features, int64_t out_features, bool bias, comm::ProcessGroup& group)
    : group_(group), in_(in_features), out_(out_features) {
  ARTEL_CHECK(out_features > 0, "RowParallelLinear: out_features must be positive, got ", out_features);
  int64_t local = share_of("RowParallelLinear", "in_features", in_features, group);
  weight_ = register_parameter("weight", Tensor::zeros({out_features, local}));
  if (bias) bias_ = register_parameter("bias", Tensor::zeros({out_features}));
}

int64_t RowParallelLinear::in_start() const { return group_.rank() * (in_ / group_.size()); }

Variable RowParallelLinear::forward(const Variable& x) {
  int64_t local = in_ / group_.size();
  ARTEL_CHECK(x.value().dim() >= 1 && x.size(-1) == local, "RowParallelLinear(", in_, " -> ", out_,
              "): input of shape ", shape_str(x.shape()), " does not end in this rank's ", local, " of ", in_,
              " input features (hint: feed it the output of a ColumnParallelLinear on the same group)");
  // The bias is added once, after the reduction: adding it on every rank
  // before would count it P times.
  Variable y = reduce_from_tensor_parallel(autograd::linear(x, weight_, Variable()), group_);
  return bias_.defined() ? autograd::add(y, bias_) : y;
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t num_embeddings, int64_t dim, comm::ProcessGroup& group)
    : group_(group), vocab_(num_embeddings) {
  ARTEL_CHECK(dim > 0, "VocabParallelEmbedding: dim must be positive, got ", dim);
  int64_t local = share_of("VocabParallelEmbedding", "num_embeddings", num_embeddings, group);
  vocab_start_ = group.rank() * local;
  weight_ = register_parameter("weight", Tensor::zeros({local, dim}));
}

Variable VocabParallelEmbedding::forward(const Tensor& ids) {
  return vocab_parallel_embedding(ids, weight_, vocab_start_, group_);
}

}  // namespace artel::parallel
