#include "artel/nn/layer_norm.h"

#include "artel/autograd/ops.h"

namespace artel::nn {

LayerNorm::LayerNorm(int64_t dim, float eps) : dim_(dim), eps_(eps) {
  ARTEL_CHECK(dim > 0, "LayerNorm: dim must be positive, got ", dim);
  ARTEL_CHECK(eps > 0, "LayerNorm: eps must be positive, got ", eps);
  weight_ = declare_parameter("weight", {dim}, Init::ones());
  bias_ = declare_parameter("bias", {dim}, Init::zeros());
}

Variable LayerNorm::forward(const Variable& x) {
  ARTEL_CHECK(x.value().dim() >= 1 && x.size(-1) == dim_, "LayerNorm(", dim_, "): input of shape ",
              shape_str(x.shape()), " does not end in ", dim_);
  if (shared_) return autograd::layer_norm(x, shared_(weight_), shared_(bias_), eps_);
  return autograd::layer_norm(x, weight_, bias_, eps_);
}

}  // namespace artel::nn
