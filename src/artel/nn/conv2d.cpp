#include "artel/nn/conv2d.h"

#include "artel/autograd/ops.h"
#include "artel/nn/init.h"

namespace artel::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding, bool bias)
    : in_(in_channels), out_(out_channels), kernel_(kernel), stride_(stride), padding_(padding) {
  ARTEL_CHECK(in_channels > 0 && out_channels > 0 && kernel > 0 && stride > 0 && padding >= 0,
              "Conv2d: bad sizes (in ", in_channels, ", out ", out_channels, ", kernel ", kernel, ", stride ", stride,
              ", padding ", padding, ")");
  int64_t fan_in = in_channels * kernel * kernel;
  weight_ = declare_parameter("weight", {out_channels, in_channels, kernel, kernel}, Init::default_uniform(fan_in));
  if (bias) bias_ = declare_parameter("bias", {out_channels}, Init::default_uniform(fan_in));
}

Variable Conv2d::forward(const Variable& x) {
  ARTEL_CHECK(x.value().dim() == 4 && x.size(1) == in_, "Conv2d(", in_, " -> ", out_, "): input of shape ",
              shape_str(x.shape()), " is not (N, ", in_, ", H, W)");
  return autograd::conv2d(x, weight_, bias_, stride_, padding_);
}

}  // namespace artel::nn
