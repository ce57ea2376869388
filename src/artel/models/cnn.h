// Cnn: a LeNet-like network for 28×28 digits, laid out as one nn.Sequential
// under `net` (PyTorch's names and indices):
//   0 conv 1→6 5×5 pad 2, 1 ReLU, 2 maxpool 2,      (B, 6, 14, 14)
//   3 conv 6→16 5×5,      4 ReLU, 5 maxpool 2,      (B, 16, 5, 5)
//   6 flatten (400), 7 linear 400→120, 8 ReLU, 9 linear 120→84, 10 ReLU, 11 linear 84→10
// so its weights are net.0.*, net.3.*, net.7.*, net.9.*, net.11.* (61,706
// parameters). PyTorch's default init. Its pieces are the twelve layers (a
// pipeline cuts between them).
//
//   Cnn m(ModelConfig{.kind = "cnn"});
//   Variable logits = m.forward(x);   // x (B, 784) or (B, 1, 28, 28) f32 -> (B, 10)
#pragma once

#include "artel/models/model.h"
#include "artel/nn/sequential.h"

namespace artel::models {

class Cnn : public Model {
 public:
  explicit Cnn(const ModelConfig& config);

 private:
  std::shared_ptr<nn::Sequential> net_;
};

}  // namespace artel::models
