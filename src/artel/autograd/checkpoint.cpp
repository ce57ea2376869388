#include "artel/autograd/checkpoint.h"

#include <optional>

namespace artel::autograd {

Variable checkpoint(const std::function<Variable(const Variable&)>& fn, const Variable& x, Rng* rng) {
  if (!grad_enabled()) return fn(x);
  const std::optional<RngState> drawn_from = rng ? std::optional(rng->state()) : std::nullopt;
  Tensor y;
  {
    NoGradGuard no_graph;
    y = fn(Variable(x.value())).value();
  }
  // The node needs an input that requires a gradient to be recorded at all: x,
  // or (x needing none: the first layer of a model) a stand-in leaf.
  const bool x_needs = needs_grad(x);
  const Variable edge = x_needs ? x : Variable(Tensor::zeros({1}), true);
  return make_result(y, {edge}, "checkpoint",
                     [fn, input = x.value(), x_needs, rng, drawn_from](const Tensor& g, std::vector<Tensor>& gi) {
                       std::optional<RngState> now;
                       if (rng) now = rng->state(), rng->set_state(*drawn_from);
                       Variable in(input, x_needs);
                       Variable out = fn(in);
                       if (rng) rng->set_state(*now);
                       if (out.requires_grad()) out.backward(g);  // the parameters' gradients accumulate here
                       if (x_needs) gi[0] = in.grad();
                     });
}

}  // namespace artel::autograd
