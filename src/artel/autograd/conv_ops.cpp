// conv2d and max_pool2d (NCHW): shape checks, the kernels of kernels/conv.h and
// kernels/pool.h, and their backward. conv2d saves nothing but its inputs
// (backward recomputes im2col); max_pool2d saves the argmax of each window.
#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/conv.h"
#include "artel/kernels/pool.h"

namespace artel::autograd {
namespace {

const float* data_or_null(const Variable& v) { return v.defined() ? v.value().data<float>() : nullptr; }

kernels::Conv2dDims conv_dims(const Variable& x, const Variable& weight, const Variable& bias, int64_t stride,
                              int64_t padding) {
  ARTEL_CHECK(x.defined() && weight.defined(), "conv2d: input and weight must be defined");
  ARTEL_CHECK(x.value().dtype() == DType::f32 && x.value().dim() == 4,
              "conv2d: input must be float32 (N, Cin, H, W), got shape ", shape_str(x.shape()));
  ARTEL_CHECK(weight.value().dtype() == DType::f32 && weight.value().dim() == 4,
              "conv2d: weight must be float32 (Cout, Cin, KH, KW), got shape ", shape_str(weight.shape()));
  ARTEL_CHECK(stride > 0 && padding >= 0, "conv2d: stride must be positive and padding non-negative, got stride ",
              stride, ", padding ", padding);
  kernels::Conv2dDims d{x.size(0), x.size(1), x.size(2), x.size(3), weight.size(0), weight.size(2),
                        weight.size(3), stride, padding};
  ARTEL_CHECK(weight.size(1) == d.c_in, "conv2d: weight ", shape_str(weight.shape()), " expects ", weight.size(1),
              " input channels but the input ", shape_str(x.shape()), " has ", d.c_in);
  ARTEL_CHECK(d.kernel_h > 0 && d.kernel_w > 0 && d.kernel_h <= d.height + 2 * padding &&
                  d.kernel_w <= d.width + 2 * padding,
              "conv2d: kernel ", d.kernel_h, "x", d.kernel_w, " does not fit the padded input ",
              d.height + 2 * padding, "x", d.width + 2 * padding, " (hint: use a smaller kernel or more padding)");
  ARTEL_CHECK(!bias.defined() || (bias.value().dtype() == DType::f32 && bias.value().dim() == 1 &&
                                  bias.size(0) == d.c_out),
              "conv2d: bias must be float32 (", d.c_out, "), got shape ", shape_str(bias.shape()));
  return d;
}

}  // namespace

Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, int64_t stride, int64_t padding) {
  const OpSpan span("conv2d");
  const kernels::Conv2dDims d = conv_dims(x, weight, bias, stride, padding);
  Tensor y = Tensor::empty({d.batch, d.c_out, d.out_height(), d.out_width()});
  kernels::conv2d_forward(d, x.value().data<float>(), weight.value().data<float>(), data_or_null(bias),
                          y.data<float>());
  return make_result(y, {x, weight, bias}, "conv2d", [x, weight, bias, d](const Tensor& g, std::vector<Tensor>& gi) {
    float* out[3] = {nullptr, nullptr, nullptr};
    const Variable* in[3] = {&x, &weight, &bias};
    for (int i = 0; i < 3; ++i)
      if (needs_grad(*in[i])) {
        gi[i] = Tensor::empty(in[i]->shape());
        out[i] = gi[i].data<float>();
      }
    kernels::conv2d_backward(d, x.value().data<float>(), weight.value().data<float>(), g.data<float>(), out[0],
                             out[1], out[2]);
  });
}

Variable max_pool2d(const Variable& x, int64_t kernel, int64_t stride) {
  const OpSpan span("max_pool2d");
  ARTEL_CHECK(x.defined() && x.value().dtype() == DType::f32 && x.value().dim() == 4,
              "max_pool2d: input must be float32 (N, C, H, W), got shape ",
              x.defined() ? shape_str(x.shape()) : "undefined");
  ARTEL_CHECK(kernel > 0 && stride > 0, "max_pool2d: kernel and stride must be positive, got kernel ", kernel,
              ", stride ", stride);
  kernels::Pool2dDims d{x.size(0), x.size(1), x.size(2), x.size(3), kernel, stride};
  ARTEL_CHECK(kernel <= d.height && kernel <= d.width, "max_pool2d: kernel ", kernel, " is larger than the input ",
              d.height, "x", d.width, " (hint: pool fewer times or use a smaller kernel)");
  Shape out{d.batch, d.channels, d.out_height(), d.out_width()};
  Tensor y = Tensor::empty(out);
  Tensor argmax = Tensor::empty(out, DType::i32);
  kernels::max_pool2d_forward(d, x.value().data<float>(), y.data<float>(), argmax.data<int32_t>());
  return make_result(y, {x}, "max_pool2d", [x, argmax, d](const Tensor& g, std::vector<Tensor>& gi) {
    if (!needs_grad(x)) return;
    gi[0] = Tensor::empty(x.shape());
    kernels::max_pool2d_backward(d, g.data<float>(), argmax.data<int32_t>(), gi[0].data<float>());
  });
}

}  // namespace artel::autograd
