#include "artel/autograd/backward_hook.h"

namespace artel::autograd {

Variable before_backward(const Variable& x, std::function<void()> hook) {
  if (!grad_enabled() || !needs_grad(x)) return x;
  return make_result(x.value(), {x}, "before_backward",
                     [hook = std::move(hook)](const Tensor& g, std::vector<Tensor>& gi) {
                       hook();
                       gi[0] = g;  // borrowed, passed on as it is (Note [Gradient ownership])
                     });
}

}  // namespace artel::autograd
