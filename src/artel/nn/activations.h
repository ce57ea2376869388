// Parameter-free layers, so activations and reshapes can sit in a Sequential
// and keep PyTorch's indices (nn.Sequential(Linear, ReLU, Linear) names its
// Linears `0` and `2`). Pooling is in max_pool2d.h.
//
//   seq.add(std::make_shared<ReLU>());
#pragma once

#include "artel/autograd/ops.h"
#include "artel/nn/layer.h"

namespace artel::nn {

class ReLU : public Layer {
 public:
  Variable forward(const Variable& x) override { return autograd::relu(x); }
};

class GELU : public Layer {  // exact erf form, as torch.nn.GELU()
 public:
  Variable forward(const Variable& x) override { return autograd::gelu(x); }
};

class Tanh : public Layer {
 public:
  Variable forward(const Variable& x) override { return autograd::tanh(x); }
};

// (N, d1, d2, ...) -> (N, d1·d2·...), as torch.nn.Flatten().
class Flatten : public Layer {
 public:
  Variable forward(const Variable& x) override { return autograd::flatten(x, 1); }
};

}  // namespace artel::nn
