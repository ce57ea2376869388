// relu, gelu, tanh, softmax, log_softmax: each backward uses what its forward
// kept (ReLU/tanh/softmax their output, GELU its derivative).
#include "artel/autograd/op_helpers.h"
#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/activation.h"
#include "artel/kernels/softmax.h"

namespace artel::autograd {

Variable relu(const Variable& x) {
  const OpSpan span("relu");
  Tensor y = Tensor::empty(x.shape());
  kernels::relu_forward(x.numel(), x.value().data<float>(), y.data<float>());
  return make_result(y, {x}, "relu", [y](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::relu_backward(g.numel(), y.data<float>(), g.data<float>(), gi[0].data<float>());
  });
}

namespace {

// y = f(x) elementwise, where forward(n, x, y, dydx) also writes f'(x) when
// dydx is not null. Training keeps the derivative rather than the input, so
// backward is a single multiply instead of a second pass through f.
template <class Forward>
Variable with_kept_derivative(const Variable& x, const char* name, Forward forward) {
  const OpSpan span(name);
  Tensor y = Tensor::empty(x.shape());
  const float* xp = x.value().data<float>();
  if (!grad_enabled() || !needs_grad(x)) {
    forward(x.numel(), xp, y.data<float>(), nullptr);
    return make_result(y, {x}, name, nullptr);
  }
  Tensor dydx = Tensor::empty(x.shape());
  forward(x.numel(), xp, y.data<float>(), dydx.data<float>());
  return make_result(y, {x}, name, [dydx](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = reusable_grad(g);
    kernels::multiply(g.numel(), g.data<float>(), dydx.data<float>(), gi[0].data<float>());
  });
}

}  // namespace

Variable gelu(const Variable& x) { return with_kept_derivative(x, "gelu", kernels::gelu_forward_with_derivative); }

Variable gelu_tanh(const Variable& x) { return with_kept_derivative(x, "gelu_tanh", kernels::gelu_tanh_forward); }

Variable tanh(const Variable& x) {
  const OpSpan span("tanh");
  Tensor y = Tensor::empty(x.shape());
  kernels::tanh_forward(x.numel(), x.value().data<float>(), y.data<float>());
  return make_result(y, {x}, "tanh", [y](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::tanh_backward(g.numel(), y.data<float>(), g.data<float>(), gi[0].data<float>());
  });
}

Variable softmax(const Variable& x, int64_t dim) {
  const OpSpan span("softmax");
  detail::DimSplit s = detail::split_at(x.shape(), detail::wrap_dim(dim, x.shape(), "softmax"));
  Tensor y = Tensor::empty(x.shape());
  kernels::softmax_forward(s.outer, s.n, s.inner, x.value().data<float>(), y.data<float>());
  return make_result(y, {x}, "softmax", [y, s](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::softmax_backward(s.outer, s.n, s.inner, y.data<float>(), g.data<float>(), gi[0].data<float>());
  });
}

Variable log_softmax(const Variable& x, int64_t dim) {
  const OpSpan span("log_softmax");
  detail::DimSplit s = detail::split_at(x.shape(), detail::wrap_dim(dim, x.shape(), "log_softmax"));
  Tensor y = Tensor::empty(x.shape());
  kernels::log_softmax_forward(s.outer, s.n, s.inner, x.value().data<float>(), y.data<float>());
  return make_result(y, {x}, "log_softmax", [y, s](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::log_softmax_backward(s.outer, s.n, s.inner, y.data<float>(), g.data<float>(), gi[0].data<float>());
  });
}

}  // namespace artel::autograd
