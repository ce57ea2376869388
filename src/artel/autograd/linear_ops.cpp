// matmul, linear and linear_add: one GEMM forward, two in backward (dX
// skipped when x needs no gradient, e.g. a network's input). Leading dimensions of the left
// operand are flattened into rows without copying.
#include "artel/autograd/ops.h"
#include "artel/kernels/elementwise.h"
#include "artel/kernels/gemm.h"
#include "artel/kernels/gemm_bf16.h"
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

namespace {

void check_linear(const char* op, const Variable& x, const Variable& weight, const Variable& bias) {
  ARTEL_CHECK(x.value().dim() >= 1 && weight.value().dim() == 2 && x.shape().back() == weight.size(1), op,
              ": input ", shape_str(x.shape()), " does not match weight ", shape_str(weight.shape()),
              " (hint: x (..., in), weight (out, in))");
  ARTEL_CHECK(!bias.defined() || (bias.value().dim() == 1 && bias.size(0) == weight.size(0)), op, ": bias ",
              shape_str(bias.defined() ? bias.shape() : Shape{}), " does not match weight ", shape_str(weight.shape()),
              " (hint: bias is (out))");
}

// A (rows x cols) tensor rounded to bf16, for a product's a16 / b16.
Tensor rounded(const Tensor& t, int64_t rows, int64_t cols) {
  Tensor r = Tensor::empty({rows, cols}, DType::bf16);
  kernels::round_operand(t.data<float>(), rows, cols, cols, static_cast<uint16_t*>(r.raw()));
  return r;
}

const uint16_t* bits(const Tensor& t) { return t.defined() ? static_cast<const uint16_t*>(t.raw()) : nullptr; }

// y = x·Wᵀ + beta·y (+ the bias row, with beta 0, when add_bias) (beta 1: y
// holds what the product is added to; 0: y is uninitialised), recorded as op
// `name` over `inputs` = {x, weight, bias[, residual]}. A residual's gradient
// is the output gradient itself (Note [Gradient ownership]).
Variable linear_onto(Tensor y, float beta, bool add_bias, std::vector<Variable> inputs, const char* name) {
  const Variable &x = inputs[0], &weight = inputs[1], &bias = inputs[2];
  int64_t M = rows_of(x.shape()), in = weight.size(1), out = weight.size(0);
  Tensor xv = x.value(), wv = weight.value();
  bool gx = needs_grad(x), gw = needs_grad(weight), gb = needs_grad(bias);
  bool gr = inputs.size() > 3 && needs_grad(inputs[3]);
  // bf16 products: x and W rounded once, here; backward multiplies by the same
  // roundings. Where the CPU runs dX faster on W transposed
  // (kernels::bf16_dx_reads_transposed_weights), dX reads w16t, rounded in the
  // same pass as W, except where dX's K (out) is long enough to run in chunks
  // (a vocabulary-wide head), which run as fast on W as stored, and where
  // transposing 50,304 rows would cost more than it saves.
  const bool bf16 = kernels::gemm_precision() == kernels::GemmPrecision::bf16;
  Tensor x16 = bf16 ? rounded(xv, M, in) : Tensor(), w16, w16t;
  if (bf16 && gx && out <= kernels::kBf16MaxK && kernels::bf16_dx_reads_transposed_weights()) {
    w16 = Tensor::empty({out, in}, DType::bf16), w16t = Tensor::empty({in, out}, DType::bf16);
    kernels::round_operand_both(wv.data<float>(), out, in, static_cast<uint16_t*>(w16.raw()),
                                static_cast<uint16_t*>(w16t.raw()));
  } else if (bf16) {
    w16 = rounded(wv, out, in);
  }
  kernels::gemm(kernels::GemmArgs{.trans_b = true, .m = M, .n = out, .k = in, .a = xv.data<float>(), .lda = in,
                                  .b = wv.data<float>(), .ldb = in, .beta = beta, .c = y.data<float>(), .ldc = out,
                                  .a16 = bits(x16), .b16 = bits(w16),
                                  .bias = add_bias ? bias.value().data<float>() : nullptr});
  if (!gw) x16 = Tensor();                  // only dW reads x
  if (!gx || w16t.defined()) w16 = Tensor();  // dX reads W as stored only without w16t
  return make_result(y, std::move(inputs), name,
                     [xv, wv, x16, w16, w16t, M, in, out, gx, gw, gb, gr](const Tensor& g, std::vector<Tensor>& gi) {
                       kernels::RoundOperandsOnce once;  // bf16: dY rounded once for both products
                       if (gx) {  // dX = dY · W
                         gi[0] = Tensor::empty(xv.shape());
                         kernels::gemm(kernels::GemmArgs{.m = M, .n = in, .k = out, .a = g.data<float>(), .lda = out,
                                                         .b = wv.data<float>(), .ldb = in, .c = gi[0].data<float>(),
                                                         .ldc = in, .b16 = bits(w16t.defined() ? w16t : w16),
                                                         .b16_transposed = w16t.defined()});
                       }
                       if (gw) {  // dW = dYᵀ · X, straight into a destination if there is one
                         Tensor& dw = grad_output_buffer(gi, 1, wv.shape());
                         kernels::gemm(kernels::GemmArgs{.trans_a = true, .m = out, .n = in, .k = M,
                                                         .a = g.data<float>(), .lda = out, .b = xv.data<float>(),
                                                         .ldb = in, .c = dw.data<float>(), .ldc = in,
                                                         .b16 = bits(x16)});
                       }
                       if (gb) {  // db = Σ_rows dY
                         Tensor& db = grad_output_buffer(gi, 2, {out});
                         kernels::column_sums(M, out, g.data<float>(), db.data<float>());
                       }
                       if (gr) gi[3] = g;
                     });
}

}  // namespace

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  check_linear("linear", x, weight, bias);
  Tensor y = Tensor::empty(with_last(x.shape(), weight.size(0)));
  return linear_onto(y, 0.0f, bias.defined(), {x, weight, bias}, "linear");
}

Variable linear_add(const Variable& x, const Variable& weight, const Variable& bias, const Variable& residual) {
  check_linear("linear_add", x, weight, bias);
  Shape shape = with_last(x.shape(), weight.size(0));
  ARTEL_CHECK(residual.defined() && residual.shape() == shape, "linear_add: residual ",
              shape_str(residual.defined() ? residual.shape() : Shape{}), " does not match the output ",
              shape_str(shape), " (hint: the residual has the linear layer's output shape)");
  // residual (+ bias) laid into y in one pass; the GEMM then adds onto it.
  Tensor y = Tensor::empty(shape);
  if (bias.defined())
    kernels::binary(kernels::BinaryOp::add, kernels::plan_broadcast(shape, shape, bias.shape()),
                    residual.value().data<float>(), bias.value().data<float>(), y.data<float>());
  else
    y.copy_from(residual.value());
  return linear_onto(y, 1.0f, false, {x, weight, bias, residual}, "linear_add");
}

}  // namespace artel::autograd
