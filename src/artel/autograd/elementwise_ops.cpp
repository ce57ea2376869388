// add, sub, mul, div with numpy broadcasting, and scalar add/mul.
//
// A broadcast operand's gradient is the output gradient summed over the
// dimensions it was repeated along (kernels::sum_to); a same-shape operand of
// add gets the output gradient itself (Note [Gradient ownership] allows it).
#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/activation.h"
#include "artel/kernels/elementwise.h"

namespace artel::autograd {
namespace {

using kernels::BinaryOp;

// dL/d(operand) from `full`, a gradient of the output's shape.
Tensor reduce_to(const Tensor& full, const Shape& target) {
  if (shape_numel(target) == full.numel()) return full.view(target);
  Tensor r = Tensor::empty(target);
  kernels::sum_to(kernels::plan_broadcast(full.shape(), target, full.shape()), full.data<float>(), r.data<float>());
  return r;
}

// g ∘ v with v broadcast to g's shape.
Tensor combine(BinaryOp op, const Tensor& g, const Tensor& v) {
  Tensor r = Tensor::empty(g.shape());
  kernels::binary(op, kernels::plan_broadcast(g.shape(), g.shape(), v.shape()), g.data<float>(), v.data<float>(),
                  r.data<float>());
  return r;
}

Tensor negated(Tensor t, bool owned) {
  Tensor r = owned ? t : Tensor::empty(t.shape());
  kernels::affine(t.numel(), t.data<float>(), -1.0f, 0.0f, r.data<float>());
  return r;
}

Tensor forward(BinaryOp op, const Variable& a, const Variable& b, const char* name) {
  ARTEL_CHECK(a.defined() && b.defined(), name, ": undefined operand");
  Shape out = kernels::broadcast_shape(a.shape(), b.shape(), name);
  Tensor y = Tensor::empty(out);
  kernels::binary(op, kernels::plan_broadcast(out, a.shape(), b.shape()), a.value().data<float>(),
                  b.value().data<float>(), y.data<float>());
  return y;
}

}  // namespace

Variable add(const Variable& a, const Variable& b) {
  const OpSpan span("add");
  Tensor y = forward(BinaryOp::add, a, b, "add");
  Shape sa = a.shape(), sb = b.shape();
  bool ga = needs_grad(a), gb = needs_grad(b);
  return make_result(y, {a, b}, "add", [sa, sb, ga, gb](const Tensor& g, std::vector<Tensor>& gi) {
    if (ga) gi[0] = reduce_to(g, sa);
    if (gb) gi[1] = reduce_to(g, sb);
  });
}

Variable sub(const Variable& a, const Variable& b) {
  const OpSpan span("sub");
  Tensor y = forward(BinaryOp::sub, a, b, "sub");
  Shape sa = a.shape(), sb = b.shape();
  bool ga = needs_grad(a), gb = needs_grad(b);
  return make_result(y, {a, b}, "sub", [sa, sb, ga, gb](const Tensor& g, std::vector<Tensor>& gi) {
    if (ga) gi[0] = reduce_to(g, sa);
    if (gb) {
      Tensor r = reduce_to(g, sb);
      gi[1] = negated(r, !r.same_storage(g));
    }
  });
}

Variable mul(const Variable& a, const Variable& b) {
  const OpSpan span("mul");
  Tensor y = forward(BinaryOp::mul, a, b, "mul");
  Tensor av = a.value(), bv = b.value();
  bool ga = needs_grad(a), gb = needs_grad(b);
  return make_result(y, {a, b}, "mul", [av, bv, ga, gb](const Tensor& g, std::vector<Tensor>& gi) {
    if (ga) gi[0] = reduce_to(combine(BinaryOp::mul, g, bv), av.shape());
    if (gb) gi[1] = reduce_to(combine(BinaryOp::mul, g, av), bv.shape());
  });
}

Variable div(const Variable& a, const Variable& b) {
  const OpSpan span("div");
  Tensor y = forward(BinaryOp::div, a, b, "div");
  Tensor av = a.value(), bv = b.value();
  bool ga = needs_grad(a), gb = needs_grad(b);
  return make_result(y, {a, b}, "div", [av, bv, y, ga, gb](const Tensor& g, std::vector<Tensor>& gi) {
    if (ga) gi[0] = reduce_to(combine(BinaryOp::div, g, bv), av.shape());
    if (gb) {  // d(a/b)/db = −y/b
      Tensor gy = Tensor::empty(g.shape());
      kernels::multiply(g.numel(), g.data<float>(), y.data<float>(), gy.data<float>());
      Tensor r = reduce_to(combine(BinaryOp::div, gy, bv), bv.shape());
      gi[1] = negated(r, true);
    }
  });
}

Variable add(const Variable& a, float s) {
  const OpSpan span("add_scalar");
  Tensor y = Tensor::empty(a.shape());
  kernels::affine(a.numel(), a.value().data<float>(), 1.0f, s, y.data<float>());
  return make_result(y, {a}, "add_scalar", [](const Tensor& g, std::vector<Tensor>& gi) { gi[0] = g; });
}

Variable mul(const Variable& a, float s) {
  const OpSpan span("mul_scalar");
  Tensor y = Tensor::empty(a.shape());
  kernels::affine(a.numel(), a.value().data<float>(), s, 0.0f, y.data<float>());
  return make_result(y, {a}, "mul_scalar", [s](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::affine(g.numel(), g.data<float>(), s, 0.0f, gi[0].data<float>());
  });
}

}  // namespace artel::autograd
