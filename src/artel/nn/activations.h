// Parameter-free layers, so activations and reshapes can sit in a Sequential
// and keep PyTorch's indices (nn.Sequential(Linear, ReLU, Linear) names its
// Linears `0` and `2`). Pooling is in max_pool2d.h.
//
//   seq.add(std::make_shared<ReLU>());
#pragma once

#include <string>

#include "artel/autograd/ops.h"
#include "artel/nn/layer.h"
#include "artel/nn/linear.h"

namespace artel::nn {

class ReLU : public Layer {
 public:
  Variable forward(const Variable& x) override { return autograd::relu(x); }
};

// exact: x·Φ(x), as torch.nn.GELU(); tanh: its tanh approximation, as
// nn.GELU(approximate="tanh") and GPT-2's "gelu_new".
enum class Gelu { exact, tanh };
Gelu parse_gelu(const std::string& name);  // "exact" | "tanh"; throws on anything else

class GELU : public Layer {
 public:
  explicit GELU(Gelu kind = Gelu::exact) : kind_(kind) {}
  Variable forward(const Variable& x) override {
    return kind_ == Gelu::tanh ? autograd::gelu_tanh(x) : autograd::gelu(x);
  }
  // Its output of fc's: fused with the product where fc allows (Linear::forward_gelu).
  Variable after(Linear& fc, const Variable& x) const { return fc.forward_gelu(x, kind_ == Gelu::tanh); }

 private:
  Gelu kind_;
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
