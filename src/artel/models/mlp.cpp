#include "artel/models/mlp.h"

#include "artel/nn/activations.h"
#include "artel/nn/linear.h"

namespace artel::models {

Mlp::Mlp(const ModelConfig& config) : Model(config) {
  Rng rng(config.seed, kInitStream);
  net_ = register_module("net", std::make_shared<nn::Sequential>());
  net_->add(std::make_shared<nn::Linear>(kInputs, kHidden, true, rng));
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::Linear>(kHidden, kHidden, true, rng));
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::Linear>(kHidden, kClasses, true, rng));
}

Variable Mlp::forward(const Tensor& input) {
  ARTEL_CHECK(input.dtype() == DType::f32 && input.dim() == 2 && input.size(1) == kInputs,
              "mlp: input must be float32 (B, 784), got ", dtype_name(input.dtype()), " ", shape_str(input.shape()));
  return net_->forward(Variable(input));
}

}  // namespace artel::models
