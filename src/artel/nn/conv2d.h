// Conv2d on NCHW input: weight (Cout, Cin, K, K), bias (Cout); square kernel,
// one stride and zero padding for both dimensions. Initialised as PyTorch
// does: U(−1/√fan_in, 1/√fan_in) with fan_in = Cin·K·K.
//
//   Conv2d conv(1, 6, /*kernel=*/5, /*stride=*/1, /*padding=*/2);
//   Variable y = conv.forward(x);   // (B, 1, 28, 28) -> (B, 6, 28, 28)
#pragma once

#include "artel/nn/layer.h"

namespace artel::nn {

class Conv2d : public Layer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding, bool bias = true);
  Variable forward(const Variable& x) override;
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }

 private:
  int64_t in_, out_, kernel_, stride_, padding_;
  Variable weight_, bias_;
};

}  // namespace artel::nn
