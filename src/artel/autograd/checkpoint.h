// Activation recomputation (PyTorch's torch.utils.checkpoint): run a function
// without recording its graph, keep only its input, and during backward run it
// again with the graph recorded and backpropagate through that — one more
// forward of the function for all the activations it would have kept.
//
//   Variable y = checkpoint([&](const Variable& x) { return block.forward(x); }, x, &dropout_rng);
//
// The function's parameters get their gradients (and fire their grad-ready
// hooks) from the backward run inside; so a parameter the function uses must
// not also be used outside it in the same graph (its hooks would fire before
// its gradient is whole). `rng` (may be null) is the generator the function
// draws from (dropout): the rerun draws exactly what the first run drew.
#pragma once

#include <functional>

#include "artel/autograd/variable.h"
#include "artel/core/rng.h"

namespace artel::autograd {

Variable checkpoint(const std::function<Variable(const Variable&)>& fn, const Variable& x, Rng* rng = nullptr);

}  // namespace artel::autograd
