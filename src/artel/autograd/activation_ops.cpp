// relu, gelu, tanh, softmax, log_softmax: each backward uses what its forward
// kept (ReLU/tanh/softmax their output, GELU its derivative).
#include "artel/autograd/op_helpers.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/activation.h"
#include "artel/kernels/softmax.h"

namespace artel::autograd {

Variable relu(const Variable& x) {
  Tensor y = Tensor::empty(x.shape());
  kernels::relu_forward(x.numel(), x.value().data<float>(), y.data<float>());
  return make_result(y, {x}, "relu", [y](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::relu_backward(g.numel(), y.data<float>(), g.data<float>(), gi[0].data<float>());
  });
}

Variable gelu(const Variable& x) {
  Tensor y = Tensor::empty(x.shape());
  const float* xp = x.value().data<float>();
  if (!grad_enabled() || !needs_grad(x)) {
    kernels::gelu_forward(x.numel(), xp, y.data<float>());
    return make_result(y, {x}, "gelu", nullptr);
  }
  // Training: keep GELU's derivative rather than its input; backward is then a
  // single multiply instead of a second pass through the normal CDF and PDF.
  Tensor dydx = Tensor::empty(x.shape());
  kernels::gelu_forward_with_derivative(x.numel(), xp, y.data<float>(), dydx.data<float>());
  return make_result(y, {x}, "gelu", [dydx](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = reusable_grad(g);
    kernels::multiply(g.numel(), g.data<float>(), dydx.data<float>(), gi[0].data<float>());
  });
}

Variable gelu_tanh(const Variable& x) {
  Tensor y = Tensor::empty(x.shape());
  const float* xp = x.value().data<float>();
  if (!grad_enabled() || !needs_grad(x)) {
    kernels::gelu_tanh_forward(x.numel(), xp, y.data<float>());
    return make_result(y, {x}, "gelu_tanh", nullptr);
  }
  Tensor dydx = Tensor::empty(x.shape());  // as gelu: the derivative kept, backward one multiply
  kernels::gelu_tanh_forward(x.numel(), xp, y.data<float>(), dydx.data<float>());
  return make_result(y, {x}, "gelu_tanh", [dydx](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = reusable_grad(g);
    kernels::multiply(g.numel(), g.data<float>(), dydx.data<float>(), gi[0].data<float>());
  });
}

Variable tanh(const Variable& x) {
  Tensor y = Tensor::empty(x.shape());
  kernels::tanh_forward(x.numel(), x.value().data<float>(), y.data<float>());
  return make_result(y, {x}, "tanh", [y](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::tanh_backward(g.numel(), y.data<float>(), g.data<float>(), gi[0].data<float>());
  });
}

Variable softmax(const Variable& x, int64_t dim) {
  detail::DimSplit s = detail::split_at(x.shape(), detail::wrap_dim(dim, x.shape(), "softmax"));
  Tensor y = Tensor::empty(x.shape());
  kernels::softmax_forward(s.outer, s.n, s.inner, x.value().data<float>(), y.data<float>());
  return make_result(y, {x}, "softmax", [y, s](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::softmax_backward(s.outer, s.n, s.inner, y.data<float>(), g.data<float>(), gi[0].data<float>());
  });
}

Variable log_softmax(const Variable& x, int64_t dim) {
  detail::DimSplit s = detail::split_at(x.shape(), detail::wrap_dim(dim, x.shape(), "log_softmax"));
  Tensor y = Tensor::empty(x.shape());
  kernels::log_softmax_forward(s.outer, s.n, s.inner, x.value().data<float>(), y.data<float>());
  return make_result(y, {x}, "log_softmax", [y, s](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::log_softmax_backward(s.outer, s.n, s.inner, y.data<float>(), g.data<float>(), gi[0].data<float>());
  });
}

}  // namespace artel::autograd
