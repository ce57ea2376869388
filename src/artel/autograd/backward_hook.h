// An identity whose backward first runs a callback: PyTorch's
// register_full_backward_pre_hook on a tensor. FSDP (parallel/fully_sharded.h)
// puts one on each output of a unit of the model, so the unit's weights are
// gathered again before any op that saved them runs its backward: every such
// op consumes the unit's outputs, so the engine reaches them only after this.
//
//   Variable y = before_backward(block.forward(x), [&] { gather(block); });
#pragma once

#include <functional>

#include "artel/autograd/variable.h"

namespace artel::autograd {

// `x` itself when no graph is recorded or x needs no gradient.
Variable before_backward(const Variable& x, std::function<void()> hook);

}  // namespace artel::autograd
