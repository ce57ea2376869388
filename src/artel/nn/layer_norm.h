// LayerNorm over the last dimension, with a learned scale (ones) and shift (zeros).
//
//   LayerNorm ln(C);
//   Variable y = ln.forward(x);   // (B, T, C) -> (B, T, C)
#pragma once

#include "artel/nn/layer.h"

namespace artel::nn {

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f);
  Variable forward(const Variable& x) override;
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }

 private:
  int64_t dim_;
  float eps_;
  Variable weight_, bias_;
};

}  // namespace artel::nn
