// Dropout: zeroes activations with probability p while training (scaling the
// rest by 1/(1−p)); the identity in eval mode or when p is 0. Masks come
// from a shared Rng that the model owns, so a checkpoint saves one RngState
// and a resumed run draws the same masks.
//
//   auto rng = std::make_shared<Rng>(seed, 1);
//   Dropout drop(0.1f, rng);
//   Variable y = drop.forward(x);
#pragma once

#include <functional>
#include <memory>

#include "artel/core/rng.h"
#include "artel/nn/layer.h"

namespace artel::nn {

class Dropout : public Layer {
 public:
  Dropout(float p, std::shared_ptr<Rng> rng);
  Variable forward(const Variable& x) override;
  float p() const { return p_; }
  // Sequence parallelism (parallel/sequence_parallel.h): x is this rank's
  // tokens of a whole activation, and `part` takes them from a whole mask,
  // drawn as the single worker draws it: every rank draws the same bits,
  // keeps its own, and the shared Rng stays alike on every rank.
  struct TokenSplit {
    std::function<Shape(const Shape& part)> whole;
    std::function<Tensor(const Tensor& whole)> part;
  };
  void set_token_split(TokenSplit split) { split_ = std::move(split); }

 private:
  float p_;
  std::shared_ptr<Rng> rng_;
  TokenSplit split_;
};

}  // namespace artel::nn
