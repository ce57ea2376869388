// matmul and linear: one GEMM forward, two in backward (dX skipped when x
// needs no gradient, e.g. a network's input). Leading dimensions of the left
// operand are flattened into rows without copying.
#include "artel/autograd/ops.h"
#include "artel/kernels/gemm.h"
#include "artel/kernels/layout.h"
#include "artel/kernels/reduce.h"

namespace artel::autograd {
namespace {

// Rows of a (..., K) tensor.
int64_t rows_of(const Shape& s) {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) r *= s[i];
  return r;
}

Shape with_last(Shape s, int64_t last) {
  s.back() = last;
  return s;
}

}  // namespace

Variable matmul(const Variable& a, const Variable& b) {
  ARTEL_CHECK(a.value().dim() >= 1 && b.value().dim() == 2 && a.shape().back() == b.size(0),
              "matmul: shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
              " do not multiply (hint: (..., K) x (K, N))");
  int64_t M = rows_of(a.shape()), K = b.size(0), N = b.size(1);
  Tensor y = Tensor::empty(with_last(a.shape(), N));
  Tensor av = a.value(), bv = b.value();
  kernels::gemm(false, false, M, N, K, 1.0f, av.data<float>(), bv.data<float>(), 0.0f, y.data<float>());
  bool ga = needs_grad(a), gb = needs_grad(b);
  return make_result(y, {a, b}, "matmul", [av, bv, M, N, K, ga, gb](const Tensor& g, std::vector<Tensor>& gi) {
    if (ga) {  // dA = dY · Bᵀ
      gi[0] = Tensor::empty(av.shape());
      kernels::gemm(false, true, M, K, N, 1.0f, g.data<float>(), bv.data<float>(), 0.0f, gi[0].data<float>());
    }
    if (gb) {  // dB = Aᵀ · dY
      gi[1] = Tensor::empty(bv.shape());
      kernels::gemm(true, false, K, N, M, 1.0f, av.data<float>(), g.data<float>(), 0.0f, gi[1].data<float>());
    }
  });
}

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  ARTEL_CHECK(x.value().dim() >= 1 && weight.value().dim() == 2 && x.shape().back() == weight.size(1),
              "linear: input ", shape_str(x.shape()), " does not match weight ", shape_str(weight.shape()),
              " (hint: x (..., in), weight (out, in))");
  int64_t M = rows_of(x.shape()), in = weight.size(1), out = weight.size(0);
  ARTEL_CHECK(!bias.defined() || (bias.value().dim() == 1 && bias.size(0) == out), "linear: bias ",
              shape_str(bias.defined() ? bias.shape() : Shape{}), " does not match weight ", shape_str(weight.shape()),
              " (hint: bias is (out))");
  Tensor y = Tensor::empty(with_last(x.shape(), out));
  Tensor xv = x.value(), wv = weight.value();
  // The bias is laid into y first and the GEMM adds onto it (beta = 1): no
  // extra pass, since a beta = 0 GEMM clears C first anyway.
  if (bias.defined()) kernels::repeat_row(M, out, bias.value().data<float>(), y.data<float>());
  kernels::gemm(false, true, M, out, in, 1.0f, xv.data<float>(), wv.data<float>(), bias.defined() ? 1.0f : 0.0f,
                y.data<float>());
  bool gx = needs_grad(x), gw = needs_grad(weight), gb = needs_grad(bias);
  return make_result(y, {x, weight, bias}, "linear",
                     [xv, wv, M, in, out, gx, gw, gb](const Tensor& g, std::vector<Tensor>& gi) {
                       if (gx) {  // dX = dY · W
                         gi[0] = Tensor::empty(xv.shape());
                         kernels::gemm(false, false, M, in, out, 1.0f, g.data<float>(), wv.data<float>(), 0.0f,
                                       gi[0].data<float>());
                       }
                       if (gw) {  // dW = dYᵀ · X, straight into a destination if there is one
                         Tensor& dw = grad_output_buffer(gi, 1, wv.shape());
                         kernels::gemm(true, false, out, in, M, 1.0f, g.data<float>(), xv.data<float>(), 0.0f,
                                       dw.data<float>());
                       }
                       if (gb) {  // db = Σ_rows dY
                         Tensor& db = grad_output_buffer(gi, 2, {out});
                         kernels::column_sums(M, out, g.data<float>(), db.data<float>());
                       }
                     });
}

}  // namespace artel::autograd
