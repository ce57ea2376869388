#include "artel/models/cnn.h"

#include "artel/nn/activations.h"
#include "artel/nn/conv2d.h"
#include "artel/nn/linear.h"
#include "artel/nn/max_pool2d.h"

namespace artel::models {

Cnn::Cnn(const ModelConfig& config) : Model(config) {
  Rng rng(config.seed, kInitStream);
  net_ = register_module("net", std::make_shared<nn::Sequential>());
  net_->add(std::make_shared<nn::Conv2d>(1, 6, 5, 1, 2, rng));   // (B, 6, 28, 28)
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::MaxPool2d>(2));                  // (B, 6, 14, 14)
  net_->add(std::make_shared<nn::Conv2d>(6, 16, 5, 1, 0, rng));  // (B, 16, 10, 10)
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::MaxPool2d>(2));                  // (B, 16, 5, 5)
  net_->add(std::make_shared<nn::Flatten>());                     // (B, 400)
  net_->add(std::make_shared<nn::Linear>(400, 120, true, rng));
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::Linear>(120, 84, true, rng));
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::Linear>(84, 10, true, rng));
}

Variable Cnn::forward(const Tensor& input) {
  bool flat = input.dim() == 2 && input.size(1) == 784;
  bool image = input.dim() == 4 && input.size(1) == 1 && input.size(2) == 28 && input.size(3) == 28;
  ARTEL_CHECK(input.dtype() == DType::f32 && (flat || image), "cnn: input must be float32 (B, 784) or (B, 1, 28, 28), got ",
              dtype_name(input.dtype()), " ", shape_str(input.shape()));
  return net_->forward(Variable(input.view({input.size(0), 1, 28, 28})));
}

}  // namespace artel::models
