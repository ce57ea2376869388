#include "artel/models/cnn.h"

#include "artel/nn/activations.h"
#include "artel/nn/conv2d.h"
#include "artel/nn/linear.h"
#include "artel/nn/max_pool2d.h"

namespace artel::models {

Cnn::Cnn(const ModelConfig& config) : Model(config) {
  net_ = register_module("net", std::make_shared<nn::Sequential>());
  net_->add(std::make_shared<nn::Conv2d>(1, 6, 5, 1, 2));   // (B, 6, 28, 28)
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::MaxPool2d>(2));             // (B, 6, 14, 14)
  net_->add(std::make_shared<nn::Conv2d>(6, 16, 5, 1, 0));  // (B, 16, 10, 10)
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::MaxPool2d>(2));             // (B, 16, 5, 5)
  net_->add(std::make_shared<nn::Flatten>());                // (B, 400)
  net_->add(std::make_shared<nn::Linear>(400, 120));
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::Linear>(120, 84));
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::Linear>(84, 10));
  nn::ParallelPlan plan;
  plan.pieces.push_back({.name = "input", .modules = {}, .forward = [](const nn::Activations& in) {
                           const Tensor& x = in.at(0).value();
                           bool flat = x.dim() == 2 && x.size(1) == 784;
                           bool image = x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28;
                           ARTEL_CHECK(x.dtype() == DType::f32 && (flat || image),
                                       "cnn: input must be float32 (B, 784) or (B, 1, 28, 28), got ",
                                       dtype_name(x.dtype()), " ", shape_str(x.shape()));
                           return nn::Activations{Variable(x.view({x.size(0), 1, 28, 28}))};
                         },
                         .layer = false});
  for (nn::Piece& p : nn::sequential_pieces("net", *net_)) plan.pieces.push_back(std::move(p));
  set_plan(std::move(plan));
}

}  // namespace artel::models
