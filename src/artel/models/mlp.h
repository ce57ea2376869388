// Mlp: W1's 784-512-512-10 ReLU network, laid out as PyTorch's
// nn.Sequential(Linear, ReLU, Linear, ReLU, Linear) under `net`, so its
// weights are net.0.weight, net.0.bias, net.2.*, net.4.* (669,706
// parameters). PyTorch's default init. Its pieces are the five layers (a
// pipeline cuts between them); its plan splits net.0 by output and net.2 by
// input features over a tensor-parallel group.
//
//   Mlp m(ModelConfig{.kind = "mlp"});
//   Variable logits = m.forward(x);   // x (B, 784) f32 -> (B, 10)
#pragma once

#include "artel/models/model.h"
#include "artel/nn/sequential.h"

namespace artel::models {

class Mlp : public Model {
 public:
  static constexpr int64_t kInputs = 784, kHidden = 512, kClasses = 10;
  explicit Mlp(const ModelConfig& config);

 private:
  std::shared_ptr<nn::Sequential> net_;
};

}  // namespace artel::models
