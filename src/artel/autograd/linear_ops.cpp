// matmul, linear and linear_add: one GEMM forward, two in backward (dX
// skipped when x needs no gradient, e.g. a network's input). Leading dimensions of the left
// operand are flattened into rows without copying.
#include <algorithm>

#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/core/threads.h"
#include "artel/kernels/activation.h"
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
  const OpSpan span("matmul");
  ARTEL_CHECK(a.value().dim() >= 1 && b.value().dim() == 2 && a.shape().back() == b.size(0),
              "matmul: shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
              " do not multiply (hint: (..., K) x (K, N))");
  int64_t M = rows_of(a.shape()), K = b.size(0), N = b.size(1);
  Tensor y = Tensor::empty(with_last(a.shape(), N));
  Tensor av = a.value(), bv = b.value();
  kernels::gemm(false, false, M, N, K, 1.0f, av.data<float>(), bv.data<float>(), 0.0f, y.data<float>());
  bool ga = needs_grad(a), gb = needs_grad(b);
  return make_result(y, {a, b}, "matmul", [av, bv, M, N, K, ga, gb](const Tensor& g, std::vector<Tensor>& gi) {
    float beta = 0.0f;  // each into a destination, or onto a gradient so far (Note [Adding a product onto a gradient])
    if (ga) {  // dA = dY · Bᵀ
      float* da = grad_sum_buffer(gi, 0, av.shape(), beta).data<float>();
      kernels::gemm(false, true, M, K, N, 1.0f, g.data<float>(), bv.data<float>(), beta, da);
    }
    if (gb) {  // dB = Aᵀ · dY
      float* db = grad_sum_buffer(gi, 1, bv.shape(), beta).data<float>();
      kernels::gemm(true, false, K, N, M, 1.0f, av.data<float>(), g.data<float>(), beta, db);
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

// What a linear layer's backward reads: the forward's values and, for bf16
// products, their roundings.
struct LinearSaved {
  Tensor xv, wv, x16, w16, w16t;
  std::function<Tensor()> remake_x;  // x made again for dW instead of xv / x16 (Note [Values made again])
  bool remake_rounded = false;       // and rounded to bf16 again, as forward rounded it
  Shape x_shape;
  int64_t M = 0, in = 0, out = 0;
  bool gx = false, gw = false;
};

// y = x·Wᵀ + beta·y (+ the bias row, with beta 0, when add_bias) (beta 1: y
// holds what the product is added to; 0: y is uninitialised), for inputs
// {x, weight, bias, ...}.
LinearSaved linear_forward(Tensor& y, float beta, bool add_bias, const std::vector<Variable>& inputs) {
  const Variable &x = inputs[0], &weight = inputs[1], &bias = inputs[2];
  LinearSaved s{.xv = x.value(), .wv = weight.value(), .x_shape = x.shape(), .M = rows_of(x.shape()), .in = weight.size(1),
                .out = weight.size(0), .gx = needs_grad(x), .gw = needs_grad(weight)};
  const int64_t M = s.M, in = s.in, out = s.out;
  // bf16 products: x and W rounded once, here; backward multiplies by the same
  // roundings. Where the CPU runs dX faster on W transposed
  // (kernels::bf16_dx_reads_transposed_weights), dX reads w16t, rounded in the
  // same pass as W, except where dX's K (out) is long enough to run in chunks
  // (a vocabulary-wide head), which run as fast on W as stored, and where
  // transposing 50,304 rows would cost more than it saves.
  const bool bf16 = kernels::gemm_precision() == kernels::GemmPrecision::bf16;
  if (bf16) s.x16 = x.rounded().defined() ? x.rounded() : rounded(s.xv, M, in);
  if (bf16 && s.gx && out <= kernels::kBf16MaxK && kernels::bf16_dx_reads_transposed_weights()) {
    s.w16 = Tensor::empty({out, in}, DType::bf16), s.w16t = Tensor::empty({in, out}, DType::bf16);
    kernels::round_operand_both(s.wv.data<float>(), out, in, static_cast<uint16_t*>(s.w16.raw()),
                                static_cast<uint16_t*>(s.w16t.raw()));
  } else if (bf16) {
    s.w16 = rounded(s.wv, out, in);
  }
  kernels::gemm(kernels::GemmArgs{.trans_b = true, .m = M, .n = out, .k = in, .a = s.xv.data<float>(), .lda = in,
                                  .b = s.wv.data<float>(), .ldb = in, .beta = beta, .c = y.data<float>(), .ldc = out,
                                  .a16 = bits(s.x16), .b16 = bits(s.w16),
                                  .bias = add_bias ? bias.value().data<float>() : nullptr});
  // Only dW reads x, and under bf16 products only its rounding: a layer
  // norm's or GELU's fp32 output that nothing else reads is then freed with
  // its op's result (Note [Edges without values]).
  if (!s.gw) s.x16 = Tensor();
  if (!s.gw || s.x16.defined()) s.xv = Tensor();
  if (s.gw && x.remake()) s.remake_x = x.remake(), s.remake_rounded = s.x16.defined(), s.xv = s.x16 = Tensor();
  if (!s.gx || s.w16t.defined()) s.w16 = Tensor();  // dX reads W as stored only without w16t
  return s;
}

// dX and dW from the output gradient g (M x out), into gi[0] and gi[1]; g16,
// when not null, is g already rounded (bf16 products), and g may then be undefined.
void linear_products(const LinearSaved& s, const Tensor& g, const uint16_t* g16, std::vector<Tensor>& gi) {
  kernels::RoundOperandsOnce once;  // bf16: dY rounded once for both products
  const float* gp = g.defined() ? g.data<float>() : nullptr;
  if (s.gx) {  // dX = dY · W
    gi[0] = Tensor::empty(s.x_shape);
    kernels::gemm(kernels::GemmArgs{.m = s.M, .n = s.in, .k = s.out, .a = gp, .lda = s.out, .b = s.wv.data<float>(),
                                    .ldb = s.in, .c = gi[0].data<float>(), .ldc = s.in, .a16 = g16,
                                    .b16 = bits(s.w16t.defined() ? s.w16t : s.w16),
                                    .b16_transposed = s.w16t.defined()});
  }
  if (s.gw) {  // dW = dYᵀ · X, into a destination, or onto the gradient so far (Note [Adding a product onto a gradient])
    Tensor xv = s.xv, x16 = s.x16;
    if (s.remake_x) {
      xv = s.remake_x();
      if (s.remake_rounded) x16 = rounded(xv, s.M, s.in);
    }
    float beta = 0.0f;
    Tensor& dw = grad_sum_buffer(gi, 1, s.wv.shape(), beta);
    kernels::gemm(kernels::GemmArgs{.trans_a = true, .m = s.out, .n = s.in, .k = s.M, .a = gp, .lda = s.out,
                                    .b = x16.defined() ? nullptr : xv.data<float>(), .ldb = s.in, .beta = beta,
                                    .c = dw.data<float>(),
                                    .ldc = s.in, .a16 = g16, .b16 = bits(x16)});
  }
}

// y = x·Wᵀ + beta·y as linear_forward, recorded as op `name` over `inputs` =
// {x, weight, bias[, residual]}. A residual's gradient is the output gradient
// itself (Note [Gradient ownership]).
Variable linear_onto(Tensor y, float beta, bool add_bias, std::vector<Variable> inputs, const char* name) {
  const LinearSaved s = linear_forward(y, beta, add_bias, inputs);
  const bool gb = needs_grad(inputs[2]), gr = inputs.size() > 3 && needs_grad(inputs[3]);
  // Under bf16 products with a bias gradient, dY is rounded and summed in one
  // pass, as linear_gelu does with dU, instead of the products rounding it and
  // column_sums reading it again.
  const bool round_with_sums = gb && (s.gx || s.gw) && kernels::gemm_precision() == kernels::GemmPrecision::bf16;
  return make_result(y, std::move(inputs), name, [s, gb, gr, round_with_sums](const Tensor& g, std::vector<Tensor>& gi) {
    if (round_with_sums) {  // dY rounded, and db = Σ_rows dY
      Tensor g16 = Tensor::empty({s.M, s.out}, DType::bf16);
      kernels::rounded_with_column_sums(s.M, s.out, g.data<float>(), static_cast<uint16_t*>(g16.raw()),
                                        grad_output_buffer(gi, 2, {s.out}).data<float>());
      linear_products(s, g, static_cast<const uint16_t*>(g16.raw()), gi);
    } else {
      linear_products(s, g, nullptr, gi);
      if (gb) {  // db = Σ_rows dY
        Tensor& db = grad_output_buffer(gi, 2, {s.out});
        kernels::column_sums(s.M, s.out, g.data<float>(), db.data<float>());
      }
    }
    if (gr) gi[3] = g;
  });
}

using GeluKernel = void (*)(int64_t, const float*, float*, float*);

// h = GELU(u), or GELU(u + bias) with the bias row added as GELU reads u
// (bias not null; exact GELU only), and its derivative into dhdu when not
// null. Under bf16 it returns h rounded too, for the product that reads h
// next (Note [Rounded values]): each block rounded as GELU leaves it in L1,
// where that product would read all of h back from memory to round it (W2
// bf16 at 1 thread: 12.71 -> 12.47 ms a step, AMD Zen 5).
Tensor gelu_rounded(GeluKernel gelu, const float* bias, const Tensor& u, Tensor& h, float* dhdu) {
  const int64_t cols = u.shape().back(), rows = cols ? u.numel() / cols : 0;
  const float* up = u.data<float>();
  float* hp = h.data<float>();
  auto gelu_rows = [&](int64_t r0, int64_t r1) {  // inside a parallel_for the kernels run on this thread
    const int64_t i = r0 * cols;
    if (bias)
      kernels::bias_gelu_forward_with_derivative(r1 - r0, cols, up + i, bias, hp + i, dhdu ? dhdu + i : nullptr);
    else
      gelu((r1 - r0) * cols, up + i, hp + i, dhdu ? dhdu + i : nullptr);
  };
  if (kernels::gemm_precision() != kernels::GemmPrecision::bf16) {
    gelu_rows(0, rows);
    return Tensor();
  }
  Tensor h16 = Tensor::empty(u.shape(), DType::bf16);
  uint16_t* bits = static_cast<uint16_t*>(h16.raw());
  const int64_t block = std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1));  // rows of about 16 KiB of h
  parallel_for((rows + block - 1) / block, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t r0 = b0 * block; r0 < std::min(rows, b1 * block); r0 += block) {
      const int64_t r1 = std::min(rows, r0 + block);
      gelu_rows(r0, r1);
      kernels::round_to_bf16(hp + r0 * cols, 1, (r1 - r0) * cols, (r1 - r0) * cols, bits + r0 * cols);
    }
  });
  return h16;
}

}  // namespace

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  const OpSpan span("linear");
  check_linear("linear", x, weight, bias);
  Tensor y = Tensor::empty(with_last(x.shape(), weight.size(0)));
  return linear_onto(y, 0.0f, bias.defined(), {x, weight, bias}, "linear");
}

Variable linear_gelu(const Variable& x, const Variable& weight, const Variable& bias, bool tanh_approximation) {
  const OpSpan span("linear_gelu");
  check_linear("linear_gelu", x, weight, bias);
  std::vector<Variable> inputs{x, weight, bias};
  Tensor u = Tensor::empty(with_last(x.shape(), weight.size(0)));  // the product, GELU's input
  // Exact GELU adds the bias as it reads the product, instead of the GEMM
  // adding it in a pass of its own (GPT-2 124M, 1 thread, AMD Zen 3: ~5 ms a
  // step): in fp32, and in bf16 where oneDNN's gemm multiplies, which has no
  // bias of its own (kernels::Bf16Kernel). oneDNN's matmul adds it in its
  // output kernel.
  const bool bias_in_gelu =
      bias.defined() && !tanh_approximation &&
      (kernels::gemm_precision() != kernels::GemmPrecision::bf16 || kernels::bf16_kernel() == kernels::Bf16Kernel::gemm);
  const LinearSaved s = linear_forward(u, 0.0f, bias.defined() && !bias_in_gelu, inputs);
  Tensor h = Tensor::empty(u.shape());
  const bool gb = needs_grad(bias);
  const GeluKernel gelu = tanh_approximation ? kernels::gelu_tanh_forward : kernels::gelu_forward_with_derivative;
  const bool grads = grad_enabled() && (s.gx || s.gw || gb);
  Tensor dhdu = grads ? Tensor::empty(u.shape()) : Tensor();  // GELU's derivative, kept instead of u
  Tensor h16 = gelu_rounded(gelu, bias_in_gelu ? bias.value().data<float>() : nullptr, u, h,
                            grads ? dhdu.data<float>() : nullptr);
  const bool bf16 = h16.defined();
  Node::BackwardFn backward;
  if (grads) backward = [s, dhdu, gb, bf16](const Tensor& g, std::vector<Tensor>& gi) {
    if (bf16) {  // dU = dH ∘ GELU′(u), rounded, and db = Σ_rows dU, in one pass
      Tensor du16 = Tensor::empty({s.M, s.out}, DType::bf16);
      uint16_t* bits16 = static_cast<uint16_t*>(du16.raw());
      kernels::product_rounded_with_column_sums(s.M, s.out, g.data<float>(), dhdu.data<float>(), bits16,
                                                gb ? grad_output_buffer(gi, 2, {s.out}).data<float>() : nullptr);
      return linear_products(s, Tensor(), bits16, gi);
    }
    // dU = dH ∘ GELU′(u), and db = Σ_rows dU, in one pass
    Tensor du = Tensor::empty(g.shape());
    kernels::product_with_column_sums(s.M, s.out, g.data<float>(), dhdu.data<float>(), du.data<float>(),
                                      gb ? grad_output_buffer(gi, 2, {s.out}).data<float>() : nullptr);
    linear_products(s, du, nullptr, gi);
  };
  Variable result = make_result(h, std::move(inputs), "linear_gelu", std::move(backward));
  result.set_rounded(std::move(h16));
  return result;
}

Variable linear_add(const Variable& x, const Variable& weight, const Variable& bias, const Variable& residual) {
  const OpSpan span("linear_add");
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
