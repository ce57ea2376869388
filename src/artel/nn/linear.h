// Linear: y = x·Wᵀ + b with W stored [out_features, in_features] (PyTorch's
// layout, so weights load into torch unchanged). Initialised as PyTorch does:
// U(−1/√in, 1/√in) for weight and bias.
//
//   Linear fc(784, 512, /*bias=*/true, rng);
//   Variable y = fc.forward(x);   // (B, 784) -> (B, 512)
#pragma once

#include "artel/core/rng.h"
#include "artel/nn/layer.h"

namespace artel::nn {

class Linear : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, Rng& rng);
  Variable forward(const Variable& x) override;

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined without bias
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
  Variable weight_, bias_;
};

}  // namespace artel::nn
