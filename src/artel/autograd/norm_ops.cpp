// layer_norm over the last dimension; mean and rstd per row are kept for the
// backward, which produces dx, dweight and dbias in one pass over the rows.
#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/layernorm.h"

namespace artel::autograd {
namespace {

void check_param(const Variable& p, int64_t C, const Shape& x, const char* what) {
  ARTEL_CHECK(!p.defined() || (p.value().dim() == 1 && p.size(0) == C), "layer_norm: ", what, " of shape ",
              shape_str(p.defined() ? p.shape() : Shape{}), " for input ", shape_str(x),
              " (hint: it must be (C) with C the input's last dimension)");
}

const float* data_or_null(const Variable& v) { return v.defined() ? v.value().data<float>() : nullptr; }

}  // namespace

Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, float eps) {
  const OpSpan span("layer_norm");
  ARTEL_CHECK(x.value().dim() >= 1 && x.shape().back() > 0, "layer_norm: input of shape ", shape_str(x.shape()),
              " has no last dimension to normalise");
  int64_t C = x.shape().back(), rows = x.numel() / C;
  check_param(weight, C, x.shape(), "weight");
  check_param(bias, C, x.shape(), "bias");
  Tensor xv = x.value(), wv = weight.defined() ? weight.value() : Tensor();
  Tensor y = Tensor::empty(x.shape()), mean = Tensor::empty({rows}), rstd = Tensor::empty({rows});
  kernels::layer_norm_forward(rows, C, xv.data<float>(), data_or_null(weight), data_or_null(bias), eps,
                              y.data<float>(), mean.data<float>(), rstd.data<float>());
  bool gx = needs_grad(x), gw = needs_grad(weight), gb = needs_grad(bias);
  return make_result(y, {x, weight, bias}, "layer_norm",
                     [xv, wv, mean, rstd, rows, C, gx, gw, gb](const Tensor& g, std::vector<Tensor>& gi) {
                       if (gx) gi[0] = Tensor::empty(xv.shape());
                       if (gw) grad_output_buffer(gi, 1, {C});  // into a destination if there is one
                       if (gb) grad_output_buffer(gi, 2, {C});
                       auto ptr = [](Tensor& t) { return t.defined() ? t.data<float>() : nullptr; };
                       kernels::layer_norm_backward(rows, C, xv.data<float>(),
                                                    wv.defined() ? wv.data<float>() : nullptr, mean.data<float>(),
                                                    rstd.data<float>(), g.data<float>(), ptr(gi[0]), ptr(gi[1]),
                                                    ptr(gi[2]));
                     });
}

}  // namespace artel::autograd
