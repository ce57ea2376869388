// LayerNorm over the last dimension, with a learned scale (ones) and shift (zeros).
//
//   LayerNorm ln(C);
//   Variable y = ln.forward(x);   // (B, T, C) -> (B, T, C)
#pragma once

#include <functional>

#include "artel/nn/layer.h"

namespace artel::nn {

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f);
  Variable forward(const Variable& x) override;
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  // Sequence parallelism (parallel/sequence_parallel.h): this rank normalises
  // only its tokens, so its weight and bias pass through `shared` (identity
  // forward, the gradient summed over the tensor-parallel group).
  void set_shared(std::function<Variable(const Variable&)> shared) { shared_ = std::move(shared); }

 private:
  int64_t dim_;
  float eps_;
  Variable weight_, bias_;
  std::function<Variable(const Variable&)> shared_;
};

}  // namespace artel::nn
