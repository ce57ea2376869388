// MaxPool2d on NCHW input: the maximum of each kernel×kernel window, windows
// `stride` apart (default: the kernel, non-overlapping), as torch.nn.MaxPool2d.
//
//   MaxPool2d pool(2);
//   Variable y = pool.forward(x);   // (B, C, 28, 28) -> (B, C, 14, 14)
#pragma once

#include "artel/autograd/ops.h"
#include "artel/nn/layer.h"

namespace artel::nn {

class MaxPool2d : public Layer {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0) : kernel_(kernel), stride_(stride > 0 ? stride : kernel) {
    ARTEL_CHECK(kernel > 0, "MaxPool2d: kernel must be positive, got ", kernel);
  }
  Variable forward(const Variable& x) override { return autograd::max_pool2d(x, kernel_, stride_); }

 private:
  int64_t kernel_, stride_;
};

}  // namespace artel::nn
