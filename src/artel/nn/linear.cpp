#include "artel/nn/linear.h"

#include "artel/autograd/ops.h"

namespace artel::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : Linear(in_features, out_features, bias, Init::default_uniform(in_features > 0 ? in_features : 1),
             Init::default_uniform(in_features > 0 ? in_features : 1)) {}

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Init weight_init, Init bias_init)
    : in_(in_features), out_(out_features) {
  ARTEL_CHECK(in_features > 0 && out_features > 0, "Linear: sizes must be positive, got in ", in_features,
              " out ", out_features);
  weight_ = declare_parameter("weight", {out_features, in_features}, weight_init);
  if (bias) bias_ = declare_parameter("bias", {out_features}, bias_init);
}

Variable Linear::forward(const Variable& x) { return forward_onto(Variable(), x); }

Variable Linear::forward_gelu(const Variable& x, bool tanh_approximation) {
  if (parallel_.kind == LinearParallel::Kind::row) {
    const Variable y = forward(x);
    return tanh_approximation ? autograd::gelu_tanh(y) : autograd::gelu(y);
  }
  return autograd::linear_gelu(input_of(x), replicated(weight_), replicated(bias_), tanh_approximation);
}

Variable Linear::replicated(const Variable& p) const {
  return p.defined() && parallel_.shared ? parallel_.shared(p) : p;
}

// x checked against this rank's weight, through the plan's `enter`.
Variable Linear::input_of(const Variable& x) const {
  ARTEL_CHECK(weight_.value().defined(), "Linear(", in_, " -> ", out_,
              "): its weight was declared but never materialised (hint: nn::materialize(model, seed); under a "
              "pipeline, a worker holds only what its stage's pieces list: list this layer's module in the piece "
              "that runs it)");
  const int64_t in = weight_.size(1);  // this rank's input features (all of them unless row-parallel)
  ARTEL_CHECK(x.value().dim() >= 1 && x.size(-1) == in, "Linear(", in_, " -> ", out_, "): input of shape ",
              shape_str(x.shape()), " does not end in ", in,
              in == in_ ? "" : " (hint: a row-parallel layer takes a column-parallel layer's output)");
  return parallel_.enter ? parallel_.enter(x) : x;
}

// One body for every form: with no plan the functions are absent and this is
// linear / linear_add; split, the same op runs on the shard between them.
Variable Linear::forward_onto(const Variable& residual, const Variable& x) {
  const Variable input = input_of(x);
  ARTEL_CHECK(!residual.defined() || parallel_.kind != LinearParallel::Kind::column,
              "Linear: a column-parallel layer's output is split, no residual can be added onto it");
  if (parallel_.kind == LinearParallel::Kind::row && parallel_.shared) {  // sequence parallel: y is this rank's tokens
    Variable y = parallel_.reduce(autograd::linear(input, weight_, Variable()));
    if (bias_.defined()) y = autograd::add(y, replicated(bias_));
    return residual.defined() ? autograd::add(residual, y) : y;
  }
  auto once = [&](const Variable& v) { return v.defined() && parallel_.once ? parallel_.once(v) : v; };
  const bool whole = parallel_.kind == LinearParallel::Kind::none;
  const Variable w = whole ? replicated(weight_) : weight_;
  const Variable b = whole ? replicated(bias_) : once(bias_), r = once(residual);
  Variable y = r.defined() ? autograd::linear_add(input, w, b, r) : autograd::linear(input, w, b);
  return parallel_.reduce ? parallel_.reduce(y) : y;
}

}  // namespace artel::nn
