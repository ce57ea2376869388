#include "artel/models/mlp.h"

#include "artel/nn/activations.h"
#include "artel/nn/linear.h"

namespace artel::models {

Mlp::Mlp(const ModelConfig& config) : Model(config) {
  net_ = register_module("net", std::make_shared<nn::Sequential>());
  net_->add(std::make_shared<nn::Linear>(kInputs, kHidden));
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::Linear>(kHidden, kHidden));
  net_->add(std::make_shared<nn::ReLU>());
  net_->add(std::make_shared<nn::Linear>(kHidden, kClasses));
  nn::ParallelPlan plan;
  plan.pieces.push_back({.name = "input", .forward = [](const nn::Activations& in) {
                           const Tensor& x = in.at(0).value();
                           ARTEL_CHECK(x.dtype() == DType::f32 && x.dim() == 2 && x.size(1) == kInputs,
                                       "mlp: input must be float32 (B, 784), got ", dtype_name(x.dtype()), " ",
                                       shape_str(x.shape()));
                           return in;
                         },
                         .layer = false});
  for (nn::Piece& p : nn::sequential_pieces("net", *net_)) plan.pieces.push_back(std::move(p));
  // Megatron's MLP pair on the two hidden layers; the 10 outputs stay whole.
  plan.tensor_parallel = {{"net.0", nn::TensorParallelStyle::column}, {"net.2", nn::TensorParallelStyle::row}};
  set_plan(std::move(plan));
}

}  // namespace artel::models
