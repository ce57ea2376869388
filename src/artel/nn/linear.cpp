#include "artel/nn/linear.h"

#include "artel/autograd/ops.h"
#include "artel/nn/init.h"

namespace artel::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Rng& rng)
    : in_(in_features), out_(out_features) {
  ARTEL_CHECK(in_features > 0 && out_features > 0, "Linear: sizes must be positive, got in ", in_features,
              " out ", out_features);
  weight_ = register_parameter("weight", Tensor::empty({out_features, in_features}));
  init::default_uniform(weight_.value(), in_features, rng);
  if (bias) {
    bias_ = register_parameter("bias", Tensor::empty({out_features}));
    init::default_uniform(bias_.value(), in_features, rng);
  }
}

Variable Linear::forward(const Variable& x) {
  ARTEL_CHECK(x.value().dim() >= 1 && x.size(-1) == in_, "Linear(", in_, " -> ", out_, "): input of shape ",
              shape_str(x.shape()), " does not end in ", in_);
  return autograd::linear(x, weight_, bias_);
}

}  // namespace artel::nn
